"""Figures for source attributions: ranked bars and source x response-token heatmaps."""

from __future__ import annotations

import textwrap

import numpy as np

from mechrag._lazy import moved
from mechrag.errors import InputError
from mechrag.plots.results import figure_and_axes, plot_scores

__all__ = ["plot_source_scores", "plot_token_scores"]


def _label(source, width: int = 60) -> str:
    text = textwrap.shorten(source.text, width=width, placeholder="…")
    return f"{source.id}: {text}"


def plot_source_scores(attribution, k: int | None = 15, ax=None, highlight=(), color="#3b6ea8"):
    """Horizontal bars of the top-``k`` sources with their text, titled with the query.

    ``highlight``: source ids to draw in a contrasting colour (e.g. gold supporting facts).
    """
    return plot_scores(
        attribution,
        k=k,
        ax=ax,
        highlight=highlight,
        labels=[_label(s) for s in attribution.sources],
        title=f"Q: {attribution.query}",
        highlight_label="gold source",
        color=color,
    )


def plot_token_scores(attribution, k: int | None = 10, ax=None, cmap="viridis"):
    """Heatmap of per-token scores for the top-``k`` sources (rows) by response token (columns)."""
    if attribution.token_scores is None:
        raise InputError(f"{attribution.method} has no per-token scores to plot")
    order = attribution.ranking[: k or None]
    tokens = attribution.response_tokens
    fig, ax = figure_and_axes(ax, (max(5.0, 0.3 * len(tokens) + 3), 0.35 * len(order) + 1.5))
    image = ax.imshow(attribution.token_scores[order], aspect="auto", cmap=cmap)
    ax.set_yticks(
        np.arange(len(order)), [_label(attribution.sources[i], 40) for i in order], fontsize=7
    )
    ax.set_xticks(np.arange(len(tokens)), tokens, rotation=90, fontsize=7)
    ax.set_xlabel("response token")
    fig.colorbar(image, ax=ax, label=f"{attribution.method} per token")
    return fig


# ``save_figure`` is defined once, in mechrag.plots.results (0.3); the old path works one release.
__getattr__ = moved(__name__, {"save_figure": "mechrag.plots.results"})
