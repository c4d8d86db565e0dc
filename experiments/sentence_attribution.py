"""Sentence-level ARC-JSD over a dataset: top-1 gold accuracy and seconds per example.

Appends one JSON line per example to OUT/results.jsonl as it goes; a rerun skips finished
examples, so an interrupted run loses nothing.

    python experiments/sentence_attribution.py --dataset hotpotqa --n 20 --distractors 2 \
        --out runs/hotpotqa_arc_jsd
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import torch
from tqdm.auto import tqdm

from mechrag import arc_jsd, load_model
from mechrag.data import load_examples
from mechrag.metrics.accuracy import top_k_hit
from mechrag.outputs import append_jsonl, read_jsonl


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", choices=("hotpotqa", "musique", "squad"), default="hotpotqa")
    parser.add_argument("--path", default=None, help="dataset file (default: shipped sample)")
    parser.add_argument("--n", type=int, default=20)
    parser.add_argument("--distractors", type=int, default=2, help="hotpotqa/musique only")
    parser.add_argument("--model", default=None)
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    parser.add_argument("--out", default="runs/sentence_attribution")
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    options = (
        {} if args.dataset == "squad" else {"distractors": args.distractors, "unit": "sentence"}
    )
    examples = load_examples(args.dataset, args.path, n=args.n, **options)
    results_path = Path(args.out) / "results.jsonl"
    done = {record["id"] for record in read_jsonl(results_path)}
    model = load_model(args.model)
    for example in tqdm([e for e in examples if e.id not in done], desc="examples"):
        start = time.perf_counter()
        attribution = arc_jsd(
            model,
            example.query,
            example.sources,
            max_new_tokens=args.max_new_tokens,
            progress=False,
        )
        ranked = [attribution.sources[i].id for i in attribution.ranking]
        append_jsonl(
            results_path,
            {
                "id": example.id,
                "query": example.query,
                "answer": example.answer,
                "response": attribution.response,
                "gold_ids": example.gold_ids,
                "ranked_ids": ranked,
                "scores": attribution.scores.tolist(),
                "n_sources": len(example.sources),
                "n_response_tokens": len(attribution.response_ids),
                "top1_gold": top_k_hit(ranked, example.gold_ids, 1),
                "seconds": time.perf_counter() - start,
            },
        )
    records = [r for r in read_jsonl(results_path) if r["id"] in {e.id for e in examples}]
    accuracy = statistics.mean(r["top1_gold"] for r in records)
    seconds = statistics.mean(r["seconds"] for r in records)
    print(
        f"{args.dataset}: n={len(records)}  top-1 gold accuracy={accuracy:.3f}  "
        f"mean seconds/example={seconds:.1f}  (results: {results_path})"
    )


if __name__ == "__main__":
    main()
