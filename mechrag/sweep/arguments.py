"""The command-line arguments of a sweep: its data set and reader options, its backend and how it
resumes. ``mechrag sweep`` and the experiment scripts that run sweeps share them, so every sweep
is configured the same way (argparse only: nothing heavy loads until a sweep runs).
"""

from __future__ import annotations

import argparse

from mechrag.data.loaders import SPLITS
from mechrag.errors import InputError, positive_int
from mechrag.sweep.config import BACKENDS, DATASETS, Backend

DATA_FLAGS = {"distractors": "distractors", "unit": "unit", "data_seed": "seed", "split": "split"}
BACKEND_KEYS = ("address", "workers", "gpus_per_worker", "threads", "device", "device_map",
                "max_batch_tokens")  # fmt: skip


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
    parser.add_argument("--device", default=None, help="cpu, cuda, ... (default: CUDA if any)")
    parser.add_argument("--device-map", default=None, help="auto: one model over several GPUs")
    parser.add_argument(
        "--max-batch-tokens", type=positive_int, default=None,
        help="tokens per forward pass (default: from free GPU memory, a worker's share of it)",
    )  # fmt: skip
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
