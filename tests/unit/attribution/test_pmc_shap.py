"""pmcSHAP / mcSHAP (RAG-E's Monte-Carlo refits): the pool is scored once, refits are free."""

from __future__ import annotations

import numpy as np
import pytest

from mechrag.attribution.estimators import shapley_values
from mechrag.attribution.shapley import exact_shapley


def cubic_game(a: np.ndarray):
    return lambda masks: (masks.astype(float) @ a) ** 3


def recorded_calls(method: str, n: int, budget: int | None, **options) -> list[np.ndarray]:
    game = cubic_game(np.random.default_rng(0).normal(size=n))
    seen: list[np.ndarray] = []

    def recording(masks):
        seen.extend(np.asarray(masks, dtype=bool))
        return game(masks)

    shapley_values(recording, n, method, budget=budget, seed=3, **options)
    return seen


@pytest.mark.parametrize("method", ["pmc_shap", "mc_shap"])
def test_default_budget_is_min_of_all_subsets_and_ten_per_player(method):
    for n, expected in [(4, 16), (8, 80), (10, 100)]:
        seen = recorded_calls(method, n, None)
        assert len(seen) == len({row.tobytes() for row in seen}) == expected


@pytest.mark.parametrize("method", ["pmc_shap", "mc_shap"])
def test_refits_cost_no_calls(method):
    few = recorded_calls(method, 8, 40, refits=1)
    many = recorded_calls(method, 8, 40, refits=200)
    assert [r.tobytes() for r in few] == [r.tobytes() for r in many]


def test_pmc_pool_is_paired_and_mc_pool_is_not():
    for method, paired in [("pmc_shap", True), ("mc_shap", False)]:
        seen = {row.tobytes() for row in recorded_calls(method, 10, 60)}
        complements = sum((~np.frombuffer(k, dtype=bool)).tobytes() in seen for k in seen)
        assert (complements == len(seen)) == paired


@pytest.mark.parametrize("method", ["pmc_shap", "mc_shap"])
def test_exact_on_a_complete_pool_and_refits_checked(method):
    game = cubic_game(np.random.default_rng(2).normal(size=5))
    exact = exact_shapley(game, 5)
    np.testing.assert_allclose(shapley_values(game, 5, method, budget=32), exact, atol=1e-9)
    with pytest.raises(ValueError, match="refits"):
        shapley_values(game, 5, method, budget=20, refits=0)


def test_leverage_pool_is_paired_budgeted_and_exact_when_complete():
    seen = recorded_calls("pmc_shap", 9, 50, sampling="leverage")
    keys = {row.tobytes() for row in seen}
    assert len(seen) == len(keys) == 50
    assert all((~np.frombuffer(k, dtype=bool)).tobytes() in keys for k in keys)
    game = cubic_game(np.random.default_rng(4).normal(size=5))
    phi = shapley_values(game, 5, "pmc_shap", budget=32, sampling="leverage")
    np.testing.assert_allclose(phi, exact_shapley(game, 5), atol=1e-9)
    with pytest.raises(ValueError, match="sampling"):
        shapley_values(game, 5, "pmc_shap", budget=20, sampling="uniform")
