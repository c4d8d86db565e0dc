"""Faithfulness of every attribution method at the ARC-JSD paper's setting: LDS and top-k
changes against cost, replayed from the frontier's records.

Gold top-1 and agreement with exact ARC-JSD are not method-neutral (a faithful method that points
at the sentence a wrong response paraphrased counts as a miss; exact ARC-JSD agrees with itself).
This study measures what ContextCite and AT2 report instead (:mod:`mechrag.metrics.faithfulness`):
the linear datamodeling score over 32 held-out masks (each source kept with probability ½), and
how far the response's log-probability moves when a method's top 1, 3 and 5 sources are removed,
or kept alone.

Each question of the frontier's records (``experiments/frontier.py``; by default the dev samples
with every paragraph, which nothing was fitted on) is rebuilt on its recorded response (float32);
its held-out masks and every method's top-k subsets (those no earlier run scored) are scored in
one batch through that case, so the masks are the same for every method. Each method's recorded
scores then give its measures; its cost (passes, seconds) is the frontier's. ``random`` is a
seeded random ranking of the same sources: the floor every method should clear. Questions with
the most recorded methods go first.

Records go to ``--out`` (one line per question and method, resumable: a rerun skips what is
there, but a frontier record refitted since, ContextCite on another target or attention on other
weights, is evaluated anew); ``make results`` builds the tables and the plot of LDS against cost
from them alone. Every scored subset's ``log p`` is kept in ``--out``'s ``scored/`` run folder
(with the model, dtype, response and sources it stands for), and a later run scores only the
subsets not there: a method whose frontier records arrive later costs its own top-k subsets, not
the held-out masks again.

    python experiments/faithfulness.py --model smollm2-135m --threads 2
"""

from __future__ import annotations

import argparse
import functools
import os
import time
import zlib
from collections.abc import Callable
from pathlib import Path

import numpy as np
from frontier_cases import EVERY_EXAMPLE, SIZES, contextcite_target, examples_of_size, run_folder

PAPER_SIZES = ("hotpotqa_dev", "musique_dev")
RANDOM = "random"
SCORED = "scored"  # the run folder's subfolder of each scored subset's log p, per question


def random_scores(question_id: str, n_sources: int):
    """A random ranking of ``n_sources``, seeded by the question (the same in every run)."""
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


def row_key(mask) -> str:
    """A mask as a string of ``0``/``1`` per source: the key its stored log-probability has."""
    return "".join("1" if kept else "0" for kept in mask)


def needed_rows(scores: dict[str, np.ndarray], settings: dict) -> np.ndarray:
    """Every subset one question's measures read: the held-out masks, the full context, and each
    method's top-k subsets kept and removed (unique rows)."""
    from mechrag.metrics.faithfulness import held_out_masks, topk_masks

    n_sources = len(next(iter(scores.values())))
    rows = [held_out_masks(n_sources, settings["n_masks"], seed=settings["seed"])]
    rows.append(np.ones((1, n_sources), dtype=bool))
    for found in scores.values():
        _, kept = topk_masks(found, settings["top_ks"])
        rows += [kept, ~kept]
    return np.unique(np.concatenate(rows), axis=0)


