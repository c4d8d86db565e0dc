"""Coalitions for cooperative-game estimators: enumeration, Shapley-kernel sampling, budgets.

A *value function* maps a batch of boolean coalitions ``[m, n_players]`` to ``[m]`` values (or
``[m, T]`` for per-token games). :class:`Oracle` wraps one so that an estimator never evaluates a
coalition twice and never evaluates more distinct coalitions than its budget.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import combinations

import numpy as np
from jaxtyping import Bool, Float
from scipy.special import comb

Masks = Bool[np.ndarray, "n_masks n_players"]
ValueFn = Callable[[Masks], np.ndarray]
MAX_EXACT_PLAYERS = 16


class BudgetExhausted(RuntimeError):
    """Raised when an estimator asks for more distinct coalitions than its budget allows."""


def default_budget(n_players: int) -> int:
    """RAG-E's default number of value calls: ``min(2^n, 10 n)``."""
    return min(2**n_players, 10 * n_players)


def resolve_budget(budget: int | None, n_players: int) -> int:
    """``budget`` checked (an integer >= 2 value calls), or the default when ``None``."""
    if budget is None:
        return default_budget(n_players)
    if isinstance(budget, bool) or int(budget) != budget or budget < 2:
        raise ValueError(f"budget must be an integer >= 2 (value calls), got {budget!r}")
    return int(budget)


def all_masks(n_players: int) -> Masks:
    """Every coalition; row ``k`` is the binary expansion of ``k`` (bit ``i`` = player ``i``)."""
    if n_players > MAX_EXACT_PLAYERS:
        raise ValueError(
            f"exact enumeration needs 2^{n_players} value calls; refusing n_players > "
            f"{MAX_EXACT_PLAYERS}: use a sampling method (kernel_shap, pmc_shap, tmc, beta, "
            "contextcite) with a budget"
        )
    codes = np.arange(2**n_players)
    return ((codes[:, None] >> np.arange(n_players)) & 1).astype(bool)


def shapley_kernel(sizes: np.ndarray, n_players: int) -> np.ndarray:
    """Lundberg & Lee's kernel ``(n-1) / (C(n,s) s (n-s))`` for coalitions of size ``s``."""
    sizes = np.asarray(sizes, dtype=float)
    return (n_players - 1) / (comb(n_players, sizes) * sizes * (n_players - sizes))


class Oracle:
    """Memoised, budget-checked access to ``value_fn``; values are kept as ``[m, K]`` rows."""

    def __init__(self, value_fn: ValueFn, n_players: int, budget: int) -> None:
        if not callable(value_fn):
            raise TypeError("value_fn must be callable: masks bool[m, n] -> values [m] or [m, T]")
        if n_players < 1:
            raise ValueError(f"n_players must be at least 1, got {n_players}")
        if budget < 2:
            raise ValueError(
                f"budget must allow at least the empty and full coalitions, got {budget}"
            )
        self.value_fn, self.n_players, self.budget = value_fn, n_players, budget
        self.cache: dict[bytes, np.ndarray] = {}
        self.tail: tuple[int, ...] | None = None

    @property
    def calls(self) -> int:
        """Distinct coalitions evaluated so far."""
        return len(self.cache)

    @property
    def remaining(self) -> int:
        return self.budget - self.calls

    def __call__(self, masks: Masks) -> Float[np.ndarray, "n_masks k"]:
        masks = np.asarray(masks, dtype=bool).reshape(-1, self.n_players)
        if len(masks) == 0:
            return np.zeros((0, int(np.prod(self.tail or ()))))
        keys = [row.tobytes() for row in masks]
        missing = list(dict.fromkeys(k for k in keys if k not in self.cache))
        if len(missing) > self.remaining:
            raise BudgetExhausted(
                f"{len(missing)} new coalitions requested, {self.remaining} left of {self.budget}"
            )
        if missing:
            rows = np.stack([np.frombuffer(k, dtype=bool) for k in missing])
            values = np.asarray(self.value_fn(rows), dtype=np.float64)
            if values.ndim not in (1, 2) or values.shape[0] != len(rows):
                raise ValueError(
                    f"value_fn returned shape {values.shape} for {len(rows)} masks: "
                    "expected [m] or [m, T]"
                )
            if not np.all(np.isfinite(values)):
                raise ValueError("value_fn returned non-finite values")
            if self.tail is None:
                self.tail = values.shape[1:]
            for key, value in zip(missing, values.reshape(len(rows), -1)):
                self.cache[key] = value
        return np.stack([self.cache[k] for k in keys])

    def shape(self, flat: np.ndarray) -> np.ndarray:
        """``[n, K]`` estimates back to ``[n]`` (scalar game) or ``[n, T]`` (per-token game)."""
        return flat.reshape((flat.shape[0], *self.tail))


