"""Agreement of Shapley-family estimators with exact Shapley on HotpotQA and the scenarios.

For each example the exact game (all ``2^d`` subsets of ``d`` documents) is scored once through
the engine; every estimator then runs on that cached game with its own budget, so its agreement
is measured on the same values and its cost is reported as ``calls x`` the measured seconds per
subset (``model_seconds``) plus its own CPU time. Per-example rows are appended to
``examples.jsonl`` as they finish; a rerun skips examples already there (resumable).

CPU defaults (2-core laptop class): ``--documents 6`` (64 subsets per example; exact over the
full 10 paragraphs would be 1,024 prompts of up to ~1,200 tokens) and HotpotQA paragraphs cut to
one sentence (the first supporting fact of gold paragraphs, else the first sentence) with the
title. Budgets at or above ``2^d`` make Kernel SHAP exact: read those rows accordingly.

    python experiments/shapley_agreement.py --n 10 --documents 6 --scenarios-per-kind 3
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from mechrag.attribution.context import AttributionTask
from mechrag.attribution.games import SubsetScorer
from mechrag.attribution.sampling import all_masks
from mechrag.attribution.shapley import exact_shapley, shapley_values
from mechrag.data import load_hotpotqa
from mechrag.engine import Engine
from mechrag.metrics import agreement, removal_top_k
from mechrag.models import load_model
from mechrag.plots.agreement import plot_agreement, plot_position_bias
from mechrag.plots.sources import save_figure
from mechrag.scenarios import key_order_outcome, make_scenarios
from mechrag.sources import Source

# name -> (estimator, game value, options)
ESTIMATORS = {
    "loo": ("loo", "logprob", {}),
    "kernel_shap": ("kernel_shap", "logprob", {}),
    "kernel_shap_paired": ("kernel_shap", "logprob", {"paired": True}),
    "pmc_shap": ("pmc_shap", "logprob", {}),
    "tmc": ("tmc", "logprob", {}),
    "beta": ("beta", "logprob", {}),
    "contextcite": ("contextcite", "logprob", {}),
    "contextcite_logit": ("contextcite", "logit_prob", {}),
}
K_VALUES = (1, 2)


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


def evaluate(model, case: dict, budgets, seeds: int, max_new_tokens: int) -> dict:
    """Exact game, removal top-k and every estimator x budget x seed for one case."""
    engine = Engine(model, max_batch_tokens=2048, progress=False)
    task = AttributionTask.prepare(
        model,
        case["query"],
        case["sources"],
        case["response"],
        max_new_tokens=max_new_tokens,
        engine=engine,
    )
    scorer = SubsetScorer(task)
    n = scorer.n_sources
    start = time.perf_counter()
    scorer.token_logprobs(all_masks(n))
    per_call = (time.perf_counter() - start) / 2**n
    exact = exact_shapley(scorer.game("logprob"), n)
    removal = {k: removal_top_k(scorer.game("logprob"), n, k) for k in K_VALUES}
    rows, scores = [], {"exact": exact.tolist()}
    for name, (method, value, options) in ESTIMATORS.items():
        for budget in budgets:
            for seed in range(seeds):
                game, asked = scorer.game(value), set()

                def counted(masks, game=game, asked=asked):
                    asked.update(row.tobytes() for row in masks)
                    return game(masks)

                tic = time.perf_counter()
                phi = shapley_values(counted, n, method, budget, seed, **options)
                cpu = time.perf_counter() - tic
                calls = len(asked)
                row = {
                    "method": name,
                    "budget": budget,
                    "seed": seed,
                    "calls": calls,
                    "model_seconds": calls * per_call + cpu,
                    **agreement(phi, exact, removal),
                }
                rows.append(row)
                scores[f"{name}@{budget}#{seed}"] = phi.tolist()
    return {
        "id": case["id"],
        "kind": case["kind"],
        "n_documents": n,
        "response": task.response_text,
        "seconds_per_subset": per_call,
        "exact_seconds": per_call * 2**n,
        "key_positions": case.get("key_positions"),
        "removal": {str(k): v.tolist() for k, v in removal.items()},
        "rows": rows,
        "scores": scores,
    }


def run(cases: list[dict], path: Path, model, budgets, seeds: int, max_new_tokens: int) -> None:
    done = set()
    if path.exists():
        done = {json.loads(line)["id"] for line in path.read_text().splitlines() if line.strip()}
    from tqdm.auto import tqdm

    for case in tqdm([c for c in cases if c["id"] not in done], desc=path.stem):
        result = evaluate(model, case, budgets, seeds, max_new_tokens)
        with path.open("a") as handle:
            handle.write(json.dumps(result) + "\n")


def summarise(path: Path) -> tuple[pd.DataFrame, list[dict]]:
    """Mean agreement per method x budget (over examples and seeds) and the raw results."""
    results = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    rows = [dict(row, id=r["id"], kind=r["kind"]) for r in results for row in r["rows"]]
    frame = pd.DataFrame(rows)
    metrics = [c for c in frame.columns if c not in ("method", "budget", "seed", "id", "kind")]
    table = frame.groupby(["method", "budget"], as_index=False)[metrics].mean()
    table.insert(2, "examples", frame.groupby(["method", "budget"])["id"].nunique().values)
    return table, results


def scenario_bias(results: list[dict], budgets) -> pd.DataFrame:
    """Position-bias outcome per case and method (exact, each estimator x budget, seed 0)."""
    by_id = {r["id"]: r for r in results}
    keys = ["exact"] + [f"{name}@{b}#0" for name in ESTIMATORS for b in budgets]
    rows = []
    for result in results:
        swapped = by_id.get(f"{result['id']}-swapped")
        if swapped is None:
            continue
        for key in keys:
            outcome = key_order_outcome(
                tuple(result["key_positions"]),
                np.array(result["scores"][key]),
                np.array(swapped["scores"][key]),
            )
            rows.append(
                {
                    "case": result["id"],
                    "kind": result["kind"],
                    "method": key.replace("#0", ""),
                    **outcome,
                }
            )
    return pd.DataFrame(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10, help="HotpotQA examples")
    parser.add_argument("--documents", type=int, default=6, help="documents per example")
    parser.add_argument("--scenarios-per-kind", type=int, default=3)
    parser.add_argument("--scenario-documents", type=int, default=6)
    parser.add_argument("--budgets", type=int, nargs="+", default=[32, 64, 100])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--max-new-tokens", type=int, default=16)
    parser.add_argument("--parts", nargs="+", default=["hotpotqa", "scenarios"])
    parser.add_argument("--out", type=Path, default=Path("results/shapley_agreement"))
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    args.out.mkdir(parents=True, exist_ok=True)
    model = load_model(device="cpu")
    for part in args.parts:
        if part == "hotpotqa":
            cases = shortened_hotpotqa(args.n, args.documents, args.seed)
        elif part == "scenarios":
            cases = scenario_cases(args.scenarios_per_kind, args.scenario_documents, args.seed)
        else:
            raise SystemExit(f"unknown part {part!r}: use hotpotqa or scenarios")
        path = args.out / f"{part}_examples.jsonl"
        run(cases, path, model, args.budgets, args.seeds, args.max_new_tokens)
        table, results = summarise(path)
        table.to_csv(args.out / f"{part}_agreement.csv", index=False)
        exact_s = np.mean([r["exact_seconds"] for r in results])
        print(f"\n{part}: {table['examples'].max()} examples, exact game {exact_s:.1f} s each")
        print(table.to_string(index=False, float_format=lambda x: f"{x:.3f}"))
        save_figure(
            plot_agreement(table, title=f"{part}: agreement with exact Shapley"),
            args.out / f"{part}_agreement",
        )
        if part == "scenarios":
            bias = scenario_bias(results, args.budgets)
            summary = bias.groupby(["method", "kind"], as_index=False)[
                ["follows_position", "follows_content", "earlier_wins_both", "keys_top2"]
            ].mean()
            summary.to_csv(args.out / "position_bias.csv", index=False)
            print("\nposition bias (share of cases):")
            print(summary.to_string(index=False, float_format=lambda x: f"{x:.2f}"))
            save_figure(
                plot_position_bias(
                    summary[
                        summary["method"].isin(
                            ["exact", "loo@32", "kernel_shap@32", "pmc_shap@32", "contextcite@32"]
                        )
                    ]
                ),
                args.out / "position_bias",
            )


if __name__ == "__main__":
    main()
