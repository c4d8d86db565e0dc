"""Fast attribution: hierarchical ARC-JSD, attention attribution and its fit, proxy models."""

from __future__ import annotations

import runpy
from pathlib import Path

import numpy as np
import pytest
import torch
from helpers import hook_count
from scipy.stats import rankdata, spearmanr

from mechrag import Case
from mechrag.attribution.attention import (
    AttentionAttribution,
    AttentionWeights,
    attention_features,
    localized_weights,
    model_key,
    model_shape,
)
from mechrag.attribution.attention_fit import (
    LOSSES,
    fit_head_weights,
    fit_objective,
    fit_quality,
    project_to_simplex,
    weights_from_records,
)
from mechrag.attribution.hierarchical import (
    HierarchicalARCJSD,
    document_masks,
    expanded_documents,
)
from mechrag.attribution.proxy import ProxyAttribution
from mechrag.attribution.screening import source_token_owners
from mechrag.errors import InputError, InputFileError
from mechrag.sources import Source

QUERY = "Where does Ana live?"
RESPONSE = "Ana lives in Oslo."


def sources(n_paragraphs: int = 4, per: int = 3) -> list[Source]:
    return [
        Source(f"p{p}s{s}", f"Fact {p}.{s}: item {7 * p + s} is here.", f"Title {p}", p)
        for p in range(n_paragraphs)
        for s in range(per)
    ]


@pytest.fixture(scope="module", params=["llama", "gpt2"])
def tiny(request):
    from mechrag.models.toy import tiny_model

    return tiny_model(request.param)


def fresh(model, srcs=None) -> Case:
    return Case(model, QUERY, srcs or sources(), RESPONSE)


def assert_float32_equal(actual, expected) -> None:
    """Equal up to float32 rounding: the same subsets scored in other batches (or buffers of
    another alignment) need not give the same bits."""
    expected = np.asarray(expected)
    np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-5 * np.abs(expected).max())


# -- hierarchical ------------------------------------------------------------------------------


def test_document_masks_group_by_paragraph(tiny):
    case = fresh(tiny, [*sources(2, 2), Source("x", "Loose fact.")])
    documents, removed = document_masks(case)
    assert documents == [0, 1, ("source", 4)]
    np.testing.assert_array_equal(~removed, [[1, 1, 0, 0, 0], [0, 0, 1, 1, 0], [0, 0, 0, 0, 1]])


def test_hierarchical_with_every_document_equals_exact(tiny):
    exact = fresh(tiny).arc_jsd()
    case = fresh(tiny)
    result = HierarchicalARCJSD(documents=4)(case)
    assert_float32_equal(result.scores, exact.scores)
    assert_float32_equal(result.token_scores, exact.token_scores)
    assert result.model_calls == exact.model_calls == 13
    assert all(result.metadata["exact"])


def test_hierarchical_scores_expanded_sentences_exactly_and_ranks_the_rest_below(tiny):
    exact = fresh(tiny).arc_jsd()
    case = fresh(tiny)
    result = HierarchicalARCJSD(documents=1)(case)
    documents, removed = document_masks(case)
    document_scores = case.token_divergences(removed).sum(-1)
    np.testing.assert_allclose(result.metadata["document_scores"], document_scores)
    top = int(np.argmax(document_scores))
    inside = np.flatnonzero(~removed[top])
    assert_float32_equal(result.scores[inside], exact.scores[inside])
    outside = np.setdiff1d(np.arange(case.n_sources), inside)
    assert result.scores[outside].max() < result.scores[inside].min()
    # Unexpanded sentences rank by their document's score per sentence.
    share = document_scores[[case.sources[i].paragraph for i in outside]] / 3
    assert spearmanr(result.scores[outside], share).statistic == pytest.approx(1.0)
    # Cost: the full context, four documents, three sentences.
    assert result.model_calls == 1 + 4 + 3
    assert result.forward_passes <= result.model_calls


