"""The sweep runner: one method over a data set, one record per example, resumable.

The driver loads the examples, skips those already recorded for the same config, hands the rest
to a backend (in-process or Ray) and appends each record as it arrives: the driver is the only
writer, each record is flushed and fsynced, and a torn last line from a kill is cut off on
resume. A changed config in the same folder is refused unless ``force``; so is resuming it in
another dtype when the config leaves the dtype to the device, or with another minor version of
mechrag than made its records.
"""

from __future__ import annotations

import json
import os
from contextlib import ExitStack
from pathlib import Path

import pandas as pd

from mechrag._version import __version__
from mechrag.errors import InputError, InputFileError, require_extra
from mechrag.results.files import JsonlWriter, write_json
from mechrag.sweep.backends import load_sweep_model, run_local  # noqa: F401 - its old path
from mechrag.sweep.config import Backend, SweepConfig
from mechrag.sweep.methods import get_method
from mechrag.sweep.records import (
    CONFIG_FILE,
    RECORDS_FILE,
    latest_records,
    records_frame,
)

SUMMARY_STEM = "summary"


class ConfigChangedError(InputError):
    """The output folder holds records of a different config."""


def load_sweep_examples(config: SweepConfig) -> list:
    """The first ``config.n`` examples of the config's data set, with unique ids."""
    from mechrag.data.loaders import load_examples, reader_options

    accepted = reader_options(config.dataset)
    unknown = sorted(set(config.data) - accepted)
    if unknown:
        raise InputError(f"{config.dataset} takes data options {sorted(accepted)}, not {unknown}")
    examples = load_examples(config.dataset, config.path, n=config.n, **config.data)
    ids = [example.id for example in examples]
    if len(set(ids)) != len(ids):
        raise InputError(f"{config.dataset} has repeated example ids; records are keyed by id")
    return examples


def _check_folder(out: Path, config: SweepConfig, force: bool) -> None:
    """Refuse a folder holding another config's sweep unless ``force`` (writes nothing)."""
    path = out / CONFIG_FILE
    if path.is_file():
        saved = json.loads(path.read_text(encoding="utf-8"))
        if saved["hash"] != config.hash and not force:
            raise ConfigChangedError(
                f"{out} holds a sweep with another config (hash {saved['hash']}, now "
                f"{config.hash}); use another folder or force=True (--force) to switch"
            )


def _claim_folder(out: Path, config: SweepConfig) -> None:
    """Record this config in ``out`` (after :func:`_check_folder`)."""
    write_json(out / CONFIG_FILE, {"hash": config.hash, "config": config.to_dict()})


def _check_precision(record: dict, done: dict[str, dict], config: SweepConfig, out: Path) -> None:
    """Refuse a record in another dtype than the folder's earlier ones when the config leaves
    the dtype to the device (a sweep begun on a CPU, float32, resumed on a GPU, bfloat16)."""
    earlier = {r["dtype"] for r in done.values() if "dtype" in r}
    made_in = record.get("dtype")  # absent for a method that needs no model
    if config.dtype is None and earlier and made_in is not None and made_in not in earlier:
        raise InputError(
            f"{out} holds records made in {', '.join(sorted(earlier))}; this model loaded in "
            f"{made_in}: resume it where the model loads in {', '.join(sorted(earlier))} (the "
            "same kind of device), or sweep into a new folder with --dtype, so that one sweep "
            "does not mix precisions"
        )


def _check_version(records: list[dict], out: Path) -> None:
    """Refuse to add records to a folder whose earlier ones another minor version of mechrag
    made, or records a worker of another minor version made (a Ray node): a record stands for
    its version's defaults (ContextCite's target changed in 0.3), so one sweep does not mix
    them."""
    minor = __version__.split(".")[:2]
    other = sorted({r["mechrag_version"] for r in records
                    if r.get("mechrag_version", __version__).split(".")[:2] != minor})  # fmt: skip
    if other:
        raise InputError(
            f"{out} holds records made by mechrag {', '.join(other)}, this is {__version__}: "
            "finish it with that version, or sweep into a new folder, so that one sweep does "
            "not mix versions whose defaults may differ"
        )


