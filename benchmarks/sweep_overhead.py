"""Per-example overhead of the sweep runner: a no-op method in process versus on Ray.

The no-op method (registered here only) returns at once, so the time per example is what the
runner itself costs: one fsynced record, and for Ray one task round trip. Start-up (Ray
cluster, actor processes) is reported apart: the per-example figure is the span from the first
example's start to the last one's end, divided by the number of examples.

    python benchmarks/sweep_overhead.py --n 100 --workers 2
"""

from __future__ import annotations

import argparse
import tempfile
import time

from mechrag.sweep import Backend, load_records, register_method, sweep
from mechrag.sweep.ray_backend import connect


def noop(model, example, options: dict) -> dict:
    return {"n_sources": len(example.sources)}


def timed_sweep(n: int, backend: str, workers: int) -> tuple[float, float]:
    """Total seconds, and seconds per example once the workers are up."""
    with tempfile.TemporaryDirectory() as folder:
        start = time.perf_counter()
        frame = sweep(
            "noop", "hotpotqa", n=n, out=folder, backend=backend, workers=workers, progress=False
        )
        total = time.perf_counter() - start
        records = load_records(folder)
    assert (frame["status"] == "ok").all() and len(records) == n
    span = max(r["started_at"] + r["seconds"] for r in records) - min(
        r["started_at"] for r in records
    )
    return total, span / n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    register_method("noop", noop, needs_model=False)
    import ray

    start = time.perf_counter()
    connect(Backend("ray", workers=args.workers))
    print(f"ray.init, local cluster with {args.workers} CPUs: {time.perf_counter() - start:.1f} s")
    print(f"{'backend':<8} {'examples':>8} {'total s':>8} {'start-up s':>10} {'ms/example':>11}")
    per_example = {}
    for backend in ("local", "ray"):
        total, per_example[backend] = timed_sweep(args.n, backend, args.workers)
        startup = total - args.n * per_example[backend]
        print(
            f"{backend:<8} {args.n:>8} {total:>8.2f} {startup:>10.2f} "
            f"{1000 * per_example[backend]:>11.2f}"
        )
    ray.shutdown()
    extra = per_example["ray"] - per_example["local"]
    print(f"Ray overhead: {1000 * extra:.1f} ms per example ({args.workers} workers)")


if __name__ == "__main__":
    main()