def test_hierarchical_subsets_join_the_cache(tiny):
    case = fresh(tiny)
    HierarchicalARCJSD(documents=1)(case)
    assert case.subsets_scored == 4 + 3  # the documents and the top document's sentences
    case.arc_jsd()
    assert case.subsets_scored == 4 + 12  # exact ARC-JSD scored only the nine others


def test_hierarchical_composes_with_the_screen(tiny):
    case = fresh(tiny)
    result = HierarchicalARCJSD(documents=2, screen=2)(case)
    exact_flags = np.asarray(result.metadata["exact"])
    assert exact_flags.sum() == 2
    expanded_ids = result.metadata["expanded_documents"]
    expanded = np.isin([s.paragraph for s in case.sources], expanded_ids)
    assert expanded[exact_flags].all()
    reference = fresh(tiny).arc_jsd()
    assert_float32_equal(result.scores[exact_flags], reference.scores[exact_flags])
    # Exact first, then the other expanded sentences, then the rest.
    tiers = [exact_flags, expanded & ~exact_flags, ~expanded]
    for upper, lower in zip(tiers, tiers[1:]):
        assert result.scores[upper].min() > result.scores[lower].max()


def test_expanded_documents_take_the_top_ones_those_within_reach_and_single_sentences():
    scores = np.array([0.3, 1.0, 0.6, 0.05, 0.2])
    sizes = np.array([3, 3, 3, 1, 3])
    np.testing.assert_array_equal(expanded_documents(scores, sizes, 1), [0, 1, 0, 1, 0])
    np.testing.assert_array_equal(expanded_documents(scores, sizes, 2), [0, 1, 1, 1, 0])
    np.testing.assert_array_equal(expanded_documents(scores, sizes, 1, 0.5), [0, 1, 1, 1, 0])
    np.testing.assert_array_equal(expanded_documents(scores, sizes, 1, 0.25), [1, 1, 1, 1, 0])
    # No document moves the response: only the top ones by order.
    np.testing.assert_array_equal(expanded_documents(np.zeros(5), sizes, 1, 0.5), [1, 0, 0, 1, 0])


def test_hierarchical_within_expands_every_document_near_the_top(tiny):
    case = fresh(tiny)
    result = HierarchicalARCJSD(documents=1, within=1e-9)(case)
    assert result.metadata["expanded_documents"] == [0, 1, 2, 3]
    assert_float32_equal(result.scores, fresh(tiny).arc_jsd().scores)
    assert result.model_calls == 1 + 4 + 12


def test_replayed_expansion_rules_match_hierarchical_arc_jsd(tiny):
    """``make results`` replays the expansion rules on a record of level-one document scores
    (``experiments/hierarchical_rules.py``): top-1 agreement with exact ARC-JSD and model calls
    as the method's own, a one-sentence document among the others."""
    from result_tables.hierarchical import HIERARCHICAL_RULES, replayed_rule

    root = Path(__file__).resolve().parents[1]
    level_one = runpy.run_path(str(root / "experiments" / "hierarchical_rules.py"))["level_one"]
    srcs = [*sources(4, 3), Source("x", "Loose fact.", title="Loose", paragraph=9)]
    exact = fresh(tiny, srcs).arc_jsd()
    record = level_one(fresh(tiny, srcs))
    top_document = HierarchicalARCJSD(documents=1)(fresh(tiny, srcs))
    assert_float32_equal(record["document_scores"], top_document.metadata["document_scores"])
    record.update(exact_scores=exact.scores.tolist(), exact_model_calls=exact.model_calls)
    documents, _ = document_masks(fresh(tiny, srcs))
    top_document = documents.index(srcs[int(np.argmax(exact.scores))].paragraph)
    calls = set()
    for documents, within in [*HIERARCHICAL_RULES, (1, 1e-9), (5, None)]:
        result = HierarchicalARCJSD(documents=documents, within=within)(fresh(tiny, srcs))
        # Agreement read from what the method expanded, not from an argmax over scores that
        # other batches round otherwise.
        agrees = float(top_document in result.metadata["expanded_documents"])
        replayed = replayed_rule(record, documents, within)
        assert replayed == (agrees, result.model_calls), (documents, within)
        calls.add(result.model_calls)
    assert len(calls) >= 4  # the rules differ in cost


