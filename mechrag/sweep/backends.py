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


def load_sweep_model(
    name: str | None,
    *,
    device: str | None = None,
    dtype: str | None = None,
    device_map: str | dict | None = None,
):
    """``mechrag.load_model(name, device, dtype, device_map=...)`` (``dtype`` by name, one of
    :data:`mechrag.defaults.DTYPES`), passing on only the options given; ``"toy:FAMILY"`` builds
    a tiny random model instead (on ``device``, in ``dtype``; ``device_map`` does not apply)."""
    import torch

    given = {"device": device, "dtype": dtype and getattr(torch, dtype), "device_map": device_map}
    given = {key: value for key, value in given.items() if value is not None}
    if name is not None and name.startswith(TOY_PREFIX):
        from mechrag.models.toy import tiny_model

        family = name.removeprefix(TOY_PREFIX)
        return tiny_model(family, dtype=given.get("dtype", torch.float32), device=device or "cpu")
    from mechrag.models.loading import load_model

    return load_model(name, **given)


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
    model = None
    if method.needs_model:
        model = load_sweep_model(
            config.model, device=backend.device, dtype=config.dtype, device_map=backend.device_map
        )
    ready()
    with backend.batch_budget():
        for index, example in todo:
            write(execute(method, model, example, index, config.options, config.hash))
