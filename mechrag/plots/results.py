"""Figures any result can draw (ranked score bars) and the helpers every figure uses."""

from __future__ import annotations

import os
import textwrap
import warnings
from collections.abc import Callable
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.patches import Patch

BAR_COLOR, HIGHLIGHT = "#3b6ea8", "#d1495b"


def figure_and_axes(ax, size):
    """``ax``'s figure, or a new constrained-layout figure of ``size`` inches."""
    if ax is not None:
        return ax.figure, ax
    return plt.subplots(figsize=size, layout="constrained")


def plot_scores(
    result,
    k: int | None = 15,
    ax=None,
    highlight=(),
    labels=None,
    title: str | None = None,
    highlight_label: str = "highlighted",
    color: str = BAR_COLOR,
):
    """Horizontal bars of a :class:`~mechrag.results.Result`'s top-``k`` items, best at the top.

    ``highlight``: item labels (``result.labels``) drawn in a contrasting colour; ``labels``:
    tick text per item (default ``result.labels``).
    """
    order, names, highlight = result.ranking[: k or None], result.labels, set(highlight)
    labels = names if labels is None else labels
    marked = [names[i] in highlight for i in order]
    fig, ax = figure_and_axes(ax, (7.0, 0.32 * len(order) + 1.2))
    ax.barh(
        np.arange(len(order)),
        result.scores[order],
        color=[HIGHLIGHT if m else color for m in marked],
    )
    if any(marked):
        ax.legend(
            handles=[Patch(color=HIGHLIGHT, label=highlight_label)],
            frameon=False,
            loc="lower right",
        )
    ax.set_yticks(np.arange(len(order)), [labels[i] for i in order], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel(f"{result.method} score")
    if title:
        ax.set_title(textwrap.shorten(title, 90), fontsize=9)
    ax.spines[["top", "right"]].set_visible(False)
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


def save_figures(drawers: dict[str, Callable], directory: str | Path) -> list[Path]:
    """Draw each figure of ``drawers`` (file stem -> function returning a Figure), save it as
    ``directory/stem`` .png and .svg, and close it before drawing the next."""
    written = []
    for stem, draw in drawers.items():
        figure = draw()
        try:
            written += save_figure(figure, Path(directory) / stem)
        finally:
            plt.close(figure)
    return written