def test_hierarchical_refuses_bad_settings(tiny):
    with pytest.raises(InputError, match="documents"):
        HierarchicalARCJSD(documents=0)
    with pytest.raises(InputError, match="within"):
        HierarchicalARCJSD(within=1.5)
    with pytest.raises(InputError, match="budget"):
        fresh(tiny).attribute("hierarchical", budget=3)


# -- attention features ------------------------------------------------------------------------


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


# -- the fit -----------------------------------------------------------------------------------


def test_simplex_projection_matches_a_brute_force_minimiser():
    rng = np.random.default_rng(1)
    for _ in range(20):
        v = torch.as_tensor(rng.normal(size=4))
        w = project_to_simplex(v)
        assert float(w.sum()) == pytest.approx(1.0) and (w >= 0).all()
        # The projection is the closest simplex point: no random simplex point is closer.
        others = torch.as_tensor(rng.dirichlet(np.ones(4), size=2000))
        assert float((w - v).norm()) <= float((others - v).norm(dim=1).min()) + 1e-12


def test_fit_recovers_known_weights_on_a_synthetic_problem():
    rng = np.random.default_rng(0)
    truth = np.zeros(12)
    truth[[1, 5, 9]] = [0.5, 0.3, 0.2]
    designs = [rng.random((int(rng.integers(6, 20)), 12)) for _ in range(60)]
    targets = [d @ truth for d in designs]
    fitted = fit_head_weights(designs, targets, l2=0.0, steps=3000, learning_rate=0.01, seed=3)
    np.testing.assert_allclose(fitted, truth, atol=0.02)
    assert fitted.min() >= 0 and fitted.sum() == pytest.approx(1.0)
    quality = fit_quality(fitted, designs, targets)
    assert quality["top1"] == 1.0 and quality["spearman"] > 0.99
    uniform = fit_quality(np.full(12, 1 / 12), designs, targets)
    assert uniform["spearman"] < 0.9


def test_fit_objective_matches_a_per_case_reference():
    from scipy.special import softmax

    rng = np.random.default_rng(7)
    designs = [rng.random((size, 5)) for size in (3, 8, 5)]
    targets = [rng.random(len(d)) for d in designs]
    designs.append(rng.random((4, 5)))
    targets.append(np.full(4, 0.2))  # constant: dropped from the objective
    weights = rng.dirichlet(np.ones(5))

    def z(values):
        return (values - values.mean()) / values.std()

    varying = list(zip(designs[:3], targets))
    pearson = np.mean([1 - np.corrcoef(d @ weights, y)[0, 1] for d, y in varying])
    assert fit_objective(weights, designs, targets) == pytest.approx(pearson, rel=1e-12)
    kl = []
    for d, y in varying:
        p, q = softmax(z(y) / 0.3), softmax(z(d @ weights) / 0.3)
        kl.append(np.sum(p * np.log(p / q)))
    listwise = fit_objective(weights, designs, targets, loss="listwise", temperature=0.3)
    assert listwise == pytest.approx(np.mean(kl), rel=1e-10)
    ranks = fit_objective(weights, designs, targets, target="ranks")
    reference = [1 - np.corrcoef(d @ weights, rankdata(y))[0, 1] for d, y in varying]
    assert ranks == pytest.approx(np.mean(reference), rel=1e-12)


