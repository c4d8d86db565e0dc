"""The Shapley agreement experiment's compare and versus stages, on synthetic value tables."""

from __future__ import annotations

import json
import runpy
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers import REPO
from scipy.stats import pearsonr, wilcoxon

from mechrag import shapley_values

SCRIPT = REPO / "experiments" / "shapley_agreement.py"


@pytest.fixture(scope="module")
def experiment():
    return runpy.run_path(str(SCRIPT))


def write_table(folder: Path, name: str, seed: int, n: int = 5) -> np.ndarray:
    """A random ``[2^n, 3]`` table of per-token log-probabilities, saved as ``score`` would."""
    token_logprobs = -np.random.default_rng(seed).gamma(2.0, size=(2**n, 3))
    meta = {"id": name, "kind": "synthetic", "sources": [f"p{i}" for i in range(n)]}
    np.savez(folder / f"{name}.npz", token_logprobs=token_logprobs, meta=json.dumps(meta))
    return token_logprobs


def test_compare_scores_each_estimator_against_exact(experiment, tmp_path):
    tables = tmp_path / "tables"
    tables.mkdir()
    games = {f"g{k}": write_table(tables, f"g{k}", k).sum(1) for k in range(2)}
    experiment["compare"](
        [tables], "logprob", ["leverage_shap+loo"], [12], 2, tmp_path / "out", "syn"
    )
    runs = pd.read_csv(tmp_path / "out" / "syn_runs.csv")
    table_game = experiment["table_game"]
    for name, values in games.items():
        exact = shapley_values(table_game(values), 5, "exact")
        loo = shapley_values(table_game(values), 5, "loo")
        known = experiment["loo_rows"](values, 5)
        rows = runs[runs.game == name].set_index(["method", "seed"])
        assert rows.loc[("loo", 0), "pearson"] == pytest.approx(pearsonr(loo, exact)[0])
        for seed in range(2):
            phi = shapley_values(table_game(values), 5, "leverage_shap", 12, seed, known=known)
            row = rows.loc[("leverage_shap+loo", seed)]
            assert row["pearson"] == pytest.approx(pearsonr(phi, exact)[0])
            assert row["mse"] == pytest.approx(np.mean((phi - exact) ** 2))
            assert row["calls"] <= 12


def test_versus_pairs_examples_and_tests_the_differences(experiment):
    """Seeds are averaged per example before pairing; a budget one method lacks is left out."""
    rng = np.random.default_rng(0)
    first, second = rng.uniform(0.8, 1.0, 9), rng.uniform(0.7, 0.95, 9)
    spread = rng.normal(0, 0.05, (9, 2))
    runs = pd.DataFrame(
        [
            {"method": method, "budget": 32, "game": f"g{k}", "seed": seed, "pearson": score}
            for method, values in (("a", first), ("b", second))
            for k, value in enumerate(values)
            for seed, score in enumerate(value + spread[k] * [1, -1])
        ]
        + [{"method": "a", "budget": 64, "game": "g0", "seed": 0, "pearson": 1.0}]
    )
    table = experiment["versus"](runs, "a", "b")
    assert table["budget"].tolist() == [32]
    assert table.loc[0, "wins"] == int((first > second).sum())
    assert table.loc[0, "mean_difference"] == pytest.approx(np.mean(first - second))
    assert table.loc[0, "wilcoxon_p"] == pytest.approx(wilcoxon(first, second).pvalue)
