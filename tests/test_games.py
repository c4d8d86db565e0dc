"""Value functions on the engine: formulas, caching, counting, and exact Shapley on them."""

from __future__ import annotations

from itertools import combinations
from math import factorial

import numpy as np
import pytest
import torch

from mechrag.attribution.context import AttributionTask
from mechrag.attribution.games import SubsetScorer
from mechrag.attribution.sampling import all_masks
from mechrag.attribution.shapley import shapley_values

DOCS = ["Ana lives in Oslo.", "Bo likes tea.", "Oslo is cold.", "Cy is tall."]


@pytest.fixture
def task(tiny_llama):
    return AttributionTask.prepare(tiny_llama, "Where does Ana live?", DOCS, response="Oslo.")


def test_values_follow_the_engine(task):
    scorer = SubsetScorer(task)
    masks = np.array([[1, 0, 1, 0], [0, 0, 0, 0]], dtype=bool)
    direct = task.engine.token_logprobs(task.builder, task.response_ids, torch.as_tensor(masks))
    direct = direct.double().numpy()
    np.testing.assert_allclose(scorer.game("logprob")(masks), direct.sum(1), rtol=1e-6)
    np.testing.assert_allclose(scorer.game("token_prob")(masks), np.exp(direct), rtol=1e-6)
    p = np.exp(direct)
    logit = np.log(p / (1 - p)).sum(1)
    np.testing.assert_allclose(scorer.game("logit_prob")(masks), logit, rtol=1e-5)


def test_empty_subset_renders_query_alone(task):
    empty = torch.zeros(len(DOCS), dtype=torch.bool)
    text = task.builder.text(empty)
    assert "Where does Ana live?" in text and not any(doc in text for doc in DOCS)


def test_subsets_are_scored_once(task):
    scorer = SubsetScorer(task)
    masks = np.array([[1, 1, 0, 0], [1, 1, 0, 0], [0, 1, 1, 1]], dtype=bool)
    passes = task.engine.forward_passes
    first = scorer.game("logprob")(masks)
    assert scorer.evaluations == 2
    used = task.engine.forward_passes - passes
    second = scorer.game("token_prob")(masks[::-1])
    assert task.engine.forward_passes - passes == used, "cached subsets were re-run"
    assert first[0] == first[1] and second.shape == (3, len(task.response_ids))


def test_bad_masks_and_values(task):
    scorer = SubsetScorer(task)
    with pytest.raises(ValueError, match="masks must be"):
        scorer.token_logprobs(np.ones((2, 3), dtype=bool))
    with pytest.raises(ValueError, match="unknown value"):
        scorer.game("prob")


def brute_force_shapley(values: dict[frozenset, float], n: int) -> np.ndarray:
    """The Shapley formula written out over explicit subsets."""
    phi = np.zeros(n)
    for i in range(n):
        others = [j for j in range(n) if j != i]
        for size in range(n):
            weight = factorial(size) * factorial(n - size - 1) / factorial(n)
            for subset in combinations(others, size):
                s = frozenset(subset)
                phi[i] += weight * (values[s | {i}] - values[s])
    return phi


def test_exact_shapley_on_tiny_model_matches_brute_force(task):
    scorer = SubsetScorer(task)
    phi = shapley_values(scorer.game("logprob"), 4, "exact")
    masks = all_masks(4)
    logprobs = task.engine.token_logprobs(task.builder, task.response_ids, torch.as_tensor(masks))
    values = {frozenset(np.flatnonzero(m)): float(v) for m, v in zip(masks, logprobs.sum(1))}
    np.testing.assert_allclose(phi, brute_force_shapley(values, 4), atol=1e-5)
    assert scorer.evaluations == 16


@pytest.mark.integration
def test_exact_shapley_on_embedded_model_six_documents(smollm):
    torch.set_num_threads(1)
    docs = [
        "Mira lives in Tarn.",
        "Tarn is by the sea.",
        "Olek sells fish.",
        "Mira was born in Vell.",
        "The sea is calm.",
        "Olek lives in Vell.",
    ]
    task = AttributionTask.prepare(smollm, "Where does Mira live?", docs, response="Tarn")
    phi = shapley_values(SubsetScorer(task).game("logprob"), 6, "exact")
    values = {}
    for mask in all_masks(6):  # one subset at a time, independently of the scorer's batching
        logprobs = task.engine.token_logprobs(
            task.builder, task.response_ids, torch.as_tensor(mask[None])
        )
        values[frozenset(np.flatnonzero(mask))] = float(logprobs.sum())
    np.testing.assert_allclose(phi, brute_force_shapley(values, 6), atol=2e-3)
