"""Shapley-family estimators against closed forms and brute force on analytic games."""

from __future__ import annotations

from itertools import permutations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mechrag.attribution.estimators import ESTIMATORS, shapley_values
from mechrag.attribution.shapley import exact_beta_shapley, exact_shapley


def additive_game(a: np.ndarray, constant: float = 0.7):
    return lambda masks: masks.astype(float) @ a + constant


def pairwise_game(a: np.ndarray, b: np.ndarray):
    """``v(S) = sum_i a_i + sum_{i<j} b_ij`` over members; Shapley ``a_i + sum_j b_ij / 2``."""
    upper = np.triu(b, 1)

    def value(masks):
        z = masks.astype(float)
        return z @ a + np.einsum("mi,ij,mj->m", z, upper, z)

    return value, a + (upper + upper.T).sum(1) / 2


def voting_game(weights: np.ndarray, quota: float):
    return lambda masks: (masks.astype(float) @ weights >= quota).astype(float)


def brute_force_shapley(value_fn, n: int) -> np.ndarray:
    """Average marginal contribution over all ``n!`` orders (independent of the estimator)."""
    phi = np.zeros(n)
    orders = list(permutations(range(n)))
    for order in orders:
        mask = np.zeros(n, dtype=bool)
        for player in order:
            before = value_fn(mask[None])[0]
            mask[player] = True
            phi[player] += value_fn(mask[None])[0] - before
    return phi / len(orders)


@pytest.fixture
def rng():
    return np.random.default_rng(123)


def test_exact_matches_closed_forms(rng):
    a = rng.normal(size=7)
    np.testing.assert_allclose(exact_shapley(additive_game(a), 7), a, atol=1e-12)
    value, expected = pairwise_game(rng.normal(size=6), rng.normal(size=(6, 6)))
    np.testing.assert_allclose(exact_shapley(value, 6), expected, atol=1e-12)


def test_exact_matches_brute_force_on_voting_game():
    game = voting_game(np.array([4.0, 3.0, 2.0, 1.0, 1.0]), quota=6)
    phi = exact_shapley(game, 5)
    np.testing.assert_allclose(phi, brute_force_shapley(game, 5), atol=1e-12)
    assert phi.sum() == pytest.approx(1.0)


def test_exact_refuses_many_players():
    with pytest.raises(ValueError, match="refusing n_players > 16"):
        shapley_values(lambda m: m.sum(1), 17, "exact")


def test_leave_one_out_closed_form(rng):
    value, _ = pairwise_game(rng.normal(size=5), rng.normal(size=(5, 5)))
    full = value(np.ones((1, 5), dtype=bool))[0]
    drop = value(~np.eye(5, dtype=bool))
    np.testing.assert_allclose(shapley_values(value, 5, "loo"), full - drop)


@pytest.mark.parametrize("paired", [False, True])
def test_kernel_shap_full_budget_is_exact(rng, paired):
    value, expected = pairwise_game(rng.normal(size=6), rng.normal(size=(6, 6)))
    phi = shapley_values(value, 6, "kernel_shap", budget=64, paired=paired)
    np.testing.assert_allclose(phi, expected, atol=1e-9)
    game = voting_game(np.array([4.0, 3.0, 2.0, 1.0, 1.0]), quota=6)
    np.testing.assert_allclose(
        shapley_values(game, 5, "kernel_shap", budget=32), exact_shapley(game, 5), atol=1e-9
    )


def cubic_game(a: np.ndarray):
    """Higher-order interactions, so a partial least-squares fit cannot be exact by luck."""
    return lambda masks: (masks.astype(float) @ a) ** 3


def test_pmc_shap_is_exact_when_the_pool_is_complete(rng):
    game = cubic_game(rng.normal(size=6))
    np.testing.assert_allclose(
        shapley_values(game, 6, "pmc_shap", budget=64), exact_shapley(game, 6), atol=1e-9
    )
    small = cubic_game(rng.normal(size=4))  # default budget min(2^4, 40) covers every coalition
    np.testing.assert_allclose(
        shapley_values(small, 4, "pmc_shap"), exact_shapley(small, 4), atol=1e-9
    )


def test_kernel_shap_enumerates_whole_size_groups_exactly():
    """12 non-trivial coalitions of 6 players are exactly sizes 1 and 5, with kernel weights;
    one short of all 64 coalitions the estimate is close to exact (sampling alone was not)."""
    from mechrag.attribution.sampling import kernel_coalitions, shapley_kernel

    masks, weights = kernel_coalitions(np.random.default_rng(0), 6, 12)
    assert sorted(masks.sum(1).tolist()) == [1] * 6 + [5] * 6
    np.testing.assert_allclose(weights, shapley_kernel(masks.sum(1), 6))
    game = cubic_game(np.random.default_rng(1).normal(size=6))
    near_full = shapley_values(game, 6, "kernel_shap", budget=63, seed=0)
    far = shapley_values(game, 6, "kernel_shap", budget=24, seed=0)
    exact = exact_shapley(game, 6)
    assert np.abs(near_full - exact).mean() < np.abs(far - exact).mean()
    assert np.abs(near_full - exact).mean() < 0.05 * np.abs(exact).mean()


