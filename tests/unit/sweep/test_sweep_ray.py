"""The Ray backend on a local 2-CPU cluster: same records as in process, survives worker and
driver deaths. Deselect with ``-m "not ray"`` (each Ray start takes ~20 s on a busy machine)."""

from __future__ import annotations

import pytest
from test_sweep import STUB_ARGS, by_id, kill_and_resume, records

from mechrag.sweep import Backend, SweepConfig, load_sweep_examples, sweep

ray = pytest.importorskip("ray")
pytestmark = pytest.mark.ray
RAY_START_TIMEOUT = 240  # seconds: a local cluster and two actors start in ~10 s on idle cores


@pytest.fixture(scope="module")
def cluster():
    from mechrag.sweep.ray_backend import connect

    started = connect(Backend("ray", workers=2))
    yield
    if started:
        ray.shutdown()


def test_killed_ray_sweep_resumes_to_the_in_process_records(tmp_path):
    ray_args = [*STUB_ARGS, "--backend", "ray", "--workers", "2"]
    kill_and_resume(tmp_path / "killed", ray_args, k=3, timeout=RAY_START_TIMEOUT)
    sweep(
        "stub_score", "squad", n=8, options={"sleep": 0.2}, out=tmp_path / "local", progress=False
    )
    assert by_id(tmp_path / "killed") == by_id(tmp_path / "local")


def test_ray_records_equal_in_process_records(cluster, tmp_path):
    options = {
        "method": "arc_jsd",
        "dataset": "squad",
        "n": 3,
        "model": "toy:llama",
        "options": {"max_new_tokens": 3},
        "threads": 1,
        "progress": False,
    }
    sweep(**options, out=tmp_path / "local")
    sweep(**options, out=tmp_path / "ray", backend="ray", workers=2)
    local, remote = by_id(tmp_path / "local"), by_id(tmp_path / "ray")
    assert remote == local and len(local) == 3
    assert all(r["status"] == "ok" for r in local.values())


def test_dead_worker_is_restarted_and_its_example_retried(cluster, tmp_path):
    ids = [e.id for e in load_sweep_examples(SweepConfig("stub_score", "squad", n=6))]
    (tmp_path / "markers").mkdir()
    options = {"die_ids": [ids[1]], "markers": str(tmp_path / "markers")}
    frame = sweep(
        "stub_die_once",
        "squad",
        n=6,
        options=options,
        out=tmp_path / "ray",
        backend="ray",
        workers=2,
        progress=False,
    )
    assert frame["status"].tolist() == ["ok"] * 6
    assert sorted(r["id"] for r in records(tmp_path / "ray")) == sorted(ids)
    assert sorted(p.name for p in (tmp_path / "markers").iterdir()) == [ids[1]]
