"""Small helpers shared by the tests: the repository's paths, the intervention tests (hooks and
gates), the benchmarks' replays of a frontier run, the cases of the fast attribution methods, the
reference computations and assertions that several test rooms use, and the views' hostile results.

Tests import it as ``helpers`` from any folder (``pythonpath`` in pyproject.toml), so no test
depends on its own folder's depth."""

from __future__ import annotations

import json
import re
import runpy
from html.parser import HTMLParser
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING

import numpy as np
import torch
from scipy.spatial.distance import jensenshannon

from mechrag.case import Case
from mechrag.engine import Engine
from mechrag.metrics import spearman_test
from mechrag.models import adapter
from mechrag.models.adapter import output_bias
from mechrag.results.files import write_json
from mechrag.sources import Source

if TYPE_CHECKING:
    from mechrag.retrieval.encoder import DenseEncoder

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures"

# -- interventions: hooks and gates ----------------------------------------------------------------

SEQUENCES = [[5, 17, 42, 99, 3, 250, 7, 8], [1, 2, 3, 4, 5]]


def hook_count(model) -> int:
    """Forward hooks registered on the model's hook points right now, as torch itself counts
    them (independent of TransformerLens's handle lists; a point with several names once)."""
    points = {id(point): point for point in model.hook_points()}.values()
    return sum(len(point._forward_hooks) for point in points)


def batch_logits(model):
    """Logits of a fixed left-padded two-row batch (hooks active on the model apply)."""
    ids, attention = Engine(model).batch_inputs(SEQUENCES)
    with torch.no_grad():
        return model(ids, attention_mask=attention)


# -- a frontier run on a tiny model ----------------------------------------------------------------


def tiny_frontier_run(tiny_llama, monkeypatch, out: Path, *, examples: int) -> list[dict]:
    """``experiments/frontier.py`` with exact ARC-JSD and uniformly weighted attention (as
    ``attention_fitted``) on a tiny model at 10 sentences; its records."""
    from mechrag.attribution.attention import AttentionAttribution

    frontier = runpy.run_path(str(REPO / "experiments" / "frontier.py"))
    monkeypatch.setattr("mechrag.models.loading.load_model", lambda name, **_: tiny_llama)
    uniform = lambda name, model_name: AttentionAttribution(weights="uniform")  # noqa: E731
    monkeypatch.setitem(frontier["run"].__globals__, "configured", uniform)
    frontier["run"](
        SimpleNamespace(
            model="smollm2-135m", sizes=["10"], methods=["exact", "attention_fitted"],
            examples=examples, max_new_tokens=3, threads=1, reuse_only=False, only_shared=False,
            out=str(out), device="cpu",
        )  # fmt: skip
    )
    return [json.loads(line) for line in (out / "records.jsonl").open()]


# -- the fast methods' case: twelve sentences in four paragraphs -----------------------------------

QUERY = "Where does Ana live?"
RESPONSE = "Ana lives in Oslo."


def sources(n_paragraphs: int = 4, per: int = 3) -> list[Source]:
    return [
        Source(f"p{p}s{s}", f"Fact {p}.{s}: item {7 * p + s} is here.", f"Title {p}", p)
        for p in range(n_paragraphs)
        for s in range(per)
    ]


def fresh(model, srcs=None) -> Case:
    return Case(model, QUERY, srcs or sources(), RESPONSE)


def assert_float32_equal(actual, expected) -> None:
    """Equal up to float32 rounding: the same subsets scored in other batches (or buffers of
    another alignment) need not give the same bits."""
    expected = np.asarray(expected)
    np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-5 * np.abs(expected).max())


# -- references ------------------------------------------------------------------------------------


