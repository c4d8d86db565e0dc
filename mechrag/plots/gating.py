"""Figures for gating: the per-token echo strip, per-condition rates with intervals, ROC curves."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from mechrag.plots.results import figure_and_axes

LOW_COLOR = "#d1495b"


def plot_echo_strip(echo, ax=None, cmap: str = "viridis"):
    """One cell per response token coloured by its context echo; low answer tokens outlined."""
    tokens, values = echo.response_tokens, np.asarray(echo.context)
    fig, ax = figure_and_axes(ax, (min(0.42 * len(tokens) + 1.5, 16), 1.7))
    image = ax.imshow(values[None], aspect="auto", cmap=cmap, vmin=0.0, vmax=np.log(2))
    for index in np.flatnonzero(echo.low_tokens):
        ax.add_patch(
            plt.Rectangle((index - 0.5, -0.5), 1, 1, fill=False, edgecolor=LOW_COLOR, lw=2)
        )
    ax.set_xticks(np.arange(len(tokens)))
    ax.set_xticklabels([repr(t)[1:-1] for t in tokens], rotation=60, ha="right", fontsize=7)
    ax.set_yticks([])
    fig.colorbar(image, ax=ax, label="JSD(context || query alone)", pad=0.01)
    ax.set_title(f"Context echo per token (outlined: below {echo.threshold:g})", fontsize=9)
    return fig


def plot_conditions(rows: list[dict], metrics=("hallucinated", "f1")):
    """Horizontal bars of each condition's metrics with their intervals.

    ``rows``: dicts with ``condition`` and, per metric, ``{metric: {"estimate", "low", "high"}}``.
    """
    fig, axes = plt.subplots(1, len(metrics), figsize=(4.2 * len(metrics), 0.32 * len(rows) + 1.2))
    axes = np.atleast_1d(axes)
    labels = [row["condition"] for row in rows]
    for axis, metric in zip(axes, metrics):
        estimate = np.array([row[metric]["estimate"] for row in rows])
        low = np.array([row[metric]["low"] for row in rows])
        high = np.array([row[metric]["high"] for row in rows])
        positions = np.arange(len(rows))
        axis.barh(positions, estimate, color="#3b6ea8", alpha=0.8)
        axis.errorbar(
            estimate, positions, xerr=[estimate - low, high - estimate], fmt="none", color="k"
        )
        axis.set_yticks(positions)
        axis.set_yticklabels(labels if axis is axes[0] else [], fontsize=7)
        axis.invert_yaxis()
        axis.set_xlabel(metric)
        axis.spines[["top", "right"]].set_visible(False)
    fig.suptitle("Per condition, 95% bootstrap intervals", fontsize=9)
    fig.tight_layout()
    return fig


def plot_roc(curves: dict, ax=None):
    """ROC curves of several detectors: ``{name: RocCurve}``."""
    fig, ax = figure_and_axes(ax, (4.0, 4.0))
    for name, curve in curves.items():
        ax.plot(curve.fpr, curve.tpr, label=f"{name} (AUROC {curve.area:.2f})", lw=1.5)
    ax.plot([0, 1], [0, 1], color="grey", lw=0.8, ls="--")
    ax.set_xlabel("false-positive rate")
    ax.set_ylabel("true-positive rate")
    ax.legend(frameon=False, fontsize=7, loc="lower right")
    ax.set_title("Hallucination detectors", fontsize=9)
    return fig
