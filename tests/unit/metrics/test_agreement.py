"""Agreement metrics against hand-computed values and exhaustive search."""

from __future__ import annotations

import warnings
from itertools import combinations

import numpy as np
import pytest
from scipy import stats

from mechrag.metrics import (
    agreement,
    kendall_tau,
    ndcg_at_k,
    pearson,
    precision_at_k,
    removal_top_k,
    spearman,
    spearman_test,
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
    with pytest.raises(ValueError, match="equal-length score vectors"):
        pearson(np.ones(3), np.ones(4))
    with pytest.raises(ValueError, match="equal-length"):
        spearman_test(np.ones((2, 2)), np.ones((2, 2)))
    with pytest.raises(ValueError, match="k must be"):
        removal_top_k(lambda m: m.sum(1), 4, 4)


def _brute_force_spearman(a, b) -> float:
    """Pearson correlation of average ranks, ranks counted pair by pair."""

    def ranks(x):
        return np.array([1 + (x < v).sum() + ((x == v).sum() - 1) / 2 for v in x])

    ra, rb = ranks(a) - ranks(a).mean(), ranks(b) - ranks(b).mean()
    return float(ra @ rb / np.sqrt((ra @ ra) * (rb @ rb)))


@pytest.mark.parametrize("seed", range(5))
def test_spearman_against_scipy_and_brute_force(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(5, 40))
    a = rng.normal(size=n)
    b = a + rng.normal(size=n)
    b[: n // 3] = np.round(b[: n // 3])  # some ties
    expected = stats.spearmanr(a, b)
    assert spearman_test(a, b) == pytest.approx((expected.statistic, expected.pvalue))
    assert spearman(a, b) == pytest.approx(_brute_force_spearman(a, b))
    assert spearman(a, b) == spearman_test(a, b)[0]


def test_spearman_constant_short_and_nan_inputs():
    x = np.array([3.0, 1.0, 2.0, 5.0, 4.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no scipy ConstantInputWarning leaks out
        assert spearman(np.ones(5), x) == 0.0
        assert np.isnan(spearman_test(np.ones(5), x)).all()
        assert np.isnan(spearman_test(x, np.full(5, 2.0))).all()
    rho, p = spearman_test([1.0, 2.0], [2.0, 1.0])  # two pairs: a rank order but no test
    assert rho == pytest.approx(-1.0) and np.isnan(p)
    # NaN pairs are skipped: same answer as on the complete pairs alone.
    y = np.array([1.0, np.nan, 2.0, 4.0, 3.0])
    with_nan = np.append(x, np.nan), np.append(y, 1.0)
    assert spearman_test(*with_nan) == pytest.approx(
        spearman_test(x[[0, 2, 3, 4]], y[[0, 2, 3, 4]])
    )
    assert pearson(*with_nan) == pytest.approx(pearson(x[[0, 2, 3, 4]], y[[0, 2, 3, 4]]))
    assert spearman([np.nan, 1.0, 2.0], [1.0, np.nan, 2.0]) == 0.0  # one complete pair


def test_component_spearman_uses_the_metric():
    from mechrag.mechanism import ComponentAttribution

    rng = np.random.default_rng(0)
    result = ComponentAttribution(
        query="q",
        source_id="s0",
        response="r",
        response_ids=[1],
        heads=rng.random((3, 4)),
        mlps=rng.random(3),
        resid_post=rng.random(3),
        head_gain=rng.normal(size=(3, 4)),
        attn_gain=rng.normal(size=3),
        mlp_gain=rng.normal(size=3),
    )
    expected = stats.spearmanr(result.scores, result.gains)
    assert result.spearman() == pytest.approx((expected.statistic, expected.pvalue))


def test_agreement_plot_draws_one_distinct_line_per_method():
    import matplotlib
    import pandas as pd

    from mechrag.plots.agreement import plot_agreement

    matplotlib.use("Agg")
    methods = [f"m{i}" for i in range(22)]
    table = pd.DataFrame(
        [
            {"method": m, "budget": b, "pearson": i / 100 + b / 1000, "kendall": -i / 100}
            for i, m in enumerate(methods)
            for b in (32, 16)  # unsorted: each line runs in budget order
        ]
    )
    fig = plot_agreement(table, metrics=("pearson", "kendall"))
    lines = fig.axes[0].get_lines()
    assert [line.get_label() for line in lines] == sorted(methods)
    looks = {(line.get_color(), line.get_linestyle(), line.get_marker()) for line in lines}
    assert len(looks) == len(methods)  # no two methods look alike, past tab20's 20 colours too
    assert len(fig.axes[1].get_lines()) == len(methods)
    for ax, metric in zip(fig.axes, ("pearson", "kendall")):
        assert ax.get_ylabel() == f"{metric} vs exact"
        for line in ax.get_lines():
            rows = table[table["method"] == line.get_label()].sort_values("budget")
            np.testing.assert_array_equal(line.get_xdata(), rows["budget"])
            np.testing.assert_array_equal(line.get_ydata(), rows[metric])
