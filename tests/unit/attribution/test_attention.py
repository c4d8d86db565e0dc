"""Attention attribution: its features against TransformerLens, its cost (also on a generated
case's cache), its weights files, the localized fallback and rescoring."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from helpers import QUERY, assert_float32_equal, fresh, hook_count, sources
from scipy.stats import spearmanr

from mechrag import Case
from mechrag.attribution.attention import (
    AttentionAttribution,
    AttentionWeights,
    attention_features,
    localized_weights,
    model_key,
    model_shape,
)
from mechrag.attribution.screening import source_token_owners
from mechrag.errors import InputError, InputFileError


def reference_features(model, case) -> np.ndarray:
    """The features from TransformerLens's own cache of one plain forward pass."""
    sequence = case.builder.ids() + case.response_ids[:-1]
    _, cache = model.run_with_cache(
        torch.tensor([sequence]), names_filter=lambda name: name.endswith("hook_pattern")
    )
    owners = source_token_owners(case.builder)
    n_response = len(case.response_ids)
    layers = []
    for layer in range(model.cfg.n_layers):
        pattern = cache[f"blocks.{layer}.attn.hook_pattern"][0, :, -n_response:].double()
        prompt = pattern[..., : len(owners)].numpy()
        layers.append(
            np.stack([prompt[..., owners == i].sum(-1).mean(-1) for i in range(case.n_sources)], -1)
        )
    return np.stack(layers)


def test_attention_features_equal_transformerlens_patterns(tiny):
    case = fresh(tiny)
    features = attention_features(case)
    np.testing.assert_allclose(features.features, reference_features(tiny, case), atol=1e-6)
    # On the cached full-context pass (prefix reuse) they are the same.
    case.arc_jsd()
    cached = attention_features(case)
    np.testing.assert_allclose(cached.features, features.features, atol=1e-6)
    assert (features.features >= 0).all() and (features.features.sum(-1) <= 1 + 1e-9).all()


def test_attention_costs_one_pass_on_a_fresh_case_and_removes_its_hooks(tiny):
    before = hook_count(tiny)
    case = fresh(tiny)
    result = AttentionAttribution(weights="uniform")(case)
    assert result.forward_passes == 1 and result.model_calls == 1
    assert case.engine.forward_passes == 1
    assert hook_count(tiny) == before
    uniform = attention_features(fresh(tiny)).features.mean((0, 1))
    np.testing.assert_allclose(result.scores, uniform, rtol=1e-9)
    np.testing.assert_allclose(result.token_scores.mean(-1), result.scores)
    assert result.method == "attention_uniform"


def generated(model, **settings) -> Case:
    """A case that generated its own response (and so holds the generation's cache)."""
    case = Case(model, QUERY, sources(), max_new_tokens=6, **settings)
    assert len(case.response_ids) >= 2  # the tiny models do not stop at once
    return case


def test_a_generated_case_continues_its_generations_cache(tiny):
    """On the generating case the full-context pass runs only the response positions, and
    attention costs two response-length passes; every number equals a fresh case's."""
    before = hook_count(tiny)
    case = generated(tiny)
    n_response, n_prompt = len(case.response_ids), len(case.builder.ids())
    again = Case(tiny, QUERY, sources(), case.response_ids)
    result = AttentionAttribution(weights="uniform")(case)
    plain = AttentionAttribution(weights="uniform")(again)
    assert result.forward_passes == 2 and result.model_calls == 1
    assert result.metadata["tokens_processed"] == 2 * n_response
    assert plain.forward_passes == 1
    assert plain.metadata["tokens_processed"] == n_prompt + n_response - 1
    np.testing.assert_allclose(result.scores, plain.scores, atol=1e-6)
    torch.testing.assert_close(case.reference_logprobs(), again.reference_logprobs())
    np.testing.assert_allclose(case.arc_jsd().scores, again.arc_jsd().scores, atol=1e-6)
    assert hook_count(tiny) == before


def test_a_generation_is_continued_only_under_its_own_hooks(tiny_llama):
    from mechrag.mechanism.ablation import ablate

    case = generated(tiny_llama)
    n_response, n_prompt = len(case.response_ids), len(case.builder.ids())
    with ablate(tiny_llama, heads=[(0, 0)]):
        ablated = case.reference_logprobs()
        assert case.engine.tokens_processed == n_prompt + n_response - 1
        torch.testing.assert_close(
            ablated, Case(tiny_llama, QUERY, sources(), case.response_ids).reference_logprobs()
        )
    continued = case.reference_logprobs()  # the hook-free pass still continues the generation
    assert case.engine.tokens_processed == n_prompt + 2 * n_response - 1
    torch.testing.assert_close(
        continued, Case(tiny_llama, QUERY, sources(), case.response_ids).reference_logprobs()
    )


@pytest.mark.parametrize(("window", "reuse_prefix"), [(8, True), (4096, True), (4096, False)])
def test_a_generation_is_continued_only_where_prefix_reuse_is_exact(
    window, reuse_prefix, monkeypatch
):
    """Outside the window (or without prefix reuse) attention after generation costs one whole
    pass, as on a fresh case, not a whole reference pass and then a whole capture pass."""
    from mechrag.engine import Engine
    from mechrag.models.toy import tiny_model

    model = tiny_model("mistral")
    monkeypatch.setattr(model.original_model.config, "sliding_window", window)
    case = generated(model, engine=Engine(model, reuse_prefix=reuse_prefix))
    n_response, n_prompt = len(case.response_ids), len(case.builder.ids())
    continued = window == 4096 and reuse_prefix
    result = AttentionAttribution(weights="uniform")(case)
    assert result.forward_passes == (2 if continued else 1)
    tokens = 2 * n_response if continued else n_prompt + n_response - 1
    assert result.metadata["tokens_processed"] == tokens
    expected = Case(model, QUERY, sources(), case.response_ids).reference_logprobs()
    torch.testing.assert_close(case.reference_logprobs(), expected)


