"""Agreement of Shapley-family estimators with exact Shapley on cached value tables.

Two stages, so the model runs once and every estimator comparison is pure numpy:

``score``: for each HotpotQA example (``documents`` one-sentence documents) or scenario case,
score all ``2^d`` subsets once and save ``log P(r_t | q, S, r_<t)`` as a table
``[2^d, T]`` (row ``k`` = the subset whose bit ``i`` is document ``i``) with the case's metadata
to ``<tables>/<part>_d<d>/<id>.npz``. Resumable: finished cases are skipped.

``compare``: on every table, exact Shapley of the game (``logprob``: ``sum_t l_t``;
``token_prob``: ``exp l_t`` per token) against each estimator x budget x seed: Pearson, Kendall
tau, top-1 agreement (same argmax as exact) and MSE (per-token games: on the ``[d, T]``
matrix; ranking metrics on the token-summed scores), split into squared bias and variance
over seeds. ``+loo`` estimators get the full and leave-one-out subsets (what ARC-JSD has
already scored, and what ``case.attribute(..., reuse_scored=True)`` hands on) as free ``known``
rows: their budget counts only new subsets, the empty one included. Writes ``runs.csv`` (one
row per run), ``frontier.csv`` (mean and seed spread per estimator x budget) and the
Pearson-vs-calls figure; ``versus`` pairs two estimators by example.

    python experiments/shapley_agreement.py score --part hotpotqa --n 6 --documents 8
    python experiments/shapley_agreement.py score --part hotpotqa --n 4 --documents 10
    python experiments/shapley_agreement.py score --part scenarios --n 1 --documents 8
    python experiments/shapley_agreement.py compare --tables results/tables/hotpotqa_d8
    python experiments/shapley_agreement.py versus --runs results/shapley_agreement/\
hotpotqa_d8_logprob_runs.csv --methods leverage_shap+loo leverage_shap_uniform+loo
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.stats import wilcoxon

from mechrag import Case, Engine, Source, load_model, shapley_values
from mechrag.data import load_hotpotqa
from mechrag.data.scenarios import make_scenarios
from mechrag.metrics import kendall_tau, pearson
from mechrag.plots.agreement import plot_agreement
from mechrag.plots.results import save_figure

# name -> (method, options, known rows: the full and leave-one-out subsets for free)
ESTIMATORS = {
    "kernel_shap": ("kernel_shap", {}, False),
    "kernel_shap_paired": ("kernel_shap", {"paired": True}, False),
    "leverage_shap": ("leverage_shap", {}, False),
    "leverage_shap_uniform": ("leverage_shap", {"balanced": False}, False),
    "leverage_shap_unpaired": ("leverage_shap", {"paired": False}, False),
    "pmc_shap": ("pmc_shap", {}, False),
    "mc_shap": ("mc_shap", {}, False),
    "tmc": ("tmc", {}, False),
    "beta": ("beta", {}, False),
    "contextcite": ("contextcite", {}, False),
    "kernel_shap_paired+loo": ("kernel_shap", {"paired": True}, True),
    "leverage_shap+loo": ("leverage_shap", {}, True),
    "leverage_shap_uniform+loo": ("leverage_shap", {"balanced": False}, True),
    "pmc_shap+loo": ("pmc_shap", {}, True),
    "pmc_shap_balanced+loo": ("pmc_shap", {"sampling": "balanced"}, True),
    "kernel_shap_paired_i3": ("kernel_shap", {"paired": True, "interactions": 3}, False),
    "leverage_shap_i3": ("leverage_shap", {"interactions": 3}, False),
    "kernel_shap_paired_i3+loo": ("kernel_shap", {"paired": True, "interactions": 3}, True),
    "leverage_shap_i3+loo": ("leverage_shap", {"interactions": 3}, True),
    "leverage_shap_uniform_i3+loo": (
        "leverage_shap",
        {"balanced": False, "interactions": 3},
        True,
    ),
}
BUDGETS = (16, 24, 32, 48, 64, 100)


# --- stage 1: score every subset once -------------------------------------------------------


def shortened_hotpotqa(n: int, documents: int, seed: int) -> list[dict]:
    """HotpotQA cases with ``documents`` one-sentence documents (gold paragraphs kept)."""
    cases = []
    for example in load_hotpotqa(n=n, distractors=documents - 2, unit="sentence", seed=seed):
        gold = set(example.gold_ids)
        chosen: dict[int, Source] = {}
        for source in example.sources:
            current = chosen.get(source.paragraph)
            if current is None or (source.id in gold and current.id not in gold):
                chosen[source.paragraph] = source
        sources = [
            Source(f"p{p}", s.text, s.title, p) for p, s in sorted(chosen.items())[:documents]
        ]
        gold_docs = sorted({f"p{s.paragraph}" for s in example.sources if s.id in gold})
        cases.append(
            {
                "id": example.id,
                "kind": "hotpotqa",
                "query": example.query,
                "sources": sources,
                "response": None,
                "gold": gold_docs,
            }
        )
    return cases


def scenario_cases(per_kind: int, documents: int, seed: int) -> list[dict]:
    cases = []
    for scenario in make_scenarios(per_kind, seed, documents):
        for case in (scenario, scenario.swapped()):
            cases.append(
                {
                    "id": case.id,
                    "kind": case.kind,
                    "query": case.query,
                    "sources": case.sources,
                    "response": case.response,
                    "key_positions": list(case.key_positions),
                }
            )
    return cases


def all_subsets(n: int) -> np.ndarray:
    """Every subset as a bool mask; row ``k`` has bit ``i`` of ``k`` as document ``i``."""
    return ((np.arange(2**n)[:, None] >> np.arange(n)) & 1).astype(bool)


def subset_token_logprobs(model, case: dict, max_new_tokens: int) -> tuple[np.ndarray, str]:
    """``[2^d, T]`` log-probabilities of the response for every subset, and the response."""
    engine = Engine(model, max_batch_tokens=2048, progress=False)
    rag_case = Case(
        model,
        case["query"],
        case["sources"],
        case["response"],
        max_new_tokens=max_new_tokens,
        engine=engine,
    )
    return rag_case.token_logprobs(all_subsets(rag_case.n_sources)), rag_case.response_text


def score(cases: list[dict], folder: Path, model, max_new_tokens: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for case in cases:
        path = folder / f"{case['id']}.npz"
        if path.exists():
            continue
        tic = time.perf_counter()
        logprobs, response = subset_token_logprobs(model, case, max_new_tokens)
        meta = {
            "id": case["id"],
            "kind": case["kind"],
            "query": case["query"],
            "sources": [source.id for source in case["sources"]],
            "gold": case.get("gold"),
            "key_positions": case.get("key_positions"),
            "response": response,
            "seconds": time.perf_counter() - tic,
        }
        np.savez(path, token_logprobs=logprobs, meta=json.dumps(meta))
        print(f"{case['id']}: {logprobs.shape} in {meta['seconds']:.0f} s", flush=True)


# --- stage 2: estimators on the cached tables -----------------------------------------------


def load_table(path: Path) -> tuple[np.ndarray, dict]:
    with np.load(path) as data:
        return data["token_logprobs"], json.loads(str(data["meta"]))


def table_game(values: np.ndarray):
    """The value function of a ``[2^n]`` or ``[2^n, T]`` table indexed by subset code."""
    n = int(np.log2(len(values)))
    codes = 1 << np.arange(n)
    return lambda masks: values[np.asarray(masks, dtype=int) @ codes]


def game_values(token_logprobs: np.ndarray, value: str) -> np.ndarray:
    if value == "logprob":
        return token_logprobs.sum(1)
    if value == "token_prob":
        return np.exp(token_logprobs)
    raise ValueError(f"unknown value {value!r}: use logprob or token_prob")


def loo_rows(values: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The full and leave-one-out subsets (ARC-JSD's ``n + 1``) with their values."""
    masks = np.vstack([np.ones((1, n), bool), ~np.eye(n, dtype=bool)])
    return masks, table_game(values)(masks)


