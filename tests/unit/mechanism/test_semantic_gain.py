"""Semantic gain, both definitions, against references computed straight from TransformerLens's
cache: the paper's (ARC-JSD Eq. 6-10, logit-lens argmax token) and mechrag's residual cosine;
Spearman against scipy."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from scipy import stats

from mechrag import Case, localize
from mechrag.mechanism.lens import DEFAULT_LOGIT_BUDGET
from mechrag.mechanism.localize import localize_source
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
    head = model.original_model.get_output_embeddings()
    return getattr(head, "original_component", head).weight.detach().double().numpy()


def _residual_cosine_localize(model, source: str):
    """``localize`` with mechrag's continuous gain (the one this file's first tests check)."""
    case = Case(model, QUERY, SOURCES, RESPONSE)
    return localize_source(
        case,
        case.source_index(source),
        gains=True,
        logit_budget=DEFAULT_LOGIT_BUDGET,
        gain_definition="residual_cosine",
    )


@pytest.mark.parametrize("family", ["tiny_llama", "tiny_gpt2"])
def test_gain_matches_direct_computation(family, request):
    model = request.getfixturevalue(family)
    result = _residual_cosine_localize(model, "p0s2")
    assert result.gain_definition == "residual_cosine"
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
    gain = case_semantic_gain(
        task, target="answer", answer="the red mat", definition="residual_cosine"
    )
    assert (gain.target, gain.definition) == ("answer", "residual_cosine")
    answer = task.builder.response_ids("the red mat")
    directions = _unembedding(model)[answer][None]  # the same answer tokens at every position
    for layer, attn, mlp, heads in _reference_gains(
        model, task.builder, task.response_ids, directions
    ):
        assert float(gain.attention[layer]) == pytest.approx(attn, abs=1e-5)
        assert float(gain.mlps[layer]) == pytest.approx(mlp, abs=1e-5)
        np.testing.assert_allclose(gain.heads[layer].numpy(), heads, atol=1e-5)
    response_gain = case_semantic_gain(task, definition="residual_cosine")
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


def _argmax_reference(model, ids: list[int], directions: np.ndarray):
    """ARC-JSD Eq. 6-10 from ``run_with_cache`` alone, in float64: per layer, the logit-lens
    argmax token of ``x^pre``, ``x^mid``, ``x^post`` at the positions predicting the response
    (final norm, then ``W_U``), its ``W_U`` column ``e``, and the mean over positions of
    ``cos(e_mid, u) - cos(e_pre, u)`` (attention) and ``cos(e_post, u) - cos(e_mid, u)`` (MLP),
    ``u`` the target columns (``[n_response, m, d_model]``, cosines averaged over ``m``).

    Returns ``[n_layers]`` attention and MLP gains and the smallest top-2 logit margin seen.
    """
    n_layers, n = model.cfg.n_layers, directions.shape[0]
    wanted = {
        f"blocks.{layer}.hook_resid_{site}"
        for layer in range(n_layers)
        for site in ("pre", "mid", "post")
    }
    with torch.no_grad():
        _, cache = model.run_with_cache(
            torch.tensor([ids]), names_filter=lambda name: name in wanted
        )
    norm = copy.deepcopy(model.ln_final.original_component).double()  # a copy: model untouched
    w_u = _unembedding(model)  # [vocab, d_model]: row v is W_U[:, v]
    unit = directions / np.linalg.norm(directions, axis=-1, keepdims=True)
    attention, mlps, margin = [], [], np.inf
    for layer in range(n_layers):
        cosines = {}
        for site in ("pre", "mid", "post"):
            x = cache[f"blocks.{layer}.hook_resid_{site}"][0, -n:].double()
            with torch.no_grad():
                logits = norm(x).numpy() @ w_u.T  # [n, vocab]
            top2 = np.sort(logits, axis=-1)[:, -2:]
            margin = min(margin, float((top2[:, 1] - top2[:, 0]).min()))
            e = w_u[logits.argmax(-1)]
            e = e / np.linalg.norm(e, axis=-1, keepdims=True)
            cosines[site] = np.einsum("td,tmd->tm", e, unit).mean(-1)
        attention.append((cosines["mid"] - cosines["pre"]).mean())
        mlps.append((cosines["post"] - cosines["mid"]).mean())
    return np.array(attention), np.array(mlps), margin


def _assert_argmax_gain(model, case, gain, directions):
    ids = case.builder.ids() + list(case.response_ids)[:-1]
    attention, mlps, margin = _argmax_reference(model, ids, directions)
    assert margin > 1e-4  # no near-tie that float32 could break the other way
    assert gain.definition == "argmax_token" and gain.heads is None
    np.testing.assert_allclose(gain.attention.numpy(), attention, atol=1e-5)
    np.testing.assert_allclose(gain.mlps.numpy(), mlps, atol=1e-5)
    assert np.abs(attention).max() > 1e-3 and np.abs(mlps).max() > 1e-3  # not vacuous


@pytest.mark.parametrize("family", ["tiny_llama", "tiny_gpt2"])
def test_argmax_token_gain_matches_cache_reference(family, request):
    model = request.getfixturevalue(family)
    case = Case(model, QUERY, SOURCES, RESPONSE)
    gain = case_semantic_gain(case)  # the paper's definition is the default
    directions = _unembedding(model)[list(case.response_ids)][:, None]
    _assert_argmax_gain(model, case, gain, directions)
    continuous = case_semantic_gain(case, definition="residual_cosine")
    assert not torch.allclose(continuous.attention, gain.attention)


@pytest.mark.parametrize("family", ["tiny_llama", "tiny_gpt2"])
def test_argmax_token_answer_target_matches_cache_reference(family, request):
    model = request.getfixturevalue(family)
    case = Case(model, QUERY, SOURCES, RESPONSE)
    gain = case_semantic_gain(case, target="answer", answer="the red mat")
    answer = case.builder.response_ids("the red mat")
    directions = np.broadcast_to(
        _unembedding(model)[answer][None], (len(case.response_ids), len(answer), model.cfg.d_model)
    )
    _assert_argmax_gain(model, case, gain, directions)


def test_localize_records_the_argmax_token_gain(tiny_llama):
    case = Case(tiny_llama, QUERY, SOURCES, RESPONSE)
    result = localize(tiny_llama, QUERY, SOURCES, source="p0s2", response=RESPONSE)
    gain = case_semantic_gain(case)
    assert result.gain_definition == "argmax_token" and result.head_gain is None
    np.testing.assert_allclose(result.attn_gain, gain.attention.numpy(), atol=1e-6)
    np.testing.assert_allclose(result.mlp_gain, gain.mlps.numpy(), atol=1e-6)
    # Heads carry their layer's attention gain where a per-component gain is asked for.
    n_heads = result.n_heads
    layer_gains = result.component_gains(head_gain="layer")
    np.testing.assert_array_equal(
        layer_gains[: result.heads.size], np.repeat(result.attn_gain, n_heads)
    )
    np.testing.assert_array_equal(layer_gains[result.heads.size :], result.mlp_gain)
    np.testing.assert_array_equal(result.gains, layer_gains)
    assert result.component_gains(head_gain="own") is None
    restored = type(result).from_dict(result.to_dict())
    assert restored.gain_definition == "argmax_token" and restored.head_gain is None


def test_component_gains_of_residual_cosine(tiny_gpt2):
    result = _residual_cosine_localize(tiny_gpt2, "p0s1")
    own = result.component_gains(head_gain="own")
    np.testing.assert_array_equal(own[: result.heads.size], result.head_gain.ravel())
    np.testing.assert_array_equal(result.gains, own)
    layer = result.component_gains(head_gain="layer")
    np.testing.assert_array_equal(
        layer[: result.heads.size], np.repeat(result.attn_gain, result.n_heads)
    )
    with pytest.raises(ValueError, match="head_gain"):
        result.component_gains(head_gain="mean")


def test_old_records_read_as_residual_cosine(tiny_gpt2):
    record = _residual_cosine_localize(tiny_gpt2, "p0s1").to_dict()
    del record["gain_definition"]
    assert (
        type(_residual_cosine_localize(tiny_gpt2, "p0s1")).from_dict(record).gain_definition
        == "residual_cosine"
    )


def test_bad_definition_raises(tiny_llama):
    case = Case(tiny_llama, QUERY, SOURCES, RESPONSE)
    with pytest.raises(ValueError, match="definition must be one of"):
        case_semantic_gain(case, definition="argmax")
    with pytest.raises(ValueError, match="definition must be one of"):
        localize_source(
            case, 0, gains=True, logit_budget=DEFAULT_LOGIT_BUDGET, gain_definition="cosine"
        )
    result = localize(tiny_llama, QUERY, SOURCES, source="p0s0", response=RESPONSE)
    record = result.to_dict()
    record["head_gain"] = np.zeros_like(result.heads).tolist()
    with pytest.raises(ValueError, match="no per-head gain"):
        type(result).from_dict(record)


@pytest.mark.integration
def test_argmax_token_gain_on_smollm(smollm):
    case = Case(smollm, QUERY, SOURCES, "On the mat.")
    gain = case_semantic_gain(case)
    directions = _unembedding(smollm)[list(case.response_ids)][:, None]
    _assert_argmax_gain(smollm, case, gain, directions)