def evaluate_question(
    records: list[dict],
    settings: dict,
    known: dict[str, float],
    score: Callable[[np.ndarray], tuple[np.ndarray, int, float]],
) -> tuple[list[dict], dict[str, float]]:
    """One record per method (and :data:`RANDOM`) of one question, and the log-probabilities it
    scored: LDS and top-k changes from ``known`` (the question's stored ``log p`` per
    :func:`row_key`) and, for the subsets not in it, ``score(masks)`` (their ``log p``, the
    forward passes and the seconds that took), called once with all of them, so every method
    shares the held-out masks and a method added later costs only its own top-k subsets."""
    from result_tables.frontier import frontier_weights

    from mechrag.metrics.faithfulness import (
        held_out_masks,
        lds_of_outputs,
        response_logit_prob,
        topk_masks,
    )

    first = records[0]
    scores = {r["method"]: np.asarray(r["scores"], dtype=float) for r in records}
    scores[RANDOM] = random_scores(first["id"], len(first["source_ids"]))
    missing = [row for row in needed_rows(scores, settings) if row_key(row) not in known]
    scored, passes, seconds = {}, 0, 0.0
    if missing:
        found_log_p, passes, seconds = score(np.stack(missing))
        scored = dict(zip(map(row_key, missing), map(float, found_log_p)))
    log_p = {**known, **scored}

    def log_ps(masks: np.ndarray) -> np.ndarray:
        return np.array([log_p[row_key(row)] for row in masks])

    masks = held_out_masks(len(first["source_ids"]), settings["n_masks"], seed=settings["seed"])
    outputs = response_logit_prob(log_ps(masks)[:, None])
    full = log_p[row_key(np.ones(len(first["source_ids"]), dtype=bool))]
    evaluated = []
    for method, found in scores.items():
        cost = next((r for r in records if r["method"] == method), {})
        ks, kept = topk_masks(found, settings["top_ks"])
        evaluated.append(
            {
                "size": first["size"],
                "id": first["id"],
                "method": method,
                "settings": settings,
                "dataset": first["dataset"],
                "n_sources": len(first["source_ids"]),
                "correct": first["correct"],
                "top1_gold": first["source_ids"][int(np.argmax(found))] in first["gold_ids"],
                "lds": lds_of_outputs(found, masks, outputs)[0],
                "topk_removal": dict(zip(map(str, ks), (log_ps(~kept) - full).tolist())),
                "topk_keep": dict(zip(map(str, ks), (log_ps(kept) - full).tolist())),
                # The game its frontier record fitted (ContextCite's: frontier_cases), and the
                # attention weights it read (their hash; None for a method reading none).
                "value": cost.get("value"),
                "weights": frontier_weights(cost) if cost else None,
                "forward_passes": cost.get("forward_passes", 0),
                "seconds": cost.get("seconds", 0.0),
                "device": cost.get("device", "cpu"),  # where the frontier timed it
                "threads": first["threads"],
                # The question's evaluation in this run (the subsets no earlier run scored):
                # the same in each of its records, whichever method needed them.
                "evaluation_subsets": len(scored),
                "evaluation_passes": passes,
                "evaluation_seconds": seconds,
            }
        )
    return evaluated, scored


@functools.cache
def examples_by_id(size: str) -> dict:
    """The examples of ``size`` by id (each size's read once)."""
    return {e.id: e for e in examples_of_size(size, EVERY_EXAMPLE)}


def question_scorer(
    model: Callable, size: str, question: str, response: list[int], source_ids: list[str]
) -> Callable[[np.ndarray], tuple[np.ndarray, int, float]]:
    """``score(masks)``: the ``log p`` of ``response`` under each mask, with the forward passes
    and seconds that took, through a case of the question on ``model()`` (the model and the
    example are read only when something is scored), checked to hold the sources the frontier
    scored."""
    from mechrag import Case

    def score(masks: np.ndarray) -> tuple[np.ndarray, int, float]:
        case = Case.from_example(model(), examples_by_id(size)[question], response=response)
        if [s.id for s in case.sources] != source_ids:
            raise RuntimeError(f"{size}/{question}: the frontier scored other sources")
        passes, started = case.engine.forward_passes, time.perf_counter()
        log_p = case.token_logprobs(masks).sum(-1)
        return log_p, case.engine.forward_passes - passes, time.perf_counter() - started

    return score


def scored_key(line: dict) -> tuple:
    """What a stored ``log p`` stands for besides its mask: the model and its dtype, the
    question, the response and the sources (in order: a mask's bits are positions)."""
    return (line["model"], line["dtype"], line["size"], line["id"],
            tuple(line["response_ids"]), tuple(line["source_ids"]))  # fmt: skip


def stored_log_ps(out: Path) -> dict[tuple, dict[str, float]]:
    """The ``log p`` of every subset scored so far, per :func:`scored_key`."""
    from mechrag.results.files import run_records

    stored: dict[tuple, dict[str, float]] = {}
    for line in run_records(out / SCORED):
        stored.setdefault(scored_key(line), {}).update(line["log_p"])
    return stored


