"""AUROC against brute-force pair counting; McNemar against scipy's binomial test."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from mechrag.metrics.detection import auroc, bootstrap_ci, mcnemar_exact, roc_curve


def _pairwise_auroc(scores, labels) -> float:
    positives, negatives = scores[labels == 1], scores[labels == 0]
    wins = sum((p > n) + 0.5 * (p == n) for p in positives for n in negatives)
    return wins / (len(positives) * len(negatives))


@pytest.mark.parametrize("seed", range(5))
def test_auroc_matches_pairwise_count_with_ties(seed):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 2, 40)
    labels[:2] = [0, 1]
    scores = rng.integers(0, 6, 40).astype(float) + labels  # many ties, some signal
    assert auroc(scores, labels) == pytest.approx(_pairwise_auroc(scores, labels))
    assert roc_curve(scores, labels).area == pytest.approx(auroc(scores, labels))


def test_auroc_extremes_and_errors():
    labels = np.array([0, 0, 1, 1])
    assert auroc([1, 2, 3, 4], labels) == 1.0
    assert auroc([4, 3, 2, 1], labels) == 0.0
    assert auroc([1, 1, 1, 1], labels) == 0.5
    with pytest.raises(ValueError, match="positive and one negative"):
        auroc([1, 2], [1, 1])
    with pytest.raises(ValueError, match="binary"):
        auroc([1, 2], [0, 2])


def test_roc_curve_points():
    curve = roc_curve([0.9, 0.8, 0.8, 0.1], [1, 0, 1, 0])
    np.testing.assert_allclose(curve.fpr, [0, 0, 0.5, 1])
    np.testing.assert_allclose(curve.tpr, [0, 0.5, 1, 1])
    assert curve.thresholds[0] == np.inf


@pytest.mark.parametrize("b, c", [(0, 0), (1, 0), (3, 9), (10, 10), (0, 7), (25, 12)])
def test_mcnemar_matches_binomial_test(b, c):
    first = np.array([1] * b + [0] * c + [1, 1, 0, 0], dtype=bool)
    second = np.array([0] * b + [1] * c + [1, 1, 0, 0], dtype=bool)
    expected = 1.0 if b + c == 0 else stats.binomtest(b, b + c, 0.5).pvalue
    assert mcnemar_exact(first, second) == pytest.approx(expected, rel=1e-12)


def test_bootstrap_is_seeded_paired_and_covers_the_estimate():
    rng = np.random.default_rng(0)
    x = rng.normal(1.0, 1.0, 200)
    interval = bootstrap_ci(np.mean, x, seed=3)
    assert interval == bootstrap_ci(np.mean, x, seed=3)
    assert interval.low < x.mean() < interval.high
    # Normal-theory half width 1.96 * sd / sqrt(n) within 15%.
    half = 1.96 * x.std(ddof=1) / np.sqrt(len(x))
    assert (interval.high - interval.low) / 2 == pytest.approx(half, rel=0.15)
    # Paired rows: the difference of identical arrays is exactly zero on every resample.
    same = bootstrap_ci(lambda a, b: float(np.mean(a - b)), x, x.copy())
    assert (same.low, same.high) == (0.0, 0.0)
