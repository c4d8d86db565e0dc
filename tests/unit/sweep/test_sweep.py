"""The sweep runner in this process: resume after kill -9, torn lines, config changes, errors."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import sweep_stubs

import mechrag
from mechrag.cli import main
from mechrag.errors import InputError
from mechrag.results.files import JsonlWriter, read_jsonl, repair_jsonl
from mechrag.sweep import ConfigChangedError, SweepConfig, read_summary, run_sweep, sweep
from mechrag.sweep.records import RECORDS_FILE, TIMING_FIELDS

STUBS = Path(sweep_stubs.__file__)


def sweep_main(argv: list[str]) -> int:
    """``mechrag sweep ...``."""
    return main(["sweep", *argv])

# The script must import this checkout's mechrag, wherever the tests run from.
SCRIPT_ENV = {**os.environ, "PYTHONPATH": str(Path(mechrag.__file__).parents[1])}
sweep_stubs.register()


def records(out: Path) -> list[dict]:
    return read_jsonl(out / RECORDS_FILE)


def untimed(record: dict) -> dict:
    return {k: v for k, v in record.items() if k not in TIMING_FIELDS}


def by_id(out: Path) -> dict[str, dict]:
    """Untimed records keyed by example id; fails if an example has two records."""
    found = records(out)
    ids = [r["id"] for r in found]
    assert len(ids) == len(set(ids)), "an example was recorded twice"
    return {r["id"]: untimed(r) for r in found}


def wait_for_records(out: Path, k: int, process: subprocess.Popen, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while len(records(out)) < k:
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "the sweep wrote too few records in time"
        time.sleep(0.05)


def kill_and_resume(out: Path, args: list[str], k: int, timeout: float = 60) -> None:
    """Start the sweep script, kill -9 it (and its process group) after ``k`` records, rerun."""
    command = [sys.executable, str(STUBS), *args, "--out", str(out), "--no-progress"]
    process = subprocess.Popen(
        command,
        env=SCRIPT_ENV,
        start_new_session=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        wait_for_records(out, k, process, timeout)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    assert k <= len(records(out)) < int(args[args.index("--n") + 1]), "kill came too late"
    with (out / RECORDS_FILE).open("a") as stream:
        stream.write('{"id": "torn')  # what a kill in the middle of a write leaves
    subprocess.run(command, env=SCRIPT_ENV, check=True, capture_output=True, timeout=2 * timeout)


STUB_ARGS = ["--method", "stub_score", "--dataset", "squad", "--n", "8", "--option", "sleep=0.2"]


def test_killed_sweep_resumes_to_the_uninterrupted_records(tmp_path):
    sweep_main([*STUB_ARGS, "--out", str(tmp_path / "whole"), "--no-progress"])
    kill_and_resume(tmp_path / "killed", STUB_ARGS, k=3)
    assert by_id(tmp_path / "killed") == by_id(tmp_path / "whole")
    assert len(by_id(tmp_path / "whole")) == 8


def test_torn_last_line_is_cut_and_other_lines_kept(tmp_path):
    path = tmp_path / "log.jsonl"
    with JsonlWriter(path) as writer:
        writer.write({"a": 1})
        writer.write({"a": 2})
    text = path.read_text()
    path.write_text(text + '{"a": 3')
    assert repair_jsonl(path) == len('{"a": 3')
    assert path.read_text() == text
    path.write_text(text + "not json\n")
    assert repair_jsonl(path) == len("not json\n")
    assert repair_jsonl(path) == 0
    assert read_jsonl(path) == [{"a": 1}, {"a": 2}]


def test_an_atomic_rewrite_keeps_the_files_mode(tmp_path):
    from mechrag.results.files import write_text_atomic

    path = tmp_path / "records.jsonl"
    path.write_text("old\n")
    path.chmod(0o640)
    write_text_atomic(path, "new\n")
    assert path.read_text() == "new\n" and path.stat().st_mode & 0o777 == 0o640
    fresh = write_text_atomic(tmp_path / "fresh.txt", "x")  # not mkstemp's private 0600
    mask = os.umask(0o022)
    os.umask(mask)
    assert fresh.stat().st_mode & 0o777 == 0o666 & ~mask
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no leftovers


def test_changed_config_is_refused_unless_forced(tmp_path):
    options = {"method": "stub_score", "dataset": "squad", "out": tmp_path, "progress": False}
    first = sweep(n=3, options={"scale": 1.0}, **options)
    with pytest.raises(ConfigChangedError):
        sweep(n=3, options={"scale": 2.0}, **options)
    assert (
        sweep_main(
            [
                "--method",
                "stub_score",
                "--dataset",
                "squad",
                "--n",
                "3",
                "--option",
                "scale=2",
                "--out",
                str(tmp_path),
                "--no-progress",
            ]
        )
        == 2
    )
    forced = sweep(n=3, options={"scale": 2.0}, force=True, **options)
    assert forced["score"].tolist() == pytest.approx((2 * first["score"]).tolist())
    assert len(records(tmp_path)) == 6  # append-only: the old config's records stay
    assert read_summary(tmp_path)["score"].tolist() == forced["score"].tolist()


def test_more_examples_extend_a_sweep_without_rerunning(tmp_path):
    options = {"method": "stub_score", "dataset": "squad", "out": tmp_path, "progress": False}
    sweep(n=2, **options)
    frame = sweep(n=5, **options)
    assert len(frame) == 5 and len(records(tmp_path)) == 5
    assert frame["index"].tolist() == list(range(5))


def test_a_sweep_made_by_another_minor_version_is_not_extended(tmp_path):
    options = {"method": "stub_score", "dataset": "squad", "out": tmp_path, "progress": False}
    sweep(n=2, **options)
    path = tmp_path / RECORDS_FILE
    lines = read_jsonl(path)
    path.write_text("".join(json.dumps({**r, "mechrag_version": "0.2.4"}) + "\n" for r in lines))
    sweep(n=2, **options)  # nothing to add: its summary is still read
    with pytest.raises(InputError, match="made by mechrag 0.2.4, this is"):
        sweep(n=3, **options)
    assert len(read_jsonl(path)) == 2
    patch = mechrag.__version__.rsplit(".", 1)[0] + ".99"  # another patch release extends it
    path.write_text("".join(json.dumps({**r, "mechrag_version": patch}) + "\n" for r in lines))
    assert len(sweep(n=3, **options)) == 3


def test_records_a_worker_of_another_minor_version_made_are_refused(tmp_path, monkeypatch):
    import importlib

    records_module = importlib.import_module("mechrag.sweep.records")
    monkeypatch.setattr(records_module, "__version__", "0.2.9")  # a Ray node's mechrag
    with pytest.raises(InputError, match="made by mechrag 0.2.9"):
        sweep("stub_score", "squad", n=2, out=tmp_path, progress=False)
    assert read_jsonl(tmp_path / RECORDS_FILE) == []


def test_failing_example_is_an_error_record_and_retry_errors_reruns_it(tmp_path):
    ids = [e.id for e in SweepConfig_examples(4)]
    options = {"fail_ids": [ids[1]], "fixed": str(tmp_path / "fixed")}
    kwargs = {
        "method": "stub_flaky",
        "dataset": "squad",
        "n": 4,
        "options": options,
        "out": tmp_path / "out",
        "progress": False,
    }
    frame = sweep(**kwargs)
    assert frame["status"].tolist() == ["ok", "error", "ok", "ok"]
    error = by_id(tmp_path / "out")[ids[1]]["error"]
    assert error["type"] == "RuntimeError" and "injected failure" in error["message"]
    assert "stub_flaky" in error["traceback"]
    assert sweep(**kwargs)["status"].tolist() == ["ok", "error", "ok", "ok"]  # skipped
    (tmp_path / "fixed").touch()
    frame = sweep(**kwargs, retry_errors=True)
    assert frame["status"].tolist() == ["ok"] * 4
    assert [r["id"] for r in records(tmp_path / "out")] == [*ids, ids[1]]  # only it reran


def SweepConfig_examples(n: int):
    from mechrag.sweep import load_sweep_examples

    return load_sweep_examples(SweepConfig("stub_score", "squad", n=n))


def test_config_rejects_unknown_method_options_and_data_options():
    with pytest.raises(ValueError, match="takes options"):
        SweepConfig("arc_jsd", options={"budget": 3})
    with pytest.raises(ValueError, match="unknown sweep method"):
        SweepConfig("no_such_method")
    with pytest.raises(ValueError, match="squad takes data options"):
        run_sweep(SweepConfig("stub_score", "squad", data={"distractors": 2}), "unused")


def test_config_file_with_flag_overrides(tmp_path):
    config = tmp_path / "sweep.toml"
    config.write_text(
        'method = "stub_score"\ndataset = "hotpotqa"\nn = 3\n'
        f'out = "{tmp_path / "out"}"\n[data]\ndistractors = 1\n[options]\nscale = 3.0\n'
    )
    assert sweep_main(["--config", str(config), "--n", "2", "--no-progress"]) == 0
    saved = json.loads((tmp_path / "out" / "config.json").read_text())["config"]
    assert saved == {
        "method": "stub_score",
        "dataset": "hotpotqa",
        "n": 2,
        "path": None,
        "data": {"distractors": 1},
        "model": None,
        "options": {"scale": 3.0},
    }


def test_split_flag_sweeps_the_dev_sample(tmp_path):
    from mechrag.data import load_hotpotqa

    out = tmp_path / "dev"
    argv = ["--method", "stub_score", "--dataset", "hotpotqa", "--n", "2", "--no-progress"]
    assert sweep_main([*argv, "--split", "dev", "--out", str(out)]) == 0
    saved = json.loads((out / "config.json").read_text())["config"]
    assert saved["data"] == {"split": "dev"}
    assert set(by_id(out)) == {e.id for e in load_hotpotqa(n=2, split="dev")}
    assert not set(by_id(out)) & {e.id for e in load_hotpotqa(n=2)}


def test_summary_command_prints_the_aggregate(tmp_path, capsys):
    sweep("stub_score", "squad", n=3, out=tmp_path, progress=False)
    assert (tmp_path / "summary.parquet").is_file()
    assert sweep_main(["summary", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    assert "3 examples, 3 ok, 0 errors" in printed and "score" in printed


def test_arc_jsd_sweep_on_a_toy_model_records_scores(tmp_path):
    frame = sweep(
        "arc_jsd",
        "squad",
        n=2,
        model="toy:llama",
        options={"max_new_tokens": 3},
        out=tmp_path,
        threads=1,
        progress=False,
    )
    assert frame["status"].tolist() == ["ok", "ok"]
    record = records(tmp_path)[0]
    assert len(record["result"]["scores"]) == record["result"]["n_sources"]
    assert (
        record["config_hash"]
        == SweepConfig(
            "arc_jsd", "squad", n=2, model="toy:llama", options={"max_new_tokens": 3}
        ).hash
    )
    assert record["mechrag_version"]
    assert (record["dtype"], record["device"]) == ("float32", "cpu")


def test_a_sweep_without_dtype_refuses_to_resume_in_another_precision(tmp_path):
    """Records made in bfloat16 (a GPU's default) are not extended in float32 (the CPU's), so
    one sweep never mixes precisions; with the dtype given, the config says it."""
    settings = {"model": "toy:llama", "options": {"max_new_tokens": 3}, "threads": 1,
                "progress": False}  # fmt: skip
    sweep("arc_jsd", "squad", n=1, out=tmp_path, **settings)
    lines = (tmp_path / RECORDS_FILE).read_text().replace('"float32"', '"bfloat16"')
    (tmp_path / RECORDS_FILE).write_text(lines)
    with pytest.raises(ValueError, match="made in bfloat16; this model loaded in float32"):
        sweep("arc_jsd", "squad", n=2, out=tmp_path, **settings)
    assert len(records(tmp_path)) == 1  # nothing written
    frame = sweep("arc_jsd", "squad", n=2, out=tmp_path / "pinned", dtype="float32", **settings)
    assert frame["status"].tolist() == ["ok", "ok"]


@pytest.mark.integration
def test_arc_jsd_sweep_on_the_embedded_model(tmp_path):
    frame = sweep(
        "arc_jsd",
        "hotpotqa",
        n=1,
        data={"distractors": 0},
        options={"max_new_tokens": 4},
        out=tmp_path,
        progress=False,
    )
    assert frame["status"].tolist() == ["ok"]
    assert frame["n_response_tokens"].iloc[0] <= 4 and frame["model_calls"].iloc[0] > 1


def test_a_compacted_sweep_resumes_from_its_gzipped_records(tmp_path):
    from mechrag.results.files import compact_records

    sweep("stub_score", "squad", n=2, out=tmp_path, progress=False)
    compact_records(tmp_path)
    assert not (tmp_path / RECORDS_FILE).exists()
    frame = sweep("stub_score", "squad", n=3, out=tmp_path, progress=False)
    assert len(read_jsonl(tmp_path / RECORDS_FILE)) == 1  # only the third example ran
    assert len(frame) == 3 and len(read_summary(tmp_path)) == 3


def test_a_sweep_refuses_a_proxy_run_without_a_proxy_before_any_model(tmp_path):
    from mechrag.errors import InputError
    from mechrag.sweep import SweepConfig

    with pytest.raises(InputError, match="needs a proxy model"):
        SweepConfig("proxy", "hotpotqa", n=1)
    with pytest.raises(InputError, match="attention weights file not found"):
        SweepConfig("attention", "hotpotqa", n=1, options={"weights": str(tmp_path / "w")})
    SweepConfig("attention", "hotpotqa", n=1, options={"weights": "uniform"})  # accepted
