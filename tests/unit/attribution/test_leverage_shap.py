"""Leverage SHAP's design and the ``known`` (free) coalitions, on analytic games."""

from __future__ import annotations

from itertools import combinations

import numpy as np
import pytest
from scipy.special import comb
from scipy.stats import chisquare

from mechrag.attribution import sampling
from mechrag.attribution.estimators import SAMPLED, shapley_values
from mechrag.attribution.sampling import all_masks, leverage_coalitions, shapley_kernel
from mechrag.attribution.shapley import exact_shapley

REGRESSIONS = [
    ("leverage_shap", {}),
    ("leverage_shap", {"paired": False}),
    ("leverage_shap", {"balanced": False}),
    ("pmc_shap", {"sampling": "balanced"}),
    ("kernel_shap", {"paired": True}),
    ("pmc_shap", {}),
    ("mc_shap", {}),
    ("kernel_shap", {"paired": True, "interactions": 3}),
    ("leverage_shap", {"interactions": 3}),
]


def cubic_game(a: np.ndarray):
    return lambda masks: (masks.astype(float) @ a) ** 3


def loo_known(value, n: int):
    """Full, empty and leave-one-out coalitions with their values (ARC-JSD's and the empty one)."""
    masks = np.vstack([np.ones((1, n), bool), np.zeros((1, n), bool), ~np.eye(n, dtype=bool)])
    return masks, value(masks)


@pytest.mark.parametrize("paired", [True, False])
@pytest.mark.parametrize("with_known", [False, True])
def test_full_budget_is_exact(paired, with_known):
    """A covering budget fits the complete pool, whatever the design (near-full budgets of the
    designs themselves: ``test_near_full_budgets_never_draw_a_coalition_twice``)."""
    game = cubic_game(np.random.default_rng(0).normal(size=6))
    known = loo_known(game, 6) if with_known else None
    budget = 64 - 8 if with_known else 64
    phi = shapley_values(game, 6, "leverage_shap", budget, paired=paired, known=known)
    np.testing.assert_allclose(phi, exact_shapley(game, 6), atol=1e-9)


@pytest.mark.parametrize("method,options", REGRESSIONS)
def test_additive_game_recovered_and_efficiency_exact(method, options):
    a = np.random.default_rng(1).normal(size=9)
    phi = shapley_values(lambda m: m.astype(float) @ a + 0.3, 9, method, 40, seed=2, **options)
    np.testing.assert_allclose(phi, a, atol=1e-9)
    game = cubic_game(a)
    total = game(np.ones((1, 9), bool))[0] - game(np.zeros((1, 9), bool))[0]
    phi = shapley_values(game, 9, method, budget=30, seed=4, **options)
    assert phi.sum() == pytest.approx(total, rel=1e-9)


@pytest.mark.parametrize("balanced", [False, True])
@pytest.mark.parametrize("paired", [True, False])
def test_weighted_normal_equations_are_unbiased(paired, balanced):
    """E[sum over the sample of w/pi z z^T] = sum over all coalitions of w z z^T (Horvitz-
    Thompson), for a budget that enumerates sizes {1, 7} and samples the rest (balanced: all
    sizes are sampled, as {1, 7} would take more than half the budget)."""
    n, draws = 8, 800
    masks = all_masks(n)[1:-1]
    full = (masks.T * shapley_kernel(masks.sum(1), n)) @ masks
    mean = np.zeros((n, n))
    rng = np.random.default_rng(0)
    for _ in range(draws):
        sample, weights = leverage_coalitions(rng, n, 30, paired=paired, balanced=balanced)
        z = sample.astype(float)
        mean += (z.T * weights) @ z / draws
    np.testing.assert_allclose(mean, full, rtol=0.04)


@pytest.mark.parametrize("balanced", [False, True])
@pytest.mark.parametrize("paired", [True, False])
def test_sizes_follow_leverage_scores(paired, balanced):
    """With no size group affordable, sampled sizes are uniform over 1..n-1 (leverage score
    1 / C(n, s) per coalition); chi-square over many seeded draws."""
    n, n_new = 10, 16
    counts = np.zeros(n + 1)
    rng = np.random.default_rng(42)
    for _ in range(400):
        sample, _ = leverage_coalitions(rng, n, n_new, paired=paired, balanced=balanced)
        assert len(sample) == n_new and len({row.tobytes() for row in sample}) == n_new
        counts += np.bincount(sample.sum(1), minlength=n + 1)
    observed = counts[1:n]
    assert chisquare(observed).pvalue > 0.01
    kernel_mass = 1 / (np.arange(1, n) * (n - np.arange(1, n)))
    expected = kernel_mass / kernel_mass.sum() * observed.sum()
    assert chisquare(observed, expected).pvalue < 1e-6  # the test can tell kernel sampling