def run_metrics(phi: np.ndarray, exact: np.ndarray) -> dict:
    summed, reference = (phi.sum(1), exact.sum(1)) if phi.ndim == 2 else (phi, exact)
    return {
        "pearson": pearson(summed, reference),
        "kendall": kendall_tau(summed, reference),
        "top1": float(np.argmax(summed) == np.argmax(reference)),
        "mse": float(np.mean((phi - exact) ** 2)),
    }


def compare_game(
    values: np.ndarray, estimators: dict, budgets, seeds: int
) -> tuple[list[dict], np.ndarray]:
    """One row per estimator x budget x seed (``calls``: new subsets scored) and exact values."""
    n = int(np.log2(len(values)))
    game = table_game(values)
    exact = shapley_values(game, n, "exact")
    known = loo_rows(values, n)
    rows = [{"method": "loo", "budget": n + 1, "seed": 0, "calls": n + 1, "variance": 0.0}]
    rows[0].update(run_metrics(shapley_values(game, n, "loo"), exact))
    rows[0]["bias2"] = rows[0]["mse"]
    for name, (method, options, uses_known) in estimators.items():
        for budget in budgets:
            if budget >= 2**n or (method in ("tmc", "beta") and budget < n + 1):
                continue
            group, estimates = [], []
            for seed in range(seeds):
                asked: set[bytes] = set()

                def counted(masks, asked=asked):
                    asked.update(row.tobytes() for row in masks)
                    return game(masks)

                extra = {"known": known} if uses_known else {}
                phi = shapley_values(counted, n, method, budget, seed, **options, **extra)
                estimates.append(phi)
                group.append(
                    {"method": name, "budget": budget, "seed": seed, "calls": len(asked)}
                    | run_metrics(phi, exact)
                )
            estimates = np.array(estimates)  # MSE = squared bias + variance over seeds
            spread = {
                "variance": float(estimates.var(0).mean()),
                "bias2": float(((estimates.mean(0) - exact) ** 2).mean()),
            }
            rows.extend(row | spread for row in group)
    return rows, exact


