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

from mechrag.errors import InputError

Masks = Bool[np.ndarray, "n_masks n_players"]
ValueFn = Callable[[Masks], np.ndarray]
Known = tuple[Masks, np.ndarray]  # coalitions already scored: masks [k, n], values [k] or [k, T]
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
        raise InputError(f"budget must be an integer >= 2 (value calls), got {budget!r}")
    return int(budget)


def all_masks(n_players: int) -> Masks:
    """Every coalition; row ``k`` is the binary expansion of ``k`` (bit ``i`` = player ``i``)."""
    if n_players > MAX_EXACT_PLAYERS:
        raise InputError(
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
    """Memoised, budget-checked access to ``value_fn``; values are kept as ``[m, K]`` rows.

    ``known``: coalitions already scored elsewhere (masks ``[k, n]`` and values ``[k]`` or
    ``[k, T]``, e.g. the full, empty and leave-one-out subsets of ARC-JSD): served from the cache
    for free; ``budget`` counts only coalitions evaluated here.
    """

    def __init__(
        self, value_fn: ValueFn, n_players: int, budget: int, known: Known | None = None
    ) -> None:
        if not callable(value_fn):
            raise TypeError("value_fn must be callable: masks bool[m, n] -> values [m] or [m, T]")
        if n_players < 1:
            raise InputError(f"n_players must be at least 1, got {n_players}")
        if budget < 2:
            raise InputError(
                f"budget must allow at least the empty and full coalitions, got {budget}"
            )
        self.value_fn, self.n_players, self.budget = value_fn, n_players, budget
        self.cache: dict[bytes, np.ndarray] = {}
        self.tail: tuple[int, ...] | None = None
        if known is not None:
            self._store(*known)
        self.known = frozenset(self.cache)

    @property
    def calls(self) -> int:
        """Distinct coalitions evaluated so far (known ones excluded)."""
        return len(self.cache) - len(self.known)

    def covers_all(self) -> bool:
        """Whether the budget reaches every coalition not already known (an exact fit)."""
        return self.budget >= 2**self.n_players - len(self.known)

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
            self._store(rows, self.value_fn(rows))
        return np.stack([self.cache[k] for k in keys])

    def _store(self, masks: Masks, values: np.ndarray) -> None:
        masks = np.asarray(masks, dtype=bool).reshape(-1, self.n_players)
        values = np.asarray(values, dtype=np.float64)
        if values.ndim not in (1, 2) or values.shape[0] != len(masks):
            raise ValueError(
                f"value_fn returned shape {values.shape} for {len(masks)} masks: "
                "expected [m] or [m, T]"
            )
        if not np.all(np.isfinite(values)):
            raise ValueError("value_fn returned non-finite values")
        if self.tail is None:
            self.tail = values.shape[1:]
        elif values.shape[1:] != self.tail:
            raise ValueError(f"values of shape {values.shape[1:]} after {self.tail}")
        for row, value in zip(masks, values.reshape(len(masks), -1)):
            self.cache[row.tobytes()] = value

    def shape(self, flat: np.ndarray) -> np.ndarray:
        """``[n, K]`` estimates back to ``[n]`` (scalar game) or ``[n, T]`` (per-token game)."""
        return flat.reshape((flat.shape[0], *self.tail))


def _size_groups(n_players: int) -> list[list[int]]:
    """Coalition sizes in complement groups ``{s, n - s}``, smallest (fewest coalitions) first."""
    return [sorted({s, n_players - s}) for s in range(1, n_players // 2 + 1)]


def _enumerate_groups(
    n_players: int, n_new: int, known: frozenset[bytes], share: float = 1.0
) -> tuple[list[np.ndarray], list[list[int]], int]:
    """Enumerate whole size groups, smallest first, while their not-yet-known members fit in
    ``share`` of the budget still left (a member whose complement is known completes a pair and
    counts half); return the enumerated coalitions, the groups left over and the budget left."""
    groups, enumerated, left = _size_groups(n_players), [], n_new
    while groups:
        population = sum(comb(n_players, s, exact=True) for s in groups[0])
        if population - 2 * len(known) > share * left:  # cheap bound before listing members
            break
        members = [row for s in groups[0] for row in _coalitions_of_size(n_players, s)]
        new = [row for row in members if row.tobytes() not in known]
        completing = sum((~row).tobytes() in known for row in new)
        if len(new) > left or len(new) - completing / 2 > share * left:
            break
        enumerated.extend(members)
        left -= len(new)
        groups.pop(0)
    return enumerated, groups, left


def kernel_coalitions(
    rng: np.random.Generator,
    n_players: int,
    n_distinct: int,
    paired: bool = False,
    known: frozenset[bytes] = frozenset(),
) -> tuple[Masks, Float[np.ndarray, " n_masks"]]:
    """Non-trivial coalitions, at most ``n_distinct`` of them not in ``known``, with
    Shapley-kernel regression weights.

    As in Lundberg & Lee's implementation, whole size groups ``{s, n - s}`` are enumerated with
    their exact kernel weights while they fit, heaviest (smallest ``s``) first; the remaining
    budget samples coalitions of the remaining sizes from the kernel, and their draw counts share
    the remaining sizes' kernel mass. A budget covering every coalition is thus exact, and no
    size group is over-weighted by sampling. ``known`` coalitions cost nothing.
    """
    enumerated, groups, left = _enumerate_groups(n_players, n_distinct, known)
    masks = np.array(enumerated, dtype=bool).reshape(-1, n_players)
    weights = shapley_kernel(masks.sum(1), n_players)
    sizes = np.array([s for group in groups for s in group], dtype=int)
    if left <= 0 or len(sizes) == 0:
        return masks, weights
    sampled, counts = _sample_sizes(rng, n_players, sizes, left, paired, known)
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


def _random_coalition(rng: np.random.Generator, n_players: int, size: int) -> np.ndarray:
    mask = np.zeros(n_players, dtype=bool)
    mask[rng.choice(n_players, size=size, replace=False)] = True
    return mask


def _sample_sizes(
    rng: np.random.Generator,
    n_players: int,
    sizes: np.ndarray,
    n_new: int,
    paired: bool,
    known: frozenset[bytes],
) -> tuple[Masks, np.ndarray]:
    """Draw coalitions (size ∝ kernel mass, then uniform members) until ``n_new`` not in
    ``known`` are seen; return them with their draw counts. ``paired`` adds each complement."""
    probabilities = (n_players - 1) / (sizes * (n_players - sizes))
    probabilities = probabilities / probabilities.sum()
    counts: dict[bytes, int] = {}
    new = 0
    for _ in range(1000 * max(n_new, 1)):
        if new >= n_new:
            break
        mask = _random_coalition(rng, n_players, rng.choice(sizes, p=probabilities))
        draws = [d.tobytes() for d in ([mask, ~mask] if paired else [mask])]
        fresh = {d for d in draws if d not in counts and d not in known}
        if new + len(fresh) > n_new:
            break
        new += len(fresh)
        for d in draws:
            counts[d] = counts.get(d, 0) + 1
    if not counts:
        return np.zeros((0, n_players), dtype=bool), np.zeros(0)
    masks = np.stack([np.frombuffer(k, dtype=bool) for k in counts])
    return masks, np.array(list(counts.values()), dtype=float)


def _systematic_round(targets: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Integers ``k`` with ``E[k] = targets``, each ``floor`` or ``ceil``, summing to
    ``round(sum(targets))`` (systematic sampling of the fractional parts)."""
    floors = np.floor(targets)
    cumulative = np.concatenate([[0.0], np.cumsum(targets - floors)]) + rng.random()
    return (floors + np.diff(np.floor(cumulative))).astype(int)


def leverage_coalitions(
    rng: np.random.Generator,
    n_players: int,
    n_new: int,
    paired: bool = True,
    known: frozenset[bytes] = frozenset(),
    balanced: bool = False,
) -> tuple[Masks, Float[np.ndarray, " n_masks"]]:
    """Leverage SHAP's design (Musco & Witter, 2025): non-trivial coalitions, at most ``n_new``
    not in ``known``, with importance-weighted Shapley-kernel regression weights.

    Whole size groups ``{s, n - s}`` are enumerated while they fit (exact kernel weights), as in
    :func:`kernel_coalitions`. The rest is drawn by leverage score: a coalition of size ``s`` has
    leverage ``1 / C(n, s)`` in the constrained kernel regression, so every remaining size gets
    the same expected number ``t_s`` of coalitions (randomised rounding, so the budget is met
    exactly), drawn uniformly *without replacement* within the size; ``paired`` draws a
    coalition with its complement (same size group, same leverage). Each coalition of size ``s``
    is then in the sample with probability ``pi_s = t_s / C(n, s)``, and its regression weight is
    the Horvitz-Thompson ``kernel(s) / pi_s``: the weighted normal equations are unbiased for
    the full ones, whatever the realised counts, and a complete sample is exact.

    ``balanced``: each size's coalitions are chosen by :func:`_balanced_draws` (players, pairs
    and triples spread evenly over the whole sample) instead of uniformly; inclusion
    probabilities, hence weights, are unchanged. A size group is then enumerated only while it
    takes at most half of the budget left, so that the budget also reaches the middle sizes; a
    coalition whose complement is known (a singleton once the leave-one-out subsets are) counts
    half, as it completes a pair. Near a full budget, a group whose share of the calls would
    exceed its coalitions is taken whole and the rest shared by the others (see ``_capped``).
    """
    share = 0.5 if balanced else 1.0
    enumerated, groups, left = _enumerate_groups(n_players, n_new, known, share)
    masks = np.array(enumerated, dtype=bool).reshape(-1, n_players)
    weights = shapley_kernel(masks.sum(1), n_players)
    sizes = [s for group in groups for s in group]
    if left < (2 if paired else 1) or not sizes:
        return masks, weights
    if paired:  # units are complement pairs: one per size for {s, n-s}, two of size n/2
        units = np.array([len(group) / 2 for group in groups]) / len(sizes) * (left // 2) * 2
        per_size = np.array([1.0 if len(group) == 2 else 2.0 for group in groups])
    else:
        groups = [[s] for s in sizes]
        units = np.full(len(sizes), left / len(sizes))
        per_size = np.ones(len(sizes))
    populations = np.array([comb(n_players, group[0], exact=True) for group in groups])
    units = _capped(units, populations / per_size)
    drawn, drawn_weights = [], []
    for group, target, count, multiplicity, population in zip(
        groups, units, _systematic_round(units, rng), per_size, populations
    ):
        inclusion = target * multiplicity / population  # same for n - s
        if balanced:
            chosen = _balanced_draws(rng, n_players, group[0], count, paired, drawn)
        else:
            chosen = _distinct_draws(rng, n_players, group[0], count, paired)
        for mask in chosen:
            for row in [mask, ~mask] if paired else [mask]:
                drawn.append(row)
                drawn_weights.append(shapley_kernel(row.sum(), n_players) / inclusion)
    if not drawn:
        return masks, weights
    return np.concatenate([masks, np.array(drawn)]), np.concatenate([weights, drawn_weights])


def _capped(targets: np.ndarray, caps: np.ndarray) -> np.ndarray:
    """``targets`` with none above its cap, the excess shared by the others in proportion to
    their targets (the total is kept while room is left). Near a full budget a size group's
    share can exceed its coalitions, where the balanced design leaves it to sampling: it is
    then taken whole (inclusion probability 1), never drawn twice."""
    targets = np.asarray(targets, dtype=float).copy()
    while np.any(over := targets > caps):
        excess = float((targets[over] - caps[over]).sum())
        targets[over] = caps[over]
        room = targets < caps
        if not room.any():
            break
        targets[room] += excess * targets[room] / targets[room].sum()
    return targets


def _distinct_draws(
    rng: np.random.Generator, n_players: int, size: int, count: int, paired: bool
) -> list[np.ndarray]:
    """``count`` distinct uniform coalitions of ``size`` (distinct complement pairs if
    ``paired``), by rejection; ``count`` stays below the population by construction."""
    seen: dict[bytes, np.ndarray] = {}
    while len(seen) < count:
        mask = _random_coalition(rng, n_players, size)
        key = min(mask.tobytes(), (~mask).tobytes()) if paired else mask.tobytes()
        seen.setdefault(key, mask)
    return list(seen.values())


BALANCE_POOL = 2000  # candidates per size for a balanced draw (all of them below this)


def _overlap_penalty(
    candidates: Bool[np.ndarray, "m n"], rows: Bool[np.ndarray, "k n"]
) -> Float[np.ndarray, " m"]:
    """How many single players, ordered pairs and ordered triples each candidate shares with
    ``rows``, weighted ``n^2 : n : 1`` so that spreading players comes first, then pairs, then
    triples: with ``o`` the overlap with a row, ``sum over rows of n^2 o + n o^2 + o^3``."""
    n = candidates.shape[1]
    overlap = candidates.astype(float) @ rows.astype(float).T
    return (n * n * overlap + n * overlap**2 + overlap**3).sum(1)


def _balanced_draws(
    rng: np.random.Generator,
    n_players: int,
    size: int,
    count: int,
    paired: bool,
    chosen: list[np.ndarray],
) -> list[np.ndarray]:
    """``count`` distinct coalitions of ``size`` (distinct complement pairs if ``paired``),
    each in turn the candidate that shares the fewest players, pairs and triples with the rows
    ``chosen`` so far and those it adds (see :func:`_overlap_penalty`); ties go uniformly at
    random.

    A greedy approximation of a balanced block design: the sample's co-occurrence counts, and so
    its regression Gram matrix, are close to the population's, so less of the game's
    interactions leaks into the fitted Shapley values than with uniform draws. The rule does not
    depend on player labels and breaks ties uniformly, so every coalition of ``size`` has the
    same inclusion probability as under uniform draws (the Horvitz-Thompson weights still hold).
    Candidates are every coalition of ``size`` (complement pair if ``paired``) up to
    ``BALANCE_POOL`` of them, else a uniform sample of ``BALANCE_POOL`` (or twice ``count``).
    """
    halves = paired and 2 * size == n_players  # a coalition and its complement: one unit
    units = comb(n_players, size, exact=True) // (2 if halves else 1)
    if units <= BALANCE_POOL:
        pool = np.array(_coalitions_of_size(n_players, size))
        if halves:  # one representative per complement pair
            pool = pool[pool[:, 0]]
    else:
        draws = min(units, max(BALANCE_POOL, 2 * count))
        pool = np.array(_distinct_draws(rng, n_players, size, draws, paired))
    sides = [pool, ~pool] if paired else [pool]

    def penalty_against(rows: list[np.ndarray]) -> np.ndarray:
        return sum(_overlap_penalty(side, np.array(rows)) for side in sides)

    penalty = penalty_against(chosen) if chosen else np.zeros(len(pool))
    picked = []
    for _ in range(count):
        best = rng.choice(np.flatnonzero(penalty == penalty.min()))
        picked.append(pool[best])
        penalty += penalty_against([pool[best], ~pool[best]] if paired else [pool[best]])
        penalty[best] = np.inf
    return picked
