"""Writing results to disk so that a crash never leaves a half-written file or record.

Whole files are written through a temporary file and an atomic rename. Record logs are JSON
lines appended one record per ``write`` + ``flush`` + ``fsync``: a kill can tear at most the
last line, which :func:`repair_jsonl` cuts off before a resumed run appends again.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path


def write_text_atomic(path: str | Path, text: str) -> Path:
    """Write ``text`` to ``path`` through a temporary file and an atomic rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(text)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return path


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


def read_jsonl(path: str | Path) -> list[dict]:
    """Records of a JSON-lines file; a torn last line (from a crash) is ignored."""
    path = Path(path)
    if not path.is_file():
        return []
    records = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return records
