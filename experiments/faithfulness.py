"""Faithfulness of every attribution method at the ARC-JSD paper's setting: LDS and top-k
changes against cost, replayed from the frontier's records.

Gold top-1 and agreement with exact ARC-JSD are not method-neutral (a faithful method that points
at the sentence a wrong response paraphrased counts as a miss; exact ARC-JSD agrees with itself).
This study measures what ContextCite and AT2 report instead (:mod:`mechrag.metrics.faithfulness`):
the linear datamodeling score over 32 held-out masks (each source kept with probability ½), and
how far the response's log-probability moves when a method's top 1, 3 and 5 sources are removed,
or kept alone.

Each question of the frontier's records (``experiments/frontier.py``; by default the dev samples
with every paragraph, which nothing was fitted on) is rebuilt once on its recorded response; its
held-out masks and every method's top-k subsets are scored in one batch through that case, so
the masks are the same for every method. Each method's recorded scores then give its measures; its
cost (passes, seconds) is the frontier's. ``random`` is a seeded random ranking of the same
sources: the floor every method should clear. Questions with the most recorded methods go first.

Records go to ``--out`` (one line per question and method, resumable: a rerun skips what is
there); ``make results`` builds the tables and the plot of LDS against cost from them alone.

    python experiments/faithfulness.py --model smollm2-135m --threads 2
"""

from __future__ import annotations

import argparse
import os
import time
import zlib
from pathlib import Path

from frontier_cases import EVERY_EXAMPLE, SIZES, examples_of_size, run_folder

PAPER_SIZES = ("hotpotqa_dev", "musique_dev")
RANDOM = "random"


def random_scores(question_id: str, n_sources: int):
    """A random ranking of ``n_sources``, seeded by the question (the same in every run)."""
    import numpy as np

    return np.random.default_rng(zlib.crc32(question_id.encode())).random(n_sources)


def recorded_questions(frontier: list[dict], sizes) -> list[tuple[str, str, list[dict]]]:
    """``(size, id, records)`` per question of ``sizes`` in the frontier's records, the newest
    record of each method (a rerun or refit supersedes the earlier one), the questions with the
    most recorded methods first (then in size and record order); records whose response differs
    from the question's first are left out, said in one line."""
    newest = {(r["size"], r["id"], r["method"]): r for r in frontier if r["size"] in sizes}
    grouped: dict[tuple[str, str], list[dict]] = {}
    for record in newest.values():
        grouped.setdefault((record["size"], record["id"]), []).append(record)
    questions = []
    for (size, question), records in grouped.items():
        same = [r for r in records if r["response_ids"] == records[0]["response_ids"]]
        if len(same) < len(records):
            print(f"{size}/{question}: {len(records) - len(same)} records of another response")
        questions.append((size, question, same))
    order = {size: i for i, size in enumerate(sizes)}
    return sorted(questions, key=lambda q: (-len(q[2]), order[q[0]]))


def evaluate_question(case, records: list[dict], settings: dict) -> list[dict]:
    """One record per method (and :data:`RANDOM`) of one question: LDS and top-k changes on
    masks scored together in one batch through ``case``."""
    import numpy as np

    from mechrag.metrics.faithfulness import (
        held_out_masks,
        lds,
        topk_keep,
        topk_masks,
        topk_removal,
    )

    scores = {r["method"]: np.asarray(r["scores"], dtype=float) for r in records}
    scores[RANDOM] = random_scores(records[0]["id"], case.n_sources)
    masks = held_out_masks(case.n_sources, settings["n_masks"], seed=settings["seed"])
    rows = [masks, case.full_mask()[None]]
    for found in scores.values():  # every top-k subset, so one batch scores them all
        _, kept = topk_masks(found, settings["top_ks"])
        rows += [kept, ~kept]
    passes, started = case.engine.forward_passes, time.perf_counter()
    case.token_logprobs(np.unique(np.concatenate(rows), axis=0))
    seconds = time.perf_counter() - started
    first = records[0]
    evaluated = []
    for method, found in scores.items():
        cost = next((r for r in records if r["method"] == method), {})
        ranked_first = case.sources[int(np.argmax(found))].id
        evaluated.append(
            {
                "size": first["size"],
                "id": first["id"],
                "method": method,
                "settings": settings,
                "dataset": first["dataset"],
                "n_sources": case.n_sources,
                "correct": first["correct"],
                "top1_gold": ranked_first in first["gold_ids"],
                "lds": lds(case, found, masks=masks).value,
                "topk_removal": {
                    str(k): v for k, v in topk_removal(case, found, settings["top_ks"]).items()
                },
                "topk_keep": {
                    str(k): v for k, v in topk_keep(case, found, settings["top_ks"]).items()
                },
                "forward_passes": cost.get("forward_passes", 0),
                "seconds": cost.get("seconds", 0.0),
                "threads": first["threads"],
                "evaluation_passes": case.engine.forward_passes - passes,
                "evaluation_seconds": seconds,
            }
        )
    return evaluated


