"""Which attention features stand in for exact ARC-JSD: richer features than the shipped one, on
the frontier's exact records, fitted and scored on questions apart.

The shipped fitted attention scores a source by one weight per head times the attention the
response pays to the source's tokens, averaged over the response (``mean`` below). The fit-size
benchmark found that more training cases do not lift its agreement with exact ARC-JSD, and that
fitted in sample it agrees on top-1 in only 0.65-0.85 of the cases: the features look like the
limit. This benchmark tries others, each computed from the same attention pass (on the
full-context pass's cache) and, for the weighted ones, one more pass without any source:

* ``mean``: the shipped feature, ``mean_t A[l, h, i, t]`` (``A``: attention mass on source
  ``i``'s tokens at the position predicting response token ``t``);
* ``share``: each token's mass divided by what that token pays to all sources together (the
  attention sink and the template drop out), then averaged;
* ``peak``: ``max_t A[l, h, i, t]`` (a source that one response token copies from);
* ``per_source_token``: ``mean`` over the source's token count (long sentences draw diffuse mass);
* ``weighted``: the response tokens weighted by how much the sources change them,
  ``d_t = JSD(P_full,t || P_no source,t)``: ``sum_t d_t A[l, h, i, t] / sum_t d_t``. ARC-JSD sums
  per-token divergences, so the tokens that no source changes add nothing to it; the plain mean
  gives them the same weight as the rest;
* ``weighted_share``: ``share`` weighted the same way.

Feature sets are single kinds or several side by side (each kind's block divided by its mean
spread over the training cases' sources, so that the simplex weighs blocks alike). Each set is
fitted with ``mechrag fit-attention``'s defaults (Pearson loss, L2 0.001, seed 0, 400 Adam steps
at rate 0.01; one thread) on the cases of two question groups (HotpotQA training at 10, 20, 40
sentences and whole; MuSiQue training; HotpotQA dev) and scored on the third, so no question is
scored by a fit that saw it. The passes' features go to ``--cache`` (not committed, about 40 MB;
a rerun reuses them and fits again); the records (``--out``, rewritten whole as
``records.jsonl.gz`` at the end of a run) hold every scored case's predicted and exact scores and
each case's pass seconds, from which ``make results`` (table ``attention_features``)
builds the table.

    python experiments/attention_features.py --threads 2
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np
from frontier_cases import REPOSITORY, recorded_cases, run_folder, timed_on_cpu

KINDS = ("mean", "share", "peak", "per_source_token", "weighted", "weighted_share")
FEATURE_SETS = (
    ("mean",),
    ("share",),
    ("peak",),
    ("per_source_token",),
    ("weighted",),
    ("weighted_share",),
    ("mean", "peak"),
    ("mean", "per_source_token"),
    ("weighted", "peak"),
    KINDS,
)
# The question groups, by the frontier's size labels: each is scored by a fit on the others.
GROUPS = {
    "HotpotQA training": ("10", "20", "40", "hotpotqa"),
    "MuSiQue training": ("musique",),
    "HotpotQA dev": ("hotpotqa_dev",),
}


def feature_kinds(per_token, context_effect, source_lengths) -> dict[str, np.ndarray]:
    """Every kind of :data:`KINDS` as a design ``[n_sources, n_layers * n_heads]`` (layer-major,
    as :meth:`~mechrag.attribution.attention.AttentionFeatures.design`).

    ``per_token``: ``[n_layers, n_heads, n_sources, n_response]`` attention masses;
    ``context_effect``: ``[n_response]`` divergences of each token's distribution from the one
    without sources; ``source_lengths``: ``[n_sources]`` token counts."""
    n_layers, n_heads, n_sources, _ = per_token.shape
    totals = per_token.sum(2, keepdims=True)
    share = per_token / np.maximum(totals, 1e-300)
    weights = np.asarray(context_effect, float)
    weights = (
        weights / weights.sum() if weights.sum() > 0 else np.full(len(weights), 1 / len(weights))
    )
    mean = per_token.mean(-1)
    kinds = {
        "mean": mean,
        "share": share.mean(-1),
        "peak": per_token.max(-1),
        "per_source_token": mean / np.maximum(np.asarray(source_lengths, float), 1.0),
        "weighted": per_token @ weights,
        "weighted_share": share @ weights,
    }
    return {k: v.reshape(n_layers * n_heads, n_sources).T for k, v in kinds.items()}


def case_features(case) -> tuple[dict[str, np.ndarray], dict[str, float]]:
    """The kinds of ``case`` and the seconds of its passes: the full context and the attention
    pass on its cache (what fitted attention costs), and the pass without sources."""
    from mechrag.attribution.attention import attention_features
    from mechrag.attribution.screening import source_token_owners

    start = time.perf_counter()
    case.reference_logprobs()
    per_token = attention_features(case).per_token
    attention_seconds = time.perf_counter() - start
    start = time.perf_counter()
    context_effect = case.token_divergences(case.empty_mask()[None])[0]
    no_source_seconds = time.perf_counter() - start
    owners = source_token_owners(case.builder)
    lengths = np.bincount(owners[owners >= 0], minlength=case.n_sources)
    kinds = feature_kinds(per_token, context_effect, lengths)
    return kinds, {"attention_seconds": attention_seconds, "no_source_seconds": no_source_seconds}


def group_of(case: dict) -> str:
    """The question group of a case (by its size label)."""
    return next(name for name, sizes in GROUPS.items() if case["size"] in sizes)


def stacked(cases: list[dict], kinds: tuple[str, ...], scales: dict[str, float]) -> list:
    """Each case's design of the feature set ``kinds``: the blocks side by side, each over its
    scale."""
    return [np.hstack([case["kinds"][k] / scales[k] for k in kinds]) for case in cases]


def block_scales(cases: list[dict], kinds: tuple[str, ...]) -> dict[str, float]:
    """Per kind, the mean over ``cases`` and heads of the spread over a case's sources."""
    return {
        k: max(float(np.mean([c["kinds"][k].std(0).mean() for c in cases])), 1e-300) for k in kinds
    }