def test_listwise_fit_recovers_known_weights():
    rng = np.random.default_rng(0)
    truth = np.zeros(12)
    truth[[1, 5, 9]] = [0.5, 0.3, 0.2]
    designs = [rng.random((int(rng.integers(6, 20)), 12)) for _ in range(30)]
    targets = [d @ truth for d in designs]
    fitted = fit_head_weights(
        designs, targets, l2=0.0, loss="listwise", steps=400, learning_rate=0.02, seed=3
    )
    np.testing.assert_allclose(fitted, truth, atol=1e-3)


def test_listwise_fit_favours_the_head_that_finds_the_top_source():
    # Two heads that no mix makes perfect: one ranks the other sources but puts the top source
    # last, one finds the top source but reverses the rest. A correlation weighs every source
    # alike; the low-temperature listwise loss weighs the top of the ranking.
    rng = np.random.default_rng(0)
    designs, targets = [], []
    for _ in range(20):
        y = rng.normal(size=10)
        top = int(np.argmax(y))
        bulk = y - y.min()
        bulk[top] = 0.0
        pointer = (y.max() - y) / 10
        pointer[top] = 1.0
        designs.append(np.stack([bulk, pointer], 1))
        targets.append(y)
    settings = {"l2": 0.0, "temperature": 0.1, "steps": 300, "learning_rate": 0.02}
    fitted = {loss: fit_head_weights(designs, targets, loss=loss, **settings) for loss in LOSSES}
    top1 = {loss: fit_quality(w, designs, targets)["top1"] for loss, w in fitted.items()}
    assert top1["listwise"] >= 0.85 > top1["pearson"]
    assert fitted["listwise"][1] > fitted["pearson"][1]  # more weight on the top-finding head


def test_fit_is_seeded_and_regularised():
    rng = np.random.default_rng(2)
    designs = [rng.random((8, 6)) for _ in range(10)]
    targets = [rng.random(8) for _ in range(10)]
    a = fit_head_weights(designs, targets, seed=4, steps=50)
    np.testing.assert_array_equal(a, fit_head_weights(designs, targets, seed=4, steps=50))
    spread = fit_head_weights(designs, targets, l2=10.0, steps=300)
    np.testing.assert_allclose(spread, np.full(6, 1 / 6), atol=0.02)
    with pytest.raises(InputError, match="target"):
        fit_head_weights(designs, targets, target="logits")
    with pytest.raises(InputError, match="loss"):
        fit_head_weights(designs, targets, loss="hinge")
    with pytest.raises(InputError, match="temperature"):
        fit_head_weights(designs, targets, loss="listwise", temperature=0.0)
    with pytest.raises(InputError, match="finite"):
        fit_head_weights(designs, [*targets[:-1], np.full(8, np.nan)])
    for bad in (rng.random((8, 5)), rng.random((7, 6)), np.full((8, 6), np.inf)):
        with pytest.raises(InputError, match="each design"):
            fit_head_weights([*designs[:-1], bad], targets)


@pytest.mark.parametrize("loss", LOSSES)
def test_fit_survives_a_case_no_head_tells_apart(loss):
    # Every head pays each source the same attention in the first case: its prediction is
    # zero for any weights, which must leave the gradient finite.
    rng = np.random.default_rng(3)
    designs = [np.ones((4, 3)), rng.random((5, 3))]
    targets = [rng.random(4), rng.random(5)]
    fitted = fit_head_weights(designs, targets, loss=loss, steps=20)
    assert np.all(np.isfinite(fitted)) and fitted.sum() == pytest.approx(1.0)