def frontier(runs: pd.DataFrame) -> pd.DataFrame:
    """Mean over games and seeds per method x budget; ``*_sd``: the spread over seeds (standard
    deviation across seeds, averaged over games)."""
    metrics = ["pearson", "kendall", "top1", "mse"]
    keys = ["method", "budget"]
    mean = runs.groupby(keys)[[*metrics, "variance", "bias2", "calls"]].mean()
    spread = runs.groupby([*keys, "game"])[metrics].std(ddof=0).groupby(keys).mean()
    table = mean.join(spread.add_suffix("_sd")).reset_index()
    table.insert(2, "games", runs.groupby(keys)["game"].nunique().values)
    return table


def compare(
    tables: list[Path], value: str, methods, budgets, seeds: int, out: Path, label: str
) -> None:
    out.mkdir(parents=True, exist_ok=True)
    runs = []
    for path in sorted(p for folder in tables for p in folder.glob("*.npz")):
        token_logprobs, meta = load_table(path)
        estimators = {name: ESTIMATORS[name] for name in methods}
        rows, _ = compare_game(game_values(token_logprobs, value), estimators, budgets, seeds)
        runs.extend(dict(row, game=meta["id"], kind=meta["kind"]) for row in rows)
        print(f"{meta['id']}: {len(rows)} runs", flush=True)
    runs = pd.DataFrame(runs)
    runs.to_csv(out / f"{label}_runs.csv", index=False)
    table = frontier(runs)
    table.to_csv(out / f"{label}_frontier.csv", index=False)
    with pd.option_context("display.width", 200, "display.max_rows", 500):
        print(table.to_string(index=False, float_format=lambda x: f"{x:.3f}"))
    save_figure(
        plot_agreement(table, metrics=("pearson", "kendall", "top1"), title=label),
        out / f"{label}_frontier",
    )


def versus(runs: pd.DataFrame, first: str, second: str, metric: str = "pearson") -> pd.DataFrame:
    """``first`` against ``second`` per budget, paired by example (each example's mean over
    seeds): examples where ``first`` is higher, the mean difference and the two-sided Wilcoxon
    signed-rank p-value across examples. Budgets or examples one of them lacks are left out."""
    per_game = runs.groupby(["method", "budget", "game"])[metric].mean().unstack("method")
    rows = []
    for budget, games in per_game[[first, second]].dropna().groupby(level="budget"):
        a, b = games[first], games[second]
        difference = a - b
        rows.append(
            {
                "budget": budget,
                "games": len(difference),
                "wins": int((difference > 0).sum()),
                "mean_difference": difference.mean(),
                "wilcoxon_p": wilcoxon(a, b).pvalue if difference.any() else 1.0,
            }
        )
    return pd.DataFrame(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    stages = parser.add_subparsers(dest="stage", required=True)
    scoring = stages.add_parser("score", help="score every subset once into value tables")
    scoring.add_argument("--part", choices=["hotpotqa", "scenarios"], default="hotpotqa")
    scoring.add_argument("--n", type=int, default=6, help="examples (scenarios: per kind)")
    scoring.add_argument("--documents", type=int, default=8)
    scoring.add_argument("--max-new-tokens", type=int, default=16)
    scoring.add_argument("--seed", type=int, default=0)
    scoring.add_argument("--tables", type=Path, default=Path("results/tables"))
    comparing = stages.add_parser("compare", help="estimators against exact on value tables")
    comparing.add_argument("--tables", type=Path, nargs="+", required=True)
    comparing.add_argument("--value", choices=["logprob", "token_prob"], default="logprob")
    comparing.add_argument("--budgets", type=int, nargs="+", default=list(BUDGETS))
    comparing.add_argument("--seeds", type=int, default=10)
    comparing.add_argument("--label", default=None)
    comparing.add_argument(
        "--methods", nargs="+", choices=sorted(ESTIMATORS), default=sorted(ESTIMATORS)
    )
    comparing.add_argument("--out", type=Path, default=Path("results/shapley_agreement"))
    pairing = stages.add_parser("versus", help="two estimators paired by example, per budget")
    pairing.add_argument("--runs", type=Path, required=True, help="a *_runs.csv from compare")
    pairing.add_argument("--methods", nargs=2, required=True, metavar=("FIRST", "SECOND"))
    pairing.add_argument("--metric", default="pearson")
    args = parser.parse_args()
    if args.stage == "versus":
        table = versus(pd.read_csv(args.runs), *args.methods, metric=args.metric)
        print(f"{args.methods[0]} vs {args.methods[1]} ({args.metric}, per example):")
        print(table.to_string(index=False, float_format=lambda x: f"{x:.3g}"))
    elif args.stage == "score":
        import torch

        torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
        make = shortened_hotpotqa if args.part == "hotpotqa" else scenario_cases
        cases = make(args.n, args.documents, args.seed)
        folder = args.tables / f"{args.part}_d{args.documents}"
        score(cases, folder, load_model(), args.max_new_tokens)
    else:
        label = args.label or "_".join(p.name for p in args.tables) + f"_{args.value}"
        compare(args.tables, args.value, args.methods, args.budgets, args.seeds, args.out, label)


if __name__ == "__main__":
    main()