def predictions(cases: list[dict]) -> list[dict]:
    """For each feature set and group: the fit on the other groups' cases, its scores on this
    group's (one torch thread, so that near-ties do not depend on the cores)."""
    import torch

    from mechrag.attribution.attention_fit import fit_head_weights

    questions = {}
    for case in cases:
        questions.setdefault(group_of(case), set()).add((case["dataset"], case["id"]))
    for group, held in questions.items():
        if any(held & other for name, other in questions.items() if name != group):
            raise RuntimeError(f"a question of group {group!r} is also in another group")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    records = []
    try:
        for kinds in FEATURE_SETS:
            for group in GROUPS:
                training = [c for c in cases if group_of(c) != group]
                scored = [c for c in cases if group_of(c) == group]
                if not training or not scored:
                    continue
                scales = block_scales(training, kinds)
                weights = fit_head_weights(
                    stacked(training, kinds, scales), [c["exact_scores"] for c in training]
                )
                for case, design in zip(scored, stacked(scored, kinds, scales)):
                    records.append(
                        {
                            "kind": "prediction",
                            "features": "+".join(kinds),
                            "group": group,
                            "size": case["size"],
                            "id": case["id"],
                            "training_cases": len(training),
                            "scores": (design @ weights).tolist(),
                            "exact_scores": list(case["exact_scores"]),
                        }
                    )
    finally:
        torch.set_num_threads(threads)
    return records


def run(args: argparse.Namespace) -> None:
    import torch

    from mechrag.models.loading import load_model
    from mechrag.results.files import JsonlWriter, replace_records, run_records

    torch.set_num_threads(args.threads)
    print(f"threads: {torch.get_num_threads()} (of {os.cpu_count()} cores)")
    ran = [r for r in run_records(args.frontier) if r["model"] == args.model]
    sizes = [size for sizes in GROUPS.values() for size in sizes]
    exact = {(r["size"], r["id"]): r for r in ran if r["method"] == "exact" and r["size"] in sizes}
    cache = Path(args.cache)
    cache.mkdir(parents=True, exist_ok=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    passes = {(r["size"], r["id"]): r for r in run_records(out) if r["kind"] == "passes"}

    def cached(size: str, example_id: str) -> Path:
        return cache / f"{size}_{example_id}.npz"

    def complete(size: str, example_id: str) -> bool:
        """Whether the cache holds every kind of this example (a cache of older kinds does not)."""
        if not cached(size, example_id).is_file():
            return False
        with np.load(cached(size, example_id)) as stored:
            return set(KINDS) <= set(stored.files)

    done = {key for key in exact if key in passes and complete(*key)}
    if len(done) < len(exact):
        model = load_model(args.model)
        for size, example, reference, case in recorded_cases(model, exact, sizes, done):
            kinds, seconds = case_features(case)
            np.savez_compressed(cached(size, example.id), **kinds)
            if (size, example.id) not in passes:
                record = {"kind": "passes", "size": size, "id": example.id,
                          "dataset": example.dataset, "model": args.model,
                          "threads": torch.get_num_threads(), "n_sources": case.n_sources,
                          # exact ARC-JSD's seconds where the CPU timed it (a GPU's are not
                          # comparable with these attention passes'), else None
                          "exact_seconds": reference["seconds"]
                          if timed_on_cpu(reference) else None,
                          **seconds}  # fmt: skip
                with JsonlWriter(out / "records.jsonl") as writer:
                    writer.write(record)
                passes[size, example.id] = record
            print(f"{size:>12} {example.id[:10]} {case.n_sources:3d} sources "
                  f"{seconds['attention_seconds']:6.1f} s + {seconds['no_source_seconds']:5.1f} s",
                  flush=True)  # fmt: skip
    cases = []
    for size, example_id in sorted(exact):
        with np.load(cached(size, example_id)) as stored:
            kinds = {k: stored[k].astype(np.float64) for k in KINDS}
        reference = exact[size, example_id]
        scores = np.asarray(reference["scores"], float)
        cases.append({"size": size, "id": example_id, "dataset": reference["dataset"],
                      "kinds": kinds, "exact_scores": scores})  # fmt: skip
    replace_records(out, [*passes.values(), *predictions(cases)])
    print(f"{len(cases)} cases; predictions of {len(FEATURE_SETS)} feature sets in {out}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--frontier", default=None, help="default: experiments/runs/frontier_MODEL")
    parser.add_argument("--cache", default=None, help="default: runs/attention_features_MODEL")
    parser.add_argument(
        "--out", default=None, help="default: experiments/runs/attention_features_MODEL"
    )
    args = parser.parse_args()
    args.frontier = args.frontier or run_folder("frontier", args.model)
    cache_root = REPOSITORY / "runs"  # not committed (.gitignore)
    args.cache = args.cache or run_folder("attention_features", args.model, root=cache_root)
    args.out = args.out or run_folder("attention_features", args.model)
    run(args)
    print("table: make results (experiments/make_results.py: attention_features)")


if __name__ == "__main__":
    main()