def naive_arc_jsd(model, query, sentences, response):
    """One unpadded forward pass per ablation, prompt rendered by hand, JSD by scipy."""
    tokenizer = model.tokenizer
    response_ids = tokenizer(response, add_special_tokens=False).input_ids
    n_response = len(response_ids)

    def response_distributions(kept):
        user = f"Context: {' '.join(kept)}\n\nQuery: {query}"
        prompt = tokenizer.apply_chat_template(
            [{"role": "user", "content": user}], tokenize=False, add_generation_prompt=True
        )
        ids = tokenizer(prompt, add_special_tokens=False).input_ids + response_ids
        with torch.no_grad():
            logits = model(torch.tensor([ids[:-1]]))[0, -n_response:]
        return logits.double().softmax(-1).numpy()

    full = response_distributions(sentences)
    scores = np.zeros((len(sentences), n_response))
    for i in range(len(sentences)):
        ablated = response_distributions(sentences[:i] + sentences[i + 1 :])
        scores[i] = jensenshannon(full, ablated, axis=-1) ** 2
    return scores


def decomposition_error(model, layer: int, cache) -> float:
    """Largest gap between the summed head writes (plus bias) and ``hook_attn_out``, relative
    to the largest entry of ``hook_attn_out``."""
    total = adapter.head_writes(model, layer, cache[adapter.hook_name(layer, "z")]).sum(-2)
    bias = output_bias(model, layer)
    if bias is not None:
        assert adapter.post_attention_norm(model, layer) is None  # no model has both yet
        total = total + bias
    attn_out = cache[f"blocks.{layer}.hook_attn_out"]
    return float((total - attn_out).abs().max() / attn_out.abs().max())


# -- results' plots --------------------------------------------------------------------------------


def assert_heads_axis(axis, result, k):
    """The heatmap is ``result.heads`` (layers as rows), the top-``k`` heads numbered by rank."""
    np.testing.assert_array_equal(axis.images[0].get_array(), result.heads)
    numbered = [(t.get_position(), t.get_text()) for t in axis.texts]
    top = result.top(k, kind="head")
    assert numbered == [((c.head, c.layer), str(rank)) for rank, c in enumerate(top, start=1)]
    assert (axis.get_xlabel(), axis.get_ylabel()) == ("head", "layer")
    assert axis.images[0].colorbar.ax.get_ylabel() == "summed logit-lens JSD"


def assert_layers_axis(axis, result):
    """One line per layer profile: the attention sum, then the MLP scores."""
    attention, mlps = axis.lines
    for line, values in ((attention, result.attention), (mlps, result.mlps)):
        np.testing.assert_array_equal(line.get_xdata(), np.arange(result.n_layers))
        np.testing.assert_array_equal(line.get_ydata(), values)
    assert [t.get_text() for t in axis.get_legend().get_texts()] == ["attention (sum)", "MLP"]
    assert (axis.get_xlabel(), axis.get_ylabel()) == ("layer", "summed logit-lens JSD")


def assert_residual_axis(axis, result):
    """One line: the residual stream's JSD after each layer."""
    (line,) = axis.lines
    np.testing.assert_array_equal(line.get_xdata(), np.arange(result.n_layers))
    np.testing.assert_array_equal(line.get_ydata(), result.resid_post)
    assert axis.get_ylabel() == "residual logit-lens JSD"


def assert_gain_axis(axis, results):
    """(score, gain) points of every head, then every MLP, pooled over ``results``; the title
    holds the pooled Spearman rho."""
    heads, mlps = axis.collections
    expected = (
        (heads, [(r.heads.ravel(), r.gains[: r.heads.size]) for r in results]),
        (mlps, [(r.mlps, r.mlp_gain) for r in results]),
    )
    for points, pairs in expected:
        np.testing.assert_array_equal(
            points.get_offsets(), np.concatenate([np.column_stack(pair) for pair in pairs])
        )
    rho = spearman_test(
        np.concatenate([r.scores for r in results]), np.concatenate([r.gains for r in results])
    )[0]
    assert axis.get_title().startswith(f"Spearman ρ = {rho:.2f}")
    assert (axis.get_xlabel(), axis.get_ylabel()) == ("component JSD", "semantic gain")


# -- a tiny retriever ------------------------------------------------------------------------------


