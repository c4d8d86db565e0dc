"""bf16 models: every softmax, divergence and lens distribution is computed in float32."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from scipy.special import rel_entr

from mechrag import Case
from mechrag.mechanism.lens import lens_logprobs
from mechrag.metrics import spearman
from mechrag.models import adapter

QUERY = "Where does Ana live?"
DOCS = ["Ana lives in Oslo.", "Bo likes tea.", "Oslo is cold.", "Cy is tall."]


@pytest.fixture(scope="module", params=["llama", "gpt2"])
def bf16_model(request):
    from mechrag.models.toy import tiny_model

    return tiny_model(request.param, dtype=torch.bfloat16)


def float64_jsd_per_pass(case: Case, masks: np.ndarray) -> np.ndarray:
    """``JSD(P_full,t || P_mask,t)`` per mask and token from one unpadded, uncached pass per
    subset: the model's bf16 logits, then softmax and divergence in float64 by hand."""
    n_response = len(case.response_ids)

    def distributions(mask) -> np.ndarray:
        ids = case.builder.ids(mask) + list(case.response_ids[:-1])
        with torch.no_grad():
            logits = case.model(torch.tensor([ids]))[0, -n_response:]
        return logits.double().softmax(-1).numpy()

    full = distributions(case.full_mask())
    rows = []
    for mask in masks:
        ablated = distributions(mask)
        middle = (full + ablated) / 2
        rows.append(0.5 * (rel_entr(full, middle).sum(-1) + rel_entr(ablated, middle).sum(-1)))
    return np.stack(rows)


def test_the_model_really_runs_in_bf16(bf16_model):
    assert next(adapter.hf_model(bf16_model).parameters()).dtype == torch.bfloat16
    ids = torch.tensor([[5, 6, 7]])
    with torch.no_grad():
        assert bf16_model(ids).dtype == torch.bfloat16


def test_scores_and_divergences_are_float32(bf16_model):
    case = Case(bf16_model, QUERY, DOCS, "Oslo.")
    assert case.reference_logprobs().dtype == torch.float32
    torch.testing.assert_close(
        case.reference_logprobs().exp().sum(-1),
        torch.ones(len(case.response_ids)),
        atol=1e-5,
        rtol=0,
    )  # normalised in float32, not rounded to bf16
    scores = case.token_divergences(case.leave_one_out_masks())
    # A softmax in bf16 misses this reference by ~5e-4; the float32 one by ~1e-7.
    expected = float64_jsd_per_pass(case, case.leave_one_out_masks())
    np.testing.assert_allclose(scores, expected, rtol=0, atol=1e-5)
    np.testing.assert_allclose(case.arc_jsd().scores, expected.sum(-1), rtol=0, atol=1e-4)


def test_lens_upcasts_before_norm_and_unembedding(bf16_model):
    writes = torch.randn(3, bf16_model.cfg.d_model).to(torch.bfloat16)
    lens = lens_logprobs(bf16_model, writes)
    assert lens.dtype == torch.float32
    # Reference: float32 copies of the final norm and unembedding applied by hand.
    norm = copy.deepcopy(bf16_model.ln_final.original_component).float()
    head = adapter.hf_model(bf16_model).get_output_embeddings()
    head = getattr(head, "original_component", head)
    expected = torch.nn.functional.linear(
        norm(writes.float()), head.weight.float(), None if head.bias is None else head.bias.float()
    ).log_softmax(-1)
    torch.testing.assert_close(lens, expected, atol=1e-5, rtol=1e-5)
    assert all(p.dtype == torch.bfloat16 for p in adapter.hf_model(bf16_model).parameters())


def test_localize_runs_in_float32(bf16_model, monkeypatch):
    """Every lens distribution localize computes is float32, and the model's weights stay bf16."""
    from mechrag.mechanism import lens

    seen = []
    original = lens.lens_logprobs

    def recording(model, writes):
        logprobs = original(model, writes)
        seen.append(logprobs.dtype)
        return logprobs

    monkeypatch.setattr(lens, "lens_logprobs", recording)
    result = Case(bf16_model, QUERY, DOCS, "Oslo.").localize("p0s0")
    assert seen and set(seen) == {torch.float32}
    assert np.isfinite(result.heads).all() and result.heads.max() > 0
    assert all(p.dtype == torch.bfloat16 for p in adapter.hf_model(bf16_model).parameters())


@pytest.mark.integration
def test_bf16_arc_jsd_keeps_the_float32_ranking(smollm):
    from mechrag import load_model
    from mechrag.data import load_hotpotqa

    bf16 = load_model(device="cpu", dtype=torch.bfloat16)
    example = load_hotpotqa(n=1, distractors=1)[0]
    reference = Case.from_example(smollm, example, max_new_tokens=12)
    half = Case.from_example(bf16, example, reference.response_ids)
    rho = spearman(half.arc_jsd().scores, reference.arc_jsd().scores)
    assert rho >= 0.9, rho
