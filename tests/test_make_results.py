"""``experiments/make_results.py``: RESULTS.md tables rebuilt from fixture run records.

The fixture (``tests/fixtures/results``) holds a few records per registered table and the
RESULTS.md they produce; a few of its numbers are recomputed here by brute force.
"""

from __future__ import annotations

import json
import runpy
import shutil
from pathlib import Path

import numpy as np
import pytest

SCRIPT = Path(__file__).parents[1] / "experiments" / "make_results.py"
FIXTURE = Path(__file__).parent / "fixtures" / "results"


@pytest.fixture(scope="module")
def script():
    return runpy.run_path(str(SCRIPT))


@pytest.fixture
def workspace(tmp_path) -> Path:
    """A copy of the fixture, so a rewrite never touches the committed files."""
    shutil.copytree(FIXTURE, tmp_path / "results")
    return tmp_path / "results"


def emptied(script, text: str) -> str:
    """``text`` with every marker block's content removed (a file before its first run)."""
    return script["MARKER"].sub(
        lambda m: f"<!-- results:{m['name']} -->\n<!-- /results:{m['name']} -->", text
    )


def run(script, workspace: Path, *argv: str) -> int:
    return script["main"](
        list(argv), results_path=workspace / "RESULTS.md", runs_root=workspace / "runs"
    )


def records(workspace: Path, run_folder: str) -> list[dict]:
    lines = (workspace / "runs" / run_folder / "records.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def row_cells(text: str, first_cell: str) -> list[str]:
    """The cells of the table row that starts with ``first_cell``."""
    (line,) = [line for line in text.splitlines() if line.startswith(f"| {first_cell} |")]
    return [cell.strip() for cell in line.strip("|").split(" | ")]


def test_reproduces_the_fixture_results_exactly(script, workspace):
    results = workspace / "RESULTS.md"
    results.write_text(emptied(script, results.read_text()))
    assert run(script, workspace) == 0
    assert results.read_text() == (FIXTURE / "RESULTS.md").read_text()
    assert run(script, workspace, "--check") == 0


def test_fixture_numbers_match_a_brute_force_computation(workspace):
    text = (FIXTURE / "RESULTS.md").read_text()
    # WARG of c1: the duplicated record of an overlapping shard counts once.
    first_of_each_key = {}
    for record in records(workspace, "alignment_paper_k6_b16"):
        first_of_each_key.setdefault(record["key"], record)
    c1 = [r["warg"] for r in first_of_each_key.values() if r.get("condition") == "c1"]
    assert len(c1) == 3
    assert row_cells(text, "c1 top-4")[1:3] == ["3", f"{np.mean(c1):+.2f} [−0.25, +1.00]"]
    # The paper rule's hallucination rate, a proportion in %, and its bootstrap interval.
    gating = records(workspace, "gating_paper/hotpotqa/paper")
    hallucinated = np.array([r["conditions"]["paper"]["hallucinated"] for r in gating], float)
    rng = np.random.default_rng(0)
    resampled = [hallucinated[rng.integers(0, 5, 5)].mean() for _ in range(2000)]
    low, high = 100 * np.quantile(resampled, [0.025, 0.975])
    expected = f"{100 * hallucinated.mean():.1f} [{low:.1f}, {high:.1f}]"
    assert row_cells(text, "paper rule")[2] == expected == "20.0 [0.0, 60.0]"


def test_check_fails_with_a_diff_on_a_stale_file(script, workspace, capsys):
    results = workspace / "RESULTS.md"
    stale = results.read_text().replace("| c1 top-4 | 3 | +0.42", "| c1 top-4 | 4 | +0.44")
    results.write_text(stale)
    assert run(script, workspace, "--check") == 1
    diff = capsys.readouterr().out
    assert "-| c1 top-4 | 4 | +0.44" in diff and "+| c1 top-4 | 3 | +0.42" in diff
    assert results.read_text() == stale  # --check never writes


def test_text_outside_the_markers_survives(script, workspace):
    results = workspace / "RESULTS.md"
    edited = results.read_text().replace("Closing prose", "Edited closing prose\n\n| a | b |")
    results.write_text(emptied(script, edited))
    assert run(script, workspace) == 0
    rewritten = results.read_text()
    assert emptied(script, rewritten) == emptied(script, edited)
    assert rewritten.endswith("Edited closing prose\n\n| a | b | after the last table.\n")


def test_a_missing_run_folder_is_one_clear_line(script, workspace, capsys):
    shutil.rmtree(workspace / "runs" / "consensus_hotpotqa_d2")
    before = (workspace / "RESULTS.md").read_text()
    assert run(script, workspace) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1
    assert error.startswith("make_results: table consensus: run folder ")
    assert error.rstrip().endswith("consensus_hotpotqa_d2 is missing")
    assert (workspace / "RESULTS.md").read_text() == before


def test_an_optional_table_waits_for_its_run(script, workspace):
    shutil.rmtree(workspace / "runs" / "frontier_smollm2")
    results = workspace / "RESULTS.md"
    results.write_text(emptied(script, results.read_text()))
    assert run(script, workspace) == 0
    assert "<!-- results:frontier -->\n<!-- /results:frontier -->" in results.read_text()


@pytest.mark.parametrize(
    ("marker", "message"),
    [
        ("<!-- results:nosuch -->\n<!-- /results:nosuch -->", "results:nosuch: no such table"),
        ("<!-- results:gating -->\n", "results:gating has no closing"),
    ],
)
def test_a_bad_marker_is_one_clear_line(script, workspace, capsys, marker, message):
    (workspace / "RESULTS.md").write_text(f"# Results\n\n{marker}")
    assert run(script, workspace) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and message in error


def test_a_record_without_a_field_the_table_reads_is_one_clear_line(script, workspace, capsys):
    (workspace / "runs/gating_paper/hotpotqa/paper/records.jsonl").write_text('{"id": "q0"}\n')
    assert run(script, workspace) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "table gating: a record in" in error
    assert error.rstrip().endswith("lacks 'conditions'")


def test_the_bootstrap_interval_is_seeded(script, workspace, tmp_path):
    spec = script["TABLES"]["gating"]
    first = script["render"](spec, workspace / "runs")
    np.random.seed(12345)  # the global generator's state must not matter
    np.random.random(100)
    assert script["render"](spec, workspace / "runs") == first
    other = tmp_path / "other"
    shutil.copytree(workspace, other)
    for folder in (workspace, other):
        (folder / "RESULTS.md").write_text(emptied(script, (folder / "RESULTS.md").read_text()))
        assert run(script, folder) == 0
    assert (workspace / "RESULTS.md").read_bytes() == (other / "RESULTS.md").read_bytes()


def test_the_committed_results_are_what_the_committed_records_give(script, capsys):
    """RESULTS.md's generated tables equal what ``make results`` builds from the records."""
    assert script["main"](["--check"]) == 0, capsys.readouterr().out


def test_frontier_speedups_pair_only_runs_timed_in_one_session(script, workspace):
    """Fixture: attention on q2 was timed in another session than exact, so the speed-up is
    (40 + 41) / (1 + 2) over q0 and q1 only; agreement still counts all three."""
    assert run(script, workspace) == 0
    text = (workspace / "RESULTS.md").read_text()
    row = next(line for line in text.splitlines() if line.startswith("| 4 | attention |"))
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    assert cells[2] == "3"
    assert cells[4].startswith(f"{(40 + 41) / (1 + 2):.1f}x [") and cells[4].endswith("(n = 2)")
    assert cells[5].startswith(f"{2 / 3:.2f}")
