"""Hierarchical ARC-JSD's expansion rules, replayed on the frontier's exact ARC-JSD records.

Hierarchical ARC-JSD's top source is exact ARC-JSD's exactly when exact's top sentence lies in a
document it expands (expanded sentences keep their exact scores and rank above every other), and
its cost is the full context, every document and the expanded sentences (a one-sentence document
once). So with each example's level-one document scores, recorded here (one pass per document,
on the frontier's recorded response), and exact ARC-JSD's sentence scores, copied from the
frontier's record, any expansion rule of
:func:`mechrag.attribution.hierarchical.expanded_documents` (the top ``documents``, and with
``within`` every document within that fraction of the top one's score) is replayed without another
model pass. ``make results`` (table ``hierarchical_rules``) gives each rule's top-1 agreement with
exact ARC-JSD and its subsets against exact's, per split: a rule is chosen on the training split
and reported on dev.

Records go to ``--out`` (one line per example, resumable), for every example of ``--sizes`` that
has an exact ARC-JSD record in ``--frontier``; the frontier's own hierarchical ARC-JSD record of
the example (its scores and model calls), where there is one, goes with it, so that ``make
results`` checks the replay against it.

    python experiments/hierarchical_rules.py --sizes hotpotqa hotpotqa_dev 40 musique --threads 2
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from frontier_cases import HIERARCHICAL_DOCUMENTS, SIZES, recorded_cases, run_folder


def level_one(case) -> dict:
    """The case's documents (each source's index among them) and their level-one scores: the
    summed per-token JSD from the full context when a document is removed whole, as
    :class:`~mechrag.attribution.hierarchical.HierarchicalARCJSD` scores them."""
    from mechrag.attribution.hierarchical import document_masks

    case.reference_logprobs()  # the full-context pass, off the clock as in the frontier's warm-up
    passes = case.engine.forward_passes
    start = time.perf_counter()
    _, removed = document_masks(case)
    scores = case.token_divergences(removed).sum(-1)
    return {
        "document_of": (~removed).argmax(0).tolist(),
        "document_scores": scores.tolist(),
        "seconds": time.perf_counter() - start,
        "forward_passes": case.engine.forward_passes - passes,
    }


def run(args: argparse.Namespace) -> None:
    import torch

    from mechrag.models.loading import load_model
    from mechrag.results.files import append_jsonl, run_records

    torch.set_num_threads(args.threads)
    print(f"threads: {torch.get_num_threads()} (of {os.cpu_count()} cores)")
    ran = [r for r in run_records(args.frontier) if r["model"] == args.model]
    exact = {(r["size"], r["id"]): r for r in ran if r["method"] == "exact"}
    # The frontier's own hierarchical runs, for make results' check of the replay.
    hierarchical = {(r["size"], r["id"]): r for r in ran if r["method"] == "hierarchical"}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    done = {(r["size"], r["id"]) for r in run_records(out)}
    model = load_model(args.model)
    for size, example, reference, case in recorded_cases(
        model, exact, args.sizes, done
    ):
        record = level_one(case)
        own = hierarchical.get((size, example.id))
        if own is not None and own["response_ids"] == reference["response_ids"]:
            record["frontier_hierarchical"] = {
                "documents": HIERARCHICAL_DOCUMENTS,
                "scores": own["scores"],
                "model_calls": own["model_calls"],
            }
        append_jsonl(
            out / "records.jsonl",
            {
                "size": size,
                "id": example.id,
                "dataset": example.dataset,
                "model": args.model,
                "threads": torch.get_num_threads(),
                "source_ids": reference["source_ids"],
                "response_ids": reference["response_ids"],
                "exact_scores": reference["scores"],
                "exact_model_calls": reference["model_calls"],
                **record,
            },
        )
        print(
            f"{size:>12} {example.id[:10]} {len(record['document_scores'])} documents "
            f"{record['seconds']:6.1f} s",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--sizes", nargs="+", required=True, choices=SIZES)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--frontier", default=None, help="default: experiments/runs/frontier_MODEL")
    parser.add_argument("--out", default=None, help="default: experiments/runs/hierarchical_MODEL")
    args = parser.parse_args()
    args.frontier = args.frontier or run_folder("frontier", args.model)
    args.out = args.out or run_folder("hierarchical", args.model)
    run(args)
    print("table: make results (experiments/make_results.py: hierarchical_rules)")


if __name__ == "__main__":
    main()