def test_weights_from_records_hold_their_provenance(tiny):
    rng = np.random.default_rng(5)
    n_heads = tiny.cfg.n_layers * tiny.cfg.n_heads
    truth = rng.dirichlet(np.ones(n_heads))
    records = []
    for _ in range(8):
        design = rng.random((6, n_heads))
        records.append(
            {
                "design": design.tolist(),
                "scores": (design @ truth).tolist(),
                "heads": rng.random((tiny.cfg.n_layers, tiny.cfg.n_heads)).tolist(),
            }
        )
    weights = weights_from_records(records, tiny, l2=0.0, provenance={"data": "synthetic"})
    assert weights.provenance["data"] == "synthetic"
    quality = weights.provenance["quality"]
    assert quality["validation"]["n"] == 2 and quality["train"]["n"] == 8
    assert quality["train"]["spearman"] > 0.9
    designs = [np.asarray(r["design"]) for r in records]
    targets = [np.asarray(r["scores"]) for r in records]
    expected = fit_objective(weights.fitted.reshape(-1), designs, targets)
    assert quality["train"]["objective"] == pytest.approx(expected)
    assert "temperature" not in weights.provenance["fit"]  # a Pearson fit has none
    assert weights.fitted.shape == (tiny.cfg.n_layers, tiny.cfg.n_heads)
    weights.check(tiny)


# -- proxy -------------------------------------------------------------------------------------


def test_proxy_retokenises_the_response_text(tiny_llama):
    from mechrag.models.toy import tiny_model

    proxy = tiny_model("gpt2")  # a prefix-space byte tokenizer would split differently
    case = fresh(tiny_llama)
    method = ProxyAttribution(proxy=proxy)
    proxied = case.for_model(method.proxy_model(case))
    assert proxy.tokenizer.decode(proxied.response_ids) == case.response_text
    result = method(case)
    direct = Case(proxy, QUERY, sources(), RESPONSE).arc_jsd()
    np.testing.assert_allclose(result.scores, direct.scores)
    assert result.method == "proxy_arc_jsd" and result.metadata["proxy"] == model_key(proxy)
    # The cost is the proxy's passes; the target model ran none.
    assert case.engine.forward_passes == 0
    assert result.forward_passes == direct.forward_passes and result.model_calls == 13
    assert result.metadata["tokens_processed"] == direct.metadata["tokens_processed"] > 0
    with pytest.raises(InputError, match="proxy model"):
        fresh(tiny_llama).attribute("proxy")


# -- the command line and the records ----------------------------------------------------------


def test_fit_attention_options_are_the_fits():
    import argparse

    from mechrag.attribution.attention_fit import TARGETS, TEMPERATURE
    from mechrag.cli.fit_attention import add_arguments

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    options = {action.dest: action for action in parser._actions}
    assert tuple(options["target"].choices) == TARGETS
    assert tuple(options["loss"].choices) == LOSSES
    assert options["temperature"].default == TEMPERATURE


def test_fit_attention_command_fits_resumes_and_refuses_dev_data(tmp_path, capsys):
    from mechrag.cli import main
    from mechrag.data import load_hotpotqa

    out = tmp_path / "w.safetensors"
    words = [
        "fit-attention",
        "--model",
        "toy:llama",
        "--dataset",
        "hotpotqa",
        "--n",
        "3",
        "--sentences",
        "6",
        "--max-new-tokens",
        "4",
        "--out",
        str(out),
    ]
    assert main(words) == 0
    weights = AttentionWeights.load(out)
    assert weights.model == "tiny-llama" and weights.provenance["n"] == 3
    training = load_hotpotqa()[50:53]  # --offset's default: the training sample, never dev
    assert weights.provenance["data"]["example_keys"] == [f"hotpotqa:{e.id}" for e in training]
    assert weights.provenance["command"].startswith("mechrag fit-attention --dataset hotpotqa")
    assert weights.fitted.sum() == pytest.approx(1.0) and weights.localized is not None
    records = tmp_path / "w_cases" / "records.jsonl"
    assert len(records.read_text().splitlines()) == 3
    capsys.readouterr()
    assert main(words) == 0  # resumed: every case is on record, nothing is run again
    assert "[1/3]" not in capsys.readouterr().out
    assert len(records.read_text().splitlines()) == 3
    assert weights.provenance["fit"]["loss"] == "pearson"
    assert main([*words, "--loss", "listwise", "--temperature", "0.1"]) == 0  # records reused
    listwise = AttentionWeights.load(out)
    changed = {"loss": "listwise", "temperature": 0.1}
    assert listwise.provenance["fit"] == {**weights.provenance["fit"], **changed}
    assert "--loss listwise --temperature 0.1" in listwise.provenance["command"]
    assert len(records.read_text().splitlines()) == 3
    assert main([*words, "--loss", "listwise", "--temperature", "0"]) == 2
    assert "--temperature must be positive" in capsys.readouterr().err
    assert main([*words[:4], "squad", *words[5:]]) == 2
    assert "training splits only" in capsys.readouterr().err


