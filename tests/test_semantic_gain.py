"""Semantic gain (through the final norm) against a direct numpy computation; Spearman against
scipy."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy import stats

from mechrag import Case, localize
from mechrag.mechanism.semantic_gain import case_semantic_gain
from mechrag.prompts import PromptBuilder
from mechrag.sources import as_sources

QUERY = "Where does the cat sleep?"
SOURCES = ["The cat sleeps on the mat.", "Dogs bark at night.", "The mat is red."]
RESPONSE = "On the mat."


def _hf_final_norm(model):
    hf = model.original_model
    return hf.model.norm if hasattr(hf, "model") else hf.transformer.ln_f


def _alignment(model, x, u):
    """mean_j cos(norm(x[t]), u[j or t]) with the Hugging Face norm module, in float64."""
    with torch.no_grad():
        normed = _hf_final_norm(model)(torch.tensor(x, dtype=torch.float32)).double().numpy()
    cos = (normed[:, None] * u).sum(-1) / (
        np.linalg.norm(normed, axis=-1)[:, None] * np.linalg.norm(u, axis=-1)
    )
    return cos.mean(-1)


def _reference_gains(model, builder, response, directions):
    """Per-layer (attention, MLP, heads) gains from a plain run_with_cache."""
    with torch.no_grad():
        _, cache = model.run_with_cache(torch.tensor([builder.ids() + response[:-1]]))
    n = len(response)
    w_o = model.W_O.detach().double().numpy()
    for layer in range(model.cfg.n_layers):
        pre, mid, post = (
            cache[f"blocks.{layer}.hook_resid_{k}"][0, -n:].double().numpy()
            for k in ("pre", "mid", "post")
        )
        z = cache[f"blocks.{layer}.attn.hook_z"][0, -n:].double().numpy()
        base = _alignment(model, pre, directions)
        heads = [
            (_alignment(model, pre + z[:, head] @ w_o[layer, head], directions) - base).mean()
            for head in range(model.cfg.n_heads)
        ]
        attn = (_alignment(model, mid, directions) - base).mean()
        mlp = (_alignment(model, post, directions) - _alignment(model, mid, directions)).mean()
        yield layer, attn, mlp, heads


def _unembedding(model):
    weight = model.original_model.get_output_embeddings().original_component.weight
    return weight.detach().double().numpy()


@pytest.mark.parametrize("family", ["tiny_llama", "tiny_gpt2"])
def test_gain_matches_direct_computation(family, request):
    model = request.getfixturevalue(family)
    result = localize(model, QUERY, SOURCES, source="p0s2", response=RESPONSE)
    builder = PromptBuilder(model.tokenizer, QUERY, as_sources(SOURCES))
    response = builder.response_ids(RESPONSE)
    directions = _unembedding(model)[response][:, None]  # one direction per position
    for layer, attn, mlp, heads in _reference_gains(model, builder, response, directions):
        assert result.attn_gain[layer] == pytest.approx(attn, abs=1e-5)
        assert result.mlp_gain[layer] == pytest.approx(mlp, abs=1e-5)
        np.testing.assert_allclose(result.head_gain[layer], heads, atol=1e-5)
    assert np.abs(result.head_gain).max() > 1e-4
    rho, p = result.spearman()
    reference = stats.spearmanr(
        np.concatenate([result.heads.ravel(), result.mlps]),
        np.concatenate([result.head_gain.ravel(), result.mlp_gain]),
    )
    assert (rho, p) == pytest.approx((reference.statistic, reference.pvalue))


@pytest.mark.parametrize("family", ["tiny_llama", "tiny_gpt2"])
def test_answer_target_matches_direct_computation(family, request):
    model = request.getfixturevalue(family)
    task = Case(model, QUERY, SOURCES, RESPONSE)
    gain = case_semantic_gain(task, target="answer", answer="the red mat")
    assert gain.target == "answer"
    answer = task.builder.response_ids("the red mat")
    directions = _unembedding(model)[answer][None]  # the same answer tokens at every position
    for layer, attn, mlp, heads in _reference_gains(
        model, task.builder, task.response_ids, directions
    ):
        assert float(gain.attention[layer]) == pytest.approx(attn, abs=1e-5)
        assert float(gain.mlps[layer]) == pytest.approx(mlp, abs=1e-5)
        np.testing.assert_allclose(gain.heads[layer].numpy(), heads, atol=1e-5)
    response_gain = case_semantic_gain(task)
    assert not torch.allclose(response_gain.heads, gain.heads)
    with pytest.raises(ValueError, match="answer_ids"):
        case_semantic_gain(task, target="answer")
    with pytest.raises(ValueError, match="target"):
        case_semantic_gain(task, target="gold")


def test_without_gains(tiny_llama):
    result = localize(tiny_llama, QUERY, SOURCES, source="p0s0", response=RESPONSE, gains=False)
    assert result.gains is None
    assert np.isnan(result.to_frame()["semantic_gain"]).all()
    with pytest.raises(ValueError, match="no semantic gains"):
        result.spearman()
