"""Causal check: ablate chosen heads/MLPs, or the top-k by JSD against k random components.

ARC-JSD's component ablation (Li et al., arXiv 2505.16415, §7, Appendix I, Table 5): mask the
top-10 heads by component JSD and 10 random heads, and compare how far the response
distribution moves. For each example the response is generated from the full context and the
top ARC-JSD source is chosen; every condition then reports (see ``mechrag.Case.ablation_effect``):
``output_jsd`` (per-token JSD between the clean and ablated full-context distributions, summed
over the response, the paper's scale: its Table 5 values exceed ln 2), ``output_jsd_per_token``
(the same divided by the response length), ``delta_loglik`` (change in response log-likelihood)
and ``delta_source_jsd`` (change in the source's sentence-level ARC-JSD).

``--mode`` takes one or more masking styles (``mechrag.ablate``): ``zero``, ``mean`` (mean
activations over the prompts of the run that first wrote ``OUT/component_means.pt``; a resumed
run with a larger ``--n`` reuses that file) and ``uniform`` (the heads' queries zeroed, so they
attend uniformly over the causal prefix, as the official code masks heads; heads only). Each
random set is drawn independently for every example (seeded by the seed and the example's id),
uniformly from every component of ``--kind`` except that example's top-k; all styles mask the
same sets. The summary gives, per style, the mean and std of every metric over examples (random:
over every example and seed) and a paired sign-flip permutation test of the mean per metric,
top-k against the example's mean over its random sets. It runs as a sweep of the
``ablate_components`` method registered below: one record per example in ``OUT/records.jsonl``
as it goes (a rerun resumes), the summary in ``OUT/summary.json``.

    python experiments/ablate_components.py --n 10 --top-k 10 --random-seeds 5
    python experiments/ablate_components.py --n 20 --top-k 10 --random-seeds 5 \
        --mode zero mean uniform
    python experiments/ablate_components.py --heads 12.3 14.0 --mlps 10 --mode mean
"""

from __future__ import annotations

import argparse
import json
import zlib
from functools import cache
from pathlib import Path

import numpy as np
import torch

from mechrag import Case, Engine, PromptBuilder
from mechrag.mechanism.ablation import (
    ComponentMeans,
    component_means,
    parse_heads,
    random_components,
)
from mechrag.metrics.detection import sign_flip_p
from mechrag.protocols import LOCALIZE_PROTOCOL, PROTOCOLS
from mechrag.sweep import (
    SweepConfig,
    load_records,
    load_sweep_examples,
    load_sweep_model,
    register_method,
)
from mechrag.sweep.arguments import (
    add_backend_arguments,
    add_data_arguments,
    data_options,
    run_with_args,
)

METRICS = ("output_jsd", "output_jsd_per_token", "delta_loglik", "delta_source_jsd")
MODES = ("zero", "mean", "uniform")
MEANS_FILE = "component_means.pt"


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_data_arguments(parser, n=10)
    parser.set_defaults(dataset="hotpotqa", threads=1)
    parser.add_argument("--model", default=None)
    parser.add_argument("--max-new-tokens", type=int, default=16)
    parser.add_argument("--heads", nargs="*", default=[], help="LAYER.HEAD, e.g. 12.3")
    parser.add_argument("--mlps", nargs="*", type=int, default=[])
    parser.add_argument(
        "--mode",
        nargs="+",
        choices=MODES,
        default=None,
        help="one or more masking styles (default: the protocol's)",
    )
    parser.add_argument(
        "--protocol",
        choices=tuple(PROTOCOLS),
        default=LOCALIZE_PROTOCOL,
        help="arc-jsd: uniform attention, as the official code masks heads; mechrag: zero",
    )
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
    args.mode = args.mode or [PROTOCOLS[args.protocol].setting("ablation_mode")]
    if args.top_k is None and not (args.heads or args.mlps):
        parser.error("give --heads/--mlps or --top-k")
    if "uniform" in args.mode and (args.mlps or (args.top_k is not None and args.kind != "head")):
        parser.error("--mode uniform masks heads only: no --mlps, and --kind head")
    parse_heads(args.heads)  # fail on a bad spec before anything runs
    return args


def split(components) -> tuple[list[tuple[int, int]], list[int]]:
    heads = [(c.layer, c.head) for c in components if c.kind == "head"]
    return heads, [c.layer for c in components if c.kind == "mlp"]


def conditions(located, options: dict, example_id: str) -> dict:
    """Named (heads, mlps) sets to ablate: the top-k of ``located`` (a ``localize`` result) and
    ``random_seeds`` random sets, each drawn from the ``kind`` pool without the top-k, with a
    generator seeded by the seed and the example's id (not its position, so a resumed or
    sharded sweep draws the same sets)."""
    kind = None if options["kind"] == "all" else options["kind"]
    top = split(located.top(options["top_k"], kind=kind))
    sets = {"top": top}
    for seed in range(options["random_seeds"]):
        rng = np.random.default_rng([seed, zlib.crc32(example_id.encode())])
        sets[f"random{seed}"] = random_components(
            located.n_layers,
            located.n_heads,
            options["top_k"],
            exclude_heads=top[0],
            exclude_mlps=top[1],
            kind=options["kind"],
            rng=rng,
        )
    return sets


