"""``mechrag sweep``: run a method over a data set (resumable), and ``mechrag sweep summary DIR``.

    mechrag sweep --method M --dataset D --out DIR | mechrag sweep summary DIR

Values come from ``--config FILE`` (TOML) and are overridden by flags. The data and backend
arguments come from :mod:`mechrag.sweep.arguments`, which the experiment scripts share, so every
sweep is configured the same way.
"""

from __future__ import annotations

import argparse
import json

from mechrag.defaults import DTYPES, MAX_NEW_TOKENS
from mechrag.errors import InputError, positive_int, read_input_text
from mechrag.sweep.arguments import (
    add_backend_arguments,
    add_data_arguments,
    backend_from,
    data_options,
    run_with_args,
)
from mechrag.sweep.config import read_toml

EXAMPLE = "mechrag sweep --method arc_jsd --dataset hotpotqa --n 20 --out runs/hotpot_arc_jsd"
HELP = "run a method over a data set, one resumable record per example"

def parse_option(text: str) -> tuple[str, object]:
    """``KEY=VALUE`` with VALUE read as JSON when it parses (numbers, true, null), else text."""
    key, equals, value = text.partition("=")
    if not equals or not key:
        raise argparse.ArgumentTypeError(f"option {text!r} must be KEY=VALUE")
    try:
        return key.replace("-", "_"), json.loads(value)
    except json.JSONDecodeError:
        return key.replace("-", "_"), value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", nargs="?", choices=("summary",), help="print a sweep's table")
    parser.add_argument("directory", nargs="?", help="sweep folder (for summary)")
    parser.add_argument("--config", default=None, help="TOML file; flags override it")
    parser.add_argument("--method", default=None, help="arc_jsd, exact, ..., localize")
    add_data_arguments(parser)
    parser.add_argument("--model", default=None, help="HF id, folder, .gguf or toy:FAMILY")
    parser.add_argument(
        "--dtype", choices=DTYPES, default=None, help="default: float32 on CPU, bfloat16 on GPU"
    )
    parser.add_argument(
        "--max-new-tokens",
        type=positive_int,
        default=None,
        help=f"generated response length (default: {MAX_NEW_TOKENS}, the case's)",
    )
    parser.add_argument(
        "--option",
        type=parse_option,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="method option, repeatable (e.g. --option budget=64)",
    )
    parser.add_argument("--out", default=None, help="output folder")
    add_backend_arguments(parser)


def config_from(args: argparse.Namespace):
    """The sweep config, the output folder and the backend from a config file and flags."""
    from mechrag.sweep.config import SweepConfig

    file = read_config_file(args.config) if args.config else {}
    out = args.out or file.pop("out", None)
    table = file.pop("backend", {})
    options = {**file.pop("options", {}), **dict(args.option)}
    if args.max_new_tokens is not None:
        options["max_new_tokens"] = args.max_new_tokens
    flags = {
        "method": args.method,
        "dataset": args.dataset,
        "n": args.n,
        "path": args.path,
        "model": args.model,
        "dtype": args.dtype,
    }
    values = {**file, **{k: v for k, v in flags.items() if v is not None}}
    values["data"] = {**file.get("data", {}), **data_options(args)}
    values["options"] = options
    if not values.get("method"):
        raise InputError("give --method (or method in --config)")
    if not out:
        raise InputError("give --out (or out in --config)")
    return SweepConfig.from_dict(values), out, backend_from(args, table)


def read_config_file(path: str) -> dict:
    """A sweep's TOML file; an unreadable or malformed one is bad input."""
    read_input_text(path, "config file")
    try:
        return read_toml(path)
    except ValueError as error:  # tomllib.TOMLDecodeError
        raise InputError(f"config file {path} is not valid TOML: {error}") from None


def print_summary(directory: str) -> None:
    from mechrag.sweep.records import aggregate
    from mechrag.sweep.runner import read_summary

    table = aggregate(read_summary(directory))
    n, ok, errors = (table.attrs[key] for key in ("n", "ok", "errors"))
    print(f"{directory}: {n} examples, {ok} ok, {errors} errors")
    print(table.to_string(float_format=lambda x: f"{x:.4g}"))


def run(args: argparse.Namespace) -> None:
    from mechrag.cli import names_out_of_memory
    from mechrag.sweep.records import aggregate, latest_records

    if args.action == "summary":
        if not args.directory:
            raise InputError("usage: mechrag sweep summary DIR")
        print_summary(args.directory)
        return
    config, out, backend = config_from(args)
    frame = run_with_args(config, out, args, backend)
    table = aggregate(frame)
    print(f"{out}: {table.attrs['ok']} ok, {table.attrs['errors']} errors (config {config.hash})")
    print(table.to_string(float_format=lambda x: f"{x:.4g}"))
    out_of_memory = sum(
        record["status"] == "error"
        and names_out_of_memory(record["error"]["type"], record["error"]["message"])
        for record in latest_records(out, config.hash).values()
    )
    if out_of_memory:
        budget = backend.max_batch_tokens
        now = f"now {budget}" if budget else "by default from the worker's free GPU memory"
        print(f"{out_of_memory} examples ran out of GPU memory: lower --max-batch-tokens ({now}) "
              "and rerun with --retry-errors")  # fmt: skip
