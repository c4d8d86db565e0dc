"""Causal check: ablate chosen heads/MLPs, or the top-k by JSD against k random components.

For each example the response is generated from the full context and the top ARC-JSD source is
chosen; every condition then reports (see ``mechrag.Case.ablation_effect``): ``output_jsd``
(summed per-token JSD between the clean and ablated full-context distributions),
``delta_loglik`` (change in response log-likelihood) and ``delta_source_jsd`` (change in the
source's sentence-level ARC-JSD). Random components are drawn uniformly from the same kind pool.
It runs as a sweep of the ``ablate_components`` method registered below: one record per example
in ``OUT/records.jsonl`` as it goes (a rerun resumes), the summary in ``OUT/summary.json``.

    python experiments/ablate_components.py --n 10 --top-k 10 --random-seeds 5
    python experiments/ablate_components.py --heads 12.3 14.0 --mlps 10 --mode mean
"""

from __future__ import annotations

import argparse
import json
import random
from functools import cache
from pathlib import Path

import numpy as np
import torch

from mechrag import Case, Engine, PromptBuilder
from mechrag.cli.sweep import (
    add_backend_arguments,
    add_data_arguments,
    data_options,
    run_with_args,
)
from mechrag.mechanism import ComponentMeans, component_means, parse_heads
from mechrag.sweep import (
    SweepConfig,
    load_records,
    load_sweep_examples,
    load_sweep_model,
    register_method,
)

METRICS = ("output_jsd", "delta_loglik", "delta_source_jsd")
MEANS_FILE = "component_means.pt"


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_data_arguments(parser, n=10)
    parser.set_defaults(dataset="hotpotqa", threads=1)
    parser.add_argument("--model", default=None)
    parser.add_argument("--max-new-tokens", type=int, default=16)
    parser.add_argument("--heads", nargs="*", default=[], help="LAYER.HEAD, e.g. 12.3")
    parser.add_argument("--mlps", nargs="*", type=int, default=[])
    parser.add_argument("--mode", choices=("zero", "mean"), default="zero")
    parser.add_argument("--top-k", type=int, default=None, help="ablate the top-k by JSD")
    parser.add_argument(
        "--kind",
        choices=("head", "mlp", "all"),
        default="head",
        help="component pool for --top-k and random draws",
    )
    parser.add_argument("--random-seeds", type=int, default=5)
    parser.add_argument(
        "--out", type=Path, default=Path("results/ablation"), help="folder (X.jsonl means X/)"
    )
    add_backend_arguments(parser)
    args = parser.parse_args()
    if args.top_k is None and not (args.heads or args.mlps):
        parser.error("give --heads/--mlps or --top-k")
    parse_heads(args.heads)  # fail on a bad spec before anything runs
    return args


def split(components) -> tuple[list[tuple[int, int]], list[int]]:
    heads = [(c.layer, c.head) for c in components if c.kind == "head"]
    return heads, [c.layer for c in components if c.kind == "mlp"]


def conditions(case: Case, options: dict) -> dict:
    """Named (heads, mlps) sets to ablate on this case."""
    if options["top_k"] is None:
        return {"chosen": (parse_heads(options["heads"]), options["mlps"])}
    kind = None if options["kind"] == "all" else options["kind"]
    located = case.localize(gains=False)
    pool = located.top(located.scores.size, kind=kind)
    sets = {"top": split(pool[: options["top_k"]])}
    for seed in range(options["random_seeds"]):
        sets[f"random{seed}"] = split(random.Random(seed).sample(pool, options["top_k"]))
    return sets


@cache
def load_means(path: str) -> ComponentMeans:
    return ComponentMeans(**torch.load(path))


def run_ablation(model, example, options: dict) -> dict:
    """The ablation effects of every condition on one example (a sweep method)."""
    case = Case.from_example(model, example, max_new_tokens=options["max_new_tokens"])
    source = int(case.arc_jsd().ranking[0])
    means = load_means(options["means"]) if options["means"] else None
    effects = {}
    for name, (heads, mlps) in conditions(case, options).items():
        effect = case.ablation_effect(
            source, heads=heads, mlps=mlps, mode=options["mode"], means=means
        )
        effects[name] = {**effect, "heads": heads, "mlps": mlps}
    return {
        "source": case.sources[source].id,
        "mode": options["mode"],
        "n_response": len(case.response_ids),
        "effects": effects,
    }


OPTIONS = ("max_new_tokens", "heads", "mlps", "mode", "top_k", "kind", "random_seeds", "means")
register_method("ablate_components", run_ablation, options=OPTIONS, replace=True)


def save_means(config: SweepConfig, path: Path) -> None:
    """Mean activations over every example's full prompt, for ``--mode mean``."""
    model = load_sweep_model(config.model)
    prompts = [
        PromptBuilder(model.tokenizer, e.query, e.sources).ids()
        for e in load_sweep_examples(config)
    ]
    means = component_means(model, Engine(model), prompts)
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"z": means.z, "mlp_out": means.mlp_out}, path)


def summarise(records: list[dict]) -> dict:
    """Mean and std over examples (random: over every example and seed)."""
    groups: dict[str, dict[str, list[float]]] = {}
    for record in records:
        for name, effect in record["result"]["effects"].items():
            group = groups.setdefault(name.rstrip("0123456789"), {m: [] for m in METRICS})
            for metric in METRICS:
                group[metric].append(effect[metric])
    return {
        name: {
            m: {"mean": float(np.mean(v)), "std": float(np.std(v)), "n": len(v)}
            for m, v in group.items()
        }
        for name, group in groups.items()
    }


def main() -> None:
    args = parse_args()
    out = args.out.with_suffix("") if args.out.suffix == ".jsonl" else args.out
    means = out / MEANS_FILE if args.mode == "mean" else None
    config = SweepConfig(
        "ablate_components",
        args.dataset,
        n=args.n,
        path=args.path,
        data=data_options(args, distractors=1),
        model=args.model,
        options={
            "max_new_tokens": args.max_new_tokens,
            "heads": args.heads,
            "mlps": args.mlps,
            "mode": args.mode,
            "top_k": args.top_k,
            "kind": args.kind,
            "random_seeds": args.random_seeds,
            "means": None if means is None else str(means.resolve()),
        },
    )
    if means is not None and not means.is_file():
        save_means(config, means)
    frame = run_with_args(config, out, args)
    ids = set(frame.loc[frame["status"] == "ok", "id"])
    summary = summarise([r for r in load_records(out) if r["id"] in ids])
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    for name, metrics in summary.items():
        print(name, "  ".join(f"{m}={s['mean']:.3f}±{s['std']:.3f}" for m, s in metrics.items()))


if __name__ == "__main__":
    main()
