"""``benchmarks/attention_features.py``: richer attention features, fitted on other questions."""

from __future__ import annotations

import json
import runpy
from pathlib import Path
from types import SimpleNamespace

import numpy as np
from helpers import tiny_frontier_run

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def test_feature_kinds_match_loops_over_heads_sources_and_tokens():
    """Every kind against its definition, one head, source and token at a time."""
    script = runpy.run_path(str(BENCHMARKS / "attention_features.py"))
    rng = np.random.default_rng(0)
    per_token = rng.random((2, 3, 4, 5))
    effect = rng.random(5)
    lengths = np.array([3, 1, 7, 2])
    kinds = script["feature_kinds"](per_token, effect, lengths)
    for layer in range(2):
        for head in range(3):
            column = layer * 3 + head
            for source in range(4):
                masses = per_token[layer, head, source]
                totals = per_token[layer, head].sum(0)
                shares = masses / totals
                expected = {
                    "mean": masses.mean(),
                    "share": shares.mean(),
                    "peak": masses.max(),
                    "per_token": masses.mean() / lengths[source],
                    "weighted": sum(e * m for e, m in zip(effect, masses)) / effect.sum(),
                    "weighted_share": sum(e * s for e, s in zip(effect, shares)) / effect.sum(),
                }
                for kind, value in expected.items():
                    assert np.isclose(kinds[kind][source, column], value), kind
    assert set(kinds) == set(script["KINDS"])


def test_a_run_fits_on_other_questions_and_its_mean_design_is_the_frontiers(
    tiny_llama, monkeypatch, tmp_path
):
    """A frontier run (exact and uniformly weighted attention) on a tiny model at 10 sentences,
    then this benchmark on its records with each example its own group (the tiny model's
    context holds no longer or later one): its ``mean`` kind's mean over heads is the
    frontier's attention scores; each feature set predicts every case once, from a fit on the
    other group's cases only; a rerun reuses the cached passes and writes the same records."""
    frontier_out = tmp_path / "frontier"
    ran = tiny_frontier_run(tiny_llama, monkeypatch, frontier_out, examples=2)
    script = runpy.run_path(str(BENCHMARKS / "attention_features.py"))
    lowest = min(r["id"] for r in ran if r["method"] == "exact")
    in_groups = lambda case: "first" if case["id"] == lowest else "second"  # noqa: E731
    monkeypatch.setitem(script["run"].__globals__, "GROUPS", {"first": ("10",), "second": ()})
    monkeypatch.setitem(script["run"].__globals__, "group_of", in_groups)
    args = SimpleNamespace(
        model="smollm2-135m", threads=1, frontier=str(frontier_out),
        cache=str(tmp_path / "cache"), out=str(tmp_path / "out"),
    )  # fmt: skip
    script["run"](args)
    first = (tmp_path / "out" / "records.jsonl").read_text()
    found = [json.loads(line) for line in first.splitlines()]
    passes = [r for r in found if r["kind"] == "passes"]
    exact = {(r["size"], r["id"]): r for r in ran if r["method"] == "exact"}
    attention = {(r["size"], r["id"]): r for r in ran if r["method"] == "attention_fitted"}
    assert sorted((r["size"], r["id"]) for r in passes) == sorted(exact) and len(exact) == 2
    for size, example_id in exact:
        with np.load(tmp_path / "cache" / f"{size}_{example_id}.npz") as stored:
            mean = stored["mean"]
        assert mean.shape[1] == 2 * 4  # tiny_llama: 2 layers, 4 heads
        assert np.allclose(mean.mean(1), attention[size, example_id]["scores"], atol=1e-6)
    predicted = [r for r in found if r["kind"] == "prediction"]
    sets = {"+".join(kinds) for kinds in script["FEATURE_SETS"]}
    assert {r["features"] for r in predicted} == sets
    assert len(predicted) == len(sets) * len(exact)
    for record in predicted:
        assert record["training_cases"] == 1  # the other group's case, never its own
        assert record["exact_scores"] == exact[record["size"], record["id"]]["scores"]
    script["run"](args)  # cached: no model pass, the same records
    assert (tmp_path / "out" / "records.jsonl").read_text() == first
