"""``experiments/attention_features.py``: richer attention features, fitted on other questions."""

from __future__ import annotations

import runpy
from types import SimpleNamespace

import numpy as np
import pytest
from helpers import REPO, tiny_frontier_run

from mechrag.results.files import run_records

EXPERIMENTS = REPO / "experiments"


def test_feature_kinds_match_loops_over_heads_sources_and_tokens():
    """Every kind against its definition, one head, source and token at a time."""
    script = runpy.run_path(str(EXPERIMENTS / "attention_features.py"))
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
                    "per_source_token": masses.mean() / lengths[source],
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
    other group's cases only; a rerun reuses the cached passes (no model is loaded) and writes
    the same records, once each, into ``records.jsonl.gz``."""
    frontier_out = tmp_path / "frontier"
    ran = tiny_frontier_run(tiny_llama, monkeypatch, frontier_out, examples=2)
    script = runpy.run_path(str(EXPERIMENTS / "attention_features.py"))
    lowest = min(r["id"] for r in ran if r["method"] == "exact")
    in_groups = lambda case: "first" if case["id"] == lowest else "second"  # noqa: E731
    monkeypatch.setitem(script["run"].__globals__, "GROUPS", {"first": ("10",), "second": ()})
    monkeypatch.setitem(script["run"].__globals__, "group_of", in_groups)
    args = SimpleNamespace(
        model="smollm2-135m", threads=1, frontier=str(frontier_out),
        cache=str(tmp_path / "cache"), out=str(tmp_path / "out"),
    )  # fmt: skip
    script["run"](args)
    found = run_records(tmp_path / "out")
    assert not (tmp_path / "out" / "records.jsonl").exists()
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

    def no_model(name):
        pytest.fail("a rerun with every pass cached loaded a model")

    monkeypatch.setattr("mechrag.models.loading.load_model", no_model)
    script["run"](args)
    assert run_records(tmp_path / "out") == found


def test_a_question_in_two_groups_is_refused():
    """The fits are scored on questions apart: a question in two groups is a bug, not a row."""
    script = runpy.run_path(str(EXPERIMENTS / "attention_features.py"))
    kinds = {kind: np.ones((2, 3)) for kind in script["KINDS"]}

    def case(size: str, example_id: str) -> dict:
        return {"size": size, "id": example_id, "dataset": "hotpotqa", "kinds": kinds,
                "exact_scores": np.array([1.0, 0.0])}  # fmt: skip

    with pytest.raises(RuntimeError, match="also in another group"):
        script["predictions"]([case("hotpotqa", "q1"), case("hotpotqa_dev", "q1")])
