"""The experiment scripts run as sweeps on a tiny model, SQuAD included, and resume."""

from __future__ import annotations

import json
import runpy
import sys

import pytest
from helpers import REPO

from mechrag.results.files import read_jsonl

EXPERIMENTS = REPO / "experiments"
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


def test_ablation_masking_styles_and_paired_tests(tmp_path, monkeypatch, capsys):
    from mechrag.metrics.detection import sign_flip_p

    styles = ["zero", "mean", "uniform"]
    args = [*TOY, "--n", "3", "--top-k", "2", "--random-seeds", "2", "--mode", *styles]
    run_script("ablate_components.py", [*args, "--out", str(tmp_path)], monkeypatch)
    records = read_jsonl(tmp_path / "records.jsonl")
    assert [r["status"] for r in records] == ["ok"] * 3, records
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert list(summary) == styles
    for record in records:
        result = record["result"]
        top = {tuple(head) for head in result["components"]["top"]["heads"]}
        for name in ("random0", "random1"):
            random_heads = {tuple(head) for head in result["components"][name]["heads"]}
            assert len(random_heads) == 2 and not top & random_heads
        for effects in result["effects"].values():
            for effect in effects.values():
                per_token = effect["output_jsd"] / result["n_response"]
                assert effect["output_jsd_per_token"] == pytest.approx(per_token)
    for style in styles:
        effects = [r["result"]["effects"][style] for r in records]
        for metric in ("output_jsd", "output_jsd_per_token"):
            top = [e["top"][metric] for e in effects]
            random = [(e["random0"][metric] + e["random1"][metric]) / 2 for e in effects]
            test = summary[style]["top_vs_random"][metric]
            assert test["n"] == 3
            differences = [t - r for t, r in zip(top, random)]
            assert test["p_value"] == pytest.approx(sign_flip_p(differences))
            assert summary[style]["top"][metric]["mean"] == pytest.approx(sum(top) / 3)
    with pytest.raises(SystemExit):
        run_script("ablate_components.py", [*args, "--kind", "all", "--out", "x"], monkeypatch)
    assert "--mode uniform masks heads only" in capsys.readouterr().err


def untimed(value):
    """``value`` without its wall-clock fields."""
    if isinstance(value, dict):
        return {k: untimed(v) for k, v in value.items() if k != "seconds"}
    return value
