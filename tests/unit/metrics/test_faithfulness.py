"""Faithfulness metrics: LDS and top-k removal against brute force, and against context-cite's
own functions on identical logits (the ``peers`` extra)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy import stats

from mechrag import Case
from mechrag.metrics.faithfulness import (
    held_out_masks,
    lds,
    response_logit_prob,
    token_logit_probs,
    topk_keep,
    topk_removal,
)

QUERY = "Where does Ana live?"
DOCS = ["Ana lives in Oslo.", "Bo likes tea.", "Oslo is cold.", "Cy is tall.", "Ana rows."]


@pytest.fixture
def case(tiny_llama):
    return Case(tiny_llama, QUERY, DOCS, "Oslo.")


def direct_log_p(case, mask) -> float:
    """``log P(response | kept sources)`` from one plain forward pass and a float64 softmax."""
    ids = case.builder.ids(mask) + list(case.response_ids)
    with torch.no_grad():
        logits = case.model(torch.tensor([ids[:-1]]))[0, -len(case.response_ids) :]
    logprobs = logits.double().log_softmax(-1)
    targets = torch.tensor(case.response_ids)
    return float(logprobs[torch.arange(len(targets)), targets].sum())


def test_lds_is_the_spearman_of_predictions_against_brute_force_outputs(case):
    attribution = case.arc_jsd()
    found = lds(case, attribution, n_masks=12, seed=3)
    log_p = np.array([direct_log_p(case, mask) for mask in found.masks])
    expected_outputs = log_p - np.log1p(-np.exp(log_p))
    np.testing.assert_allclose(found.outputs, expected_outputs, rtol=1e-4)
    np.testing.assert_allclose(found.predictions, found.masks.astype(float) @ attribution.scores)
    assert found.value == pytest.approx(stats.spearmanr(found.predictions, found.outputs)[0])
    assert found.masks.shape == (12, len(DOCS))


def test_every_method_on_one_case_shares_the_masks_and_pays_once(case):
    first = lds(case, case.arc_jsd(), n_masks=10)
    passes = case.engine.forward_passes
    second = lds(case, case.attribute("loo"), n_masks=10)
    assert case.engine.forward_passes == passes  # the masks were scored already
    np.testing.assert_array_equal(first.masks, second.masks)
    np.testing.assert_array_equal(first.outputs, second.outputs)


def test_given_masks_are_used_as_they_are(case):
    masks = np.eye(len(DOCS), dtype=bool)
    found = lds(case, case.arc_jsd(), masks=masks)
    np.testing.assert_array_equal(found.masks, masks)
    with pytest.raises(ValueError, match="masks must be"):
        lds(case, case.arc_jsd(), masks=np.ones((3, 2), dtype=bool))


def test_held_out_masks_depend_on_the_seed_and_keep_about_half():
    masks = held_out_masks(40, n_masks=500, seed=1)
    assert abs(masks.mean() - 0.5) < 0.02
    np.testing.assert_array_equal(masks, held_out_masks(40, n_masks=500, seed=1))
    assert not np.array_equal(masks, held_out_masks(40, n_masks=500, seed=2))


def test_held_out_masks_are_not_contextcites_training_masks(case):
    """ContextCite fits on keep-½ masks drawn from its seed; LDS at the same seed must score it
    on other masks, or it grades ContextCite on its training data."""
    from mechrag.attribution.contextcite import contextcite_surrogate

    n = 12
    trained = []
    def value(masks):
        trained.append(np.asarray(masks, dtype=bool))
        return np.asarray(masks, dtype=float).sum(1)

    contextcite_surrogate(value, n, budget=64, seed=0, keep_prob=0.5, l1=0.01)
    fitted_on = {tuple(row) for masks in trained for row in np.asarray(masks, dtype=bool)}
    held_out = {tuple(row) for row in held_out_masks(n, n_masks=32, seed=0)}
    assert fitted_on and not held_out & fitted_on


def test_topk_removal_and_keep_against_brute_force(case):
    attribution = case.attribute("loo")
    order = np.argsort(-attribution.scores, kind="stable")
    full = direct_log_p(case, np.ones(len(DOCS), dtype=bool))
    removal, kept = topk_removal(case, attribution, k=(1, 3, 9)), topk_keep(case, attribution)
    assert set(removal) == {1, 3} and set(kept) == {1, 3, 5}  # k above the sources: left out
    for k, change in removal.items():
        mask = np.ones(len(DOCS), dtype=bool)
        mask[order[:k]] = False
        assert change == pytest.approx(direct_log_p(case, mask) - full, rel=1e-4, abs=1e-6)
    for k, change in kept.items():
        mask = np.zeros(len(DOCS), dtype=bool)
        mask[order[:k]] = True
        assert change == pytest.approx(direct_log_p(case, mask) - full, rel=1e-4, abs=1e-6)
    assert kept[5] == pytest.approx(0.0, abs=1e-9)  # every source kept: the full context


def test_an_attribution_for_other_sources_is_refused(case, tiny_llama):
    other = Case(tiny_llama, QUERY, DOCS[:3], "Oslo.").arc_jsd()
    with pytest.raises(ValueError, match="other sources"):
        lds(case, other)


def test_plain_scores_count_as_the_attribution_they_came_from(case):
    attribution = case.attribute("loo")
    from_result, from_scores = lds(case, attribution), lds(case, list(attribution.scores))
    assert from_scores.value == from_result.value
    assert topk_removal(case, attribution.scores) == topk_removal(case, attribution)
    with pytest.raises(ValueError, match="scores must be"):
        topk_keep(case, attribution.scores[:-1])


def test_logit_probs_match_context_cite_on_identical_logits():
    utils = pytest.importorskip(
        "context_cite.utils", reason="context-cite is not installed (pip install -e '.[peers]')"
    )
    generator = torch.Generator().manual_seed(0)
    logits = torch.randn(3, 5, 50, generator=generator, dtype=torch.float64) * 4
    labels = torch.randint(0, 50, (3, 5), generator=generator)
    theirs = utils._compute_logit_probs(logits, labels).numpy()
    logprobs = logits.log_softmax(-1).gather(-1, labels[..., None])[..., 0].numpy()
    np.testing.assert_allclose(token_logit_probs(logprobs), theirs, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(
        response_logit_prob(logprobs), utils.aggregate_logit_probs(theirs), rtol=1e-6
    )


def test_logit_probs_are_the_log_odds_written_out():
    p = np.array([[0.9, 0.5], [0.2, 0.999]])
    np.testing.assert_allclose(token_logit_probs(np.log(p)), np.log(p / (1 - p)))
    sequence = p.prod(-1)
    np.testing.assert_allclose(response_logit_prob(np.log(p)), np.log(sequence / (1 - sequence)))


def test_attribute_evaluate_prints_and_writes_the_measures(tmp_path, capsys):
    import json

    from mechrag.cli import main

    context = tmp_path / "context.txt"
    context.write_text(" ".join(DOCS[:3]) + "\n\n" + " ".join(DOCS[3:]))
    out = tmp_path / "out"
    line = ["attribute", "--query", QUERY, "--context-file", str(context), "--out", str(out)]
    flags = ["--model", "toy:llama", "--max-new-tokens", "3", "--evaluate", "--html"]
    assert main([*line, "--method", "loo", *flags]) == 0
    printed = capsys.readouterr().out
    assert "LDS (Spearman, 32 held-out masks)" in printed and "top k removed" in printed
    written = json.loads((out / "attribution_loo.json").read_text())
    found = written["metadata"]["faithfulness"]
    assert set(found) == {"lds", "lds_masks", "topk_removal", "topk_keep"}
    # The same measures, recomputed on the same model, sources and response.
    from mechrag.models.toy import tiny_model
    from mechrag.results import Attribution

    attribution = Attribution.from_dict(written)
    case = Case(tiny_model("llama"), QUERY, attribution.sources, attribution.response_ids)
    assert found["lds"] == pytest.approx(lds(case, attribution).value)
    assert found["lds_masks"] == 32
    removal = topk_removal(case, attribution)
    assert found["topk_removal"] == pytest.approx({str(k): v for k, v in removal.items()})
    assert "LDS (32 masks)" in (out / "report.html").read_text()


def test_a_sweep_records_the_faithfulness_of_its_own_case(tiny_llama):
    from mechrag.data import RAGExample
    from mechrag.sources import as_sources
    from mechrag.sweep.methods import get_method

    example = RAGExample("e1", "toy", QUERY, as_sources(DOCS), ["p0s0"], "Oslo")
    record = get_method("loo").run(tiny_llama, example, {"evaluate": True, "max_new_tokens": 4})
    case = Case.from_example(tiny_llama, example, max_new_tokens=4)
    expected = lds(case, case.attribute("loo"))
    assert record["faithfulness"]["lds"] == pytest.approx(expected.value)
    plain = get_method("loo").run(tiny_llama, example, {"max_new_tokens": 4})
    assert "faithfulness" not in plain  # unchanged records without the option