@pytest.mark.parametrize("balanced", [False, True])
def test_inclusion_probability_within_a_size_is_uniform(balanced):
    """Each coalition of a sampled size is drawn equally often (uniform without replacement;
    balanced: by the rule's symmetry under relabelling players, with random ties)."""
    n, rng = 6, np.random.default_rng(3)
    seen: dict[bytes, int] = {}
    for _ in range(2000):
        sample, _ = leverage_coalitions(rng, n, 8, paired=False, balanced=balanced)
        for row in sample[sample.sum(1) == 2]:
            seen[row.tobytes()] = seen.get(row.tobytes(), 0) + 1
    assert len(seen) == comb(n, 2, exact=True)
    assert chisquare(list(seen.values())).pvalue > 0.01


@pytest.mark.parametrize("method", sorted(SAMPLED))
@pytest.mark.parametrize("budget", [6, 23])
def test_budget_counts_only_new_coalitions_and_known_are_never_rescored(method, budget):
    n = 7
    game = cubic_game(np.random.default_rng(5).normal(size=n))
    known = loo_known(game, n)
    known_keys = {row.tobytes() for row in known[0]}
    seen: list[bytes] = []

    def counting(masks):
        seen.extend(row.tobytes() for row in masks)
        return game(masks)

    shapley_values(counting, n, method, budget=budget, seed=1, known=known)
    assert len(seen) == len(set(seen)), "a coalition was evaluated twice"
    assert not known_keys & set(seen), "a known coalition was scored again"
    assert len(seen) <= budget


@pytest.mark.parametrize("balanced", [False, True])
def test_known_leave_one_out_rows_make_the_first_size_group_cheaper(balanced):
    """With the n leave-one-out coalitions known, sizes {1, n-1} cost n calls, not 2n."""
    n = 8
    game = cubic_game(np.random.default_rng(6).normal(size=n))
    seen: list[np.ndarray] = []

    def recording(masks):
        seen.extend(masks)
        return game(masks)

    shapley_values(recording, n, "leverage_shap", n, balanced=balanced, known=loo_known(game, n))
    assert sorted(int(m.sum()) for m in seen) == [1] * n


def test_balanced_design_keeps_middle_sizes_where_enumeration_would_use_them_up():
    """8 players, leave-one-out known, 64 calls: enumerating whole groups spends all of them on
    sizes 1 and {2, 6} (8 + 56); the balanced design enumerates a group only within half the
    budget left (a coalition completing a known pair counts half), so sizes 3-5 are sampled."""
    n = 8
    known = frozenset(row.tobytes() for row in loo_known(cubic_game(np.ones(n)), n)[0])
    sizes = {}
    for balanced in (False, True):
        rng = np.random.default_rng(0)
        sample, _ = leverage_coalitions(rng, n, 64, True, known, balanced=balanced)
        new = [row for row in sample if row.tobytes() not in known]
        assert len(new) == 64
        sizes[balanced] = set(sample.sum(1).tolist())
    assert sizes[False] == {1, 2, 6, 7}
    assert {1, 2, 3, 4, 5, 6, 7} == sizes[True]


@pytest.mark.parametrize("balanced", [True, False])
@pytest.mark.parametrize("n,paired", [(4, False), (6, True), (6, False), (8, True)])
def test_near_full_budgets_never_draw_a_coalition_twice(n, paired, balanced):
    """Close to 2^n calls a size group's share can exceed its coalitions (the balanced design
    leaves such groups to sampling): it is then taken whole, with inclusion probability 1, and
    the rest goes to the other groups: no repeats, no weight below the kernel, budget spent."""
    for n_new in range(2**n - 2 - 12, 2**n - 2):
        rng = np.random.default_rng(n_new)
        sample, weights = leverage_coalitions(rng, n, n_new, paired, balanced=balanced)
        assert len({row.tobytes() for row in sample}) == len(sample) >= n_new - 1
        assert np.all(weights >= shapley_kernel(sample.sum(1), n) * (1 - 1e-12))


