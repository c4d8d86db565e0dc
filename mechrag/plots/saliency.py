"""Figures for the retrieval-to-generation pipeline: token saliency as coloured text, ranks."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib import colors

from mechrag.metrics.alignment import ranks
from mechrag.plots.results import figure_and_axes

CHARACTERS_PER_LINE = 90
# Axis width in characters: 9 pt monospace on a 10-inch figure with a colour bar.
AXIS_CHARACTERS = 112


def plot_token_saliency(attribution, ax=None, cmap="RdBu_r", title: str | None = None):
    """Words coloured by their summed IG score (red = raises the similarity, blue = lowers).

    Takes a :class:`~mechrag.retrieval.TokenAttribution`; WordPiece pieces are merged into
    words. Colours share one symmetric scale around zero.
    """
    words = attribution.words()
    scores = np.array([score for _, score in words]) if words else np.zeros(1)
    limit = float(np.abs(scores).max()) or 1.0
    norm = colors.Normalize(-limit, limit)
    colormap = plt.get_cmap(cmap)
    lines, line, used = [], [], 0
    for word, score in words:
        if line and used + len(word) + 1 > CHARACTERS_PER_LINE:
            lines.append(line)
            line, used = [], 0
        line.append((word, score, used))
        used += len(word) + 1
    lines.append(line)
    fig, ax = figure_and_axes(ax, (10, 0.32 * len(lines) + 1.0))
    ax.set_xlim(0, AXIS_CHARACTERS)
    ax.set_ylim(len(lines), -0.6)
    ax.axis("off")
    for row, members in enumerate(lines):
        for word, score, column in members:
            ax.text(
                column,
                row + 0.5,
                word,
                family="monospace",
                fontsize=9,
                va="center",
                bbox={"facecolor": colormap(norm(score)), "edgecolor": "none", "pad": 1.0},
            )
    label = title or (
        f"{attribution.side} saliency (IG, {attribution.baseline} baseline, "
        f"completeness {attribution.completeness:.3f})"
    )
    ax.set_title(label, fontsize=9, loc="left")
    fig.colorbar(plt.cm.ScalarMappable(norm, colormap), ax=ax, fraction=0.03, label="IG")
    return fig


def plot_rank_agreement(
    retriever_scores,
    generator_scores,
    labels=None,
    ax=None,
    title=None,
    retriever_score_kind: str = "similarity",
):
    """Retriever rank (x) against generator rank (y), one point per document; 1 = top.

    ``retriever_score_kind`` names what ranks the retriever side (``similarity`` or the prompt
    ``position``), for the axis label."""
    retriever_ranks, generator_ranks = ranks(retriever_scores), ranks(generator_scores)
    n = len(retriever_ranks)
    fig, ax = figure_and_axes(ax, (4.5, 4.5))
    ax.plot([1, n], [1, n], color="0.7", linestyle="--", linewidth=1, label="perfect agreement")
    ax.scatter(retriever_ranks, generator_ranks, color="#3b6ea8", zorder=3)
    for i, text in enumerate(labels or []):
        ax.annotate(
            text,
            (retriever_ranks[i], generator_ranks[i]),
            fontsize=7,
            xytext=(4, 4),
            textcoords="offset points",
        )
    ax.set_xlabel(f"retriever rank ({retriever_score_kind})")
    ax.set_ylabel("generator rank (attribution)")
    ax.set_xticks(range(1, n + 1))
    ax.set_yticks(range(1, n + 1))
    ax.invert_yaxis()
    ax.legend(fontsize=7, loc="best")
    if title:
        ax.set_title(title, fontsize=9)
    return fig
