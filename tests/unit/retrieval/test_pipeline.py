"""explain(): retrieval -> generation -> both attributions -> alignment, on tiny random models."""

from __future__ import annotations

import dataclasses
import json

import matplotlib
import numpy as np
import pytest

from mechrag.errors import InputError
from mechrag.metrics.agreement import spearman
from mechrag.metrics.alignment import alignment_flags, ranks, warg
from mechrag.retrieval.conditions import PromptConditions
from mechrag.retrieval.corpus import Corpus
from mechrag.retrieval.rag_e import PipelineExplanation, explain
from mechrag.retrieval.retriever import Retriever

matplotlib.use("Agg")

TEXTS = [
    "the cat sat on the mat",
    "the dog ran far",
    "red cats sat",
    "the mat is red",
    "dogs ran on the mat",
    "far red dog",
]


@pytest.fixture(scope="module")
def tiny_retriever(tmp_path_factory) -> Retriever:
    from helpers import _tiny_encoder

    encoder = _tiny_encoder(tmp_path_factory.mktemp("bert"))
    return Retriever.build(Corpus.from_texts(TEXTS), encoder)


@pytest.fixture(scope="module")
def explanation(tiny_retriever, tiny_llama) -> PipelineExplanation:
    return explain(
        "where did the cat sit", tiny_retriever, tiny_llama, k=3, n_steps=8, max_new_tokens=4
    )


def test_explanation_holds_both_sides(explanation, tiny_retriever):
    hits = tiny_retriever.search("where did the cat sit", 3)
    assert [d.id for d in explanation.documents] == [h.document.id for h in hits]
    np.testing.assert_allclose(explanation.similarities, [h.score for h in hits], rtol=1e-5)
    assert explanation.retriever_score_kind == "position"  # the default
    assert explanation.retriever_scores.tolist() == [2.0, 1.0, 0.0]
    n_tokens = len(explanation.generator.response_ids)
    assert explanation.generator.token_scores.shape == (3, n_tokens)
    np.testing.assert_allclose(
        explanation.generator.scores, explanation.generator.token_scores.sum(1)
    )
    assert explanation.condition.ranked
    assert len(explanation.document_saliency) == 3
    assert set(explanation.completeness) == {"query", *[d.id for d in explanation.documents]}


def test_alignment_and_frame(explanation):
    expected = warg(explanation.retriever_scores, explanation.generator.scores)
    assert explanation.warg == expected
    assert set(explanation.flags) == {"wr@1", "nd@1", "wr@3", "nd@3"}  # k <= 3 documents
    frame = explanation.to_frame()
    assert frame["retriever_rank"].tolist() == [1, 2, 3]
    assert frame["retriever_score"].tolist() == [2.0, 1.0, 0.0]
    np.testing.assert_array_equal(frame["similarity"], explanation.similarities)
    assert sorted(frame["generator_rank"]) == [1, 2, 3]
    data = json.loads(explanation.to_json())
    assert data["warg"] == pytest.approx(expected)
    assert data["completeness"]["query"] == pytest.approx(explanation.query_saliency.completeness)


def test_round_trip_through_json(explanation):
    data = json.loads(explanation.to_json())
    restored = PipelineExplanation.from_dict(data)
    assert restored.query == explanation.query
    assert restored.condition == explanation.condition
    assert restored.hits == explanation.hits
    np.testing.assert_array_equal(restored.retriever_scores, explanation.retriever_scores)
    np.testing.assert_array_equal(
        restored.generator.token_scores, explanation.generator.token_scores
    )
    assert restored.generator.to_dict() == explanation.generator.to_dict()
    np.testing.assert_array_equal(restored.query_saliency.scores, explanation.query_saliency.scores)
    for ours, theirs in zip(restored.document_saliency, explanation.document_saliency, strict=True):
        assert ours.to_dict() == theirs.to_dict()
    assert (restored.tau, restored.generator_aipc) == (explanation.tau, explanation.generator_aipc)
    assert restored.metadata == explanation.metadata
    assert restored.retriever_score_kind == "position"
    assert restored.to_dict() == data


