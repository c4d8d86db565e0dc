"""Figures for source attributions: ranked bars and source x response-token heatmaps."""

from __future__ import annotations

import os
import textwrap
import warnings
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.patches import Patch

HIGHLIGHT = "#d1495b"


def _label(source, width: int = 60) -> str:
    text = textwrap.shorten(source.text, width=width, placeholder="…")
    return f"{source.id}: {text}"


def figure_and_axes(ax, size):
    """``ax``'s figure, or a new constrained-layout figure of ``size`` inches."""
    if ax is not None:
        return ax.figure, ax
    return plt.subplots(figsize=size, layout="constrained")


def plot_source_scores(attribution, k: int | None = 15, ax=None, highlight=(), color="#3b6ea8"):
    """Horizontal bars of the top-``k`` sources, best at the top.

    ``highlight``: source ids to draw in a contrasting colour (e.g. gold supporting facts).
    """
    order = attribution.ranking[: k or None]
    fig, ax = figure_and_axes(ax, (7.0, 0.32 * len(order) + 1.2))
    labels = [_label(attribution.sources[i]) for i in order]
    marked = [attribution.sources[i].id in set(highlight) for i in order]
    ax.barh(
        np.arange(len(order)),
        attribution.scores[order],
        color=[HIGHLIGHT if m else color for m in marked],
    )
    if any(marked):
        ax.legend(
            handles=[Patch(color=HIGHLIGHT, label="gold source")], frameon=False, loc="lower right"
        )
    ax.set_yticks(np.arange(len(order)), labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel(f"{attribution.method} score")
    ax.set_title(textwrap.shorten(f"Q: {attribution.query}", 90), fontsize=9)
    ax.spines[["top", "right"]].set_visible(False)
    return fig


def plot_token_scores(attribution, k: int | None = 10, ax=None, cmap="viridis"):
    """Heatmap of per-token scores for the top-``k`` sources (rows) by response token (columns)."""
    if attribution.token_scores is None:
        raise ValueError(f"{attribution.method} has no per-token scores to plot")
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


def save_figure(fig, path: str | Path, formats=("png", "svg")) -> list[Path]:
    """Save ``fig`` as ``path`` with each suffix in ``formats``; returns the written paths."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    written = []
    for suffix in formats:
        target = path.with_suffix(f".{suffix}")
        partial = target.with_name(f".{target.name}.partial")
        with warnings.catch_warnings():  # sources in other scripts lack glyphs in DejaVu
            warnings.filterwarnings("ignore", message="Glyph .* missing from font")
            fig.savefig(partial, dpi=200, bbox_inches="tight", format=suffix)
        os.replace(partial, target)  # a figure file appears only once fully written
        written.append(target)
    return written