@pytest.mark.parametrize("pool", [50, 600])
@pytest.mark.parametrize("paired", [True, False])
def test_balanced_design_on_sizes_too_large_to_enumerate(paired, pool, monkeypatch):
    """Past ``BALANCE_POOL`` candidates the candidates are a uniform sample. 600 lies between
    the 462 complement pairs of size 6 (n = 12) and its 924 coalitions: paired, that group is
    enumerated by pairs (asking for 600 distinct pairs would never end)."""
    monkeypatch.setattr(sampling, "BALANCE_POOL", pool)
    n, n_new = 12, 200
    sample, weights = leverage_coalitions(
        np.random.default_rng(0), n, n_new, paired, balanced=True
    )
    assert len({row.tobytes() for row in sample}) == len(sample) == n_new
    assert (sample.sum(1) == n // 2).any() and np.all(weights > 0)


@pytest.mark.parametrize("paired", [True, False])
def test_balanced_design_spreads_pairs_evenly(paired):
    """The balanced design's point: over the sampled coalitions, the number of times each pair
    of players occurs together varies far less than under uniform draws (same sizes)."""
    n = 8
    known = frozenset(row.tobytes() for row in loo_known(cubic_game(np.ones(n)), n)[0])

    def pair_count_variance(balanced: bool, seed: int) -> float:
        rng = np.random.default_rng(seed)
        sample, _ = leverage_coalitions(rng, n, 24, paired, known, balanced=balanced)
        sampled = sample[(sample.sum(1) > 1) & (sample.sum(1) < n - 1)].astype(float)
        return float((sampled.T @ sampled)[np.triu_indices(n, 1)].var())

    uniform = np.mean([pair_count_variance(False, seed) for seed in range(20)])
    balanced = np.mean([pair_count_variance(True, seed) for seed in range(20)])
    assert balanced < 0.5 * uniform


def test_unbiased_over_seeds_on_a_pairwise_game_without_pairing():
    """Unpaired Leverage SHAP is not exact on a pairwise game, but its seed average is close."""
    rng = np.random.default_rng(8)
    a, b = rng.normal(size=8), np.triu(rng.normal(size=(8, 8)), 1)

    def game(masks):
        z = masks.astype(float)
        return z @ a + np.einsum("mi,ij,mj->m", z, b, z)

    exact = exact_shapley(game, 8)
    estimates = [
        shapley_values(game, 8, "leverage_shap", budget=40, seed=s, paired=False)
        for s in range(300)
    ]
    single_error = np.abs(estimates[0] - exact).max()
    assert np.abs(np.mean(estimates, axis=0) - exact).max() < 0.25 * single_error


def third_order_game(n: int, seed: int):
    """A random game with terms of order 1, 2 and 3 only."""
    rng = np.random.default_rng(seed)
    terms = [(t, rng.normal()) for size in (1, 2, 3) for t in combinations(range(n), size)]

    def game(masks):
        return sum(weight * masks[:, list(t)].all(1) for t, weight in terms)

    return game


@pytest.mark.parametrize("method", ["kernel_shap", "leverage_shap"])
@pytest.mark.parametrize("with_known", [False, True])
def test_interactions_full_budget_is_exact(method, with_known):
    game = cubic_game(np.random.default_rng(5).normal(size=6))
    known = loo_known(game, 6) if with_known else None
    budget = 64 - 8 if with_known else 64
    phi = shapley_values(
        game, 6, method, budget=budget, paired=True, interactions=3, known=known
    )
    np.testing.assert_allclose(phi, exact_shapley(game, 6), atol=1e-9)


@pytest.mark.parametrize("method", ["kernel_shap", "leverage_shap"])
def test_third_order_model_recovers_a_third_order_game(method):
    """Unpenalised order-3 terms fit a game of order 3 exactly from a partial sample (41
    parameters, 54 coalitions); the additive fit on the same sample does not."""
    game = third_order_game(6, 0)
    exact = exact_shapley(game, 6)
    third = shapley_values(game, 6, method, 54, seed=1, paired=True, interactions=3, ridge=0.0)
    np.testing.assert_allclose(third, exact, atol=1e-8)
    additive = shapley_values(game, 6, method, 54, seed=1, paired=True)
    assert np.abs(additive - exact).max() > 1e-3


def test_pairwise_terms_change_nothing_under_paired_sampling():
    """Paired Kernel SHAP is already exact on order-2 games, so order-2 terms are inert."""
    game = cubic_game(np.random.default_rng(6).normal(size=8))
    for seed in range(3):
        additive = shapley_values(game, 8, "kernel_shap", 30, seed=seed, paired=True)
        pairwise = shapley_values(
            game, 8, "kernel_shap", 30, seed=seed, paired=True, interactions=2, ridge=0.0
        )
        np.testing.assert_allclose(pairwise, additive, atol=1e-8)


def test_interactions_reject_bad_settings():
    game = cubic_game(np.ones(4))
    with pytest.raises(ValueError, match="interactions"):
        shapley_values(game, 4, "kernel_shap", 10, interactions=0)
    scored = []
    with pytest.raises(ValueError, match="interaction terms"):
        shapley_values(lambda m: scored.append(m) or m.sum(1), 40, "leverage_shap", 100,
                       interactions=3)
    assert scored == []  # refused before any coalition was scored
