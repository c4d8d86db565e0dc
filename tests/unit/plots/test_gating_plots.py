"""Gating figures draw what they are given: one bar per condition, one curve per detector."""

from __future__ import annotations

import matplotlib
import numpy as np

from mechrag.metrics.detection import roc_curve
from mechrag.plots.gating import plot_conditions, plot_roc

matplotlib.use("Agg")


def test_condition_bars_and_roc_curves():
    estimates = {"hallucinated": [0.3, 0.1, 0.6], "f1": [0.5, 0.8, 0.2]}
    rows = [
        {
            "condition": name,
            **{
                metric: {"estimate": values[i], "low": values[i] - 0.05, "high": values[i] + 0.1}
                for metric, values in estimates.items()
            },
        }
        for i, name in enumerate("abc")
    ]
    figure = plot_conditions(rows)
    assert len(figure.axes) == 2
    assert [t.get_text() for t in figure.axes[0].get_yticklabels()] == ["a", "b", "c"]
    assert len(figure.axes[0].patches) == 3
    for axis, (metric, values) in zip(figure.axes, estimates.items()):
        assert axis.get_xlabel() == metric
        np.testing.assert_allclose([bar.get_width() for bar in axis.patches], values)
        intervals = [segment[:, 0] for segment in axis.collections[0].get_segments()]
        np.testing.assert_allclose(intervals, [(v - 0.05, v + 0.1) for v in values])
    labels = np.array([0, 1, 0, 1, 1])
    curves = {"x": roc_curve([0.1, 0.9, 0.3, 0.7, 0.2], labels), "y": roc_curve(-labels, labels)}
    figure = plot_roc(curves)
    legend = [t.get_text() for t in figure.axes[0].get_legend().get_texts()]
    assert legend == ["x (AUROC 0.83)", "y (AUROC 0.00)"]
