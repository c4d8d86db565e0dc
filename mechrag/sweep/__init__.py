"""Sweeps: run any method over a data set, one append-only record per example, resumable,
in this process or on Ray actors (``pip install mechrag[ray]``)."""

from mechrag.sweep.config import SweepConfig
from mechrag.sweep.methods import METHODS, SweepMethod, get_method, register_method
from mechrag.sweep.records import aggregate
from mechrag.sweep.runner import (
    Backend,
    ConfigChangedError,
    load_records,
    load_sweep_examples,
    load_sweep_model,
    read_summary,
    run_sweep,
    sweep,
)

__all__ = [
    "METHODS",
    "Backend",
    "ConfigChangedError",
    "SweepConfig",
    "SweepMethod",
    "aggregate",
    "get_method",
    "load_records",
    "load_sweep_examples",
    "load_sweep_model",
    "read_summary",
    "register_method",
    "run_sweep",
    "sweep",
]
