"""The gating experiment's paper protocol on a tiny model: records, resume and re-judging the
stored responses without a model pass."""

from __future__ import annotations

import importlib
import json
import runpy
import sys

import pytest
from helpers import REPO

from mechrag.results.files import read_jsonl

SWEEP = importlib.import_module("mechrag.sweep")  # the module (mechrag.sweep is also a function)

SCRIPT = REPO / "experiments" / "gating.py"


def run_gating(args: list[str], monkeypatch) -> None:
    monkeypatch.setattr(sys, "argv", ["gating.py", *args])
    runpy.run_path(str(SCRIPT), run_name="__main__")


def test_paper_protocol_records_resume_and_rejudge(tmp_path, monkeypatch, capsys):
    args = [
        "--protocol", "paper", "--datasets", "squad", "--n-calibration", "1", "--n-test", "2",
        "--random-seeds", "1", "--random-pool", "all", "--max-new-tokens", "3",
        "--model", "toy:llama",
        "--out", str(tmp_path),
    ]  # fmt: skip
    run_gating(args, monkeypatch)
    path = tmp_path / "squad" / "paper" / "records.jsonl"
    first = read_jsonl(path)
    assert len(first) == 2
    assert set(first[0]["conditions"]) == {"none", "paper", "random:0"}
    # SQuAD 2.0 alternates answerable and unanswerable questions.
    assert sorted(bool(r["answers"]) for r in first) == [False, True]

    def no_model(name):
        raise AssertionError("re-judging must not load a model")

    monkeypatch.setattr(SWEEP, "load_sweep_model", no_model)
    capsys.readouterr()
    run_gating([*args, "--rejudge"], monkeypatch)
    assert "squad: 0 stored judgements changed" in capsys.readouterr().out
    assert read_jsonl(path) == first  # judged by the current judge already
    written = path.stat().st_mtime_ns
    run_gating([*args, "--rejudge"], monkeypatch)
    assert path.stat().st_mtime_ns == written  # nothing changed: nothing written

    # A stale judgement (as from an older judge) is judged again from the stored response.
    stale = [dict(r) for r in first]
    plain = stale[1]["conditions"]["none"]
    stale[1]["conditions"] = {**stale[1]["conditions"], "none": {**plain, "abstained": None}}
    assert stale != first
    path.write_text("".join(json.dumps(r) + "\n" for r in stale))
    run_gating([*args, "--rejudge"], monkeypatch)
    assert "squad: 1 stored judgements changed" in capsys.readouterr().out
    assert read_jsonl(path) == first

    # A record of an example outside this split is left as it is, and said so.
    other = {**first[0], "id": "not-in-this-split"}
    path.write_text("".join(json.dumps(r) + "\n" for r in [*first, other]))
    run_gating([*args, "--rejudge"], monkeypatch)
    assert "squad: 1 records of other examples left as they are" in capsys.readouterr().out
    assert read_jsonl(path) == [*first, other]
    # A line that is not JSON (not a torn last line) is refused, the file untouched.
    damaged = path.read_text().replace("\n", "\nnot json\n", 1)
    path.write_text(damaged)
    with pytest.raises(SystemExit, match="a line that is not JSON"):
        run_gating([*args, "--rejudge"], monkeypatch)
    assert path.read_text() == damaged
    # A torn last line (a crash mid-write) is dropped with the rewrite.
    torn = "".join(json.dumps(r) + "\n" for r in stale) + '{"id": "to'
    path.write_text(torn)
    run_gating([*args, "--rejudge"], monkeypatch)
    assert read_jsonl(path) == first and path.read_text().endswith("\n")


def test_rejudge_without_records_writes_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(SWEEP, "load_sweep_model", pytest.fail)
    run_gating(
        ["--protocol", "paper", "--datasets", "squad", "--n-test", "2", "--rejudge",
         "--out", str(tmp_path)],
        monkeypatch,
    )  # fmt: skip
    assert "squad: no records" in capsys.readouterr().out
    assert not any(tmp_path.iterdir())


def test_rejudge_refuses_the_calibrated_protocol(tmp_path, monkeypatch, capsys):
    with pytest.raises(SystemExit) as stopped:
        run_gating(["--datasets", "squad", "--rejudge", "--out", str(tmp_path)], monkeypatch)
    assert stopped.value.code == 2
    assert "--rejudge re-judges the paper protocol only" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())


def test_paper_protocol_on_hotpotqa_dev_takes_dev_examples_into_their_own_folder(
    tmp_path, monkeypatch
):
    from mechrag.data import load_hotpotqa

    args = [
        "--protocol", "paper", "--datasets", "hotpotqa_dev", "--n-calibration", "0",
        "--n-test", "1", "--random-seeds", "1", "--random-pool", "all", "--max-new-tokens", "2",
        "--model", "toy:llama", "--out", str(tmp_path),
    ]  # fmt: skip
    run_gating(args, monkeypatch)
    (record,) = read_jsonl(tmp_path / "hotpotqa_dev" / "paper" / "records.jsonl")
    assert record["id"] in {e.id for e in load_hotpotqa(split="dev")}
    assert record["id"] not in {e.id for e in load_hotpotqa()}
