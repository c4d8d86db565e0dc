"""Retriever: encoder pooling, FAISS search, corpus, integrated gradients (Captum).

The prompt conditions are tested in test_conditions.py."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from captum.attr import LayerIntegratedGradients
from helpers import _tiny_encoder

from mechrag.retrieval.corpus import Corpus, build_corpus
from mechrag.retrieval.encoder import DenseEncoder
from mechrag.retrieval.index import FlatIndex
from mechrag.retrieval.integrated_gradients import (
    RetrieverIntegratedGradients,
    TokenAttribution,
    merge_wordpieces,
    special_token_mask,
)
from mechrag.retrieval.perturbation import token_aipc, token_removal_value
from mechrag.retrieval.retriever import Retriever


@pytest.fixture(scope="module")
def tiny_encoder(tmp_path_factory) -> DenseEncoder:
    return _tiny_encoder(tmp_path_factory.mktemp("tiny_bert"))


def test_mean_pooling_matches_hand_computation(tiny_encoder):
    texts = ["the cat sat", "the dog ran far on the red mat"]
    batch = tiny_encoder.tokenize(texts)
    with torch.no_grad():
        hidden = tiny_encoder.model(**batch).last_hidden_state
    expected = []
    for row, mask in zip(hidden, batch["attention_mask"]):
        mean = row[mask.bool()].mean(0)
        expected.append(mean / mean.norm())
    torch.testing.assert_close(tiny_encoder.encode(texts), torch.stack(expected))


def test_flat_index_equals_brute_force_dot_product(tmp_path):
    rng = np.random.default_rng(0)
    documents, queries = rng.normal(size=(50, 12)), rng.normal(size=(4, 12))
    index = FlatIndex.from_vectors(documents)
    scores, rows = index.search(queries, 7)
    brute = queries @ documents.T
    np.testing.assert_array_equal(rows, np.argsort(-brute, axis=1)[:, :7])
    np.testing.assert_allclose(scores, np.take_along_axis(brute, rows, 1), rtol=1e-5)
    reloaded = FlatIndex.load(index.save(tmp_path / "index.faiss"))
    np.testing.assert_array_equal(reloaded.search(queries, 7)[1], rows)


def test_retriever_search_ranks_by_similarity_and_round_trips(tiny_encoder, tmp_path):
    corpus = Corpus.from_texts(["the cat sat", "the dog ran", "red mat", "the cat sat"])
    assert len(corpus) == 3  # the duplicate is kept once
    retriever = Retriever.build(corpus, tiny_encoder)
    hits = retriever.search("cat on mat", k=3)
    assert [h.rank for h in hits] == [1, 2, 3]
    expected = retriever.scores("cat on mat", list(corpus))
    assert [h.document.id for h in hits] == [corpus[i].id for i in np.argsort(-expected)]
    np.testing.assert_allclose([h.score for h in hits], np.sort(expected)[::-1], rtol=1e-5)
    loaded = Retriever.load(retriever.save(tmp_path / "r"), tiny_encoder)
    assert [h.document.id for h in loaded.search("cat on mat", 3)] == [h.document.id for h in hits]


def test_corpus_from_shipped_samples_dedupes_and_keeps_provenance():
    corpus = build_corpus(["squad"])
    texts = [" ".join(d.text.split()) for d in corpus]
    assert len(set(texts)) == len(texts)
    shared = [d for d in corpus if len(d.provenance) > 1]
    assert shared, "SQuAD questions share paragraphs: provenance must list each"
    assert all(d.title for d in corpus)
    hotpot = build_corpus(["hotpotqa"], n=2)
    assert len(hotpot) == 20  # ten paragraphs per HotpotQA example
    gold = [d for d in hotpot if any(o.gold for o in d.provenance)]
    assert len(gold) == 4


def _hand_ig(score, inputs, baselines, alphas, weights) -> np.ndarray:
    """Reference IG: a weighted sum of autograd gradients along the straight path."""
    total = torch.zeros_like(inputs)
    for alpha, weight in zip(alphas, weights):
        point = (baselines + alpha * (inputs - baselines)).requires_grad_()
        (gradient,) = torch.autograd.grad(score(point), point)
        total += weight * gradient
    return ((inputs - baselines) * total)[0].sum(-1).double().numpy()


def _replace_output(module, output):
    """A forward hook that makes ``module`` return ``output`` (a callable: of its own output)."""
    return module.register_forward_hook(
        lambda _, args, own: output(own) if callable(output) else output
    )


def _zeroed_embedding_output(encoder, text, fixed) -> float:
    """The paper's zero baseline, built directly: the embeddings module's output (word +
    position + token type, normalised) is zero at every non-special token."""
    batch = encoder.tokenize([text])
    keep = special_token_mask(encoder, batch["input_ids"]).unsqueeze(-1)
    handle = _replace_output(encoder.model.embeddings, lambda own: own * keep)
    try:
        embedding = encoder.embed_ids(batch["input_ids"], batch["attention_mask"])
    finally:
        handle.remove()
    return float((embedding @ fixed.T).sum())


@pytest.mark.parametrize("baseline", ["unk", "zero", "zero_all"])
@pytest.mark.parametrize("method", ["gausslegendre", "riemann_trapezoid"])
def test_ig_equals_hand_written_quadrature(tiny_encoder, baseline, method):
    n = 16
    if method == "gausslegendre":
        nodes, weights = np.polynomial.legendre.leggauss(n)
        alphas, weights = (nodes + 1) / 2, weights / 2
    else:  # textbook trapezoid: n points, n - 1 intervals of width 1/(n - 1)
        alphas = np.linspace(0, 1, n)
        weights = np.full(n, 1 / (n - 1))
        weights[[0, -1]] /= 2
    text = "the cats sat on the red mat"
    fixed = tiny_encoder.encode(["dog ran far", "red cat"])
    ig = RetrieverIntegratedGradients(
        tiny_encoder, baseline=baseline, n_steps=n, method=method, warn=False
    )
    result = ig.explain_query(text, fixed)
    batch = tiny_encoder.tokenize([text])
    ids, mask = batch["input_ids"], batch["attention_mask"]
    if baseline == "zero_all":  # on the embeddings module's output, zero there
        embeddings = tiny_encoder.model.embeddings
        with torch.no_grad():
            inputs = embeddings(input_ids=ids)
        baselines = inputs * special_token_mask(tiny_encoder, ids).unsqueeze(-1)

        def score(point):
            handle = _replace_output(embeddings, point)
            try:
                hidden = tiny_encoder.model(input_ids=ids, attention_mask=mask).last_hidden_state
            finally:
                handle.remove()
            return (tiny_encoder.pool(hidden, mask) @ fixed.T).sum()
    else:
        inputs, baselines = ig.integration_inputs(tiny_encoder, ids, mask)

        def score(point):
            return (tiny_encoder.embed_from_word_embeddings(point, mask) @ fixed.T).sum()

    reference = _hand_ig(score, inputs, baselines, alphas, weights)
    np.testing.assert_allclose(result.scores, reference, rtol=1e-4, atol=1e-7)
    assert result.scores[0] == 0 and result.scores[-1] == 0  # [CLS] and [SEP] keep embeddings


def test_ig_matches_layer_integrated_gradients_on_word_embeddings(tiny_encoder):
    text, fixed = "the dog sat on the mat", tiny_encoder.encode(["red cat"])
    batch = tiny_encoder.tokenize([text])
    ids, mask = batch["input_ids"], batch["attention_mask"]
    unk_ids = torch.where(special_token_mask(tiny_encoder, ids), ids, 1)

    def similarity(input_ids):
        hidden = tiny_encoder.model(
            input_ids=input_ids, attention_mask=mask.expand(len(input_ids), -1)
        )
        return (tiny_encoder.pool(hidden.last_hidden_state, mask) @ fixed.T).sum(-1)

    layer = LayerIntegratedGradients(similarity, tiny_encoder.word_embeddings)
    expected = layer.attribute(ids, baselines=unk_ids, n_steps=20).sum(-1)[0]
    ours = RetrieverIntegratedGradients(tiny_encoder, n_steps=20).explain_query(text, fixed)
    np.testing.assert_allclose(ours.scores, expected.detach().numpy(), rtol=1e-4, atol=1e-7)


def test_zero_all_baseline_zeroes_the_whole_input_embedding(tmp_path):
    """``zero_all`` (RAG-E v1 §5.1: zeros "discarding the positional embeddings") scores the
    input with its whole embedding zero, unlike ``zero``; IG over it is complete:
    ``Σ IG = s(input) − s(baseline)``."""
    encoder = _tiny_encoder(tmp_path, initializer_range=0.5)  # position embeddings matter
    text, fixed = "the dog ran far on the red mat", encoder.encode(["red cat", "the mat"])
    paper = RetrieverIntegratedGradients(encoder, baseline="zero_all", n_steps=200)
    words_only = RetrieverIntegratedGradients(encoder, baseline="zero", n_steps=200)
    result, kept_positions = paper.explain_query(text, fixed), words_only.explain_query(text, fixed)
    expected = _zeroed_embedding_output(encoder, text, fixed)
    assert result.baseline_target == pytest.approx(expected, abs=1e-6)
    assert abs(kept_positions.baseline_target - expected) > 1e-2  # the two baselines differ
    assert result.target == pytest.approx(kept_positions.target, abs=1e-6)
    assert result.scores.sum() == pytest.approx(result.target - result.baseline_target, rel=1e-3)
    assert result.scores[0] == 0 and result.scores[-1] == 0  # [CLS] and [SEP] keep everything


def test_zeroing_before_the_layernorm_leaves_a_flat_path(tmp_path):
    """Why ``zero_all`` zeroes the embeddings module's output and not the sum it normalises:
    along ``α · (word + position + token type)`` the score stays put for every ``α > 0`` (the
    LayerNorm removes the scale) and jumps at ``α = 0``, so IG from there would be about 0."""
    encoder = _tiny_encoder(tmp_path, initializer_range=0.5)
    text, fixed = "the dog ran far on the red mat", encoder.encode(["red cat"])
    batch = encoder.tokenize([text])
    keep = special_token_mask(encoder, batch["input_ids"]).unsqueeze(-1)

    def score(alpha: float) -> float:
        def scale(module, args):
            return (args[0] * (keep + alpha * ~keep),)

        handle = encoder.model.embeddings.LayerNorm.register_forward_pre_hook(scale)
        try:
            embedding = encoder.embed_ids(batch["input_ids"], batch["attention_mask"])
        finally:
            handle.remove()
        return float((embedding @ fixed.T).sum())

    path = [score(alpha) for alpha in (1e-3, 0.1, 0.5, 1.0)]
    assert max(path) - min(path) < 1e-5
    assert abs(score(0.0) - path[-1]) > 1e-2


def test_completeness_is_reported_and_warned(tmp_path):
    rough = _tiny_encoder(tmp_path, initializer_range=0.5)  # a strongly curved score
    fixed = rough.encode(["red cat"])
    text = "the dog ran far on the red mat"
    exact = RetrieverIntegratedGradients(rough, n_steps=200).explain_query(text, fixed)
    assert abs(exact.completeness - 1) < 0.01
    with pytest.warns(UserWarning, match="completeness"):
        coarse = RetrieverIntegratedGradients(rough, n_steps=2, method="riemann_trapezoid")
        coarse.explain_query(text, fixed)


def test_merge_wordpieces_sums_continuations():
    tokens = ["[CLS]", "the", "cat", "##s", "sat", "[SEP]"]
    words = merge_wordpieces(tokens, np.array([0, 1.0, 2.0, 0.5, -1.0, 0]), [1, 0, 0, 0, 0, 1])
    assert words == [("the", 1.0), ("cats", 2.5), ("sat", -1.0)]


def test_token_attribution_round_trips_through_json(tiny_encoder, tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    explained = RetrieverIntegratedGradients(tiny_encoder, n_steps=8, warn=False).explain_query(
        "the cats sat", tiny_encoder.encode(["red cat"])
    )
    explained.metadata["seed"] = np.int64(3)
    data = json.loads(explained.to_json())
    assert data["completeness"] == pytest.approx(explained.completeness)
    assert data["words"] == [list(word) for word in explained.words()]
    restored = TokenAttribution.from_dict(data)  # the derived completeness and words: skipped
    np.testing.assert_array_equal(restored.scores, explained.scores)
    assert restored.scores.dtype == np.float64
    for name in ("side", "text", "tokens", "special", "target", "baseline_target", "method"):
        assert getattr(restored, name) == getattr(explained, name)
    assert restored.metadata == {"seed": 3}
    assert restored.to_dict() == explained.to_dict()
    written = explained.save(tmp_path, "query")
    assert [p.name for p in written] == ["query.json", "query_saliency.png", "query_saliency.svg"]
    saved = TokenAttribution.from_dict(json.loads(written[0].read_text()))
    assert saved.words() == explained.words()


def test_token_removal_keeps_special_tokens_and_scores_masks(tiny_encoder):
    fixed = tiny_encoder.encode(["red cat"])
    value, positions = token_removal_value(tiny_encoder, "the cat sat", fixed)
    assert positions.tolist() == [1, 2, 3]
    full, none = value(np.array([[True] * 3, [False] * 3]))
    assert full == pytest.approx(
        float(tiny_encoder.encode(["the cat sat"])[0] @ fixed[0]), abs=1e-5
    )
    masked = tiny_encoder.encode(["[MASK] [MASK] [MASK]"])[0] @ fixed[0]
    assert none == pytest.approx(float(masked), abs=1e-5)
    attribution = RetrieverIntegratedGradients(tiny_encoder, n_steps=32).explain_query(
        "the cat sat", fixed
    )
    assert -1.5 <= token_aipc(attribution, tiny_encoder, fixed) <= 1.5


@pytest.mark.integration
def test_ig_completeness_within_one_percent_on_embedded_retriever():
    from mechrag.retrieval.encoder import load_encoder

    torch.set_num_threads(1)
    encoder = load_encoder()
    documents = encoder.encode(["Paris is the capital of France.", "Bananas are yellow."])
    query = "What is the capital of France?"
    for baseline in ("unk", "zero"):
        ig = RetrieverIntegratedGradients(encoder, baseline=baseline, n_steps=100)
        assert abs(ig.explain_query(query, documents).completeness - 1) < 0.01
    document = ig.explain_document("Paris is the capital of France.", encoder.encode([query])[0])
    assert abs(document.completeness - 1) < 0.01


@pytest.mark.integration
def test_embedded_encoder_pooling_and_paraphrases():
    from mechrag.retrieval.encoder import load_encoder

    encoder = load_encoder()
    assert (encoder.pooling, encoder.normalize, encoder.max_length) == ("mean", True, 256)
    texts = ["A man is eating food.", "A man is eating a piece of bread.", "The sky is blue today."]
    embeddings = encoder.encode(texts)
    batch = encoder.tokenize(texts)
    with torch.no_grad():
        hidden = encoder.model(**batch).last_hidden_state
    weights = batch["attention_mask"].unsqueeze(-1).float()
    manual = torch.nn.functional.normalize((hidden * weights).sum(1) / weights.sum(1), dim=-1)
    torch.testing.assert_close(embeddings, manual)
    similarity = embeddings @ embeddings.T
    assert similarity[0, 1] > 0.6 > 0.2 > similarity[0, 2]


def test_separate_query_and_document_encoders(tiny_encoder, tmp_path):
    """DRAGON-style: a folder without sentence-transformers config, CLS pooling, dot product."""
    folder = tmp_path / "context_encoder"
    tiny_encoder.model.save_pretrained(folder)
    tiny_encoder.tokenizer.save_pretrained(folder)
    with pytest.raises(ValueError, match="pooling"):
        DenseEncoder.from_pretrained(folder)
    documents = DenseEncoder.from_pretrained(folder, pooling="cls", normalize=False)
    corpus = Corpus.from_texts(["the cat sat", "the dog ran far", "red mat"])
    retriever = Retriever.build(corpus, tiny_encoder, documents)
    query = tiny_encoder.encode(["red cat"])[0]
    expected = documents.encode([d.text for d in corpus]) @ query
    np.testing.assert_allclose(retriever.scores("red cat", list(corpus)), expected, rtol=1e-5)
    ig = RetrieverIntegratedGradients.from_retriever(retriever, n_steps=32)
    explanation = ig.explain_document("the dog ran far", query)
    assert explanation.target == pytest.approx(float(expected[1]), rel=1e-5)
    assert abs(explanation.completeness - 1) < 0.01


def test_the_encoder_feeds_its_inputs_to_the_device_of_its_weights(tmp_path):
    """Inputs follow the weights (here the meta device, which any CPU machine has), so an
    encoder moved to a GPU gets GPU inputs (the cuda tests run it there: test_cuda.py)."""
    encoder = _tiny_encoder(tmp_path)
    moved = DenseEncoder(encoder.model.to("meta"), encoder.tokenizer, pooling="mean",
                         normalize=True, max_length=16)  # fmt: skip
    assert moved.device == torch.device("meta")
    batch = moved.tokenize(["the cat sat", "red dog"])
    assert {tensor.device for tensor in batch.values()} == {torch.device("meta")}


def test_load_encoder_puts_the_weights_on_the_device_asked(tmp_path):
    from mechrag.retrieval.encoder import load_encoder

    encoder = _tiny_encoder(tmp_path)
    encoder.model.save_pretrained(tmp_path / "saved")
    encoder.tokenizer.save_pretrained(tmp_path / "saved")
    loaded = load_encoder(tmp_path / "saved", pooling="mean", normalize=True, device="meta")
    assert loaded.device == torch.device("meta")
    assert load_encoder(tmp_path / "saved", pooling="mean", normalize=True).device.type == "cpu"
