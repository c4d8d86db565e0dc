"""``mechrag localize``: score attention heads and MLPs by logit-lens JSD when a source is
removed (by default the top ARC-JSD source); ``--out`` receives the plots, CSV and JSON."""

from __future__ import annotations

import argparse

from mechrag.cli.common import (
    add_model_arguments,
    add_output_arguments,
    add_question_arguments,
    check_html,
    print_written,
    read_sources,
    write_html,
)
from mechrag.errors import InputError

HELP = "score attention heads and MLPs by logit-lens JSD when a source is removed"
COMPONENT_PLOTS = ("plot_heads", "plot_layers", "plot_residual", "plot_gain")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_question_arguments(parser)
    add_model_arguments(parser, max_new_tokens=32)
    add_output_arguments(parser, "folder for the plots and JSON")
    parser.add_argument("--source", default=None, help="source id to remove (default: top one)")


def run(args: argparse.Namespace) -> None:
    from mechrag.case import Case
    from mechrag.models import load_model
    from mechrag.plots import save_figure

    check_html(args)
    sources = read_sources(args)
    if args.source is not None and args.source not in {s.id for s in sources}:
        raise InputError(f"unknown source {args.source!r}: choose from {[s.id for s in sources]}")
    model = load_model(args.model)
    case = Case(model, args.query, sources, args.response, max_new_tokens=args.max_new_tokens)
    result = case.localize(args.source)
    print(f"response: {result.response!r}\nremoved source: {result.source_id}")
    if result.gains is not None:
        rho, p = result.spearman()
        print(f"Spearman rho (JSD vs semantic gain) = {rho:.3f} (p = {p:.2g})")
    print(result.to_frame().sort_values("rank").head(args.top_k).to_string(index=False))
    if args.out:
        for name in COMPONENT_PLOTS:
            stem = f"components_{name.removeprefix('plot_')}"
            save_figure(getattr(result, name)(), f"{args.out}/{stem}")
        result.save(args.out, "components")
        print(f"wrote plots, components.csv and components.json to {args.out}")
        print_written(write_html(args))
