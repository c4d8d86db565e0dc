"""Shapley-family algorithms over any value function on coalitions of players.

``value_fn(masks: bool[m, n]) -> float[m]`` (or ``float[m, T]`` for per-token games, estimated
column by column). Every algorithm is seeded, evaluates each coalition at most once and never
more distinct coalitions than its ``budget`` (default ``min(2^n, 10 n)``); ``known=(masks,
values)`` hands it coalitions already scored (e.g. ARC-JSD's full, empty and leave-one-out
subsets), which are free and do not count against the budget. The configured estimators that
call them, with their parameters and defaults, are in :mod:`mechrag.attribution.estimators`:

- exact Shapley, ``phi_i = sum_S |S|!(n-|S|-1)!/n! (v(S+i) - v(S))``, and leave-one-out;
- :func:`regression_shapley`: Lundberg & Lee's weighted least squares with the Shapley kernel
  and the efficiency constraint ``sum phi = v(N) - v(empty)``, on a Kernel SHAP or a Leverage
  SHAP sample (Musco & Witter, 2025), with optional ridge-penalised interaction terms;
- :func:`refitted_shapley`: RAG-E's stabilisation (pmcSHAP, mcSHAP), one pool evaluated once and
  ``refits`` constrained fits on random fractions of it, averaged;
- :func:`permutation_shapley`: weighted permutation sampling (TMC, Ghorbani & Zou, 2019; Beta
  Shapley, Kwon & Zou, 2022).
"""

from __future__ import annotations

from itertools import combinations

import numpy as np
from jaxtyping import Bool, Float
from scipy.special import betaln, comb

from mechrag._lazy import moved
from mechrag.attribution.sampling import (
    BudgetExhausted,
    Known,
    Masks,
    Oracle,
    ValueFn,
    all_masks,
    kernel_coalitions,
    leverage_coalitions,
    resolve_budget,
    shapley_kernel,
)
from mechrag.errors import InputError

Estimate = Float[np.ndarray, " n_players"]  # or [n_players, T] for per-token games


def _endpoints(oracle: Oracle) -> tuple[np.ndarray, np.ndarray]:
    """``v(empty)`` and ``v(N)``, each ``[K]``."""
    n = oracle.n_players
    empty, full = oracle(np.stack([np.zeros(n, dtype=bool), np.ones(n, dtype=bool)]))
    return empty, full


def _exact_semivalue(
    value_fn: ValueFn, n_players: int, size_weights: np.ndarray, known: Known | None = None
) -> Estimate:
    """``phi_i = sum_{S not containing i} size_weights[|S|] (v(S + i) - v(S))`` by enumeration."""
    masks = all_masks(n_players)
    oracle = Oracle(value_fn, n_players, len(masks), known)
    values = oracle(masks)
    codes = np.arange(len(masks))
    sizes = masks.sum(1)
    phi = np.empty((n_players, values.shape[1]))
    for player in range(n_players):
        without = codes[(codes >> player) & 1 == 0]
        gains = values[without | (1 << player)] - values[without]
        phi[player] = size_weights[sizes[without]] @ gains
    return oracle.shape(phi)


def exact_shapley(value_fn: ValueFn, n_players: int, known: Known | None = None) -> Estimate:
    """Exact Shapley values from all ``2^n`` coalitions (refuses ``n > 16``)."""
    weights = 1.0 / (n_players * comb(n_players - 1, np.arange(n_players)))
    return _exact_semivalue(value_fn, n_players, weights, known)


def _beta_coalition_weights(n_players: int, alpha: float, beta: float) -> np.ndarray:
    """Beta-Shapley weight of one coalition of size ``s`` (not containing the player)."""
    if alpha <= 0 or beta <= 0:
        raise InputError(f"Beta-Shapley needs alpha, beta > 0, got ({alpha}, {beta})")
    s = np.arange(n_players)
    return np.exp(betaln(s + beta, n_players - 1 - s + alpha) - betaln(alpha, beta))


def exact_beta_shapley(
    value_fn: ValueFn, n_players: int, alpha: float = 16.0, beta: float = 1.0
) -> Estimate:
    """Exact Beta(alpha, beta)-Shapley by enumeration; ``alpha = beta = 1`` is Shapley."""
    return _exact_semivalue(value_fn, n_players, _beta_coalition_weights(n_players, alpha, beta))


def leave_one_out(value_fn: ValueFn, n_players: int, known: Known | None = None) -> Estimate:
    """``v(N) - v(N without i)`` from ``n + 1`` coalitions."""
    oracle = Oracle(value_fn, n_players, n_players + 1, known)
    full = oracle(np.ones((1, n_players), dtype=bool))[0]
    return oracle.shape(full - oracle(~np.eye(n_players, dtype=bool)))


MAX_INTERACTION_TERMS = 5000


