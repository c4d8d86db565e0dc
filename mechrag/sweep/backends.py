"""Running a sweep's examples in this process, and loading its model.

The Ray runner (:mod:`mechrag.sweep.ray_backend`) loads models the same way; the driver in
:mod:`mechrag.sweep.runner` picks one by :class:`mechrag.sweep.config.Backend`.
"""

from __future__ import annotations

from collections.abc import Callable

from mechrag.sweep.config import Backend, SweepConfig
from mechrag.sweep.methods import SweepMethod
from mechrag.sweep.records import execute

TOY_PREFIX = "toy:"


def load_sweep_model(name: str | None):
    """``mechrag.load_model(name)``; ``"toy:FAMILY"`` builds a tiny random model instead."""
    if name is not None and name.startswith(TOY_PREFIX):
        from mechrag.models.toy import tiny_model

        return tiny_model(name.removeprefix(TOY_PREFIX))
    from mechrag.models.loading import load_model

    return load_model(name)


def run_local(
    method: SweepMethod,
    config: SweepConfig,
    todo: list,
    write: Callable[[dict], None],
    ready: Callable[[], None],
    backend: Backend,
) -> None:
    """Run ``todo`` ((index, example) pairs) in this process, loading the model once."""
    if backend.threads:
        import torch

        torch.set_num_threads(backend.threads)
    model = load_sweep_model(config.model) if method.needs_model else None
    ready()
    for index, example in todo:
        write(execute(method, model, example, index, config.options, config.hash))
