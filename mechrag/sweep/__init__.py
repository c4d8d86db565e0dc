"""Sweeps: run any method over a data set, one append-only record per example, resumable,
in this process or on Ray actors (``pip install mechrag[ray]``)."""

from mechrag._lazy import lazy_exports

_MODULES = {
    "mechrag.sweep.backends": ("load_sweep_model",),
    "mechrag.sweep.config": ("Backend", "SweepConfig"),
    "mechrag.sweep.methods": (
        "METHODS", "SWEEP_METHODS", "SweepMethod", "get_method", "register_method",
    ),
    "mechrag.sweep.records": ("aggregate",),
    "mechrag.sweep.runner": (
        "ConfigChangedError", "load_records", "load_sweep_examples", "read_summary", "run_sweep",
        "sweep",
    ),
}
__all__, __getattr__, __dir__ = lazy_exports(__name__, globals(), _MODULES)

