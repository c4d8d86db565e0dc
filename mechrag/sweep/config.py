"""What a sweep computes (method, options, data set and model, with a hash that names it) and
where it runs (:class:`Backend`).

The hash covers everything that changes a record (method, its options, data set, data options,
model) and nothing that only changes how many examples or where they run (``n``, backend,
workers), so a sweep can be extended to more examples or moved to a cluster and still resume.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from mechrag.data.loaders import DATASETS
from mechrag.defaults import DTYPES
from mechrag.errors import InputError


@dataclass(frozen=True)
class SweepConfig:
    """One sweep: ``method`` with ``options`` over ``dataset`` (first ``n`` examples).

    ``data``: options of the data set's reader (``distractors``, ``unit``, ``seed``, ``split``;
    SQuAD takes none). ``path``: a data file instead of the shipped sample. ``model``: as for
    :func:`mechrag.load_model` (``None``: the embedded model; ``"toy:llama"``: a tiny random
    model from :mod:`mechrag.models.toy`).
    """

    method: str
    dataset: str = "hotpotqa"
    n: int | None = None
    path: str | None = None
    data: dict = field(default_factory=dict)
    model: str | None = None
    options: dict = field(default_factory=dict)
    dtype: str | None = None  # the model's (default: the loader's); it changes the records

    def __post_init__(self) -> None:
        from mechrag.sweep.methods import get_method

        if self.dtype is not None and self.dtype not in DTYPES:
            raise InputError(f"unknown dtype {self.dtype!r}: choose from {DTYPES}")
        if self.dataset not in DATASETS:
            raise InputError(f"unknown dataset {self.dataset!r}: choose from {DATASETS}")
        if self.n is not None and self.n < 1:
            raise InputError(f"n must be at least 1, got {self.n}")
        get_method(self.method).check_options(self.options)

    def identity(self) -> dict:
        """The fields that determine every record's content (hashed)."""
        return {k: v for k, v in self.to_dict().items() if k != "n"}

    @property
    def hash(self) -> str:
        text = json.dumps(self.identity(), sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def to_dict(self) -> dict:
        """The fields; ``dtype`` only when set, so a sweep made before it existed keeps its
        hash and its ``config.json``."""
        fields_ = asdict(self)
        if fields_["dtype"] is None:
            del fields_["dtype"]
        return fields_

    @classmethod
    def from_dict(cls, data: dict) -> SweepConfig:
        known = {f.name for f in fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise InputError(f"unknown sweep config keys {sorted(unknown)}: use {sorted(known)}")
        return cls(**data)


BACKENDS = ("local", "ray")


@dataclass(frozen=True)
class Backend:
    """Where examples run: ``local`` (this process) or ``ray`` (one actor per worker).

    ``address``: Ray cluster to join (``"auto"``, ``"HOST:PORT"``); ``None`` starts a local one
    with ``workers`` CPUs. ``threads``: torch threads per worker (Ray default 1). ``device`` and
    ``device_map``: where each worker loads the model (see :func:`mechrag.load_model`); they
    are not hashed. The device also picks the default dtype (float32 on the CPU, bfloat16 on a
    GPU): give the sweep's ``dtype`` so that its records do not depend on where it resumes (a
    sweep without one that would resume in another dtype than its records' is refused).
    ``max_batch_tokens``: every case's engine budget (not hashed; default: the engine's, from
    free GPU memory, scaled by a Ray worker's ``gpus_per_worker`` below one GPU, so that workers
    sharing a GPU do not each size their batches from all of it).
    """

    name: str = "local"
    address: str | None = None
    workers: int = 1
    gpus_per_worker: float = 0.0
    threads: int | None = None
    max_attempts: int = 3
    device: str | None = None
    device_map: str | None = None
    max_batch_tokens: int | None = None

    def __post_init__(self) -> None:
        if self.name not in BACKENDS:
            raise InputError(f"unknown backend {self.name!r}: choose from {BACKENDS}")
        if self.workers < 1 or self.max_attempts < 1:
            raise InputError("workers and max_attempts must be at least 1")
        if self.max_batch_tokens is not None and self.max_batch_tokens < 1:
            raise InputError(f"max_batch_tokens must be positive, got {self.max_batch_tokens}")
        if self.gpus_per_worker < 0:
            raise InputError(f"gpus_per_worker must be at least 0, got {self.gpus_per_worker}")

    def batch_budget(self):
        """The scope each worker runs its examples in (:func:`mechrag.engine.batch_budget`): the
        sweep's token budget, or, for a Ray worker holding part of a GPU, that part of the
        memory the engine would otherwise size its batches from."""
        from mechrag.engine import batch_budget

        fractional = self.name == "ray" and 0 < self.gpus_per_worker < 1
        share = self.gpus_per_worker if fractional else 1.0
        return batch_budget(self.max_batch_tokens, memory_share=share)


def read_toml(path: str | Path) -> dict:
    """A sweep config file: top-level keys of :class:`SweepConfig` plus ``out`` and a
    ``[backend]`` table (the fields of :class:`Backend`: ``name``, ``address``, ``workers``,
    ``gpus_per_worker``, ``threads``, ``device``, ``device_map``, ``max_batch_tokens``)."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10: the same parser, as the tomli package
        import tomli as tomllib

    with Path(path).open("rb") as stream:
        return tomllib.load(stream)
