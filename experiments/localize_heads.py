"""Localise the heads and MLPs that carry the top ARC-JSD source, averaged over a dataset.

Appends one JSON line per example to ``OUT/examples.jsonl`` as it goes (rerunning skips the
examples already there), then writes ``components.csv`` (mean and std per component),
``top_components.csv``, ``summary.json`` (Spearman rho of JSD vs semantic gain) and the plots.

    python experiments/localize_heads.py --dataset hotpotqa --n 10 --out results/localize
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch
from mechrag.attribution.arc_jsd import arc_jsd_for_task
from mechrag.attribution.context import AttributionTask

from mechrag.data import load_examples
from mechrag.mechanism import ComponentAttribution, localize_task, spearman
from mechrag.models import load_model
from mechrag.plots.components import plot_gain_scatter
from mechrag.plots.sources import save_figure


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="hotpotqa")
    parser.add_argument("--path", default=None, help="dataset file (default: shipped sample)")
    parser.add_argument("--n", type=int, default=10)
    parser.add_argument("--distractors", type=int, default=1)
    parser.add_argument("--model", default=None)
    parser.add_argument("--max-new-tokens", type=int, default=16)
    parser.add_argument("--top-k", type=int, default=10)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=Path("results/localize"))
    return parser.parse_args()


def run_example(model, example, max_new_tokens: int) -> dict:
    start = time.perf_counter()
    task = AttributionTask.prepare(
        model, example.query, example.sources, max_new_tokens=max_new_tokens, progress=False
    )
    attribution = arc_jsd_for_task(task)
    result = localize_task(task, attribution=attribution)
    rho, p = result.spearman()
    return {
        "id": example.id,
        "gold_ids": example.gold_ids,
        "top_source_is_gold": result.source_id in example.gold_ids,
        "rho": rho,
        "p": p,
        "seconds": time.perf_counter() - start,
        "result": result.to_dict(),
    }


def summarise(records: list[dict], out: Path, k: int) -> dict:
    results = [ComponentAttribution.from_dict(r["result"]) for r in records]
    mean = ComponentAttribution.average(results)
    frame = mean.to_frame().rename(columns={"score": "mean", "semantic_gain": "mean_gain"})
    std = mean.metadata["std"]
    frame.insert(4, "std", np.concatenate([np.ravel(std["heads"]), std["mlps"]]))
    frame.sort_values("rank").to_csv(out / "components.csv", index=False)
    top = frame.sort_values("rank").head(k)
    top.to_csv(out / "top_components.csv", index=False)
    pooled = spearman(
        np.concatenate([r.scores for r in results]), np.concatenate([r.gains for r in results])
    )
    rhos = [r["rho"] for r in records]
    summary = {
        "n": len(records),
        "spearman_per_example_mean": float(np.mean(rhos)),
        "spearman_per_example_std": float(np.std(rhos)),
        "per_example_significant": int(sum(r["p"] < 0.05 for r in records)),
        "spearman_pooled": {"rho": pooled[0], "p": pooled[1]},
        "spearman_of_means": dict(zip(("rho", "p"), mean.spearman())),
        "top_source_is_gold": float(np.mean([r["top_source_is_gold"] for r in records])),
        "seconds_per_example": float(np.mean([r["seconds"] for r in records])),
        "top_components": [c.label for c in mean.top(k)],
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    for name, figure in (
        ("heads", mean.plot_heads(k=k)),
        ("layers", mean.plot_layers()),
        ("residual", mean.plot_residual()),
        ("gain", plot_gain_scatter(results)),
    ):
        save_figure(figure, out / f"mean_{name}")
    print(top.to_string(index=False))
    print(json.dumps({k: v for k, v in summary.items() if k != "top_components"}, indent=2))
    return summary


def main() -> None:
    args = parse_args()
    torch.set_num_threads(args.threads)
    args.out.mkdir(parents=True, exist_ok=True)
    log = args.out / "examples.jsonl"
    done = {}
    if log.is_file():
        done = {r["id"]: r for r in map(json.loads, log.read_text().splitlines()) if r}
    examples = load_examples(args.dataset, args.path, n=args.n, distractors=args.distractors)
    model = load_model(args.model)
    for example in examples:
        if example.id in done:
            continue
        record = run_example(model, example, args.max_new_tokens)
        done[example.id] = record
        with log.open("a") as handle:
            handle.write(json.dumps(record) + "\n")
        print(f"{example.id}: rho={record['rho']:.3f} ({record['seconds']:.1f} s)", flush=True)
    summarise([done[e.id] for e in examples], args.out, args.top_k)


if __name__ == "__main__":
    main()
