"""Detector and comparison statistics: AUROC, ROC curves, bootstrap intervals, exact McNemar.

* ``auroc(scores, labels)``: probability that a random positive scores above a random negative,
  ties counting 1/2 (the Mann-Whitney U statistic over ``n_pos * n_neg``).
* ``roc_curve``: false- and true-positive rates at every distinct threshold, from (0, 0) to (1, 1).
* ``bootstrap_ci``: percentile interval of a statistic over seeded resamples of paired rows.
* ``mcnemar_exact``: two-sided exact McNemar p for paired binary outcomes, the binomial test of
  the discordant pairs against 1/2.
* ``sign_flip_p``: two-sided p of the paired sign-flip permutation test of a mean difference.
* ``holm_adjusted``: Holm's step-down adjusted p-values of a family of tests.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from jaxtyping import Bool, Float
from scipy import stats

from mechrag.errors import InputError


def _binary(labels) -> np.ndarray:
    labels = np.asarray(labels)
    if not np.isin(labels, (0, 1)).all():
        raise InputError("labels must be binary (0/1 or bool)")
    return labels.astype(bool)


def auroc(scores: Float[np.ndarray, " n"], labels: Bool[np.ndarray, " n"]) -> float:
    """Area under the ROC curve of ``scores`` detecting ``labels == 1`` (ties count 1/2)."""
    scores, labels = np.asarray(scores, dtype=float), _binary(labels)
    if scores.shape != labels.shape:
        raise InputError(f"scores {scores.shape} and labels {labels.shape} differ in shape")
    n_pos, n_neg = int(labels.sum()), int((~labels).sum())
    if n_pos == 0 or n_neg == 0:
        raise InputError("AUROC needs at least one positive and one negative example")
    ranks = stats.rankdata(scores)  # average ranks: a tie between classes adds 1/2
    u = ranks[labels].sum() - n_pos * (n_pos + 1) / 2
    return float(u / (n_pos * n_neg))


@dataclass
class RocCurve:
    """ROC points at decreasing thresholds (``score >= threshold`` is flagged)."""

    fpr: np.ndarray
    tpr: np.ndarray
    thresholds: np.ndarray

    @property
    def area(self) -> float:
        """Trapezoidal area under the points (equals :func:`auroc`)."""
        return float(np.sum(np.diff(self.fpr) * (self.tpr[1:] + self.tpr[:-1]) / 2))


def roc_curve(scores, labels) -> RocCurve:
    """ROC points at every distinct score, from (0, 0) (threshold +inf) to (1, 1)."""
    scores, labels = np.asarray(scores, dtype=float), _binary(labels)
    auroc(scores, labels)  # validates shapes and that both classes occur
    thresholds = np.unique(scores)[::-1]
    flagged = scores[None, :] >= thresholds[:, None]
    tpr = (flagged & labels).sum(1) / labels.sum()
    fpr = (flagged & ~labels).sum(1) / (~labels).sum()
    return RocCurve(
        fpr=np.concatenate([[0.0], fpr]),
        tpr=np.concatenate([[0.0], tpr]),
        thresholds=np.concatenate([[np.inf], thresholds]),
    )


@dataclass(frozen=True)
class Interval:
    """A point estimate with a two-sided percentile bootstrap interval."""

    estimate: float
    low: float
    high: float

    def __str__(self) -> str:
        return f"{self.estimate:.3f} [{self.low:.3f}, {self.high:.3f}]"


def bootstrap_ci(
    statistic: Callable[..., float],
    *arrays,
    n_resamples: int = 2000,
    level: float = 0.95,
    seed: int = 0,
) -> Interval:
    """``statistic(*arrays)`` with a percentile interval over resampled rows.

    The same rows are drawn for every array, so paired data stays paired. Resamples on which the
    statistic fails (e.g. AUROC with one class) are skipped.
    """
    arrays = [np.asarray(a) for a in arrays]
    n = len(arrays[0])
    if n == 0 or any(len(a) != n for a in arrays):
        raise InputError("bootstrap_ci needs non-empty arrays of one length")
    if not 0 < level < 1:
        raise InputError(f"level must be in (0, 1), got {level}")
    rng = np.random.default_rng(seed)
    values = []
    for _ in range(n_resamples):
        rows = rng.integers(0, n, n)
        try:
            values.append(statistic(*(a[rows] for a in arrays)))
        except ValueError:
            continue
    alpha = (1 - level) / 2
    low, high = np.quantile(values, [alpha, 1 - alpha]) if values else (np.nan, np.nan)
    return Interval(float(statistic(*arrays)), float(low), float(high))


def mcnemar_exact(first: Bool[np.ndarray, " n"], second: Bool[np.ndarray, " n"]) -> float:
    """Two-sided exact McNemar p-value for paired binary outcomes of two conditions.

    With ``b`` pairs where only ``first`` is true and ``c`` where only ``second`` is,
    ``p = min(1, 2 * P(X <= min(b, c)))`` for ``X ~ Binomial(b + c, 1/2)`` (1 when b + c = 0).
    """
    first, second = _binary(first), _binary(second)
    if first.shape != second.shape:
        raise InputError("paired outcomes must have the same shape")
    b, c = int((first & ~second).sum()), int((~first & second).sum())
    n = b + c
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(b, c) + 1)) / 2**n
    return min(1.0, 2 * tail)


# Up to this many paired differences the sign-flip test enumerates every sign pattern.
SIGN_FLIP_EXACT = 16


def sign_flip_p(
    differences: Float[np.ndarray, " n"], *, n_resamples: int = 20000, seed: int = 0
) -> float:
    """Two-sided p of the paired sign-flip permutation test of the mean difference.

    Under the null each difference is as likely positive as negative, so the observed
    ``|mean|`` is compared with the means of the differences under random signs: every one of
    the ``2**n`` patterns up to :data:`SIGN_FLIP_EXACT` differences, ``n_resamples`` seeded
    draws (plus the observed pattern) beyond. It tests the mean itself, the statistic the
    bootstrap interval is around (a signed-rank test tests the pseudo-median, and on skewed or
    discrete differences can disagree with the mean's interval). 1 when every difference is 0.
    """
    differences = np.asarray(differences, dtype=float)
    if differences.ndim != 1 or not len(differences):
        raise InputError("sign_flip_p needs a non-empty 1-d array of paired differences")
    if not np.isfinite(differences).all():
        raise InputError("sign_flip_p needs finite paired differences")
    if not differences.any():
        return 1.0
    n = len(differences)
    # Rounding in the sums scales with the differences: a pattern whose mean equals the
    # observed one up to it counts as reaching it.
    tolerance = 1e-9 * np.abs(differences).mean()
    observed = abs(np.ones(n) @ differences) / n  # computed as the patterns' means are
    if n <= SIGN_FLIP_EXACT:
        patterns = 1 - 2 * ((np.arange(2**n)[:, None] >> np.arange(n)) & 1)
        means = np.abs(patterns @ differences) / n
        return float(np.mean(means >= observed - tolerance))
    signs = np.random.default_rng(seed).choice((-1.0, 1.0), size=(n_resamples, n))
    means = np.abs(signs @ differences) / n
    return float((1 + np.sum(means >= observed - tolerance)) / (1 + n_resamples))


def holm_adjusted(p_values: Float[np.ndarray, " m"]) -> Float[np.ndarray, " m"]:
    """Holm's step-down adjusted p-values of a family of ``m`` tests, in the order given.

    The i-th smallest p is multiplied by ``m - i + 1``; the products are made non-decreasing
    along that order and capped at 1. Rejecting the tests whose adjusted p is at most alpha
    holds the chance of any false rejection in the family at alpha, whatever the tests'
    dependence (Holm 1979), so a claim picked from many tests can be read at its family's size.
    """
    p_values = np.asarray(p_values, dtype=float)
    if p_values.ndim != 1 or not ((p_values >= 0) & (p_values <= 1)).all():
        raise InputError("holm_adjusted needs a 1-d array of p-values in [0, 1]")
    m = len(p_values)
    order = np.argsort(p_values, kind="stable")
    stepped = np.maximum.accumulate(p_values[order] * (m - np.arange(m)))
    adjusted = np.empty(m)
    adjusted[order] = np.minimum(stepped, 1.0)
    return adjusted
