"""``experiments/ablate_components.py``: the random control sets are drawn per example, uniform
over the non-top components and without the top-k (the selection before the fix fails)."""

from __future__ import annotations

import importlib.util
import random

import numpy as np
import pytest
from helpers import REPO
from scipy.stats import chisquare

from mechrag.results.components import ComponentAttribution

EXPERIMENT = REPO / "experiments" / "ablate_components.py"


@pytest.fixture(scope="module")
def experiment():
    """``experiments/ablate_components.py`` as a module."""
    spec = importlib.util.spec_from_file_location("ablate_components", EXPERIMENT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _located(seed: int, n_layers: int = 4, n_heads: int = 8) -> ComponentAttribution:
    """A localisation result with random distinct scores."""
    scores = np.random.default_rng(seed).permutation(n_layers * (n_heads + 1)).astype(float)
    return ComponentAttribution(
        query="q",
        source_id="s",
        response="r",
        response_ids=[1],
        heads=scores[: n_layers * n_heads].reshape(n_layers, n_heads),
        mlps=scores[n_layers * n_heads :],
        resid_post=np.zeros(n_layers),
    )


def _old_conditions(experiment, located, options: dict, example_id: str) -> dict:
    """The selection before the fix: ``k`` picks from the pool sorted by rank, one fixed
    ``random.Random(seed)`` per seed (the same rank positions in every example, top-k included)."""
    kind = None if options["kind"] == "all" else options["kind"]
    pool = located.top(located.scores.size, kind=kind)
    sets = {"top": experiment.split(pool[: options["top_k"]])}
    for seed in range(options["random_seeds"]):
        sets[f"random{seed}"] = experiment.split(random.Random(seed).sample(pool, options["top_k"]))
    return sets


def _selection_defects(select, examples: list[tuple[str, ComponentAttribution]]) -> set[str]:
    """What is wrong with the random sets ``select`` draws over ``examples``."""
    options = {"top_k": 10, "kind": "head", "random_seeds": 5}
    defects = set()
    rank_positions = []
    picks = []
    for example_id, located in examples:
        sets = select(located, options, example_id)
        top = set(sets["top"][0])
        assert len(top) == options["top_k"]
        ranked = [(c.layer, c.head) for c in located.top(located.heads.size, kind="head")]
        randoms = [sets[f"random{seed}"][0] for seed in range(options["random_seeds"])]
        if any(top & set(heads) for heads in randoms):
            defects.add("random set holds top-k")
        rank_positions.append([sorted(ranked.index(h) for h in heads) for heads in randoms])
        picks += [heads for heads in randoms[:1]]
    if all(positions == rank_positions[0] for positions in rank_positions):
        defects.add("same rank positions in every example")
    # Seed 0's picks over the examples: each of the 22 non-top heads ~ uniformly often.
    counts = {}
    for heads in picks:
        for head in heads:
            counts[head] = counts.get(head, 0) + 1
    if len(counts) < 22 or chisquare(list(counts.values())).pvalue < 1e-3:
        defects.add("not uniform over the non-top heads")
    return defects


def test_random_sets_are_drawn_per_example_without_the_top_k(experiment):
    """Fails on the selection before the fix, which the reference reproduces."""
    located = _located(0)
    same_ranking = [(f"example-{i}", located) for i in range(300)]
    varied = [(f"example-{i}", _located(i)) for i in range(300)]
    old = lambda *args: _old_conditions(experiment, *args)  # noqa: E731
    assert _selection_defects(old, varied) == {
        "random set holds top-k",
        "same rank positions in every example",
    }
    assert "not uniform over the non-top heads" in _selection_defects(old, same_ranking)
    assert _selection_defects(experiment.conditions, varied) == set()
    assert _selection_defects(experiment.conditions, same_ranking) == set()
    # Seeded by the seed and the example's id: the same again, different for another id.
    options = {"top_k": 3, "kind": "all", "random_seeds": 2}
    first = experiment.conditions(located, options, "a")
    assert experiment.conditions(located, options, "a") == first
    assert experiment.conditions(located, options, "b") != first
    assert first["random0"] != first["random1"]
