"""``mechrag gate``: the response with and without JSD gating, low-echo tokens marked.

Steps: greedy response; its context echo (per-token JSD between the full context and the query
alone); localisation of the top source's heads and MLPs; gates from ``--rule``; the gated
response (``--mode dynamic``: gates only at steps whose echo is below ``--threshold``;
``static``: at every step) and its echo. ``--out`` receives ``gate.json`` and the echo strips.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from mechrag.cli import _add_case, _add_common, _read_case_inputs
from mechrag.mechanism.echo import DEFAULT_THRESHOLD
from mechrag.mechanism.gating_rules import DEFAULT_FACTORS, RULES


def marked(echo_result) -> str:
    """The response text with answer tokens below the echo threshold wrapped in [[...]]."""
    return "".join(
        f"[[{token}]]" if low else token
        for token, low in zip(echo_result.response_tokens, echo_result.low_tokens)
    )


def cmd_gate(args: argparse.Namespace) -> None:
    import torch

    from mechrag import Case, load_model
    from mechrag.adapter import greedy_generate
    from mechrag.mechanism.echo import echo
    from mechrag.mechanism.gated_decoding import decode_with_gates
    from mechrag.mechanism.gating_rules import GatingRule
    from mechrag.outputs import write_text_atomic
    from mechrag.plots import save_figure

    sources = _read_case_inputs(args)
    model = load_model(args.model)
    case = Case(model, args.query, sources, args.response, max_new_tokens=args.max_new_tokens)
    plain = echo(case, threshold=args.threshold)
    located = case.localize(plain.top_source)
    rule = GatingRule(args.rule, k=args.top_k, factor=args.factor)
    gates = rule.gates(located)
    builder = case.builder
    if args.mode == "dynamic":
        empty = torch.zeros(builder.n_sources, dtype=torch.bool)
        decoded = decode_with_gates(
            model, builder.ids(), builder.ids(empty), gates, args.threshold, args.max_new_tokens
        )
        gated_ids, fired = decoded.response_ids, decoded.n_fired
    else:
        with gates.apply(model):
            gated_ids, fired = greedy_generate(model, builder.ids(), args.max_new_tokens), None
    if not gated_ids:
        raise ValueError("the gated model generated an empty response")
    gated_case = Case(model, args.query, sources, gated_ids, engine=case.engine)
    gated = echo(gated_case, threshold=args.threshold)
    print(f"top source: {plain.top_source}; rule {rule.label}: {', '.join(gates.labels())}")
    print(f"echo threshold {args.threshold:g}; [[token]] = answer token below it\n")
    print(f"without gating (mean echo {plain.mean:.3f}):\n  {marked(plain)}")
    steps = "" if fired is None else f", gate fired at {fired} steps"
    print(f"with gating ({args.mode}{steps}; mean echo {gated.mean:.3f}):\n  {marked(gated)}")
    if args.out:
        out = Path(args.out)
        record = {
            "query": args.query,
            "rule": rule.to_dict(),
            "mode": args.mode,
            "gates": gates.to_dict(),
            "fired_steps": fired,
            "response": case.response_text,
            "gated_response": gated_case.response_text,
            "echo": plain.to_dict(),
            "gated_echo": gated.to_dict(),
        }
        write_text_atomic(out / "gate.json", json.dumps(record, indent=1))
        save_figure(plain.plot(), out / "echo_response")
        save_figure(gated.plot(), out / "echo_gated_response")
        print(f"\nwrote gate.json and echo strips to {out}")


def add_parser(commands) -> argparse.ArgumentParser:
    """Register ``mechrag gate`` on the ``commands`` sub-parsers."""
    parser = commands.add_parser(
        "gate", help="generate with and without JSD gating; mark low-echo tokens"
    )
    _add_case(parser)
    _add_common(parser, 32, "folder for gate.json and the echo strips")
    parser.add_argument("--rule", choices=RULES, default="damp")
    defaults = ", ".join(f"{rule} {factor:g}" for rule, factor in DEFAULT_FACTORS.items())
    parser.add_argument("--factor", type=float, default=None, help=f"gate factor ({defaults})")
    parser.add_argument("--mode", choices=("dynamic", "static"), default="dynamic")
    parser.add_argument("--threshold", type=float, default=DEFAULT_THRESHOLD)
    parser.set_defaults(handler=cmd_gate)
    return parser
