"""Agreement of estimated attributions with a reference (exact Shapley, removal top-k).

Correlations skip pairs with a NaN on either side and call an undefined correlation (constant
input) 0.0; ``spearman_test`` keeps NaN there and adds the p-value.
"""

from __future__ import annotations

from itertools import combinations

import numpy as np
from jaxtyping import Float
from scipy import stats

from mechrag.errors import InputError

Scores = Float[np.ndarray, " n_players"]


def _pair(estimate, reference) -> tuple[np.ndarray, np.ndarray]:
    estimate, reference = np.asarray(estimate, float), np.asarray(reference, float)
    if estimate.shape != reference.shape or estimate.ndim != 1 or len(estimate) < 2:
        raise InputError(
            "need two equal-length score vectors of >= 2 values, "
            f"got {estimate.shape} and {reference.shape}"
        )
    return estimate, reference


def _correlation(test, estimate, reference) -> tuple[float, float]:
    """``test``'s (statistic, p-value) over the pairs where neither value is NaN.

    ``(nan, nan)`` when fewer than two such pairs remain or either side is constant (no
    ranking to agree on), where scipy would warn.
    """
    estimate, reference = _pair(estimate, reference)
    complete = ~(np.isnan(estimate) | np.isnan(reference))
    estimate, reference = estimate[complete], reference[complete]
    if len(estimate) < 2 or np.ptp(estimate) == 0 or np.ptp(reference) == 0:
        return np.nan, np.nan
    statistic, p_value = test(estimate, reference)
    return float(statistic), float(p_value)


def _or_zero(statistic: float) -> float:
    """An undefined correlation counts as no agreement."""
    return 0.0 if np.isnan(statistic) else statistic


def pearson(estimate: Scores, reference: Scores) -> float:
    """Pearson r over NaN-free pairs; 0.0 when undefined (constant input)."""
    return _or_zero(_correlation(stats.pearsonr, estimate, reference)[0])


def spearman(estimate: Scores, reference: Scores) -> float:
    """Spearman rho (ties get average ranks) over NaN-free pairs; 0.0 when undefined."""
    return _or_zero(spearman_test(estimate, reference)[0])


def spearman_test(a: Scores, b: Scores) -> tuple[float, float]:
    """Spearman rho and its two-sided p-value (scipy's t approximation) over NaN-free pairs.

    ``(nan, nan)`` when fewer than two pairs remain or either side is constant; the p-value is
    NaN with only two pairs.
    """
    return _correlation(stats.spearmanr, a, b)


def kendall_tau(estimate: Scores, reference: Scores) -> float:
    """Kendall tau-b over NaN-free pairs; 0.0 when undefined (constant input)."""
    return _or_zero(_correlation(stats.kendalltau, estimate, reference)[0])


def top_k(scores: Scores, k: int) -> np.ndarray:
    """Indices of the ``k`` highest scores (ties keep index order)."""
    return np.argsort(-np.asarray(scores, float), kind="stable")[:k]


def ndcg_at_k(estimate: Scores, reference: Scores, k: int) -> float:
    """NDCG@k of the estimated ranking, gains = reference scores shifted so the least is 0."""
    estimate, reference = _pair(estimate, reference)
    gains = reference - reference.min()
    discounts = 1.0 / np.log2(np.arange(2, min(k, len(gains)) + 2))
    ideal = gains[top_k(gains, k)] @ discounts
    return float(gains[top_k(estimate, k)] @ discounts / ideal) if ideal > 0 else 1.0


def removal_top_k(value_fn, n_players: int, k: int) -> np.ndarray:
    """The size-``k`` set whose removal lowers ``v`` the most, by exhaustive search.

    Evaluates ``v(N \\ K)`` for all ``C(n, k)`` sets ``K`` in one call of ``value_fn``.
    """
    if not 1 <= k < n_players:
        raise InputError(f"k must be in [1, {n_players - 1}], got {k}")
    sets = list(combinations(range(n_players), k))
    masks = np.ones((len(sets), n_players), dtype=bool)
    for row, members in enumerate(sets):
        masks[row, list(members)] = False
    values = np.asarray(value_fn(masks), float)
    return np.array(sets[int(np.argmin(values))])


def precision_at_k(estimate: Scores, reference_set, k: int) -> float:
    """Fraction of the estimate's top-``k`` inside ``reference_set``."""
    return len(set(top_k(estimate, k).tolist()) & set(np.asarray(reference_set).tolist())) / k


def agreement(estimate: Scores, exact: Scores, removal_sets: dict[int, np.ndarray]) -> dict:
    """Pearson, Spearman, Kendall tau, NDCG@k and P@k (vs ``removal_sets[k]``) in one row."""
    row = {
        "pearson": pearson(estimate, exact),
        "spearman": spearman(estimate, exact),
        "kendall": kendall_tau(estimate, exact),
    }
    for k, reference in removal_sets.items():
        row[f"ndcg@{k}"] = ndcg_at_k(estimate, exact, k)
        row[f"p@{k}"] = precision_at_k(estimate, reference, k)
    return row
