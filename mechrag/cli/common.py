"""Arguments and input readers that several subcommands share.

Inputs are checked before any model loads, so bad input costs no model load and writes nothing.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from mechrag.errors import InputError, positive_int, read_input_text


def add_model_arguments(parser: argparse.ArgumentParser) -> None:
    """The model, where and in which dtype it runs, the engine's token budget, and the length of
    a generated response (:data:`mechrag.defaults.MAX_NEW_TOKENS`, the one default every entry
    point reads). Unset, each takes the library's own default."""
    from mechrag.defaults import DTYPES, MAX_NEW_TOKENS

    parser.add_argument("--model", default=None, help="HF id, local folder or .gguf")
    parser.add_argument(
        "--device", default=None, help="cpu, cuda, cuda:1, ... (default: CUDA when available)"
    )
    parser.add_argument(
        "--device-map",
        default=None,
        help="spread the model over several GPUs: auto (Hugging Face's device_map; gpu extra)",
    )
    parser.add_argument(
        "--dtype", choices=DTYPES, default=None, help="default: float32 on CPU, bfloat16 on GPU"
    )
    parser.add_argument(
        "--max-batch-tokens",
        type=positive_int,
        default=None,
        help="the engine's tokens per forward pass (default: half the GPU's free memory; 2048 "
        "on CPU); lower it after a CUDA out-of-memory error",
    )
    parser.add_argument(
        "--max-new-tokens",
        type=positive_int,
        default=MAX_NEW_TOKENS,
        help="generated response length (default: %(default)s)",
    )


def load_model_from(args: argparse.Namespace):
    """The model of ``--model`` (also ``toy:FAMILY``, a tiny random model), on ``--device`` (or
    over ``--device-map``) in ``--dtype``; unset, the loader's defaults hold."""
    from mechrag.sweep.backends import load_sweep_model

    return load_sweep_model(
        args.model, device=args.device, dtype=args.dtype, device_map=args.device_map
    )


def case_from(args: argparse.Namespace, model, sources):
    """The case of ``--query`` over ``sources`` with ``--response`` (or one generated with
    ``--max-new-tokens``), on an engine with ``--max-batch-tokens``."""
    from mechrag.case import Case

    return Case(
        model,
        args.query,
        sources,
        args.response,
        max_new_tokens=args.max_new_tokens,
        engine=engine_from(args, model),
    )


def engine_from(args: argparse.Namespace, model):
    """The engine every case of a command shares, with ``--max-batch-tokens``."""
    from mechrag.engine import Engine

    return Engine(model, max_batch_tokens=args.max_batch_tokens)


def add_question_arguments(parser: argparse.ArgumentParser, context_file: bool = True) -> None:
    """The query, the context file (paragraphs split by blank lines) and the response."""
    parser.add_argument("--query", required=True)
    if context_file:
        parser.add_argument(
            "--context-file", required=True, help="paragraphs split by blank lines"
        )
    parser.add_argument("--response", default=None, help="response to explain (default: generate)")


def add_output_arguments(parser: argparse.ArgumentParser, out_help: str) -> None:
    """How many ranked items to print, the folder the command writes to, and ``--html``."""
    parser.add_argument("--top-k", type=positive_int, default=10, help="ranked items printed")
    parser.add_argument("--out", default=None, help=out_help)
    add_html_argument(parser)


def add_html_argument(parser: argparse.ArgumentParser) -> None:
    """``--html``: also write ``report.html`` (every result in ``--out``) beside the outputs."""
    parser.add_argument(
        "--html", action="store_true", help="also write report.html, one page of --out's results"
    )


def check_html(args: argparse.Namespace) -> None:
    """``--html`` needs ``--out``: the page goes beside the other outputs."""
    if args.html and not args.out:
        raise InputError("--html needs --out: the page is written beside the other outputs")


def write_html(args: argparse.Namespace) -> list[Path]:
    """``--out``/report.html of every result there, when ``--html`` is given."""
    if not args.html:
        return []
    from mechrag.views.report import write_report

    return [write_report(args.out)]


def add_protocol_argument(parser: argparse.ArgumentParser, default: str) -> None:
    """``--protocol``: a paper's settings in one name (see :mod:`mechrag.protocols`); ``default``
    is the workflow's (``LOCALIZE_PROTOCOL`` or ``EXPLAIN_PROTOCOL``), passed through to it."""
    from mechrag.protocols import PROTOCOLS

    names = ", ".join(f"{p.name}: {p.paper}" for p in PROTOCOLS.values())
    help_text = f"default %(default)s; {names}"
    parser.add_argument("--protocol", choices=tuple(PROTOCOLS), default=default, help=help_text)


def check_question(args: argparse.Namespace) -> None:
    """A non-empty query, and a non-empty response when one is given."""
    if not args.query.strip():
        raise InputError("query is empty")
    if args.response is not None and not args.response.strip():
        raise InputError("response is empty: nothing to attribute")


def read_sources(args: argparse.Namespace, unit: str = "sentence") -> list:
    """Validated sources from ``--context-file`` (paragraphs at blank lines, then sentences
    unless ``unit`` is ``document``) and a checked query and response."""
    from mechrag.sources import as_sources, documents_from_texts, sentences_from_paragraphs

    check_question(args)
    text = read_input_text(args.context_file, "context file")
    if not text.strip():
        raise InputError(f"context file {args.context_file} is empty")
    paragraphs = [p.strip() for p in text.split("\n\n") if p.strip()]
    if unit == "document":
        return as_sources(documents_from_texts(paragraphs))
    return as_sources(sentences_from_paragraphs([(None, p) for p in paragraphs]))


def print_ranking(attribution, k: int, gold=()) -> None:
    """The query, the response, the method and its top ``k`` sources (``*``: gold)."""
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


def print_written(paths) -> None:
    for path in paths:
        print(f"wrote {path}")