def _interaction_sets(n_players: int, order: int) -> list[tuple[int, ...]]:
    """Every set of 2 to ``order`` players, the interaction terms of an order-``order`` model."""
    sets = [c for size in range(2, order + 1) for c in combinations(range(n_players), size)]
    if len(sets) > MAX_INTERACTION_TERMS:
        raise InputError(
            f"interactions={order} on {n_players} players needs {len(sets)} interaction terms "
            f"(more than {MAX_INTERACTION_TERMS}): use interactions=1"
        )
    return sets


def _constrained_wls(
    masks: Masks,
    weights: np.ndarray,
    targets: np.ndarray,
    total: np.ndarray,
    interactions: int = 1,
    ridge: float = 0.0,
) -> np.ndarray:
    """Shapley values of the weighted least-squares model of ``v(S) - v(empty)``, with the
    model's value at the full coalition held at ``total = v(N) - v(empty)`` (KKT system).

    ``interactions = 1``: Kernel SHAP's additive model ``z . phi``. ``interactions = k > 1``
    adds a term ``c_T prod_{i in T} z_i`` for every set ``T`` of 2 to ``k`` players, penalised by
    ``ridge * |c|^2``; the model's Shapley values ``phi_i + sum_{T containing i} c_T / |T|`` are
    returned, efficient by the constraint. On the complete pool with kernel weights every order
    gives the exact Shapley values; an additive game is fitted with ``c = 0`` at no penalty, so
    it stays exact. ``lstsq`` gives the minimum-norm solution when the sample under-determines
    the model.
    """
    n = masks.shape[1]
    sets = _interaction_sets(n, interactions) if interactions > 1 else []
    z = masks.astype(float)
    if sets:
        z = np.hstack([z, np.stack([z[:, list(t)].prod(1) for t in sets], 1)])
    width = z.shape[1]
    w = weights / weights.sum() if len(weights) else weights
    system = np.zeros((width + 1, width + 1))
    system[:width, :width] = z.T @ (w[:, None] * z)
    system[np.arange(n, width), np.arange(n, width)] += ridge
    system[:width, width] = system[width, :width] = 1.0
    rhs = np.vstack([z.T @ (w[:, None] * targets), total[None]])
    solution = np.linalg.lstsq(system, rhs, rcond=None)[0]
    phi = solution[:n].copy()
    for term, players in zip(solution[n:width], sets):
        phi[list(players)] += term / len(players)
    return phi


def _check_interactions(interactions: int, ridge: float, n_players: int) -> None:
    """Reject bad settings before any coalition is scored (scoring is the expensive part)."""
    if int(interactions) != interactions or interactions < 1 or ridge < 0:
        raise InputError(
            f"need an integer interactions >= 1 and ridge >= 0, got {interactions}, {ridge}"
        )
    _interaction_sets(n_players, int(interactions))


POOL_DESIGNS = ("kernel", "leverage", "balanced")


def _kernel_pool(
    oracle: Oracle, rng: np.random.Generator, paired: bool, design: str = "kernel"
) -> tuple[Masks, np.ndarray, np.ndarray, np.ndarray]:
    """Non-trivial coalitions with weights, their ``v(S) - v(empty)`` and ``v(N) - v(empty)``.

    With a budget covering all ``2^n`` coalitions the pool is complete with exact kernel weights
    (so the fit is exact); otherwise ``design`` picks the sample: ``kernel`` (see
    ``kernel_coalitions``), ``leverage`` or ``balanced`` (see ``leverage_coalitions``). Known
    coalitions are free and, where a design enumerates their size group, used.
    """
    n = oracle.n_players
    empty, full = _endpoints(oracle)
    if oracle.covers_all():
        masks = all_masks(n)[1:-1]
        weights = shapley_kernel(masks.sum(1), n)
    elif design == "kernel":
        masks, weights = kernel_coalitions(rng, n, oracle.remaining, paired, oracle.known)
    else:
        masks, weights = leverage_coalitions(
            rng, n, oracle.remaining, paired, oracle.known, balanced=design == "balanced"
        )
    return masks, weights, oracle(masks) - empty, full - empty


def regression_shapley(
    value_fn: ValueFn,
    n_players: int,
    *,
    budget: int | None,
    seed: int,
    paired: bool,
    design: str,
    interactions: int,
    ridge: float,
    known: Known | None,
) -> Estimate:
    """One pool drawn by ``design``, scored once, one constrained fit (Kernel/Leverage SHAP).

    ``interactions > 1`` fits interaction terms up to that order as well (ridge-penalised, see
    ``_constrained_wls``).
    """
    _check_interactions(interactions, ridge, n_players)
    oracle = Oracle(value_fn, n_players, resolve_budget(budget, n_players), known)
    rng = np.random.default_rng(seed)
    masks, weights, targets, total = _kernel_pool(oracle, rng, paired, design)
    return oracle.shape(_constrained_wls(masks, weights, targets, total, interactions, ridge))


def _complete_sizes(masks: Masks) -> Bool[np.ndarray, " n_masks"]:
    """Rows whose whole size group is in ``masks`` (enumerated, not sampled)."""
    n, sizes = masks.shape[1], masks.sum(1)
    counts = np.bincount(sizes, minlength=n + 1)
    return counts[sizes] == comb(n, sizes)