def run_sweep(
    config: SweepConfig,
    out: str | Path,
    *,
    backend: Backend | None = None,
    force: bool = False,
    retry_errors: bool = False,
    progress: bool = True,
) -> pd.DataFrame:
    """Run ``config`` into ``out``, skipping examples already recorded; returns the summary.

    ``retry_errors`` runs examples whose record is an error again. The summary (one row per
    example: status, seconds and the result's scalar fields) is also written to
    ``out/summary.parquet`` (``summary.csv`` without pyarrow). Nothing is written to ``out``
    before the models have loaded, so a sweep that cannot start leaves no folder behind.
    """
    from tqdm.auto import tqdm

    backend = backend or Backend()
    out = Path(out)
    method = get_method(config.method)
    if backend.name == "ray":
        require_extra("ray", "a sweep on the ray backend")
    examples = load_sweep_examples(config)
    _check_folder(out, config, force)
    done = latest_records(out, config.hash)
    todo = [
        (index, example)
        for index, example in enumerate(examples)
        if example.id not in done or (retry_errors and done[example.id]["status"] == "error")
    ]
    if todo:
        _check_version(list(done.values()), out)
    if not todo:
        _claim_folder(out, config)
        return write_summary(out, [example.id for example in examples], config.hash)
    with (
        ExitStack() as stack,
        tqdm(
            total=len(examples),
            initial=len(examples) - len(todo),
            disable=not progress,
            desc=f"{config.method} on {config.dataset}",
            unit="example",
        ) as bar,
    ):
        writers: list[JsonlWriter] = []

        def ready() -> None:
            """Models are loaded: claim the folder, open the records, time the ETA from here."""
            _claim_folder(out, config)
            writers.append(stack.enter_context(JsonlWriter(out / RECORDS_FILE)))
            bar.reset(total=len(examples))
            bar.initial = bar.n = len(examples) - len(todo)
            bar.refresh()

        def write(record: dict) -> None:
            _check_precision(record, done, config, out)
            _check_version([record], out)
            writers[0].write(record)
            bar.update()

        if backend.name == "ray":
            from mechrag.sweep.ray_backend import run_ray

            run_ray(method, config, todo, write, ready, backend)
        else:
            run_local(method, config, todo, write, ready, backend)
    return write_summary(out, [example.id for example in examples], config.hash)


def write_summary(out: Path, ids: list[str], config_hash: str) -> pd.DataFrame:
    """Per-example table of the newest records of ``ids``, saved as Parquet (or CSV)."""
    latest = latest_records(out, config_hash)
    frame = records_frame([latest[i] for i in ids if i in latest])
    temporary = out / f".{SUMMARY_STEM}.partial"
    try:
        frame.to_parquet(temporary, index=False)
        suffix = "parquet"
    except (ImportError, TypeError, ValueError):  # no pyarrow, or columns of mixed types
        frame.to_csv(temporary, index=False)
        suffix = "csv"
    os.replace(temporary, out / f"{SUMMARY_STEM}.{suffix}")
    stale = "csv" if suffix == "parquet" else "parquet"
    (out / f"{SUMMARY_STEM}.{stale}").unlink(missing_ok=True)
    return frame


def load_records(out: str | Path) -> list[dict]:
    """The newest record of each example of the sweep in ``out`` (its current config)."""
    out = Path(out)
    path = out / CONFIG_FILE
    if not path.is_file():
        raise InputFileError(f"no sweep in {out} (missing {CONFIG_FILE})")
    saved = json.loads(path.read_text(encoding="utf-8"))
    return sorted(latest_records(out, saved["hash"]).values(), key=lambda r: r["index"])


def read_summary(out: str | Path) -> pd.DataFrame:
    """The per-example table of the sweep in ``out`` (rebuilt from its records)."""
    return records_frame(load_records(out))


def sweep(
    method: str,
    dataset: str = "hotpotqa",
    *,
    out: str | Path,
    n: int | None = None,
    options: dict | None = None,
    data: dict | None = None,
    path: str | None = None,
    model: str | None = None,
    dtype: str | None = None,
    backend: str = Backend.name,
    address: str | None = Backend.address,
    workers: int = Backend.workers,
    gpus_per_worker: float = Backend.gpus_per_worker,
    threads: int | None = Backend.threads,
    device: str | None = Backend.device,
    device_map: str | None = Backend.device_map,
    max_batch_tokens: int | None = Backend.max_batch_tokens,
    force: bool = False,
    retry_errors: bool = False,
    progress: bool = True,
) -> pd.DataFrame:
    """Run ``method`` over the first ``n`` examples of ``dataset``, one record each, into ``out``.

    ``options``: the method's options (e.g. ``{"max_new_tokens": 32}``); ``data``: the data
    reader's (``{"distractors": 2}``); ``dtype``: the model's (hashed; default: the device's,
    see :class:`Backend`); ``device``, ``device_map``: where each worker loads it;
    ``max_batch_tokens``: each case's engine budget (see :class:`Backend`). Rerunning
    resumes; see :func:`run_sweep`. Returns the per-example summary table.

    >>> mechrag.sweep("arc_jsd", "hotpotqa", n=20, out="runs/hotpot")  # doctest: +SKIP
    """
    config = SweepConfig(
        method=method,
        dataset=dataset,
        n=n,
        path=path,
        data=dict(data or {}),
        model=model,
        options=dict(options or {}),
        dtype=dtype,
    )
    return run_sweep(
        config,
        out,
        backend=Backend(
            backend,
            address,
            workers,
            gpus_per_worker,
            threads,
            device=device,
            device_map=device_map,
            max_batch_tokens=max_batch_tokens,
        ),
        force=force,
        retry_errors=retry_errors,
        progress=progress,
    )