WORDS = ["the", "cat", "sat", "on", "mat", "dog", "ran", "far", "##s", "red"]


def _tiny_encoder(folder, initializer_range: float = 0.02) -> DenseEncoder:
    """A random BERT with a few hundred parameters and a WordPiece tokenizer."""
    from transformers import BertConfig, BertModel, BertTokenizerFast

    from mechrag.retrieval.encoder import DenseEncoder

    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS]
    (folder / "vocab.txt").write_text("\n".join(vocab) + "\n")
    tokenizer = BertTokenizerFast(str(folder / "vocab.txt"))
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=len(vocab),
        hidden_size=8,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=8,
        max_position_embeddings=16,
        type_vocab_size=1,
        initializer_range=initializer_range,
    )
    model = BertModel(config, add_pooling_layer=False)
    return DenseEncoder(model, tokenizer, pooling="mean", normalize=True, max_length=16)


# -- views of hostile text -------------------------------------------------------------------------


HOSTILE_QUERY = "Where does the cat sleep & why <not> \"here\" 'now'?"
HOSTILE_RESPONSE = "On the mat & <b>rug</b> \"yes\" 'ok'"
SCRIPT = "<script>alert(1)</script>"
IMAGE = "<img src=x onerror=alert(1)>"


def hostile_sources() -> list[Source]:
    return [
        Source("p0s0", "The cat sleeps on the mat.", "Cats & <i>dogs</i>", 0),
        Source("p0s1", f"{SCRIPT} Dogs bark.", "Cats & <i>dogs</i>", 0),
        Source("p1s0", f"{IMAGE} The mat is red.", None, 1),
    ]


def build_results(model) -> dict:
    """One result of each viewed kind, from ``model`` on hostile text."""
    from mechrag.mechanism.echo import echo
    from mechrag.mechanism.gating.comparison import compare_gating
    from mechrag.mechanism.gating.rules import GatingRule

    case = Case(model, HOSTILE_QUERY, hostile_sources(), HOSTILE_RESPONSE)
    rule = GatingRule("damp", k=4)
    return {
        "attribution": case.arc_jsd(),
        "components": case.localize(),
        "echo": echo(case),
        "gating": compare_gating(case, rule, mode="static", max_new_tokens=4),
    }


def build_explanation(model, folder):
    """An explanation over a tiny corpus (one document holds a script tag)."""
    from mechrag.retrieval.corpus import Corpus
    from mechrag.retrieval.rag_e import explain
    from mechrag.retrieval.retriever import Retriever

    texts = ["the cat sat on the mat", f"the dog {SCRIPT} ran far", "red cats sat", "the mat"]
    folder.mkdir(parents=True, exist_ok=True)
    retriever = Retriever.build(Corpus.from_texts(texts), _tiny_encoder(folder))
    return explain("where did the cat sit", retriever, model, k=3, n_steps=8, max_new_tokens=4)


class Elements(HTMLParser):
    """Every start tag with its attributes (what a browser would build from the markup)."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict]] = []

    def handle_starttag(self, tag, attrs) -> None:
        self.tags.append((tag, dict(attrs)))


def elements(markup: str) -> list[tuple[str, dict]]:
    parser = Elements()
    parser.feed(markup)
    return parser.tags


def assert_inert(markup: str) -> None:
    """No script element, no event-handler attribute, nothing fetched from the network."""
    tags = elements(markup)
    assert not [tag for tag, _ in tags if tag in ("script", "iframe", "object", "embed")]
    assert not [name for _, attrs in tags for name in attrs if name.startswith("on")]
    assert "<script" not in markup.lower()
    assert not re.search(r"https?://", markup)


def save_results(results: dict, directory) -> None:
    write_json(directory / "attribution_arc_jsd.json", results["attribution"].to_dict())
    write_json(directory / "components.json", results["components"].to_dict())
    write_json(directory / "gate.json", results["gating"].to_dict())
    write_json(directory / "other.json", {"not": "a result"})
