"""The ``mechrag`` command line: thin wrappers that parse, call the library and save."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from mechrag.attribution.estimators import ESTIMATORS

ATTRIBUTION_METHODS = ("arc_jsd", *ESTIMATORS)

DEMO_EXAMPLE_ID = "5a77ec115542992a6e59dff7"


def _read_case_inputs(args: argparse.Namespace, unit: str = "sentence"):
    """Validated sources from ``--context-file`` and a checked query, before any model loads.

    Paragraphs are separated by blank lines.
    """
    from mechrag.sources import as_sources, documents_from_texts, sentences_from_paragraphs

    if not args.query.strip():
        raise ValueError("query is empty")
    if args.response is not None and not args.response.strip():
        raise ValueError("response is empty: nothing to attribute")
    path = args.context_file
    text = Path(path).read_text(encoding="utf-8")
    if not text.strip():
        raise ValueError(f"context file {path} is empty")
    paragraphs = [p.strip() for p in text.split("\n\n") if p.strip()]
    if unit == "document":
        return as_sources(documents_from_texts(paragraphs))
    return as_sources(sentences_from_paragraphs([(None, p) for p in paragraphs]))


def print_ranking(attribution, k: int, gold=()) -> None:
    frame = attribution.to_frame().sort_values("rank").head(k)
    print(f"query:    {attribution.query}")
    print(f"response: {attribution.response!r}")
    print(f"method:   {attribution.method} ({attribution.model_calls} model calls)\n")
    for row in frame.itertuples():
        marker = "*" if row.source_id in set(gold) else " "
        text = row.text if len(row.text) <= 90 else row.text[:89] + "…"
        print(f"{row.rank:>3} {marker} {row.score:9.4f}  {row.source_id:<8} {text}")
    if gold:
        print("\n* gold supporting source")


def cmd_attribute(args: argparse.Namespace) -> None:
    from mechrag import Case, load_model

    sources = _read_case_inputs(args, args.unit)
    model = load_model(args.model)
    start = time.perf_counter()
    case = Case(model, args.query, sources, args.response, max_new_tokens=args.max_new_tokens)
    attribution = case.attribute(args.method, budget=args.budget)
    print_ranking(attribution, args.top_k)
    print(f"\n{time.perf_counter() - start:.1f} s")
    if args.out:
        for path in attribution.save(args.out, f"attribution_{args.method}"):
            print(f"wrote {path}")


def cmd_demo(args: argparse.Namespace) -> None:
    from mechrag import Case, load_model
    from mechrag.data import load_hotpotqa

    example = next(e for e in load_hotpotqa(distractors=2) if e.id == DEMO_EXAMPLE_ID)
    print(
        f"HotpotQA example {example.id}: gold paragraphs + 2 distractors, "
        f"{len(example.sources)} sentences; reference answer: {example.answer!r}\n"
    )
    model = load_model(args.model)
    start = time.perf_counter()
    case = Case.from_example(model, example, max_new_tokens=args.max_new_tokens)
    attribution = case.arc_jsd()
    print_ranking(attribution, args.top_k, example.gold_ids)
    top_is_gold = attribution.top(1)[0][0].id in example.gold_ids
    print(f"\ntop-1 is gold: {top_is_gold}; {time.perf_counter() - start:.1f} s")
    figure = attribution.plot(highlight=example.gold_ids)
    for path in attribution.save(args.out, "demo_arc_jsd", figure=figure):
        print(f"wrote {path}")


COMPONENT_PLOTS = ("plot_heads", "plot_layers", "plot_residual", "plot_gain")


def cmd_localize(args: argparse.Namespace) -> None:
    from mechrag import Case, load_model
    from mechrag.plots import save_figure

    sources = _read_case_inputs(args)
    if args.source is not None and args.source not in {s.id for s in sources}:
        raise ValueError(f"unknown source {args.source!r}: choose from {[s.id for s in sources]}")
    model = load_model(args.model)
    case = Case(model, args.query, sources, args.response, max_new_tokens=args.max_new_tokens)
    result = case.localize(args.source)
    print(f"response: {result.response!r}\nremoved source: {result.source_id}")
    if result.gains is not None:
        rho, p = result.spearman()
        print(f"Spearman rho (JSD vs semantic gain) = {rho:.3f} (p = {p:.2g})")
    print(result.to_frame().sort_values("rank").head(args.top_k).to_string(index=False))
    if args.out:
        out = Path(args.out)
        for name in COMPONENT_PLOTS:
            save_figure(getattr(result, name)(), out / f"components_{name.removeprefix('plot_')}")
        result.save(out, "components")
        print(f"wrote plots, components.csv and components.json to {out}")


def _add_common(parser: argparse.ArgumentParser, max_new_tokens: int, out_help: str) -> None:
    """Arguments every subcommand that explains a response takes."""
    parser.add_argument("--model", default=None, help="HF id, local folder or .gguf")
    parser.add_argument("--max-new-tokens", type=int, default=max_new_tokens)
    parser.add_argument("--top-k", type=int, default=10)
    parser.add_argument("--out", default=None, help=out_help)


def _add_case(parser: argparse.ArgumentParser) -> None:
    """Arguments naming the query, the context file and the response."""
    parser.add_argument("--query", required=True)
    parser.add_argument("--context-file", required=True, help="paragraphs split by blank lines")
    parser.add_argument("--response", default=None, help="response to explain (default: generate)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mechrag", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    attribute = commands.add_parser("attribute", help="score the sources of a context file")
    _add_case(attribute)
    _add_common(attribute, 64, "folder for the table, JSON and bar chart")
    attribute.add_argument("--method", default="arc_jsd", choices=ATTRIBUTION_METHODS)
    attribute.add_argument("--unit", choices=("sentence", "document"), default="sentence")
    attribute.add_argument(
        "--budget", type=int, default=None, help="value calls (sampling methods)"
    )
    attribute.set_defaults(handler=cmd_attribute)

    localize = commands.add_parser(
        "localize", help="score attention heads and MLPs by logit-lens JSD when a source is removed"
    )
    _add_case(localize)
    _add_common(localize, 32, "folder for the plots and JSON")
    localize.add_argument("--source", default=None, help="source id to remove (default: top one)")
    localize.set_defaults(handler=cmd_localize)

    from mechrag.mechanism.gate_cli import add_parser as add_gate
    from mechrag.sweep.cli import add_parser as add_sweep

    add_gate(commands)
    add_sweep(commands)
    try:  # `explain` needs the retrieval extra (faiss, captum)
        from mechrag.retrieval.cli import add_parser as add_explain
    except ModuleNotFoundError as missing:
        hint = f"unavailable ({missing}): pip install 'mechrag[retrieval]'"
        commands.add_parser("explain", help=hint)
    else:
        add_explain(commands)

    demo = commands.add_parser("demo", help="ARC-JSD on a shipped HotpotQA example")
    _add_common(demo, 32, "folder for the table, JSON and bar chart")
    demo.set_defaults(handler=cmd_demo, out="outputs/demo")
    return parser


def run_handler(args: argparse.Namespace) -> int:
    """Run a parsed subcommand; bad input ends with one error line and exit status 2."""
    try:
        args.handler(args)
    except (ValueError, TypeError, FileNotFoundError, ModuleNotFoundError) as error:
        print(f"mechrag: error: {error}", file=sys.stderr)
        return 2
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_handler(build_parser().parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