def kernel_coalitions(
    rng: np.random.Generator, n_players: int, n_distinct: int, paired: bool = False
) -> tuple[Masks, Float[np.ndarray, " n_masks"]]:
    """At most ``n_distinct`` non-trivial coalitions with Shapley-kernel regression weights.

    As in Lundberg & Lee's implementation, whole size groups ``{s, n - s}`` are enumerated with
    their exact kernel weights while they fit, heaviest (smallest ``s``) first; the remaining
    budget samples coalitions of the remaining sizes from the kernel, and their draw counts share
    the remaining sizes' kernel mass. A budget covering every coalition is thus exact, and no
    size group is over-weighted by sampling.
    """
    groups = [sorted({s, n_players - s}) for s in range(1, n_players // 2 + 1)]
    enumerated: list[np.ndarray] = []
    left = n_distinct
    while groups and sum(comb(n_players, s, exact=True) for s in groups[0]) <= left:
        for size in groups.pop(0):
            enumerated.extend(_coalitions_of_size(n_players, size))
            left -= comb(n_players, size, exact=True)
    masks = np.array(enumerated, dtype=bool).reshape(-1, n_players)
    weights = shapley_kernel(masks.sum(1), n_players)
    sizes = np.array([s for group in groups for s in group], dtype=int)
    if left <= 0 or len(sizes) == 0:
        return masks, weights
    sampled, counts = _sample_sizes(rng, n_players, sizes, left, paired)
    group_mass = (n_players - 1) / (sizes * (n_players - sizes))  # kernel mass of each size
    sampled_weights = group_mass.sum() * counts / counts.sum() if len(counts) else counts
    return np.concatenate([masks, sampled]), np.concatenate([weights, sampled_weights])


def _coalitions_of_size(n_players: int, size: int) -> list[np.ndarray]:
    rows = []
    for members in combinations(range(n_players), size):
        row = np.zeros(n_players, dtype=bool)
        row[list(members)] = True
        rows.append(row)
    return rows


def _sample_sizes(
    rng: np.random.Generator, n_players: int, sizes: np.ndarray, n_distinct: int, paired: bool
) -> tuple[Masks, np.ndarray]:
    """Draw coalitions (size ∝ kernel mass, then uniform members) until ``n_distinct`` are seen;
    return them with their draw counts. ``paired`` adds each draw's complement too."""
    probabilities = (n_players - 1) / (sizes * (n_players - sizes))
    probabilities = probabilities / probabilities.sum()
    counts: dict[bytes, int] = {}
    for _ in range(1000 * max(n_distinct, 1)):
        if len(counts) >= n_distinct:
            break
        mask = np.zeros(n_players, dtype=bool)
        mask[rng.choice(n_players, size=rng.choice(sizes, p=probabilities), replace=False)] = True
        draws = [mask, ~mask] if paired else [mask]
        if len(counts) + sum(d.tobytes() not in counts for d in draws) > n_distinct:
            break
        for d in draws:
            counts[d.tobytes()] = counts.get(d.tobytes(), 0) + 1
    if not counts:
        return np.zeros((0, n_players), dtype=bool), np.zeros(0)
    masks = np.stack([np.frombuffer(k, dtype=bool) for k in counts])
    return masks, np.array(list(counts.values()), dtype=float)