@pytest.mark.parametrize("method", ["kernel_shap", "pmc_shap"])
def test_budget_of_two_gives_the_efficient_uniform_split(method):
    a = np.array([1.0, 2.0, 3.0])
    phi = shapley_values(additive_game(a), 3, method, budget=2)
    np.testing.assert_allclose(phi, np.full(3, 2.0), atol=1e-9)


@pytest.mark.parametrize("method,budget", [("exact", None), ("kernel_shap", 20), ("pmc_shap", 30)])
def test_efficiency(rng, method, budget):
    value, _ = pairwise_game(rng.normal(size=8), rng.normal(size=(8, 8)))
    total = value(np.ones((1, 8), dtype=bool))[0] - value(np.zeros((1, 8), dtype=bool))[0]
    phi = shapley_values(value, 8, method, budget=budget, seed=3)
    assert phi.sum() == pytest.approx(total, abs=1e-9)


@settings(max_examples=25, deadline=None)
@given(st.integers(2, 7), st.integers(0, 2**31 - 1))
def test_exact_efficiency_on_random_games(n, seed):
    table = np.random.default_rng(seed).normal(size=2**n)
    codes = 1 << np.arange(n)
    phi = exact_shapley(lambda masks: table[masks @ codes], n)
    assert phi.sum() == pytest.approx(table[-1] - table[0], abs=1e-9)


def _mean_error(method, value, exact, n, budget, **options):
    errors = [
        np.abs(shapley_values(value, n, method, budget=budget, seed=s, **options) - exact).mean()
        for s in range(4)
    ]
    return float(np.mean(errors))


@pytest.mark.parametrize(
    "method,options",
    [
        ("kernel_shap", {}),
        ("kernel_shap", {"paired": True}),
        ("pmc_shap", {}),
        ("tmc", {"tolerance": 0.0}),
    ],
)
def test_estimators_converge_to_exact(method, options):
    # Cubic, not pairwise: paired Kernel SHAP is exact on games of order <= 2 at any budget.
    value = cubic_game(np.random.default_rng(7).normal(size=10))
    exact = exact_shapley(value, 10)
    small = _mean_error(method, value, exact, 10, 24, **options)
    large = _mean_error(method, value, exact, 10, 800, **options)
    assert large < 0.6 * small


def test_beta_shapley_exact_and_sampled():
    rng = np.random.default_rng(11)
    value, expected = pairwise_game(rng.normal(size=6), rng.normal(size=(6, 6)))
    np.testing.assert_allclose(exact_beta_shapley(value, 6, 1.0, 1.0), expected, atol=1e-12)
    target = exact_beta_shapley(value, 6, 4.0, 1.0)
    assert not np.allclose(target, expected)
    sampled = shapley_values(
        value, 6, "beta", budget=64, alpha=4.0, beta=1.0, max_permutations=4000
    )
    np.testing.assert_allclose(sampled, target, atol=0.1 * np.abs(target).max())


def test_contextcite_recovers_additive_weights(rng):
    a = rng.normal(size=8)
    phi = shapley_values(additive_game(a), 8, "contextcite", budget=80, l1=0.0)
    np.testing.assert_allclose(phi, a, atol=1e-6)
    sparse = shapley_values(additive_game(a), 8, "contextcite", budget=80, l1=10.0)
    assert np.all(sparse == 0)


@pytest.mark.parametrize("method", tuple(ESTIMATORS))
@pytest.mark.parametrize("budget", [12, 40])
def test_budget_is_honoured(method, budget):
    n = 6 if method != "exact" else 5
    rng = np.random.default_rng(5)
    value, _ = pairwise_game(rng.normal(size=n), rng.normal(size=(n, n)))
    seen: list[bytes] = []

    def counting(masks):
        seen.extend(row.tobytes() for row in masks)
        return value(masks)

    allowed = budget if method not in ("exact", "loo") else None
    shapley_values(counting, n, method, budget=allowed, seed=1)
    assert len(seen) == len(set(seen)), "a coalition was evaluated twice"
    assert len(seen) <= ESTIMATORS[method](budget=allowed).required_calls(n)


@pytest.mark.parametrize("method", tuple(ESTIMATORS))
def test_per_token_games_give_a_matrix(method):
    a = np.random.default_rng(2).normal(size=(5, 3))
    budget = None if method in ("exact", "loo") else 20
    phi = shapley_values(lambda m: m.astype(float) @ a, 5, method, budget=budget, seed=0)
    assert phi.shape == (5, 3)
    if method in ("exact", "kernel_shap", "loo"):
        np.testing.assert_allclose(phi, a, atol=1e-9)


def test_bad_inputs():
    game = additive_game(np.ones(4))
    with pytest.raises(ValueError, match="unknown method"):
        shapley_values(game, 4, "banzhaf")
    with pytest.raises(ValueError, match="budget"):
        shapley_values(game, 4, "kernel_shap", budget=1)
    with pytest.raises(ValueError, match="needs 16 value calls"):
        shapley_values(game, 4, "exact", budget=8)
    with pytest.raises(ValueError, match="expected"):
        shapley_values(lambda m: np.zeros((len(m), 2, 2)), 4, "exact")
    with pytest.raises(ValueError, match="too small for one permutation"):
        shapley_values(additive_game(np.ones(8)), 8, "tmc", budget=4, tolerance=0.0)
