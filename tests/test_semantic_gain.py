"""Semantic gain against a direct numpy computation; Spearman against scipy."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy import stats

from mechrag import localize
from mechrag.mechanism.semantic_gain import spearman

QUERY = "Where does the cat sleep?"
SOURCES = ["The cat sleeps on the mat.", "Dogs bark at night.", "The mat is red."]
RESPONSE = "On the mat."


def _cos(x, u):
    return (x * u).sum(-1) / (np.linalg.norm(x, axis=-1) * np.linalg.norm(u, axis=-1))


@pytest.mark.parametrize("family", ["tiny_llama", "tiny_gpt2"])
def test_gain_matches_direct_computation(family, request):
    from mechrag.prompts import PromptBuilder
    from mechrag.sources import as_sources

    model = request.getfixturevalue(family)
    result = localize(model, QUERY, SOURCES, source="p0s2", response=RESPONSE)
    builder = PromptBuilder(model.tokenizer, QUERY, as_sources(SOURCES))
    response = builder.response_ids(RESPONSE)
    with torch.no_grad():
        _, cache = model.run_with_cache(torch.tensor([builder.ids() + response[:-1]]))
    n = len(response)
    u = model.original_model.get_output_embeddings().original_component.weight
    u = u.detach().double().numpy()[response]
    w_o = model.W_O.detach().double().numpy()
    for layer in range(model.cfg.n_layers):
        pre, mid, post = (
            cache[f"blocks.{layer}.hook_resid_{k}"][0, -n:].double().numpy()
            for k in ("pre", "mid", "post")
        )
        z = cache[f"blocks.{layer}.attn.hook_z"][0, -n:].double().numpy()
        assert result.attn_gain[layer] == pytest.approx(
            (_cos(mid, u) - _cos(pre, u)).mean(), abs=1e-5
        )
        assert result.mlp_gain[layer] == pytest.approx(
            (_cos(post, u) - _cos(mid, u)).mean(), abs=1e-5
        )
        for head in range(model.cfg.n_heads):
            moved = pre + z[:, head] @ w_o[layer, head]
            expected = (_cos(moved, u) - _cos(pre, u)).mean()
            assert result.head_gain[layer, head] == pytest.approx(expected, abs=1e-5)
    assert np.abs(result.head_gain).max() > 1e-4
    rho, p = result.spearman()
    reference = stats.spearmanr(
        np.concatenate([result.heads.ravel(), result.mlps]),
        np.concatenate([result.head_gain.ravel(), result.mlp_gain]),
    )
    assert (rho, p) == pytest.approx((reference.statistic, reference.pvalue))


def test_spearman_matches_scipy():
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=50), rng.normal(size=50)
    y = x + 0.5 * y
    expected = stats.spearmanr(x, y)
    assert spearman(x, y) == pytest.approx((expected.statistic, expected.pvalue))
    assert spearman(x, x)[0] == pytest.approx(1.0)
    with pytest.raises(ValueError, match="equal-length"):
        spearman(x, y[:10])


def test_without_gains(tiny_llama):
    result = localize(tiny_llama, QUERY, SOURCES, source="p0s0", response=RESPONSE, gains=False)
    assert result.gains is None
    assert np.isnan(result.to_frame()["semantic_gain"]).all()
    with pytest.raises(ValueError, match="no semantic gains"):
        result.spearman()
