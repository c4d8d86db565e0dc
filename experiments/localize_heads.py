"""Localise the heads and MLPs that carry the top ARC-JSD source, averaged over a dataset.

A sweep of the ``localize`` method (see ``mechrag sweep``): one record per example in
``OUT/records.jsonl`` (a rerun resumes), then ``components.csv`` (mean and std per component),
``top_components.csv``, ``summary.json`` (Spearman rho of JSD vs semantic gain) and the plots.

    python experiments/localize_heads.py --dataset hotpotqa --n 10 --out results/localize
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from mechrag import ComponentAttribution
from mechrag.metrics import spearman_test
from mechrag.plots import save_figure
from mechrag.plots.components import plot_gain_scatter
from mechrag.sweep import SweepConfig, load_records
from mechrag.sweep.arguments import (
    add_backend_arguments,
    add_data_arguments,
    data_options,
    run_with_args,
)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_data_arguments(parser, n=10)
    parser.set_defaults(dataset="hotpotqa", threads=1)
    parser.add_argument("--model", default=None)
    parser.add_argument("--max-new-tokens", type=int, default=16)
    parser.add_argument("--top-k", type=int, default=10)
    parser.add_argument("--out", type=Path, default=Path("results/localize"))
    add_backend_arguments(parser)
    return parser.parse_args()


def summarise(records: list[dict], out: Path, k: int) -> dict:
    results = [ComponentAttribution.from_dict(r["result"]["result"]) for r in records]
    mean = ComponentAttribution.average(results)
    frame = mean.to_frame().rename(columns={"score": "mean", "semantic_gain": "mean_gain"})
    std = mean.metadata["std"]
    frame.insert(4, "std", np.concatenate([np.ravel(std["heads"]), std["mlps"]]))
    frame.sort_values("rank").to_csv(out / "components.csv", index=False)
    top = frame.sort_values("rank").head(k)
    top.to_csv(out / "top_components.csv", index=False)
    pooled = spearman_test(
        np.concatenate([r.scores for r in results]), np.concatenate([r.gains for r in results])
    )
    rhos = [r["result"]["rho"] for r in records]
    summary = {
        "n": len(records),
        "spearman_per_example_mean": float(np.mean(rhos)),
        "spearman_per_example_std": float(np.std(rhos)),
        "per_example_significant": int(sum(r["result"]["p"] < 0.05 for r in records)),
        "spearman_pooled": dict(zip(("rho", "p"), pooled)),
        "spearman_of_means": dict(zip(("rho", "p"), mean.spearman())),
        "top_source_is_gold": float(np.mean([r["result"]["top_source_is_gold"] for r in records])),
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
    config = SweepConfig(
        "localize",
        args.dataset,
        n=args.n,
        path=args.path,
        data=data_options(args, distractors=1),
        model=args.model,
        options={"max_new_tokens": args.max_new_tokens},
    )
    frame = run_with_args(config, args.out, args)
    ids = set(frame.loc[frame["status"] == "ok", "id"])
    if len(ids) < len(frame):
        print(f"{len(frame) - len(ids)} examples failed; see {args.out}/records.jsonl")
    summarise([r for r in load_records(args.out) if r["id"] in ids], args.out, args.top_k)


if __name__ == "__main__":
    main()
