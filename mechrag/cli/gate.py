"""``mechrag gate``: the response with and without JSD gating, low-echo tokens marked.

Steps: greedy response; its context echo (per-token JSD between the full context and the query
alone); localisation of the top source's heads and MLPs; gates from ``--rule``; the gated
response (``--mode dynamic``: gates only at steps whose echo is below ``--threshold``;
``static``: at every step) and its echo. ``--out`` receives ``gate.json`` and the echo strips.
"""

from __future__ import annotations

import argparse

from mechrag.cli.common import (
    add_model_arguments,
    add_output_arguments,
    add_protocol_argument,
    add_question_arguments,
    case_from,
    check_html,
    load_model_from,
    print_written,
    read_sources,
    write_html,
)
from mechrag.protocols import LOCALIZE_PROTOCOL

EXAMPLE = (
    'mechrag gate --query "Where was the author born?" --context-file context.txt --out '
    "out/gate"
)
HELP = "generate with and without JSD gating; mark low-echo tokens"


def marked(echo_result) -> str:
    """The response text with answer tokens below the echo threshold wrapped in [[...]]."""
    return "".join(
        f"[[{token}]]" if low else token
        for token, low in zip(echo_result.response_tokens, echo_result.low_tokens)
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from mechrag.mechanism.echo import DEFAULT_THRESHOLD
    from mechrag.mechanism.gating.rules import DEFAULT_FACTORS, DEFAULT_K, GATING_MODES, RULES

    add_question_arguments(parser)
    add_model_arguments(parser)
    add_output_arguments(parser, "folder for gate.json and the echo strips")
    counts = ", ".join(f"{rule} {k}" for rule, k in DEFAULT_K.items())
    parser.set_defaults(top_k=None)  # each rule's own count of gated components
    add_protocol_argument(parser, default=LOCALIZE_PROTOCOL)
    parser.add_argument(
        "--rule",
        choices=RULES,
        default=None,
        help="default: the protocol's (arc-jsd: paper, ARC-JSD's Table 4 rule: top-5 heads and "
        f"MLPs with G < 0 scaled by 0.7 + 0.3 sigmoid(G)); --top-k per rule: {counts}",
    )
    defaults = ", ".join(f"{rule} {factor:g}" for rule, factor in DEFAULT_FACTORS.items())
    parser.add_argument("--factor", type=float, default=None, help=f"gate factor ({defaults})")
    parser.add_argument(
        "--mode",
        choices=GATING_MODES,
        default=None,
        help="default: static for paper (as in Table 4), dynamic for the other rules",
    )
    parser.add_argument("--threshold", type=float, default=DEFAULT_THRESHOLD)


def run(args: argparse.Namespace) -> None:
    from mechrag.mechanism.gating.comparison import compare_gating
    from mechrag.mechanism.gating.rules import GatingRule

    check_html(args)
    sources = read_sources(args)
    rule = GatingRule.for_protocol(args.protocol, args.rule, k=args.top_k, factor=args.factor)
    model = load_model_from(args)
    case = case_from(args, model, sources)
    result = compare_gating(
        case, rule, mode=args.mode, threshold=args.threshold, max_new_tokens=args.max_new_tokens
    )
    gates = ", ".join(result.gates.labels())
    print(f"top source: {result.echo.top_source}; rule {rule.label}: {gates}")
    print(f"echo threshold {args.threshold:g}; [[token]] = answer token below it\n")
    print(f"without gating (mean echo {result.echo.mean:.3f}):\n  {marked(result.echo)}")
    mode = args.mode or rule.default_mode
    steps = "" if result.fired_steps is None else f", gate fired at {result.fired_steps} steps"
    print(
        f"with gating ({mode}{steps}; mean echo {result.gated_echo.mean:.3f}):\n"
        f"  {marked(result.gated_echo)}"
    )
    if args.out:
        print()
        print_written(result.save(args.out))
        print_written(write_html(args))