def test_attribute_command_takes_the_fast_methods(tmp_path, capsys, monkeypatch, tiny_llama):
    from mechrag.cli import main

    monkeypatch.setattr("mechrag.models.loading.load_model", lambda name=None: tiny_llama)
    context = tmp_path / "context.txt"
    context.write_text("Ana lives in Oslo. Oslo is cold.\n\nBo likes tea. Cy is tall.\n")
    base = [
        "attribute",
        "--query",
        QUERY,
        "--context-file",
        str(context),
        "--response",
        RESPONSE,
    ]
    for extra in (
        ["--method", "hierarchical", "--documents", "1"],
        ["--method", "hierarchical", "--documents", "1", "--within", "0.5"],
        ["--method", "attention", "--weights", "uniform"],
    ):
        assert main([*base, *extra]) == 0, capsys.readouterr().err
    assert main([*base, "--method", "arc_jsd", "--weights", "uniform"]) == 2
    assert "takes" in capsys.readouterr().err
    assert main([*base, "--method", "hierarchical", "--within", "2"]) == 2
    assert "within must be in (0, 1]" in capsys.readouterr().err


def test_attribute_command_refuses_a_missing_weights_file_or_proxy_before_loading(
    tmp_path, capsys, monkeypatch
):
    from mechrag.cli import main

    def no_model(name=None):
        raise AssertionError("the model was loaded before the inputs were checked")

    monkeypatch.setattr("mechrag.models.loading.load_model", no_model)
    context = tmp_path / "context.txt"
    context.write_text("Ana lives in Oslo. Oslo is cold.\n")
    base = ["attribute", "--query", QUERY, "--context-file", str(context), "--response", RESPONSE]
    missing = tmp_path / "nope.safetensors"
    assert main([*base, "--method", "attention", "--weights", str(missing)]) == 2
    assert "attention weights file not found" in capsys.readouterr().err
    malformed = tmp_path / "bad.safetensors"
    malformed.write_bytes(b"not a safetensors file")
    assert main([*base, "--method", "attention", "--weights", str(malformed)]) == 2
    assert "is not a safetensors file" in capsys.readouterr().err
    assert main([*base, "--method", "proxy"]) == 2
    assert "needs a proxy model" in capsys.readouterr().err
    assert not list(tmp_path.glob("attribution_*"))


def test_a_sweep_refuses_a_proxy_run_without_a_proxy_before_any_model(tmp_path):
    from mechrag.errors import InputError
    from mechrag.sweep import SweepConfig

    with pytest.raises(InputError, match="needs a proxy model"):
        SweepConfig("proxy", "hotpotqa", n=1)
    with pytest.raises(InputError, match="attention weights file not found"):
        SweepConfig("attention", "hotpotqa", n=1, options={"weights": str(tmp_path / "w")})
    SweepConfig("attention", "hotpotqa", n=1, options={"weights": "uniform"})  # accepted