def test_reads_explanations_written_before_retriever_score_kinds(explanation):
    """Old files have no ``retriever_score_kind`` and no ``similarity`` column: their
    ``retriever_score`` was the similarity."""
    data = json.loads(explanation.to_json())
    del data["retriever_score_kind"]
    for row in data["documents"]:
        row["retriever_score"] = row.pop("similarity")
    restored = PipelineExplanation.from_dict(data)
    assert restored.retriever_score_kind == "similarity"
    np.testing.assert_array_equal(restored.retriever_scores, explanation.similarities)


def test_c1_positions_rank_like_similarities(explanation):
    """In c1 the prompt is the retrieval ranking: both kinds give the same ranks, flags and
    Spearman; WARG reads the kind chosen."""
    by_similarity = dataclasses.replace(explanation, retriever_score_kind="similarity")
    positions, similarities = explanation.retriever_scores, by_similarity.retriever_scores
    np.testing.assert_array_equal(ranks(positions), ranks(similarities))
    assert explanation.flags == by_similarity.flags
    assert explanation.summary()["spearman"] == pytest.approx(by_similarity.summary()["spearman"])
    generator = explanation.generator.scores
    assert explanation.warg == warg(positions, generator)
    assert by_similarity.warg == warg(similarities, generator)
    assert explanation.flags == alignment_flags(similarities, generator, (1, 3))
    assert spearman(positions, generator) == pytest.approx(spearman(similarities, generator))


def test_save_writes_explanation_json_and_plots(explanation, tmp_path):
    import matplotlib.pyplot as plt

    figures = plt.get_fignums()
    written = explanation.save(tmp_path)
    assert plt.get_fignums() == figures  # every figure it drew is closed
    stems = ["query_saliency", "tokens", "ranks"] + [
        f"document_{i}_{d.id}_saliency" for i, d in enumerate(explanation.documents, start=1)
    ]
    expected = ["explanation.json"] + [
        f"{stem}.{suffix}" for stem in stems for suffix in ("png", "svg")
    ]
    assert [p.name for p in written] == expected
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(expected)  # no temporaries
    assert json.loads((tmp_path / "explanation.json").read_text()) == json.loads(
        explanation.to_json()
    )


def _assert_saliency(figure, attribution):
    """The words in order, each boxed in its score's colour on a scale symmetric about zero."""
    import matplotlib.pyplot as plt
    from matplotlib.colors import Normalize

    axis = figure.axes[0]
    words, scores = zip(*attribution.words())
    assert tuple(t.get_text() for t in axis.texts) == words
    limit = np.abs(scores).max()
    expected = plt.get_cmap("RdBu_r")(Normalize(-limit, limit)(scores))
    np.testing.assert_allclose([t.get_bbox_patch().get_facecolor() for t in axis.texts], expected)
    title = axis.get_title(loc="left")
    assert title.startswith(f"{attribution.side} saliency")
    assert title.endswith(f"completeness {attribution.completeness:.3f})")


def test_plots(explanation):
    import matplotlib.pyplot as plt

    _assert_saliency(explanation.plot_query_saliency(), explanation.query_saliency)
    _assert_saliency(explanation.plot_document_saliency(0), explanation.document_saliency[0])
    generator, frame = explanation.generator, explanation.to_frame()
    heatmap = explanation.plot_tokens().axes[0]  # every document, best first
    np.testing.assert_array_equal(
        heatmap.images[0].get_array(), generator.token_scores[generator.ranking]
    )
    documents = [t.get_text().split(":")[0] for t in heatmap.get_yticklabels()]
    assert documents == frame["document_id"][generator.ranking].tolist()
    assert [t.get_text() for t in heatmap.get_xticklabels()] == generator.response_tokens
    ranks = explanation.plot_ranks().axes[0]
    expected = frame[["retriever_rank", "generator_rank"]].to_numpy()
    np.testing.assert_array_equal(ranks.collections[0].get_offsets(), expected)
    assert [(t.get_text(), t.xy) for t in ranks.texts] == [
        (id_, tuple(rank)) for id_, rank in zip(frame["document_id"], expected)
    ]
    assert (ranks.get_xlabel(), ranks.get_ylabel()) == (
        f"retriever rank ({explanation.retriever_score_kind})",
        "generator rank (attribution)",
    )
    assert ranks.get_title().startswith(f"WARG = {explanation.warg:.2f}")
    plt.close("all")


