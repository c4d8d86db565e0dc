"""Views of a :class:`~mechrag.retrieval.rag_e.PipelineExplanation` (both sides of one RAG answer
and their alignment) and of a retriever
:class:`~mechrag.retrieval.integrated_gradients.TokenAttribution` (integrated-gradients saliency
over one text)."""

from __future__ import annotations

import numpy as np

from mechrag.views.attribution import response_block, source_ranks
from mechrag.views.blocks import bars, facts, heatmap, section, table, text, token_strip

DOCUMENT_COLUMNS = (
    "position",
    "document_id",
    "title",
    "retrieved",
    "retriever_rank",
    "retriever_score",
    "similarity",
    "generator_rank",
    "generator_score",
    "generator_relies",
)


def saliency_strip(saliency) -> str:
    """IG saliency per word (WordPieces merged, special tokens dropped), with completeness."""
    words = saliency.words()
    strip = token_strip([w for w, _ in words], np.array([s for _, s in words]), what="IG")
    completeness = saliency.completeness
    return (
        facts(
            {
                "similarity": saliency.target,
                "at baseline": saliency.baseline_target,
                "IG completeness": completeness,
            }
        )
        + strip
    )


def saliency_view(result) -> str:
    """One text's IG saliency on its own."""
    summary = facts(
        {
            "side": result.side,
            "method": result.method,
            "baseline": result.baseline,
            "steps": result.n_steps,
        }
    )
    return section(
        f"Retriever saliency · {result.side}", summary + saliency_strip(result), "saliency"
    )


def explanation_view(result) -> str:
    """Alignment scores, both sides' document scores, the retriever's saliency over the query
    and each document, and the generator's per-token heat."""
    documents = result.documents
    ids = [d.id for d in documents]
    summary = result.summary()
    flags = {name.upper(): value for name, value in result.flags.items()}
    alignment = facts(
        {
            "condition": result.condition.name,
            "WARG": result.warg,
            "tau": result.tau,
            **flags,
            "Spearman": summary["spearman"],
            "Pearson": summary["pearson"],
            "generator AIPC": result.generator_aipc,
            "PMC-SHAP calls": result.generator.model_calls,
        }
    )
    frame = result.to_frame()
    table_rows = frame[list(DOCUMENT_COLUMNS)].itertuples(index=False)
    header = [name.replace("_", " ") for name in DOCUMENT_COLUMNS]
    side_by_side = (
        '<div class="columns">'
        f"<div><h3>Retriever: {text(result.retriever_score_kind)} score per document</h3>"
        f"{bars(ids, result.retriever_scores)}"
        "</div>"
        f"<div><h3>Generator: PMC-SHAP per document</h3>{bars(ids, result.generator.scores)}"
        "</div></div>"
    )
    query = (
        "<h3>Retriever: IG saliency of the query</h3>" + saliency_strip(result.query_saliency)
        if result.query_saliency is not None
        else ""
    )
    retriever_ranks, generator_ranks = (
        source_ranks(result.retriever_scores),
        source_ranks(result.generator.scores),
    )
    saliencies = result.document_saliency or [None] * len(documents)
    blocks = []
    for index, (document, saliency) in enumerate(zip(documents, saliencies)):
        heading = (
            f"<h3>Retriever: IG saliency of document {index + 1}, {text(document.id)}"
            + (f" · {text(document.title)}" if document.title else "")
            + f" (retriever rank {retriever_ranks[index]}, generator rank "
            f"{generator_ranks[index]})</h3>"
        )
        body = (
            saliency_strip(saliency)
            if saliency is not None
            else f'<p class="paragraph">{text(document.text)}</p>'
        )
        blocks.append(heading + body)
    generator = result.generator
    tokens = (
        "<h3>Generator: document × response token</h3>"
        + heatmap(generator.token_scores, ids, generator.response_tokens, what="PMC-SHAP")
        if generator.token_scores is not None
        else ""
    )
    return section(
        "Retrieval to generation",
        alignment
        + f'<p class="query"><b>Query</b> {text(result.query)}</p>'
        + response_block(generator, ids[int(generator.ranking[0])] if ids else None)
        + side_by_side
        + table(header, list(table_rows))
        + query
        + "".join(blocks)
        + tokens,
        "explanation",
    )
