"""``benchmarks/gpu_check.py`` on a machine without CUDA: it says so and exits cleanly."""

import subprocess
import sys

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