def _refit_average(
    masks: Masks,
    weights: np.ndarray,
    targets: np.ndarray,
    total: np.ndarray,
    groups: np.ndarray,
    refits: int,
    fraction: float,
    rng: np.random.Generator,
) -> np.ndarray:
    """Mean of ``refits`` constrained fits, each on the enumerated size groups plus a random
    ``fraction`` of the sampled row ``groups`` (complement pairs for pmcSHAP, single
    coalitions for mcSHAP); no new value calls.

    Enumerated groups carry no sampling noise and stay in every refit: dropping some of them
    (as a refit over the whole pool would) leaves under-determined fits at small budgets.
    """
    fixed = _complete_sizes(masks)
    labels = np.unique(groups[~fixed])
    if len(labels) == 0:
        return _constrained_wls(masks, weights, targets, total)
    keep = min(len(labels), max(1, round(fraction * len(labels))))
    fits = []
    for _ in range(refits):
        rows = fixed | np.isin(groups, rng.choice(labels, size=keep, replace=False))
        fits.append(_constrained_wls(masks[rows], weights[rows], targets[rows], total))
    return np.mean(fits, axis=0)


def _check_refits(refits: int, fraction: float) -> None:
    if refits < 1 or not 0 < fraction <= 1:
        raise InputError(f"need refits >= 1 and 0 < fraction <= 1, got {refits}, {fraction}")


def refitted_shapley(
    value_fn: ValueFn,
    n_players: int,
    *,
    budget: int | None,
    seed: int,
    refits: int,
    fraction: float,
    paired: bool,
    design: str,
    known: Known | None,
) -> Estimate:
    """One pool scored once, ``refits`` fits on random ``fraction``s of its sampled groups
    (complement pairs when ``paired``, single coalitions otherwise), averaged (pmcSHAP and
    mcSHAP)."""
    if design not in POOL_DESIGNS:
        raise InputError(f"unknown sampling {design!r}: choose from {POOL_DESIGNS}")
    _check_refits(refits, fraction)
    oracle = Oracle(value_fn, n_players, resolve_budget(budget, n_players), known)
    rng = np.random.default_rng(seed)
    masks, weights, targets, total = _kernel_pool(oracle, rng, paired=paired, design=design)
    if oracle.covers_all():  # a complete pool: one fit is exact, refits only add noise
        return oracle.shape(_constrained_wls(masks, weights, targets, total))
    if paired:
        groups = np.array([min(m.tobytes(), (~m).tobytes()) for m in masks])
    else:
        groups = np.arange(len(masks))
    estimate = _refit_average(masks, weights, targets, total, groups, refits, fraction, rng)
    return oracle.shape(estimate)


def permutation_shapley(
    value_fn: ValueFn,
    n_players: int,
    *,
    budget: int | None,
    seed: int,
    position_weights: np.ndarray,
    tolerance: float,
    max_permutations: int,
    known: Known | None,
) -> Estimate:
    """Average weighted marginal contributions along random permutations until the budget ends
    (TMC and Beta Shapley); ``position_weights[s]`` weighs the marginal at prefix size ``s``.

    A permutation whose remaining prefixes would exceed the budget is dropped. Truncation: once
    ``|v(N) - v(prefix)| <= tolerance |v(N) - v(empty)|`` the remaining marginals count as zero.
    """
    oracle = Oracle(value_fn, n_players, resolve_budget(budget, n_players), known)
    rng = np.random.default_rng(seed)
    n = n_players
    empty, full = _endpoints(oracle)
    scale = np.abs(full - empty)
    total, done = np.zeros((n, len(full))), 0
    while done < max_permutations:
        mask, marginals, previous = np.zeros(n, dtype=bool), np.zeros_like(total), empty
        try:
            for position, player in enumerate(rng.permutation(n)):
                if tolerance > 0 and np.all(np.abs(full - previous) <= tolerance * scale):
                    break
                mask[player] = True
                current = full if position == n - 1 else oracle(mask[None])[0]
                marginals[player] = position_weights[position] * (current - previous)
                previous = current
        except BudgetExhausted:
            break
        total += marginals
        done += 1
    if done == 0:
        raise InputError(
            f"budget {oracle.budget} is too small for one permutation of {n} players "
            f"(needs up to {n + 1} value calls)"
        )
    return oracle.shape(total / done)


def beta_position_weights(n_players: int, alpha: float, beta: float) -> np.ndarray:
    """Permutation weights of Beta(alpha, beta)-Shapley: a uniform permutation puts a player
    after ``s`` others with probability ``1/n``, so the marginal at prefix size ``s`` is
    reweighted by ``n C(n-1, s) w_beta(s)``."""
    sizes = np.arange(n_players)
    return n_players * comb(n_players - 1, sizes) * _beta_coalition_weights(n_players, alpha, beta)


# Moved to the configured estimators (0.3); the old import path works for one release.
__getattr__ = moved(__name__, {"shapley_values": "mechrag.attribution.estimators"})
