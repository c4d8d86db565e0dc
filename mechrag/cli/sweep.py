"""``mechrag sweep``: run a method over a data set (resumable), and ``mechrag sweep summary DIR``.

    mechrag sweep --method M --dataset D --out DIR | mechrag sweep summary DIR

Values come from ``--config FILE`` (TOML) and are overridden by flags. The argument helpers are
shared with the experiment scripts so every sweep is configured the same way.
"""

from __future__ import annotations

import argparse
import json

from mechrag.data.loaders import SPLITS
from mechrag.defaults import MAX_NEW_TOKENS
from mechrag.errors import InputError, positive_int, read_input_text
from mechrag.sweep.config import BACKENDS, DATASETS, Backend, read_toml

HELP = "run a method over a data set, one resumable record per example"

DATA_FLAGS = {"distractors": "distractors", "unit": "unit", "data_seed": "seed", "split": "split"}
BACKEND_KEYS = ("address", "workers", "gpus_per_worker", "threads")


def add_data_arguments(parser: argparse.ArgumentParser, n: int | None = None) -> None:
    """Data set, file, number of examples and reader options (only the ones given are passed)."""
    parser.add_argument("--dataset", choices=DATASETS, default=None)
    parser.add_argument("--path", default=None, help="data file (default: the shipped sample)")
    parser.add_argument("--n", type=positive_int, default=n, help="first N examples (default: all)")
    parser.add_argument("--distractors", type=int, default=None, help="hotpotqa/musique only")
    parser.add_argument("--unit", choices=("sentence", "document"), default=None)
    parser.add_argument("--data-seed", type=int, default=None, help="distractor sampling seed")
    parser.add_argument(
        "--split", choices=SPLITS, default=None, help="hotpotqa/musique: the shipped sample's split"
    )


def data_options(args: argparse.Namespace, **defaults) -> dict:
    """The reader options given on the command line (``--distractors`` ...), plus those of
    ``defaults`` that the data set's reader takes (SQuAD takes no ``distractors``)."""
    from mechrag.data.loaders import reader_options

    given = {key: getattr(args, flag) for flag, key in DATA_FLAGS.items()}
    given = {key: value for key, value in given.items() if value is not None}
    accepted = reader_options(args.dataset) if args.dataset else set()
    return {**{k: v for k, v in defaults.items() if k in accepted}, **given}


def add_backend_arguments(parser: argparse.ArgumentParser) -> None:
    """Where to run, and how resuming treats old records."""
    parser.add_argument("--backend", choices=BACKENDS, default=None)
    parser.add_argument("--address", default=None, help="Ray cluster: auto or HOST:PORT")
    parser.add_argument("--workers", type=positive_int, default=None, help="Ray actors (default 1)")
    parser.add_argument("--gpus-per-worker", type=float, default=None)
    parser.add_argument("--threads", type=positive_int, help="torch threads per worker")
    parser.add_argument("--force", action="store_true", help="replace a different config")
    parser.add_argument("--retry-errors", action="store_true", help="run failed examples again")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def backend_from(args: argparse.Namespace, table: dict | None = None) -> Backend:
    """The backend from flags, falling back to a config file's ``[backend]`` table."""
    table = dict(table or {})
    name = args.backend or table.pop("name", "local")
    values = {key: getattr(args, key) for key in BACKEND_KEYS if getattr(args, key) is not None}
    unknown = set(table) - set(BACKEND_KEYS)
    if unknown:
        raise InputError(f"unknown [backend] keys {sorted(unknown)}: use name, {BACKEND_KEYS}")
    return Backend(name, **{**table, **values})


def run_with_args(config, out, args: argparse.Namespace, backend: Backend | None = None):
    """``run_sweep`` with the backend and resume flags of :func:`add_backend_arguments`."""
    from mechrag.sweep.runner import run_sweep

    return run_sweep(
        config,
        out,
        backend=backend or backend_from(args),
        force=args.force,
        retry_errors=args.retry_errors,
        progress=not args.no_progress,
    )


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
    from mechrag.sweep.records import aggregate

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
