"""Sweeps: run any method over a data set, one append-only record per example, resumable,
in this process or on Ray actors (``pip install mechrag[ray]``)."""

import sys
import types

from mechrag._lazy import lazy_exports

_EXPORTS = {
    "Backend": "mechrag.sweep.config",
    "ConfigChangedError": "mechrag.sweep.runner",
    "METHODS": "mechrag.sweep.methods",
    "SWEEP_METHODS": "mechrag.sweep.methods",
    "SweepConfig": "mechrag.sweep.config",
    "SweepMethod": "mechrag.sweep.methods",
    "aggregate": "mechrag.sweep.records",
    "get_method": "mechrag.sweep.methods",
    "load_records": "mechrag.sweep.runner",
    "load_sweep_examples": "mechrag.sweep.runner",
    "load_sweep_model": "mechrag.sweep.backends",
    "read_summary": "mechrag.sweep.runner",
    "register_method": "mechrag.sweep.methods",
    "run_sweep": "mechrag.sweep.runner",
    "sweep": "mechrag.sweep.runner",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS)


class _CallableSweepPackage(types.ModuleType):
    """``mechrag.sweep`` names both this package and :func:`sweep`: the import system binds the
    package to it once a submodule is imported, so the package forwards calls to the function."""

    def __call__(self, *args, **kwargs):
        return __getattr__("sweep")(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableSweepPackage
