"""AUROC against brute-force pair counting; McNemar against scipy's binomial test; Holm's
adjustment against closed testing over every subset of the family."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from mechrag.errors import InputError
from mechrag.metrics.detection import (
    auroc,
    bootstrap_ci,
    holm_adjusted,
    mcnemar_exact,
    roc_curve,
)


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


def _brute_force_sign_flip_p(differences) -> float:
    """Every sign pattern, one by one."""
    import itertools

    observed = abs(np.mean(differences))
    means = [
        abs(np.mean(np.asarray(signs) * differences))
        for signs in itertools.product((-1, 1), repeat=len(differences))
    ]
    return float(np.mean([m >= observed - 1e-12 for m in means]))


def test_sign_flip_p_enumerates_every_pattern_and_samples_beyond():
    from mechrag.metrics.detection import SIGN_FLIP_EXACT, sign_flip_p

    rng = np.random.default_rng(3)
    for n in (1, 5, 9):
        differences = rng.normal(0.4, 1.0, n)
        assert sign_flip_p(differences) == pytest.approx(_brute_force_sign_flip_p(differences))
    discrete = np.array([0.58, -0.42, 0.58, 0.58, -1.42, 0.58, -0.42, 1.58])  # ties in |mean|
    assert sign_flip_p(discrete) == pytest.approx(_brute_force_sign_flip_p(discrete))
    assert sign_flip_p(np.ones(6)) == pytest.approx(2 / 2**6)
    assert sign_flip_p(np.zeros(4)) == 1.0
    # Beyond the exact limit: seeded draws, within Monte Carlo error of the full enumeration.
    wide = rng.normal(0.25, 1.0, SIGN_FLIP_EXACT + 2)
    exact = _brute_force_sign_flip_p(wide)
    sampled = sign_flip_p(wide, n_resamples=20000, seed=1)
    assert sampled == sign_flip_p(wide, n_resamples=20000, seed=1)
    assert abs(sampled - exact) < 4 * np.sqrt(exact * (1 - exact) / 20000) + 1e-4
    with pytest.raises(ValueError, match="non-empty 1-d"):
        sign_flip_p(np.array([]))
    with pytest.raises(ValueError, match="finite"):
        sign_flip_p(np.array([0.2, np.nan, 0.4]))
    huge = np.array([3e8, -1e8, -2e8 + 1e-3, 5e7, -5e7])  # a mean near 0 among large values
    assert sign_flip_p(huge) == pytest.approx(_brute_force_sign_flip_p(huge))


def _closed_testing_holm(p_values) -> list[float]:
    """Holm's adjusted p by its definition as closed testing with Bonferroni's local test: the
    largest, over every subset of the family holding the test, of the subset's size times its
    smallest p (capped at 1)."""
    m = len(p_values)
    adjusted = []
    for i in range(m):
        subsets = (
            [j for j in range(m) if mask >> j & 1] for mask in range(1, 2**m) if mask >> i & 1
        )
        adjusted.append(max(min(1.0, len(s) * min(p_values[j] for j in s)) for s in subsets))
    return adjusted


@pytest.mark.parametrize("seed", range(6))
def test_holm_matches_closed_testing_over_every_subset(seed):
    rng = np.random.default_rng(seed)
    p_values = rng.choice([0.001, 0.01, 0.02, 0.04, 0.3, 0.9], size=7) * rng.uniform(0.5, 1, 7)
    p_values[:2] = p_values[2]  # ties
    assert holm_adjusted(p_values) == pytest.approx(_closed_testing_holm(p_values))


def test_holm_by_hand_and_bad_input():
    # Sorted .01, .03, .04, .2 times 4, 3, 2, 1: .04, .09, .08 -> .09 (monotone), .2.
    assert holm_adjusted([0.01, 0.04, 0.03, 0.2]) == pytest.approx([0.04, 0.09, 0.09, 0.2])
    assert holm_adjusted([0.5, 0.6]).tolist() == [1.0, 1.0]
    assert holm_adjusted([]).shape == (0,)
    with pytest.raises(InputError, match="p-values in"):
        holm_adjusted([0.2, 1.5])