def run(args: argparse.Namespace) -> None:
    import torch

    from mechrag import Case
    from mechrag.metrics.faithfulness import HELD_OUT_STREAM, N_MASKS, TOP_KS
    from mechrag.models.loading import load_model
    from mechrag.results.files import append_jsonl, run_records

    torch.set_num_threads(args.threads)
    print(f"threads: {torch.get_num_threads()} (of {os.cpu_count()} cores)")
    settings = {"model": args.model, "n_masks": N_MASKS, "seed": 0, "top_ks": list(TOP_KS),
                "held_out_stream": HELD_OUT_STREAM}  # fmt: skip
    frontier = [r for r in run_records(Path(args.frontier)) if r["model"] == args.model]
    questions = recorded_questions(frontier, args.sizes)[: args.questions]
    if not questions:
        raise SystemExit(f"no {args.model} records of {args.sizes} in {args.frontier}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    done = {
        (r["size"], r["id"], r["method"])
        for r in run_records(out)
        if r.get("settings") == settings
    }
    model = None
    examples: dict[str, dict] = {}
    for size, question, records in questions:
        records = [r for r in records if (size, question, r["method"]) not in done]
        if not records:
            continue
        if model is None:
            model = load_model(args.model)
        if size not in examples:
            examples[size] = {e.id: e for e in examples_of_size(size, EVERY_EXAMPLE)}
        example = examples[size][question]
        case = Case.from_example(model, example, response=list(records[0]["response_ids"]))
        if any([s.id for s in case.sources] != r["source_ids"] for r in records):
            raise RuntimeError(f"{size}/{question}: the frontier scored other sources")
        evaluated = evaluate_question(case, records, settings)
        for record in evaluated:
            if (size, question, record["method"]) not in done:
                append_jsonl(out / "records.jsonl", record)
        cost = evaluated[0]  # the question's evaluation, the same in each of its records
        print(
            f"{size:>12} {question[:10]} {len(evaluated):2d} methods "
            f"{cost['evaluation_passes']:3d} passes {cost['evaluation_seconds']:6.1f} s",
            flush=True,
        )


def main() -> None:
    from mechrag.errors import positive_int

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m", choices=("smollm2-135m", "gemma3-270m"))
    parser.add_argument("--sizes", nargs="+", default=list(PAPER_SIZES), choices=SIZES)
    parser.add_argument("--questions", type=positive_int, default=None, help="at most this many")
    parser.add_argument("--threads", type=positive_int, default=2)
    parser.add_argument("--frontier", default=None, help="default: experiments/runs/frontier_MODEL")
    parser.add_argument("--out", default=None, help="default: experiments/runs/faithfulness_MODEL")
    args = parser.parse_args()
    args.frontier = args.frontier or run_folder("frontier", args.model)
    args.out = args.out or run_folder("faithfulness", args.model)
    run(args)
    print("tables and figure: make results (result_tables/faithfulness.py)")


if __name__ == "__main__":
    main()
