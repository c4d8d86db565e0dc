"""What a sweep computes: method, options, data set and model, with a hash that names it.

The hash covers everything that changes a record (method, its options, data set, data options,
model) and nothing that only changes how many examples or where they run (``n``, backend,
workers), so a sweep can be extended to more examples or moved to a cluster and still resume.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

DATASETS = ("hotpotqa", "musique", "squad")


@dataclass(frozen=True)
class SweepConfig:
    """One sweep: ``method`` with ``options`` over ``dataset`` (first ``n`` examples).

    ``data``: options of the data set's reader (``distractors``, ``unit``, ``seed``; SQuAD takes
    none). ``path``: a data file instead of the shipped sample. ``model``: as for
    :func:`mechrag.load_model` (``None``: the embedded model; ``"toy:llama"``: a tiny random
    model from :mod:`mechrag.toy`).
    """

    method: str
    dataset: str = "hotpotqa"
    n: int | None = None
    path: str | None = None
    data: dict = field(default_factory=dict)
    model: str | None = None
    options: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        from mechrag.sweep.methods import get_method

        if self.dataset not in DATASETS:
            raise ValueError(f"unknown dataset {self.dataset!r}: choose from {DATASETS}")
        if self.n is not None and self.n < 1:
            raise ValueError(f"n must be at least 1, got {self.n}")
        get_method(self.method).check_options(self.options)

    def identity(self) -> dict:
        """The fields that determine every record's content (hashed)."""
        return {k: v for k, v in asdict(self).items() if k != "n"}

    @property
    def hash(self) -> str:
        text = json.dumps(self.identity(), sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> SweepConfig:
        known = {f.name for f in fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"unknown sweep config keys {sorted(unknown)}: use {sorted(known)}")
        return cls(**data)


def read_toml(path: str | Path) -> dict:
    """A sweep config file: top-level keys of :class:`SweepConfig` plus ``out`` and a
    ``[backend]`` table (``name``, ``address``, ``workers``, ``gpus_per_worker``)."""
    import tomllib  # Python 3.11+

    with Path(path).open("rb") as stream:
        return tomllib.load(stream)
