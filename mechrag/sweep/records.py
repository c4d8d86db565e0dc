"""Sweep records: one JSON line per example attempt, and the tables built from them.

A record is ``{"id", "index", "status": "ok" | "error", "config_hash", "method",
"mechrag_version", "dtype", "device", "seconds", "result" | "error"}`` (``dtype`` and
``device``: the model's, as resolved where the record was made; absent for a method that needs
no model). The log is append-only: when an example is run again (``retry_errors``) its newest
record for the current config is the one that counts.
"""

from __future__ import annotations

import time
import traceback
from pathlib import Path

import pandas as pd

from mechrag._version import __version__
from mechrag.results.files import run_records

RECORDS_FILE = "records.jsonl"
CONFIG_FILE = "config.json"
TIMING_FIELDS = ("seconds", "started_at")
FRAME_COLUMNS = ("id", "index", "status", "seconds", "error")
TRACEBACK_LINES = 12


def execute(method, model, example, index: int, options: dict, config_hash: str) -> dict:
    """Run ``method`` on one example; an exception becomes an error record, never a crash."""
    from mechrag.models import adapter

    record = {
        "id": example.id,
        "index": index,
        "config_hash": config_hash,
        "method": method.name,
        "mechrag_version": __version__,
        "started_at": time.time(),
    }
    if model is not None:  # methods that need no model run without one
        record["dtype"] = str(adapter.dtype(model)).removeprefix("torch.")
        record["device"] = adapter.device(model).type
    start = time.perf_counter()
    try:
        record.update(status="ok", result=method.run(model, example, options))
    except Exception as error:  # noqa: BLE001 - a failed example must not stop the sweep
        record.update(status="error", error=error_info(error))
    record["seconds"] = time.perf_counter() - start
    return record


def error_info(error: BaseException) -> dict:
    """Type, message and the last lines of the traceback of ``error``."""
    lines = traceback.format_exception(type(error), error, error.__traceback__)
    tail = "".join(lines).splitlines()[-TRACEBACK_LINES:]
    return {"type": type(error).__name__, "message": str(error), "traceback": "\n".join(tail)}


def latest_records(out: str | Path, config_hash: str | None = None) -> dict[str, dict]:
    """The newest record of each example in ``out`` (for ``config_hash`` when given), from its
    compacted ``records.jsonl.gz`` (:func:`mechrag.results.files.compact_records`) and its
    ``records.jsonl``, so a committed, compacted sweep resumes where it stopped."""
    latest = {}
    for record in run_records(out):
        if config_hash is None or record.get("config_hash") == config_hash:
            latest[record["id"]] = record
    return latest


def records_frame(records: list[dict]) -> pd.DataFrame:
    """One row per record: id, index, status, seconds, error type and the result's scalars."""
    rows = []
    for record in sorted(records, key=lambda r: r["index"]):
        row = {
            "id": record["id"],
            "index": record["index"],
            "status": record["status"],
            "seconds": record["seconds"],
            "error": record.get("error", {}).get("type"),
        }
        for key, value in (record.get("result") or {}).items():
            if isinstance(value, bool | int | float | str) or value is None:
                row[key] = value
        rows.append(row)
    return pd.DataFrame(rows, columns=None if rows else list(FRAME_COLUMNS))


def aggregate(frame: pd.DataFrame) -> pd.DataFrame:
    """Count, mean and std of every numeric column over the successful examples."""
    ok = frame[frame["status"] == "ok"]
    numeric = ok.drop(columns=["index"]).select_dtypes(include=["number", "bool"])
    table = numeric.astype(float).agg(["count", "mean", "std"]).T
    table.attrs.update(n=len(frame), ok=len(ok), errors=int((frame["status"] == "error").sum()))
    return table
