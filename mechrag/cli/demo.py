"""``mechrag demo``: ARC-JSD on a shipped HotpotQA example (gold paragraphs + 2 distractors)."""

from __future__ import annotations

import argparse
import time

from mechrag.cli.common import (
    add_model_arguments,
    add_output_arguments,
    engine_from,
    load_model_from,
    print_ranking,
    print_written,
    write_html,
)

EXAMPLE = "mechrag demo --out out/demo --html"
HELP = "ARC-JSD on a shipped HotpotQA example"
DEMO_EXAMPLE_ID = "5a77ec115542992a6e59dff7"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_model_arguments(parser)
    add_output_arguments(parser, "folder for the table, JSON and bar chart")
    parser.set_defaults(out="outputs/demo")


def run(args: argparse.Namespace) -> None:
    from mechrag.case import Case
    from mechrag.data.loaders import load_hotpotqa

    example = next(e for e in load_hotpotqa(distractors=2) if e.id == DEMO_EXAMPLE_ID)
    print(
        f"HotpotQA example {example.id}: gold paragraphs + 2 distractors, "
        f"{len(example.sources)} sentences; reference answer: {example.answer!r}\n"
    )
    model = load_model_from(args)
    start = time.perf_counter()
    case = Case.from_example(
        model, example, max_new_tokens=args.max_new_tokens, engine=engine_from(args, model)
    )
    attribution = case.arc_jsd()
    print_ranking(attribution, args.top_k, example.gold_ids)
    top_is_gold = attribution.top(1)[0][0].id in example.gold_ids
    print(f"\ntop-1 is gold: {top_is_gold}; {time.perf_counter() - start:.1f} s")
    figure = attribution.plot(highlight=example.gold_ids)
    print_written(attribution.save(args.out, "demo_arc_jsd", figure=figure))
    print_written(write_html(args))
