"""``mechrag localize``: score attention heads and MLPs by logit-lens JSD when a source is
removed (by default the top ARC-JSD source); ``--out`` receives the plots, CSV and JSON."""

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
from mechrag.errors import InputError
from mechrag.protocols import LOCALIZE_PROTOCOL, get_protocol

EXAMPLE = (
    'mechrag localize --query "Where was the author born?" --context-file context.txt '
    "--out out/heads --html"
)
HELP = "score attention heads and MLPs by logit-lens JSD when a source is removed"
COMPONENT_PLOTS = ("plot_heads", "plot_layers", "plot_residual", "plot_gain")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_question_arguments(parser)
    add_model_arguments(parser)
    add_output_arguments(parser, "folder for the plots and JSON")
    parser.add_argument("--source", default=None, help="source id to remove (default: top one)")
    add_protocol_argument(parser, default=LOCALIZE_PROTOCOL)


def run(args: argparse.Namespace) -> None:
    from mechrag.mechanism.consensus import consensus, paper_record
    from mechrag.plots import save_figure
    from mechrag.results.files import write_json

    protocol = get_protocol(args.protocol)
    check_html(args)
    sources = read_sources(args)
    if args.source is not None and args.source not in {s.id for s in sources}:
        raise InputError(f"unknown source {args.source!r}: choose from {[s.id for s in sources]}")
    model = load_model_from(args)
    case = case_from(args, model, sources)
    result = case.localize(args.source, protocol=args.protocol)
    print(f"response: {result.response!r}\nremoved source: {result.source_id}")
    rho, p = result.spearman()
    definition = result.gain_definition
    print(f"Spearman rho (JSD vs {definition} gain, all components) = {rho:.3f} (p = {p:.2g})")
    found = consensus(result) if protocol.consensus else None
    for module in (found.attention, found.mlp) if found else ():
        print(
            f"consensus ({module.module}, top {module.top_n} of {module.n_layers} layers): "
            f"J&S {module.jsd_overlap} (null {module.null_jsd_overlap:.2f}, "
            f"p = {module.jsd_overlap_p:.2g}), G&S {module.gain_overlap} "
            f"(null {module.null_gain_overlap:.2f}, p = {module.gain_overlap_p:.2g}), "
            f"rho(J, G) = {module.rho:.3f}"
        )
    print(result.to_frame().sort_values("rank").head(args.top_k).to_string(index=False))
    if args.out:
        for name in COMPONENT_PLOTS:
            stem = f"components_{name.removeprefix('plot_')}"
            save_figure(getattr(result, name)(), f"{args.out}/{stem}")
        result.save(args.out, "components")
        if found is not None:  # the paper's record: per-layer JSD and gains, consensus, null
            write_json(f"{args.out}/components.json", paper_record(result, found))
        print(f"wrote plots, components.csv and components.json to {args.out}")
        print_written(write_html(args))