def weights_for(model, fitted=None, localized=None) -> AttentionWeights:
    shape = (model.cfg.n_layers, model.cfg.n_heads)
    rng = np.random.default_rng(0)
    return AttentionWeights(
        model_key(model),
        model_shape(model),
        rng.random(shape) if fitted is None else fitted,
        localized,
        {"note": "test"},
    )


def test_weights_round_trip_and_score(tiny, tmp_path):
    weights = weights_for(tiny)
    paths = weights.save(tmp_path / "w.safetensors")
    assert [p.name for p in paths] == ["w.safetensors", "w.json"]
    loaded = AttentionWeights.load(tmp_path / "w.safetensors")
    np.testing.assert_array_equal(loaded.fitted, weights.fitted)
    assert loaded.localized is None and loaded.provenance == {"note": "test"}
    case = fresh(tiny)
    result = AttentionAttribution(weights=str(tmp_path / "w.safetensors"))(case)
    expected = np.einsum("lh,lhs->s", weights.fitted, attention_features(fresh(tiny)).features)
    np.testing.assert_allclose(result.scores, expected, rtol=1e-9)
    assert result.method == "attention"


def test_weights_for_another_model_are_refused(tiny_llama, tiny_gpt2, tmp_path):
    weights_for(tiny_llama).save(tmp_path / "llama.safetensors")
    with pytest.raises(InputError, match="fitted for 'tiny-llama'"):
        AttentionAttribution(weights=str(tmp_path / "llama.safetensors"))(fresh(tiny_gpt2))
    other = weights_for(tiny_llama)
    other.shape = {**other.shape, "n_heads": 99}
    with pytest.raises(InputError, match="fit-attention"):
        other.check(tiny_llama)


def test_missing_and_foreign_weight_files_are_bad_input(tiny, tmp_path):
    with pytest.raises(InputFileError, match="not found"):
        AttentionAttribution(weights=str(tmp_path / "none.safetensors"))(fresh(tiny))
    from safetensors.numpy import save_file

    save_file({"x": np.zeros(2)}, str(tmp_path / "other.safetensors"))
    with pytest.raises(InputFileError, match="not a mechrag"):
        AttentionWeights.load(tmp_path / "other.safetensors")


def test_fitted_weights_need_a_file_for_models_without_shipped_ones(tiny):
    with pytest.raises(InputError, match="fit-attention"):
        fresh(tiny).attribute("attention")


def test_localized_fallback_runs_localize_on_the_case(tiny):
    case = fresh(tiny)
    result = AttentionAttribution(weights="localized")(case)
    heads = fresh(tiny).localize(gains=False).heads
    weights = localized_weights([heads])
    assert (weights > 0).sum() == min(10, heads.size)
    np.testing.assert_allclose(
        result.scores, np.einsum("lh,lhs->s", weights, attention_features(case).features)
    )
    assert result.metadata["weights_from"] == "localize on this case"
    assert result.forward_passes > 1  # honest: the localisation's passes count


def test_localized_weights_pick_the_top_normalised_heads():
    a = np.array([[4.0, 0.0], [0.0, 0.0]])
    b = np.array([[0.0, 0.0], [1.0, 0.0]])
    np.testing.assert_array_equal(localized_weights([a, b], top=2), [[0.5, 0], [0.5, 0]])
    np.testing.assert_array_equal(localized_weights([a, a], top=1), [[1, 0], [0, 0]])


def test_patterns_are_captured_for_one_mask_only(tiny):
    case = fresh(tiny)
    with pytest.raises(ValueError, match="one mask"):
        case.capture(case.leave_one_out_masks()[:2], ("pattern",))


def test_shipped_weights_load_for_the_embedded_models():
    from mechrag.attribution.attention import shipped_weights_path
    from mechrag.models import EMBEDDED_MODELS

    for name in EMBEDDED_MODELS:
        weights = AttentionWeights.load(shipped_weights_path(name))
        assert weights.model == name
        assert weights.fitted.min() >= 0 and weights.fitted.sum() == pytest.approx(1.0)
        assert weights.localized is not None
        data = weights.provenance["data"]
        assert data["split"].startswith("train") and weights.provenance["n"] >= 10
        assert all(key.split(":")[0] in ("hotpotqa", "musique") for key in data["example_keys"])
        assert {"validation", "train"} <= set(weights.provenance["quality"])


def test_rescored_attention_scores_its_top_sources_exactly(tiny):
    exact = fresh(tiny).arc_jsd()
    everything = AttentionAttribution(weights="uniform", rescore=12)(fresh(tiny))
    assert_float32_equal(everything.scores, exact.scores)
    case = fresh(tiny)
    result = AttentionAttribution(weights="uniform", rescore=3)(case)
    attention = np.asarray(result.metadata["attention_scores"])
    np.testing.assert_allclose(attention, attention_features(fresh(tiny)).features.mean((0, 1)))
    top = np.argsort(-attention, kind="stable")[:3]
    assert_float32_equal(result.scores[top], exact.scores[top])  # other batches than exact's
    rest = np.setdiff1d(np.arange(12), top)
    assert result.scores[rest].max() < result.scores[top].min()
    assert spearmanr(result.scores[rest], attention[rest]).statistic == pytest.approx(1.0)
    assert result.method == "attention_uniform_rescored" and result.model_calls == 1 + 3 + 1
    # One full pass, the attention pass on its cache, and the three suffixes (batched).
    assert 2 < result.forward_passes <= 2 + 3


