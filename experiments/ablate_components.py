"""Causal check: ablate chosen heads/MLPs, or the top-k by JSD against k random components.

For each example the response is generated from the full context and the top ARC-JSD source is
chosen; every condition then reports (see ``mechrag.mechanism.ablation.ablation_effect``):
``output_jsd`` (summed per-token JSD between the clean and ablated full-context distributions),
``delta_loglik`` (change in response log-likelihood) and ``delta_source_jsd`` (change in the
source's sentence-level ARC-JSD). Random components are drawn uniformly from the same kind pool.
One JSON line per example is appended to ``OUT`` as it goes; reruns skip finished examples.

    python experiments/ablate_components.py --n 10 --top-k 10 --random-seeds 5
    python experiments/ablate_components.py --heads 12.3 14.0 --mlps 10 --mode mean
"""

from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path

import numpy as np
import torch
from mechrag.attribution.arc_jsd import arc_jsd_for_task
from mechrag.attribution.context import AttributionTask

from mechrag.data import load_examples
from mechrag.engine import Engine
from mechrag.mechanism import ablation_effect, component_means, localize_task, parse_heads
from mechrag.models import load_model
from mechrag.prompts import PromptBuilder

METRICS = ("output_jsd", "delta_loglik", "delta_source_jsd")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="hotpotqa")
    parser.add_argument("--path", default=None)
    parser.add_argument("--n", type=int, default=10)
    parser.add_argument("--distractors", type=int, default=1)
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
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=Path("results/ablation.jsonl"))
    args = parser.parse_args()
    if args.top_k is None and not (args.heads or args.mlps):
        parser.error("give --heads/--mlps or --top-k")
    return args


def split(components) -> tuple[list[tuple[int, int]], list[int]]:
    heads = [(c.layer, c.head) for c in components if c.kind == "head"]
    return heads, [c.layer for c in components if c.kind == "mlp"]


def conditions(args, task, attribution) -> dict:
    """Named (heads, mlps) sets to ablate on this example."""
    if args.top_k is None:
        return {"chosen": (parse_heads(args.heads), args.mlps)}
    kind = None if args.kind == "all" else args.kind
    located = localize_task(task, attribution=attribution, gains=False)
    pool = located.top(located.scores.size, kind=kind)
    sets = {"top": split(pool[: args.top_k])}
    for seed in range(args.random_seeds):
        sets[f"random{seed}"] = split(random.Random(seed).sample(pool, args.top_k))
    return sets


def run_example(model, example, args, means) -> dict:
    start = time.perf_counter()
    task = AttributionTask.prepare(
        model, example.query, example.sources, max_new_tokens=args.max_new_tokens, progress=False
    )
    attribution = arc_jsd_for_task(task)
    source = int(attribution.ranking[0])
    masks = torch.ones((2, task.builder.n_sources), dtype=torch.bool)
    masks[1, source] = False
    clean = task.engine.run(task.builder, task.response_ids, masks)
    effects = {}
    for name, (heads, mlps) in conditions(args, task, attribution).items():
        effect = ablation_effect(
            task, source, heads, mlps, clean=clean, mode=args.mode, means=means
        )
        effects[name] = {**effect, "heads": heads, "mlps": mlps}
    return {
        "id": example.id,
        "source": task.sources[source].id,
        "mode": args.mode,
        "n_response": len(task.response_ids),
        "effects": effects,
        "seconds": time.perf_counter() - start,
    }


def summarise(records: list[dict]) -> dict:
    """Mean and std over examples (random: over every example and seed)."""
    groups: dict[str, dict[str, list[float]]] = {}
    for record in records:
        for name, effect in record["effects"].items():
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
    torch.set_num_threads(args.threads)
    examples = load_examples(args.dataset, args.path, n=args.n, distractors=args.distractors)
    model = load_model(args.model)
    means = None
    if args.mode == "mean":
        prompts = [PromptBuilder(model.tokenizer, e.query, e.sources).ids() for e in examples]
        means = component_means(model, Engine(model), prompts)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    done = {}
    if args.out.is_file():
        done = {r["id"]: r for r in map(json.loads, args.out.read_text().splitlines()) if r}
    for example in examples:
        if example.id in done:
            continue
        record = run_example(model, example, args, means)
        done[example.id] = record
        with args.out.open("a") as handle:
            handle.write(json.dumps(record) + "\n")
        print(f"{example.id}: {record['seconds']:.1f} s", flush=True)
    summary = summarise([done[e.id] for e in examples])
    args.out.with_suffix(".summary.json").write_text(json.dumps(summary, indent=2))
    for name, metrics in summary.items():
        print(name, "  ".join(f"{m}={s['mean']:.3f}±{s['std']:.3f}" for m, s in metrics.items()))


if __name__ == "__main__":
    main()
