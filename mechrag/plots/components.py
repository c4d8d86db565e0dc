"""Figures for component attributions: head heatmap, layer profiles, residual lens, gain scatter.

Every function takes a :class:`~mechrag.results.components.ComponentAttribution` (the gain scatter
also a list of them, pooled) and returns a matplotlib Figure sized for a paper column.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from mechrag.errors import InputError
from mechrag.metrics import spearman_test
from mechrag.plots.results import figure_and_axes

HEAD_COLOR, MLP_COLOR, RESID_COLOR = "#3b6ea8", "#d1495b", "#2e8b57"


def plot_heads(result, k: int = 10, ax=None, cmap: str = "viridis"):
    """Layers (rows) x heads (columns) heatmap of head scores; the top-``k`` heads carry their
    rank."""
    heads = result.heads
    fig, ax = figure_and_axes(ax, (0.45 * heads.shape[1] + 2.4, 0.2 * heads.shape[0] + 1.4))
    image = ax.imshow(heads, aspect="auto", cmap=cmap, origin="lower")
    for rank, component in enumerate(result.top(k, kind="head"), start=1):
        ax.text(
            component.head,
            component.layer,
            str(rank),
            ha="center",
            va="center",
            fontsize=7,
            color="white",
            fontweight="bold",
        )
    ax.set_xlabel("head")
    ax.set_ylabel("layer")
    ax.set_xticks(np.arange(heads.shape[1]))
    fig.colorbar(image, ax=ax, label="summed logit-lens JSD")
    ax.set_title(f"Attention heads (top {k} numbered)", fontsize=9)
    return fig


def plot_layers(result, ax=None):
    """MLP score and the sum of head scores for every layer."""
    layers = np.arange(result.n_layers)
    fig, ax = figure_and_axes(ax, (5.5, 3.0))
    ax.plot(layers, result.attention, marker="o", ms=3, color=HEAD_COLOR, label="attention (sum)")
    ax.plot(layers, result.mlps, marker="s", ms=3, color=MLP_COLOR, label="MLP")
    ax.set_xlabel("layer")
    ax.set_ylabel("summed logit-lens JSD")
    ax.legend(frameon=False, fontsize=8)
    ax.spines[["top", "right"]].set_visible(False)
    return fig


def plot_residual(result, ax=None):
    """Logit-lens JSD of the residual stream after each layer."""
    fig, ax = figure_and_axes(ax, (5.5, 3.0))
    ax.plot(np.arange(result.n_layers), result.resid_post, marker="o", ms=3, color=RESID_COLOR)
    ax.set_xlabel("layer")
    ax.set_ylabel("residual logit-lens JSD")
    ax.spines[["top", "right"]].set_visible(False)
    return fig


def plot_gain_scatter(results, ax=None):
    """Semantic gain against component JSD (heads and MLPs), titled with Spearman rho.

    A head's gain is ``result.gains``'s: its own, or its layer's attention gain under the
    paper's ``"argmax_token"`` definition, which defines none per head.
    """
    results = results if isinstance(results, (list, tuple)) else [results]
    if any(r.gains is None for r in results):
        raise InputError("every result needs semantic gains (localize(..., gains=True))")
    fig, ax = figure_and_axes(ax, (4.5, 3.5))
    for kind, color, scores, gains in (
        (
            "heads",
            HEAD_COLOR,
            [r.heads.ravel() for r in results],
            [r.gains[: r.heads.size] for r in results],
        ),
        ("MLPs", MLP_COLOR, [r.mlps for r in results], [r.mlp_gain for r in results]),
    ):
        ax.scatter(
            np.concatenate(scores),
            np.concatenate(gains),
            s=9,
            alpha=0.6,
            color=color,
            label=kind,
            linewidths=0,
        )
    rho, p = spearman_test(
        np.concatenate([r.scores for r in results]), np.concatenate([r.gains for r in results])
    )
    ax.axhline(0.0, color="grey", lw=0.6)
    ax.set_xlabel("component JSD")
    ax.set_ylabel("semantic gain")
    ax.set_title(f"Spearman ρ = {rho:.2f} (p = {p:.1e})", fontsize=9)
    ax.legend(frameon=False, fontsize=8)
    ax.spines[["top", "right"]].set_visible(False)
    return fig


def plot_summary(result, k: int = 10):
    """The four panels side by side: heads, layer profile, residual lens and gain scatter."""
    fig, axes = plt.subplots(1, 4, figsize=(18, 4), layout="constrained")
    plot_heads(result, k=k, ax=axes[0])
    plot_layers(result, ax=axes[1])
    plot_residual(result, ax=axes[2])
    if result.gains is not None:
        plot_gain_scatter(result, ax=axes[3])
    else:
        axes[3].set_axis_off()
    return fig
