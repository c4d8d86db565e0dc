"""The experiment scripts run as sweeps on a tiny model, SQuAD included, and resume."""

from __future__ import annotations

import json
import runpy
import sys
from pathlib import Path

import pytest

from mechrag.outputs import read_jsonl

EXPERIMENTS = Path(__file__).parents[1] / "experiments"
TOY = [
    "--dataset",
    "squad",
    "--n",
    "2",
    "--model",
    "toy:llama",
    "--max-new-tokens",
    "3",
    "--threads",
    "1",
    "--no-progress",
]


def run_script(name: str, args: list[str], monkeypatch) -> None:
    monkeypatch.setattr(sys, "argv", [name, *args])
    runpy.run_path(str(EXPERIMENTS / name), run_name="__main__")


@pytest.mark.parametrize(
    "script, extra",
    [
        ("sentence_attribution.py", []),
        ("localize_heads.py", ["--top-k", "3"]),
        ("ablate_components.py", ["--top-k", "2", "--random-seeds", "1"]),
    ],
)
def test_experiment_runs_on_squad_and_resumes(script, extra, tmp_path, monkeypatch, capsys):
    args = [*TOY, *extra, "--out", str(tmp_path)]
    records = tmp_path / "records.jsonl"
    run_script(script, args, monkeypatch)
    first = read_jsonl(records)
    assert [r["status"] for r in first] == ["ok", "ok"], first
    run_script(script, args, monkeypatch)
    assert read_jsonl(records) == first  # nothing ran again
    assert json.loads((tmp_path / "config.json").read_text())["config"]["data"] == {}
    # A kill while writing leaves a torn last line: the rerun repairs it and redoes that example.
    lines = records.read_text().splitlines()
    records.write_text(lines[0] + "\n" + lines[1][: len(lines[1]) // 2])
    run_script(script, args, monkeypatch)
    resumed = read_jsonl(records)
    assert [r["id"] for r in resumed] == [r["id"] for r in first]  # each example exactly once
    assert resumed[0] == first[0]
    assert untimed(resumed[1]["result"]) == untimed(first[1]["result"])  # redone, same result


def untimed(value):
    """``value`` without its wall-clock fields."""
    if isinstance(value, dict):
        return {k: untimed(v) for k, v in value.items() if k != "seconds"}
    return value
