"""The view of a per-source :class:`~mechrag.results.Attribution`: the context shaded by score
beside the ranked bars, and the response's per-token heat for one source."""

from __future__ import annotations

from itertools import groupby

import numpy as np

from mechrag.errors import InputError
from mechrag.views.blocks import (
    Scale,
    bars,
    facts,
    fragment,
    number,
    section,
    text,
    token_strip,
)

TOP_SOURCES = 15


def source_ranks(scores) -> np.ndarray:
    """Rank of each item, 1 = highest score (ties keep item order)."""
    order = np.argsort(-np.asarray(scores), kind="stable")
    ranks = np.empty(order.size, dtype=int)
    ranks[order] = np.arange(1, order.size + 1)
    return ranks


def context_block(sources, scores, *, chosen: str | None = None) -> str:
    """The context as it reads, paragraph by paragraph, each source shaded by its score and
    followed by a badge with its rank and score (``chosen``: outlined)."""
    scale = Scale.fit(scores)
    ranks = source_ranks(scores)
    indexed = list(enumerate(sources))
    paragraphs = []
    for _, members in groupby(indexed, key=lambda item: item[1].paragraph):
        members = list(members)
        title = members[0][1].title
        spans = []
        for index, source in members:
            score = float(scores[index])
            classes = "source" + (" neg" if scale.is_negative(score) else "")
            classes += " chosen" if source.id == chosen else ""
            tip = f"{source.id}: score {number(score, 4)}, rank {ranks[index]}"
            spans.append(
                f'<span class="{classes}" style="{scale.style(score)}" title="{text(tip)}">'
                f"{text(source.text)}</span>"
                f'<span class="badge">#{ranks[index]} {text(source.id)} {number(score)}</span>'
            )
        heading = f'<span class="title">{text(title)}</span>' if title else ""
        paragraphs.append(f'<p class="paragraph">{heading}{" ".join(spans)}</p>')
    key = "badge: #rank, id, score" + (
        "; outlined: the source of the response heat" if chosen else ""
    )
    return "".join(paragraphs) + scale.legend("source score") + f'<div class="legend">{key}</div>'


def ranked_bars(labels, scores, k: int | None = TOP_SOURCES, highlight=()) -> str:
    """Bars of the top ``k`` items, best first."""
    order = np.argsort(-np.asarray(scores), kind="stable")[:k]
    return bars([labels[i] for i in order], np.asarray(scores)[order], highlight=highlight)


def attribution_view(result, *, source: str | None = None, k: int | None = TOP_SOURCES) -> str:
    """Query, context, ranked bars and response heat of ``result`` for ``source`` (an id;
    default: the top source)."""
    ids = result.labels
    chosen = source if source is not None else (ids[int(result.ranking[0])] if ids else None)
    if chosen is not None and chosen not in ids:
        raise InputError(f"unknown source {chosen!r}: choose from {ids}")
    metadata = result.metadata or {}
    summary = facts(
        {
            "method": result.method,
            "model": metadata.get("model"),
            "model calls": result.model_calls,
            "forward passes": result.forward_passes,
            "seconds": metadata.get("seconds"),
            "sources": len(ids),
            "response tokens": len(result.response_ids),
        }
    )
    summary += faithfulness_facts(metadata.get("faithfulness"))
    shown = "all" if k is None or k >= len(ids) else f"top {k}"
    columns = (
        '<div class="columns">'
        f"<div><h3>Context</h3>{context_block(result.sources, result.scores, chosen=chosen)}</div>"
        f"<div><h3>Ranked sources ({shown})</h3>"
        f"{ranked_bars(ids, result.scores, k, highlight=(chosen,))}</div></div>"
    )
    return section(
        f"Attribution · {result.method}",
        summary
        + f'<p class="query"><b>Query</b> {text(result.query)}</p>'
        + columns
        + response_block(result, chosen),
        "attribution",
    )


def faithfulness_facts(found: dict | None) -> str:
    """LDS and the top-k changes of the response's log-probability, when the attribution was
    evaluated (:func:`mechrag.metrics.faithfulness.faithfulness`)."""
    if not found:
        return ""
    entries = {f"LDS ({found['lds_masks']} masks)": found["lds"]}
    entries |= {f"Δ log p, top {k} removed": v for k, v in found["topk_removal"].items()}
    entries |= {f"Δ log p, top {k} alone": v for k, v in found["topk_keep"].items()}
    return facts(entries)


def response_block(result, chosen: str | None) -> str:
    """The response, as per-token heat of ``chosen`` when the result has token scores."""
    if result.token_scores is None or chosen is None:
        return f'<h3>Response</h3><div class="response">{text(result.response)}</div>'
    row = result.labels.index(chosen)
    return f"<h3>Response: how much each token rests on {text(chosen)}</h3>" + token_strip(
        result.response_tokens, result.token_scores[row], what=f"{chosen} score"
    )


def attribution_html(result, *, source: str | None = None) -> str:
    """The notebook fragment of :func:`attribution_view`."""
    return fragment(attribution_view(result, source=source))
