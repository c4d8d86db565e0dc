"""Writing results to disk so that a crash never leaves a half-written file or record.

Whole files are written through a temporary file and an atomic rename. Record logs are JSON
lines appended one record per ``write`` + ``flush`` + ``fsync``: a kill can tear at most the
last line, which :func:`repair_jsonl` cuts off before a resumed run appends again.

Every result serialises one way: :func:`json_ready` turns it into JSON types and
:func:`write_json` writes that atomically (:class:`mechrag.results.base.Serializable` builds on
both). Run records (a sweep's or a study's ``records.jsonl``) are read, compacted and replaced
here too.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import os
import tempfile
from pathlib import Path

import numpy as np

from mechrag.errors import InputFileError


def json_ready(value):
    """``value`` in JSON types: a dataclass as its ``to_dict()`` (or its fields), tuples as
    lists, numpy arrays and scalars as lists and Python numbers, paths as strings."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        if hasattr(value, "to_dict"):
            return json_ready(value.to_dict())
        return {f.name: json_ready(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {key: json_ready(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_ready(item) for item in value]
    if isinstance(value, (np.ndarray, np.generic)):
        return value.tolist()
    if isinstance(value, Path):
        return str(value)
    return value


def write_json(path: str | Path, data) -> Path:
    """Write ``data`` (through :func:`json_ready`) as indented JSON, atomically."""
    return write_text_atomic(path, json.dumps(json_ready(data), indent=1))


def write_text_atomic(path: str | Path, text: str) -> Path:
    """Write ``text`` to ``path`` through a temporary file, fsynced, and an atomic rename; the
    file keeps its mode (a new one gets the umask's, as ``open`` would give it)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = path.stat().st_mode & 0o777 if path.is_file() else 0o666 & ~_umask()
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(text)
            stream.flush()
            os.fsync(stream.fileno())
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return path


def _umask() -> int:
    """The process's umask (read by setting it, then restoring it)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


class JsonlWriter:
    """Appends JSON records to a file, each one durable (flushed and fsynced) when it returns.

    Use as a context manager; the file is repaired (torn last line cut off) on opening.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        repair_jsonl(self.path)
        self._stream = self.path.open("a", encoding="utf-8")

    def write(self, record: dict) -> None:
        self._stream.write(json.dumps(record) + "\n")
        self._stream.flush()
        os.fsync(self._stream.fileno())

    def close(self) -> None:
        self._stream.close()

    def __enter__(self) -> JsonlWriter:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()


def append_jsonl(path: str | Path, record: dict) -> None:
    """Append one durable JSON line (see :class:`JsonlWriter` to append many)."""
    with JsonlWriter(path) as writer:
        writer.write(record)


def repair_jsonl(path: str | Path) -> int:
    """Cut a torn last line (no newline, or not valid JSON) off ``path``; returns bytes removed."""
    path = Path(path)
    if not path.is_file():
        return 0
    with path.open("rb+") as stream:
        data = stream.read()
        if data.endswith(b"\n"):  # complete last line: keep it unless it is corrupt
            start = data.rfind(b"\n", 0, len(data) - 1) + 1
            keep = len(data) if _is_json(data[start:]) else start
        else:  # the last line never got its newline
            keep = data.rfind(b"\n") + 1
        if keep < len(data):
            stream.truncate(keep)
            stream.flush()
            os.fsync(stream.fileno())
        return len(data) - keep


def _is_json(line: bytes) -> bool:
    try:
        json.loads(line)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return False
    return True


def read_jsonl(path: str | Path, *, strict: bool = False) -> list[dict]:
    """Records of a JSON-lines file (gzip-compressed when it ends in ``.gz``); a torn last line
    (from a crash) is ignored. ``strict``: any other line that is not UTF-8 JSON is an
    :class:`~mechrag.errors.InputFileError` (for a reader that rewrites the file)."""
    path = Path(path)
    if not path.is_file():
        return []
    data = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    lines = [line for line in data.split(b"\n") if line.strip()]
    records = []
    for number, line in enumerate(lines, start=1):
        try:
            text = line.decode("utf-8", errors="strict" if strict else "replace")
            records.append(json.loads(text))
        except (UnicodeDecodeError, json.JSONDecodeError):
            if strict and number < len(lines):
                raise InputFileError(f"{path}: line {number} is not JSON") from None
    return records


def run_records(folder: str | Path) -> list[dict]:
    """Every record of a resumable run folder: its compacted ``records.jsonl.gz`` (committed)
    then its ``records.jsonl`` (appended since)."""
    folder = Path(folder)
    return read_jsonl(folder / "records.jsonl.gz") + read_jsonl(folder / "records.jsonl")


def compact_records(folder: str | Path) -> Path:
    """Fold a run folder's ``records.jsonl`` into ``records.jsonl.gz`` (atomically, records in
    order) and remove the plain file: the compact form committed to the repository."""
    return replace_records(folder, run_records(folder))


def replace_records(folder: str | Path, records: list[dict]) -> Path:
    """Make ``records`` a run folder's only records: its ``records.jsonl.gz`` (written
    atomically), its ``records.jsonl`` removed after. A crash leaves the old records or the new
    ones first, never neither."""
    folder = Path(folder)
    text = "".join(json.dumps(record, sort_keys=True) + "\n" for record in records)
    target = folder / "records.jsonl.gz"
    with tempfile.NamedTemporaryFile(dir=folder, delete=False, suffix=".tmp") as stream:
        stream.write(gzip.compress(text.encode("utf-8"), mtime=0))
        stream.flush()
        os.fsync(stream.fileno())
    os.chmod(stream.name, 0o644)  # a temporary file is private; committed records are not
    os.replace(stream.name, target)
    (folder / "records.jsonl").unlink(missing_ok=True)
    return target