def evaluated_as(record: dict) -> tuple[str, str | None, str | None]:
    """What a question's faithfulness record stands for: its method, for ContextCite the target
    it was fitted on, and for a method reading the shipped attention weights their hash (a
    frontier record and its faithfulness record agree; a refit's record is a new one to
    evaluate)."""
    from result_tables.frontier import frontier_weights

    return record["method"], contextcite_target(record), frontier_weights(record)


def run(args: argparse.Namespace) -> None:
    import torch
    from result_tables.frontier import newest_weights

    from mechrag.metrics.faithfulness import HELD_OUT_STREAM, N_MASKS, TOP_KS
    from mechrag.models import adapter
    from mechrag.models.loading import load_model
    from mechrag.results.files import append_jsonl, run_records

    torch.set_num_threads(args.threads)
    print(f"threads: {torch.get_num_threads()} (of {os.cpu_count()} cores)")
    settings = {"model": args.model, "n_masks": N_MASKS, "seed": 0, "top_ks": list(TOP_KS),
                "held_out_stream": HELD_OUT_STREAM}  # fmt: skip
    # After a refit, the old weights' records are not replayed (as the frontier's tables).
    frontier = newest_weights(
        [r for r in run_records(Path(args.frontier)) if r["model"] == args.model]
    )
    questions = recorded_questions(frontier, args.sizes)[: args.questions]
    if not questions:
        raise SystemExit(f"no {args.model} records of {args.sizes} in {args.frontier}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    # A ContextCite record refitted on another target, or an attention record made with refitted
    # weights, is a new record to evaluate.
    done = {
        (r["size"], r["id"], *evaluated_as(r))
        for r in run_records(out)
        if r.get("settings") == settings
    }
    stored = stored_log_ps(out)
    # float32 wherever it runs (the frontier's CPU records are float32), loaded when first needed
    model = functools.cache(
        lambda: load_model(args.model, device=args.device, dtype=torch.float32)
    )
    for size, question, records in questions:
        pending = [r for r in records if (size, question, *evaluated_as(r)) not in done]
        if not pending and (size, question, *evaluated_as({"method": RANDOM})) in done:
            continue
        records = pending or records  # only random missing: a run stopped before writing it
        if any(r["source_ids"] != records[0]["source_ids"] for r in records):
            raise RuntimeError(f"{size}/{question}: the frontier's records scored other sources")
        response, sources = list(records[0]["response_ids"]), records[0]["source_ids"]
        score = question_scorer(model, size, question, response, sources)
        line = {"model": args.model, "dtype": "float32", "size": size, "id": question,
                "response_ids": response, "source_ids": sources}  # fmt: skip
        known = stored.setdefault(scored_key(line), {})
        evaluated, scored = evaluate_question(records, settings, known, score)
        if scored:
            line.update(device=str(adapter.device(model())), log_p=scored)
            append_jsonl(out / SCORED / "records.jsonl", line)
            known.update(scored)
        for record in evaluated:
            if (size, question, *evaluated_as(record)) not in done:
                append_jsonl(out / "records.jsonl", record)
        cost = evaluated[0]  # the question's evaluation, the same in each of its records
        print(
            f"{size:>12} {question[:10]} {len(evaluated):2d} methods "
            f"{cost['evaluation_subsets']:3d} subsets in {cost['evaluation_passes']:3d} passes "
            f"{cost['evaluation_seconds']:6.1f} s",
            flush=True,
        )


def main() -> None:
    from mechrag.errors import positive_int

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m", choices=("smollm2-135m", "gemma3-270m"))
    parser.add_argument("--sizes", nargs="+", default=list(PAPER_SIZES), choices=SIZES)
    parser.add_argument("--questions", type=positive_int, default=None, help="at most this many")
    parser.add_argument("--threads", type=positive_int, default=2)
    parser.add_argument("--device", default="cpu", help="cpu, or cuda (float32 on either)")
    parser.add_argument("--frontier", default=None, help="default: experiments/runs/frontier_MODEL")
    parser.add_argument("--out", default=None, help="default: experiments/runs/faithfulness_MODEL")
    args = parser.parse_args()
    args.frontier = args.frontier or run_folder("frontier", args.model)
    args.out = args.out or run_folder("faithfulness", args.model)
    run(args)
    print("tables and figure: make results (result_tables/faithfulness.py)")


if __name__ == "__main__":
    main()
