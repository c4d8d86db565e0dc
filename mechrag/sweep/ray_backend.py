"""Ray backend: one actor per worker loads the model once and runs the examples it is handed.

The driver keeps one example in flight per actor, collects results with ``ray.wait`` and is the
only process that writes records. An actor that dies (crash, OOM kill, lost node) is restarted by
Ray (``max_restarts=-1``), which then runs the example it was running again
(``max_task_retries``); an example that kills its worker ``max_attempts`` times is recorded as a
``WorkerDied`` error, so every example gets exactly one record per run.
"""

from __future__ import annotations

import os
import sys
from collections import deque
from collections.abc import Callable

from mechrag._version import __version__
from mechrag.sweep.backends import load_sweep_model
from mechrag.sweep.config import Backend, SweepConfig
from mechrag.sweep.methods import SweepMethod
from mechrag.sweep.records import execute


class SweepWorker:
    """Holds the method and the loaded model; runs one example per call."""

    def __init__(
        self, method: SweepMethod, config: SweepConfig, backend: Backend, threads: int
    ) -> None:
        import torch

        torch.set_num_threads(threads)
        self.method = method
        self.backend = backend
        self.model = None
        if method.needs_model:
            self.model = load_sweep_model(
                config.model,
                device=backend.device,
                dtype=config.dtype,
                device_map=backend.device_map,
            )

    def ready(self) -> int:
        return os.getpid()

    def run(self, example, index: int, options: dict, config_hash: str) -> dict:
        with self.backend.batch_budget():
            return execute(self.method, self.model, example, index, options, config_hash)


def connect(backend: Backend) -> bool:
    """Join ``backend.address`` or start a local cluster; True when this call started Ray."""
    import ray

    if ray.is_initialized():
        return False
    if backend.address is not None:
        ray.init(address=backend.address)
    else:
        # A local cluster's workers share this machine, so they import what the driver imports,
        # and they run at its priority: Ray's default (nice 15) starves them on a busy machine.
        path = os.pathsep.join(entry for entry in sys.path if entry)
        ray.init(
            num_cpus=backend.workers,
            include_dashboard=False,
            runtime_env={"env_vars": {"PYTHONPATH": path}},
            _system_config={"worker_niceness": 0},
        )
    return True


def worker_died_record(example, index: int, config: SweepConfig, attempts: int, error) -> dict:
    return {
        "id": example.id,
        "index": index,
        "config_hash": config.hash,
        "method": config.method,
        "mechrag_version": __version__,
        "status": "error",
        "error": {
            "type": "WorkerDied",
            "message": f"the worker died {attempts} times on this example: {error}",
            "traceback": "",
        },
        "seconds": None,
    }


def run_ray(
    method: SweepMethod,
    config: SweepConfig,
    todo: list,
    write: Callable[[dict], None],
    ready: Callable[[], None],
    backend: Backend,
) -> None:
    """Run ``todo`` ((index, example) pairs) on ``backend.workers`` Ray actors."""
    import ray
    from ray.exceptions import RayActorError

    started = connect(backend)
    actor_class = ray.remote(
        num_cpus=1,
        num_gpus=backend.gpus_per_worker,
        max_restarts=-1,
        max_task_retries=backend.max_attempts - 1,
    )(SweepWorker)
    actors = [
        actor_class.remote(method, config, backend, backend.threads or 1)
        for _ in range(min(backend.workers, len(todo)))
    ]
    try:
        ray.get([actor.ready.remote() for actor in actors])  # model loading errors stop here
        ready()
        queue, in_flight = deque(todo), {}

        def submit(actor) -> None:
            index, example = queue.popleft()
            ref = actor.run.remote(example, index, config.options, config.hash)
            in_flight[ref] = (actor, index, example)

        for actor in actors:
            submit(actor)
        while in_flight:
            [ref], _ = ray.wait(list(in_flight), num_returns=1)
            actor, index, example = in_flight.pop(ref)
            try:
                write(ray.get(ref))
            except RayActorError as error:
                write(worker_died_record(example, index, config, backend.max_attempts, error))
            if queue:
                submit(actor)
    finally:
        for actor in actors:
            ray.kill(actor, no_restart=True)
        if started:
            ray.shutdown()