# The ``means`` option is a path relative to the repository (when the file is inside it), so a
# config's hash, and with it a resumed run, is the same on every checkout and working directory.
REPOSITORY = Path(__file__).resolve().parents[1]


def means_option(path: Path) -> str:
    """``path`` as the ``means`` option: relative to the repository when inside it."""
    path = path.resolve()
    return str(path.relative_to(REPOSITORY)) if path.is_relative_to(REPOSITORY) else str(path)


@cache
def load_means(option: str) -> ComponentMeans:
    return ComponentMeans(**torch.load(REPOSITORY / option))


def run_ablation(model, example, options: dict) -> dict:
    """The ablation effects of every condition and masking style on one example (a sweep
    method)."""
    case = Case.from_example(model, example, max_new_tokens=options["max_new_tokens"])
    source = int(case.arc_jsd().ranking[0])
    means = load_means(options["means"]) if options["means"] else None
    if options["top_k"] is None:
        sets = {"chosen": (parse_heads(options["heads"]), options["mlps"])}
    else:
        sets = conditions(case.localize(gains=False), options, example.id)
    n_response = len(case.response_ids)
    effects: dict[str, dict] = {}
    for mode in options["modes"]:
        for name, (heads, mlps) in sets.items():
            effect = case.ablation_effect(source, heads=heads, mlps=mlps, mode=mode, means=means)
            effect["output_jsd_per_token"] = effect["output_jsd"] / n_response
            effects.setdefault(mode, {})[name] = effect
    return {
        "source": case.sources[source].id,
        "n_response": n_response,
        "components": {name: {"heads": h, "mlps": m} for name, (h, m) in sets.items()},
        "effects": effects,
    }


OPTIONS = ("max_new_tokens", "heads", "mlps", "modes", "top_k", "kind", "random_seeds", "means")
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


def _spread(values: list[float]) -> dict:
    return {"mean": float(np.mean(values)), "std": float(np.std(values)), "n": len(values)}


def paired_test(top: list[float], random: list[float]) -> dict:
    """Sign-flip permutation test of the mean per-example top-k effect minus the same examples'
    mean random effect (two-sided, seeded; ``p = 1`` when every difference is 0), the test
    ``make results`` gives."""
    differences = np.asarray(top, float) - np.asarray(random, float)
    return {
        "n": len(differences),
        "mean_difference": float(differences.mean()),
        "p_value": sign_flip_p(differences),
    }


def summarise(records: list[dict]) -> dict:
    """Per masking style: mean and std of each metric per condition (random: over every
    example and seed) and, with a top-k, the paired test of top-k against random per metric."""
    summary = {}
    modes = dict.fromkeys(mode for r in records for mode in r["result"]["effects"])
    for mode in modes:
        effects = [r["result"]["effects"][mode] for r in records]
        groups: dict[str, dict[str, list[float]]] = {}
        random_means: dict[str, list[float]] = {metric: [] for metric in METRICS}
        for example in effects:
            for name, effect in example.items():
                group = groups.setdefault(name.rstrip("0123456789"), {m: [] for m in METRICS})
                for metric in METRICS:
                    group[metric].append(effect[metric])
            randoms = [e for name, e in example.items() if name.startswith("random")]
            if randoms:
                for metric in METRICS:
                    random_means[metric].append(float(np.mean([e[metric] for e in randoms])))
        summary[mode] = {
            name: {m: _spread(v) for m, v in group.items()} for name, group in groups.items()
        }
        if "top" in groups and "random" in groups:
            summary[mode]["top_vs_random"] = {
                m: paired_test(groups["top"][m], random_means[m]) for m in METRICS
            }
    return summary


def main() -> None:
    args = parse_args()
    out = args.out.with_suffix("") if args.out.suffix == ".jsonl" else args.out
    means = out / MEANS_FILE if "mean" in args.mode else None
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
            "modes": list(dict.fromkeys(args.mode)),
            "top_k": args.top_k,
            "kind": args.kind,
            "random_seeds": args.random_seeds,
            "means": None if means is None else means_option(means),
        },
    )
    if means is not None and not means.is_file():
        save_means(config, means)
    frame = run_with_args(config, out, args)
    ids = set(frame.loc[frame["status"] == "ok", "id"])
    summary = summarise([r for r in load_records(out) if r["id"] in ids])
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    for mode, groups in summary.items():
        for name, metrics in groups.items():
            if name == "top_vs_random":
                line = "  ".join(f"{m}: p={t['p_value']:.3g}" for m, t in metrics.items())
            else:
                line = "  ".join(f"{m}={s['mean']:.3f}±{s['std']:.3f}" for m, s in metrics.items())
            print(mode, name, line)


if __name__ == "__main__":
    main()