def test_compacted_records_read_back_in_order(tmp_path):
    from mechrag.results.files import append_jsonl, compact_records, run_records

    for i in range(3):
        append_jsonl(tmp_path / "records.jsonl", {"i": i})
    target = compact_records(tmp_path)
    assert target.name == "records.jsonl.gz" and not (tmp_path / "records.jsonl").exists()
    append_jsonl(tmp_path / "records.jsonl", {"i": 3})
    assert [r["i"] for r in run_records(tmp_path)] == [0, 1, 2, 3]
    compact_records(tmp_path)
    assert [r["i"] for r in run_records(tmp_path)] == [0, 1, 2, 3]


def test_cut_to_sentences_keeps_gold_and_every_paragraph():
    from mechrag.data import cut_to_sentences, load_examples

    example = load_examples("hotpotqa", unit="sentence")[0]
    cut = cut_to_sentences(example, 12)
    assert len(cut.sources) == 12 and set(example.gold_ids) <= {s.id for s in cut.sources}
    assert len({s.paragraph for s in cut.sources}) == len({s.paragraph for s in example.sources})
    order = [example.sources.index(s) for s in cut.sources]
    assert order == sorted(order)
    with pytest.raises(InputError):
        cut_to_sentences(example, 1)


def test_fit_attention_does_not_reuse_another_models_records(tmp_path, capsys):
    from mechrag.cli import main

    out = tmp_path / "w.safetensors"
    words = ["--dataset", "hotpotqa", "--n", "2", "--sentences", "5", "--max-new-tokens", "3",
             "--out", str(out)]  # fmt: skip
    assert main(["fit-attention", "--model", "toy:llama", *words]) == 0
    capsys.readouterr()
    assert main(["fit-attention", "--model", "toy:gpt2", *words]) == 0
    assert "[1/2]" in capsys.readouterr().out  # scored afresh on the other model
    assert AttentionWeights.load(out).model == "tiny-gpt2"


def test_bad_fit_input_writes_nothing(tmp_path):
    from mechrag.cli import main

    out = tmp_path / "w.safetensors"
    assert main(["fit-attention", "--model", "toy:nosuch", "--n", "2", "--out", str(out)]) == 2
    assert list(tmp_path.iterdir()) == []
    (tmp_path / "file").write_text("x")
    words = ["fit-attention", "--n", "2", "--records", str(tmp_path / "file"), "--out", str(out)]
    assert main(words) == 2


def test_patterns_are_captured_for_one_mask_only(tiny):
    case = fresh(tiny)
    with pytest.raises(ValueError, match="one mask"):
        case.capture(case.leave_one_out_masks()[:2], ("pattern",))


def test_rank_below_keeps_the_order_when_the_smallest_known_score_is_zero():
    from mechrag.attribution.screening import rank_below

    known = np.array([True, True, False, False])
    placed = rank_below(np.array([0.0, 0.5, 0, 0]), known, np.array([9, 9, 2.0, 1.0]))
    assert placed[1] > placed[0] > placed[2] > placed[3]
    placed = rank_below(np.array([0.2, 0.5, 0, 0]), known, np.array([9, 9, 2.0, 1.0]))
    np.testing.assert_allclose(placed[2:], [0.1, 0.05])


def test_a_two_case_fit_still_holds_one_out():
    from mechrag.attribution.attention_fit import _split

    train, held_out = _split(2, 0.25, seed=0)
    assert len(train) == 1 and len(held_out) == 1
    with pytest.raises(InputError, match="validation"):
        _split(4, 1.0, seed=0)


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


def test_one_sentence_documents_stay_exact_under_the_screen(tiny):
    srcs = [Source("p9s0", "Ana lives in Oslo, a cold city.", "Solo", 9), *sources(3, 3)]
    exact = fresh(tiny, srcs).arc_jsd()
    result = HierarchicalARCJSD(documents=2, screen=1)(fresh(tiny, srcs))
    flags = np.asarray(result.metadata["exact"])
    assert flags[0] and flags.sum() == 2  # the one-sentence document, and the screen's pick
    assert_float32_equal(result.scores[flags], exact.scores[flags])
    assert result.scores[flags].min() > result.scores[~flags].max()
