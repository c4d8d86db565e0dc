"""Stub sweep methods for the sweep tests (registered only by the tests, never by mechrag).

Run as a script it registers them and behaves like ``mechrag sweep``, so a test can kill it:
``python tests/sweep_stubs.py --method stub_score --dataset squad --n 8 --out DIR``.
"""

from __future__ import annotations

import hashlib
import os
import sys
import time
from pathlib import Path


def stub_score(model, example, options: dict) -> dict:
    """A deterministic function of the example (and ``scale``); ``sleep`` seconds per call."""
    time.sleep(options.get("sleep", 0.0))
    digest = hashlib.sha256(example.query.encode()).digest()
    score = int.from_bytes(digest[:4], "little") / 2**32 * options.get("scale", 1.0)
    return {
        "score": score,
        "n_sources": len(example.sources),
        "ids": [s.id for s in example.sources],
    }


def stub_flaky(model, example, options: dict) -> dict:
    """Raises on the ids in ``fail_ids`` until the file ``fixed`` exists."""
    if example.id in options["fail_ids"] and not Path(options["fixed"]).exists():
        raise RuntimeError(f"injected failure on {example.id}")
    return stub_score(model, example, {})


def stub_die_once(model, example, options: dict) -> dict:
    """Kills its own process the first time it sees an id in ``die_ids`` (marker files in
    ``markers``), the way a crashed or OOM-killed worker dies."""
    marker = Path(options["markers"]) / example.id
    if example.id in options["die_ids"] and not marker.exists():
        marker.touch()
        os._exit(1)
    return stub_score(model, example, {})


def register() -> None:
    from mechrag.sweep import register_method

    for run, options in (
        (stub_score, ("sleep", "scale")),
        (stub_flaky, ("fail_ids", "fixed")),
        (stub_die_once, ("die_ids", "markers")),
    ):
        register_method(run.__name__, run, options=options, needs_model=False, replace=True)


if __name__ == "__main__":
    register()
    from mechrag.cli import main

    sys.exit(main(["sweep", *sys.argv[1:]]))
