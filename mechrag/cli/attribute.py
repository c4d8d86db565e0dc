"""``mechrag attribute``: score the sources of a context file with any registered method.

    mechrag attribute --query "..." --context-file FILE [--method arc_jsd] [--out DIR]

``--method`` takes every name of :data:`mechrag.attribution.methods.METHODS`; ``--out`` receives
the table, the JSON and the bar chart (and ``report.html`` with ``--html``).
"""

from __future__ import annotations

import argparse
import time

from mechrag.cli.common import (
    add_model_arguments,
    add_output_arguments,
    add_question_arguments,
    case_from,
    check_html,
    load_model_from,
    positive_int,
    print_ranking,
    print_written,
    read_sources,
    write_html,
)

EXAMPLE = (
    'mechrag attribute --query "Where was the author born?" --context-file context.txt '
    "--method arc_jsd --evaluate --out out/attribution --html"
)
HELP = "score the sources of a context file"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from mechrag.attribution.methods import METHODS

    add_question_arguments(parser)
    add_model_arguments(parser)
    add_output_arguments(parser, "folder for the table, JSON and bar chart")
    parser.add_argument("--method", default="arc_jsd", choices=tuple(METHODS))
    parser.add_argument("--unit", choices=("sentence", "document"), default="sentence")
    parser.add_argument("--budget", type=positive_int, help="value calls (sampling methods)")
    parser.add_argument(
        "--documents", type=positive_int, default=None, help="documents expanded (hierarchical)"
    )
    parser.add_argument(
        "--within",
        type=float,
        default=None,
        help="also expand documents within this fraction of the top one's score (hierarchical)",
    )
    parser.add_argument(
        "--weights", default=None, help="fitted, localized, uniform or a file (attention)"
    )
    parser.add_argument("--proxy-model", default=None, help="the proxy model (proxy)")
    parser.add_argument(
        "--evaluate",
        action="store_true",
        help="also measure faithfulness: LDS on 32 held-out masks and the log-probability "
        "change when the top 1, 3, 5 sources are removed or kept alone (printed and in the JSON)",
    )


def print_faithfulness(found: dict) -> None:
    """LDS and the top-k changes of ``log p`` under the ranked table."""
    print(f"\nLDS (Spearman, {found['lds_masks']} held-out masks): {found['lds']:+.3f}")
    for kind, label in (("topk_removal", "removed"), ("topk_keep", "kept alone")):
        changes = ", ".join(f"k={k} {v:+.3f}" for k, v in found[kind].items())
        print(f"Δ log p(response), top k {label}: {changes}")


def run(args: argparse.Namespace) -> None:
    from mechrag.attribution.methods import resolve_method

    check_html(args)
    method = resolve_method(args.method).with_settings(
        budget=args.budget,
        documents=args.documents,
        within=args.within,
        weights=args.weights,
        proxy=args.proxy_model,
    )
    method.check_inputs()
    sources = read_sources(args, args.unit)
    model = load_model_from(args)
    start = time.perf_counter()
    case = case_from(args, model, sources)
    attribution = case.attribute(method)
    print_ranking(attribution, args.top_k)
    if args.evaluate:
        from mechrag.metrics.faithfulness import faithfulness

        found = faithfulness(case, attribution)
        attribution.metadata["faithfulness"] = found
        print_faithfulness(found)
    print(f"\n{time.perf_counter() - start:.1f} s")
    if args.out:
        print_written(attribution.save(args.out, f"attribution_{args.method}"))
        print_written(write_html(args))
