"""Figures for estimator agreement (metric vs budget)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

from mechrag.errors import InputError

MARKERS = ("o", "s", "^", "D")


def plot_agreement(
    table: pd.DataFrame, metrics=("pearson", "kendall", "p@1"), title: str | None = None
):
    """One panel per metric: its mean over examples against the budget, a line per method.

    ``table`` has columns ``method``, ``budget`` and each metric (one row per method x budget);
    a ``<metric>_sd`` column (spread over seeds), where present, is drawn as a band.
    """
    missing = {"method", "budget", *metrics} - set(table.columns)
    if missing:
        raise InputError(f"agreement table lacks columns {sorted(missing)}")
    fig, axes = plt.subplots(
        1, len(metrics), figsize=(4.0 * len(metrics), 3.4), layout="constrained", squeeze=False
    )
    colours = plt.get_cmap("tab20").colors
    for ax, metric in zip(axes[0], metrics):
        groups = table.sort_values("budget").groupby("method", sort=True)
        for index, (method, rows) in enumerate(groups):
            # tab20 pairs a dark and a light shade of each hue: the light one is dashed; past
            # 20 methods the palette repeats with another marker.
            (line,) = ax.plot(
                rows["budget"],
                rows[metric],
                marker=MARKERS[index // len(colours) % len(MARKERS)],
                ms=3,
                color=colours[index % len(colours)],
                ls="-" if index % 2 == 0 else "--",
                label=method,
            )
            if f"{metric}_sd" in rows:
                low, high = rows[metric] - rows[f"{metric}_sd"], rows[metric] + rows[f"{metric}_sd"]
                ax.fill_between(rows["budget"], low, high, color=line.get_color(), alpha=0.12)
        ax.set_xlabel("value calls (budget)")
        ax.set_ylabel(f"{metric} vs exact")
        ax.spines[["top", "right"]].set_visible(False)
    axes[0, -1].legend(fontsize=7, frameon=False, loc="upper left", bbox_to_anchor=(1.02, 1.0))
    if title:
        fig.suptitle(title, fontsize=10)
    return fig
