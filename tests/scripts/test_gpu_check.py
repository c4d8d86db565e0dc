"""``benchmarks/gpu_check.py`` on a machine without CUDA: it says so and exits cleanly."""

import json
import subprocess
import sys
import time

import pytest
import torch
from helpers import REPO


def test_gpu_check_exits_cleanly_without_cuda():
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present: the script would run the real check")
    script = REPO / "benchmarks" / "gpu_check.py"
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "no CUDA device" in done.stdout


def test_the_gpu_table_reads_the_newest_record_and_its_throughput():
    from result_tables.gpu import gpu_check_table, newest

    def timing(seconds, mfu):
        return {"seconds": seconds, "mfu": mfu, "peak_gib": 3.5}

    record = {
        "gpu": "GPU X", "torch": "2.13", "cuda": "13.0", "started": "2026-12-04T10:00:00Z",
        "matmul_peak_tflops": 700.0,
        "speed": [{"shape": "qwen2-7b", "parameters": 7.6e9, "sources": 36, "prompt_tokens": 1274,
                   "engine": timing(1.0, 0.5), "naive": timing(2.5, 0.2),
                   "plain_forward": timing(1.5, 0.3)}],
        "throughput": [{"shape": "smollm2-135m", "questions": 20, "max_batch_tokens": 65536,
                        "layers": 30, "dtype": "bfloat16",
                        "chosen_by_engine": True, "questions_per_second": 4.0,
                        "tokens_per_second": 2.5e6, "peak_gib": None}],
        "concurrent": [{"workers": w, "questions": 20, "max_batch_tokens": 65536,
                        "questions_per_second": q, "tokens_per_second": 1e6 * q, "peak_gib": 2.0}
                       for w, q in ((1, 2.0), (4, 5.0))]
                      + [{"workers": 8, "error": "OutOfMemoryError: CUDA out of memory"}],
    }  # fmt: skip
    older = {**record, "started": "2026-12-01T10:00:00Z", "gpu": "GPU OLD"}
    (chosen,) = newest([older, record])
    table = gpu_check_table([chosen])
    assert "GPU X" in table and "GPU OLD" not in table
    row = "| qwen2-7b | 7.60B | 36 / 1274 | 1.00 (50%) | 2.50 (20%) | 1.50 (30%) | 3.5 | 2.50x |"
    assert row in table
    assert "| 65,536 (the engine's choice) | 4.00 | 2,500,000 | n/a |" in table
    assert "| 4 | 5.00 | 2.50x | 5,000,000 | 2.0 |" in table
    assert "| 8 | failed: OutOfMemoryError: CUDA out of memory |" in table
    assert "over 20 HotpotQA dev questions (every paragraph) at the smollm2-135m shape (30 " \
        "layers, bfloat16)" in table.replace("\n", " ")


def test_a_failing_concurrent_worker_gives_an_error_row_not_a_hang(monkeypatch):
    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    import gpu_check

    # A zero token budget fails in every worker's warm-up; the barrier is broken, nobody waits.
    (row,) = gpu_check.concurrent_throughput("cpu", 1, [2, 5], n_questions=2, budget=0)
    assert row["workers"] == 2 and "must be positive" in row["error"]


def test_a_worker_that_fails_releases_the_ones_waiting_at_the_barrier(monkeypatch):
    import queue
    import threading

    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    import gpu_check

    def run(rank, workers, settings, barrier):  # rank 0 reaches the barrier, rank 1 fails
        if rank == 1:
            raise RuntimeError("CUDA error: out of memory")
        barrier.wait(timeout=60)
        return {"rank": rank}

    monkeypatch.setattr(gpu_check, "_concurrent_run", run)
    barrier, results = threading.Barrier(2), queue.Queue()
    waiting = threading.Thread(target=gpu_check._concurrent_worker,
                               args=(0, 2, {}, barrier, results))  # fmt: skip
    waiting.start()
    while barrier.n_waiting == 0:
        time.sleep(0.05)
    started = time.perf_counter()
    gpu_check._concurrent_worker(1, 2, {}, barrier, results)
    waiting.join(timeout=60)
    assert time.perf_counter() - started < 30  # released, not timed out
    errors = sorted(results.get()["error"] for _ in range(2))
    assert errors[0].startswith("BrokenBarrierError") and "out of memory" in errors[1]


def test_each_stage_keeps_the_record_so_far(monkeypatch, tmp_path):
    """A run stopped in a stage leaves the record of the stages before it in
    ``in_progress.json`` (and appends nothing); a finished run appends the record and removes
    that file. The stages are stubbed: this checks the bookkeeping, not the measurements."""
    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    import gpu_check

    out = tmp_path / "out"
    argv = ["gpu_check.py", "--device", "cpu", "--shapes", "s", "--no-tests", "--no-embedded",
            "--throughput-questions", "0", "--out", str(out)]  # fmt: skip
    monkeypatch.setattr(sys, "argv", argv)
    monkeypatch.setattr(gpu_check, "matmul_peak", lambda device, size: 1.0)
    row = {name: {"seconds": 1.0, "mfu": 0.5} for name in ("engine", "naive", "plain_forward")}
    row.update(parameters=1e6, sources=3, prompt_tokens=10)

    def stopped(*args):
        raise TimeoutError("the run's time limit")

    monkeypatch.setattr(gpu_check, "speed_row", stopped)
    with pytest.raises(TimeoutError):
        gpu_check.main()
    kept = json.loads((out / gpu_check.IN_PROGRESS).read_text())
    assert kept["embedded"] is None and "speed" not in kept  # the stages before speed's
    assert not (out / "records.jsonl").exists()
    monkeypatch.setattr(gpu_check, "speed_row", lambda *args: row)
    assert gpu_check.main() == 0
    (record,) = map(json.loads, (out / "records.jsonl").read_text().splitlines())
    assert record["speed"] == [row] and record["matmul_peak_tflops"] == 1.0
    assert not (out / gpu_check.IN_PROGRESS).exists()
