"""The LASSO solver and the ContextCite surrogate."""

from __future__ import annotations

import numpy as np
import pytest

from mechrag.attribution.contextcite import lasso
from mechrag.attribution.estimators import ContextCite


def test_lasso_without_penalty_is_least_squares():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(60, 5))
    y = x @ np.array([1.0, -2.0, 0.0, 0.5, 3.0]) + 0.3 + rng.normal(scale=0.1, size=60)
    weights, intercept = lasso(x, y, l1=0.0, tol=1e-12)
    design = np.hstack([x, np.ones((60, 1))])
    expected = np.linalg.lstsq(design, y, rcond=None)[0]
    np.testing.assert_allclose(weights, expected[:5], atol=1e-6)
    assert intercept == pytest.approx(expected[5], abs=1e-6)


def test_lasso_soft_thresholds_an_orthogonal_design():
    # Columns standardised and orthogonal: the solution is soft-thresholding of x_j . y / m.
    x = np.array([[1, 1], [1, -1], [-1, 1], [-1, -1]], dtype=float)
    y = np.array([3.0, 1.0, -1.0, -3.0])  # x_0 . y / 4 = 2, x_1 . y / 4 = 1
    weights, intercept = lasso(x, y, l1=0.5)
    np.testing.assert_allclose(weights, [1.5, 0.5], atol=1e-10)
    assert intercept == pytest.approx(0.0)
    assert np.all(lasso(x, y, l1=5.0)[0] == 0)


def test_constant_columns_get_zero_weight():
    x = np.column_stack([np.ones(8), np.arange(8.0)])
    weights, _ = lasso(x, 2 * np.arange(8.0), l1=0.0)
    np.testing.assert_allclose(weights, [0.0, 2.0], atol=1e-8)


def test_surrogate_is_seeded_and_sparse():
    a = np.array([2.0, 0.0, 0.0, -1.0, 0.0, 0.0])

    def game(masks):
        return masks.astype(float) @ a + 0.05 * np.sin(masks @ np.arange(1, 7.0))

    estimator = ContextCite(budget=40, seed=4, l1=0.05)
    first = estimator.estimate(game, 6)
    np.testing.assert_array_equal(first, estimator.estimate(game, 6))
    assert np.argmax(first) == 0 and np.argmin(first) == 3
    assert np.sum(first != 0) < 6


def test_bad_inputs():
    with pytest.raises(ValueError, match="keep_prob"):
        ContextCite(keep_prob=1.0).estimate(lambda m: m.sum(1), 3)
    with pytest.raises(ValueError, match="features"):
        lasso(np.ones((3, 2)), np.ones(4), 0.1)
    with pytest.raises(ValueError, match="l1"):
        lasso(np.ones((3, 2)), np.ones(3), -1.0)
