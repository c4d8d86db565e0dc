"""Agreement metrics against hand-computed values and exhaustive search."""

from __future__ import annotations

from itertools import combinations

import numpy as np
import pytest

from mechrag.metrics import (
    agreement,
    kendall_tau,
    ndcg_at_k,
    pearson,
    precision_at_k,
    removal_top_k,
    spearman,
    top_k,
)


def test_correlations_by_hand():
    exact = np.array([1.0, 2.0, 3.0, 4.0])
    assert pearson(2 * exact + 1, exact) == pytest.approx(1.0)
    assert spearman(exact**3, exact) == pytest.approx(1.0)
    # One swapped pair out of six: tau = (5 - 1) / 6.
    assert kendall_tau(np.array([2.0, 1.0, 3.0, 4.0]), exact) == pytest.approx(4 / 6)
    assert pearson(np.ones(4), exact) == 0.0


def test_ndcg_by_hand():
    exact = np.array([3.0, 1.0, 2.0, 0.0])
    assert ndcg_at_k(exact, exact, 2) == pytest.approx(1.0)
    # Estimate ranks source 2 first: DCG = 2 + 3/log2(3); ideal = 3 + 2/log2(3).
    estimate = np.array([2.0, 0.0, 3.0, 1.0])
    expected = (2 + 3 / np.log2(3)) / (3 + 2 / np.log2(3))
    assert ndcg_at_k(estimate, exact, 2) == pytest.approx(expected)


def test_removal_top_k_is_the_exhaustive_argmin():
    rng = np.random.default_rng(0)
    table = rng.normal(size=2**5)
    codes = 1 << np.arange(5)

    def value(masks):
        return table[masks @ codes]

    for k in (1, 2, 3):
        best = min(combinations(range(5), k), key=lambda s: table[31 - sum(1 << i for i in s)])
        assert sorted(removal_top_k(value, 5, k).tolist()) == list(best)


def test_precision_and_agreement_row():
    estimate = np.array([0.9, 0.1, 0.5, 0.3])
    assert top_k(estimate, 2).tolist() == [0, 2]
    assert precision_at_k(estimate, [0, 3], 2) == 0.5
    row = agreement(estimate, estimate, {1: np.array([0]), 2: np.array([1, 3])})
    assert row["pearson"] == pytest.approx(1.0) and row["p@1"] == 1.0 and row["p@2"] == 0.0


def test_bad_inputs():
    with pytest.raises(ValueError, match="score vectors"):
        pearson(np.ones(3), np.ones(4))
    with pytest.raises(ValueError, match="k must be"):
        removal_top_k(lambda m: m.sum(1), 4, 4)
