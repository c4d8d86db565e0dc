"""Sentence-level ARC-JSD over a dataset: top-1 gold accuracy and seconds per example.

A sweep of the ``arc_jsd`` method (see ``mechrag sweep``): one record per example in
OUT/records.jsonl, written as it goes; a rerun resumes where it stopped.

    python experiments/sentence_attribution.py --dataset hotpotqa --n 20 --distractors 2 \\
        --out runs/hotpotqa_arc_jsd [--backend ray --workers 2]
"""

from __future__ import annotations

import argparse

from mechrag.sweep import SweepConfig
from mechrag.sweep.arguments import (
    add_backend_arguments,
    add_data_arguments,
    data_options,
    run_with_args,
)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_data_arguments(parser, n=20)
    parser.set_defaults(dataset="hotpotqa")
    parser.add_argument("--model", default=None)
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--out", default="runs/sentence_attribution")
    add_backend_arguments(parser)
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    config = SweepConfig(
        "arc_jsd",
        args.dataset,
        n=args.n,
        path=args.path,
        data=data_options(args, distractors=2, unit="sentence"),
        model=args.model,
        options={"max_new_tokens": args.max_new_tokens},
    )
    frame = run_with_args(config, args.out, args)
    ok = frame[frame["status"] == "ok"]
    print(
        f"{args.dataset}: n={len(ok)} ({len(frame) - len(ok)} errors)  "
        f"top-1 gold accuracy={ok['top1_gold'].mean():.3f}  "
        f"mean seconds/example={ok['seconds'].mean():.1f}  (records: {args.out}/records.jsonl)"
    )


if __name__ == "__main__":
    main()