def test_conditions_add_random_documents(tiny_retriever, tiny_llama):
    options = dict(explain_query=False, explain_documents=False, max_new_tokens=3)
    result = explain(
        "a red dog",
        tiny_retriever,
        tiny_llama,
        k=2,
        condition="c3",
        seed=1,
        generator_aipc=True,
        **options,
    )
    # the paper's c3: k // 2 = 1 random document first, then the top k - 1
    assert result.condition.retrieved == [False, True]
    assert result.condition.documents[1] == result.hits[0].document
    assert not result.condition.ranked
    assert result.retriever_scores.tolist() == [1.0, 0.0]  # by slot: the random one first
    np.testing.assert_allclose(
        result.similarities,
        tiny_retriever.scores("a red dog", result.condition.documents),
        rtol=1e-6,
    )
    assert result.metadata["conditions"] == {"preset": "paper", "n_random": None, "seed": 1}
    assert result.metadata["draws"] == "per-question"
    assert result.generator_aipc is not None and np.isfinite(result.generator_aipc)
    restored = PipelineExplanation.from_dict(json.loads(result.to_json()))
    assert restored.hits == result.hits  # the hit the prompt did not show travels in the JSON
    code = explain(
        "a red dog",
        tiny_retriever,
        tiny_llama,
        k=2,
        condition="c3",
        conditions=PromptConditions(preset="code", n_random=1, seed=1),
        retriever_scores="similarity",
        **options,
    )
    assert code.condition.retrieved == [False, True, True]  # B2: 1 random, then the top 2
    np.testing.assert_array_equal(code.retriever_scores, code.similarities)
    with pytest.raises(InputError, match="retriever_scores"):
        explain("a red dog", tiny_retriever, tiny_llama, retriever_scores="rank", **options)


def _explain_parser():
    from mechrag.cli import build_parser

    return build_parser("explain")


def test_cli_parser_needs_exactly_one_corpus():
    parser = _explain_parser()
    args = parser.parse_args(["explain", "--query", "q", "--dataset", "hotpotqa", "--k", "3"])
    assert (args.dataset, args.corpus, args.k, args.baseline) == ("hotpotqa", None, 3, "unk")
    for argv in (
        ["explain", "--query", "q"],
        ["explain", "--query", "q", "--corpus", "f", "--dataset", "squad"],
    ):
        with pytest.raises(SystemExit):
            parser.parse_args(argv)


@pytest.mark.integration
def test_cli_explain_writes_json_and_plots(tmp_path, capsys):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(
        "The Eiffel Tower is in Paris. It was completed in 1889.\n\n"
        "Bananas are yellow and rich in potassium.\n\n"
        "The Colosseum is an amphitheatre in Rome.\n"
    )
    out = tmp_path / "out"
    args = _explain_parser().parse_args(
        [
            "explain",
            "--query",
            "When was the Eiffel Tower completed?",
            "--corpus",
            str(corpus),
            "--k",
            "2",
            "--n-steps",
            "50",
            "--max-new-tokens",
            "8",
            "--out",
            str(out),
        ]
    )
    args.run(args)
    data = json.loads((out / "explanation.json").read_text())
    assert data["hits"][0]["id"] == "d0"  # the Eiffel Tower document ranks first
    rows = data["documents"]
    retriever = np.array([row["retriever_score"] for row in rows])
    generator = np.array([row["generator_score"] for row in rows])
    assert data["warg"] == pytest.approx(warg(retriever, generator, data["tau"]))  # its own rows
    assert all(abs(ratio - 1) < 0.05 for ratio in data["completeness"].values())
    assert (out / "ranks.png").is_file() and (out / "query_saliency.png").is_file()
    assert "WARG" in capsys.readouterr().out
