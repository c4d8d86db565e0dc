"""``experiments/make_results.py``: RESULTS.md tables rebuilt from fixture run records.

The fixture (``tests/fixtures/results``) holds a few records per registered table and the
RESULTS.md they produce; a few of its numbers are recomputed here by brute force.
"""

from __future__ import annotations

import itertools
import json
import shutil
from pathlib import Path

import make_results
import numpy as np
import pytest
from helpers import FIXTURES
from result_tables.attention_fit import (
    FEATURE_SCORED,
    FIT_LOSSES,
    FIT_SETTINGS,
    FIT_SIZE_EVALUATION,
    FIT_SIZE_IN_SAMPLE,
    attention_features_table,
    fit_losses_table,
    fit_size_table,
    shipped_fitted_weights,
)
from result_tables.claims import FEWEST, claims_table, smallest_detectable, verdict
from result_tables.common import RESAMPLES_TEST, Claim, mean_p, p_text
from result_tables.frontier import (
    FRONTIER_WEIGHTED,
    frontier_figure,
    frontier_misses_table,
    frontier_table,
    newest_weights,
    point_styles,
)
from result_tables.hierarchical import (
    chosen_rule,
    hierarchical_rules_table,
    replay_check,
    replayed_rule,
)
from result_tables.paper_setting import paper_setting_claims

FIXTURE = FIXTURES / "results"


@pytest.fixture
def workspace(tmp_path) -> Path:
    """A copy of the fixture, so a rewrite never touches the committed files."""
    shutil.copytree(FIXTURE, tmp_path / "results")
    return tmp_path / "results"


def emptied(text: str) -> str:
    """``text`` with every marker block's content removed (a file before its first run)."""
    return make_results.MARKER.sub(
        lambda m: f"<!-- results:{m['name']} -->\n<!-- /results:{m['name']} -->", text
    )


def run(workspace: Path, *argv: str) -> int:
    return make_results.main(
        list(argv), results_path=workspace / "RESULTS.md", runs_root=workspace / "runs"
    )


def records(workspace: Path, run_folder: str) -> list[dict]:
    lines = (workspace / "runs" / run_folder / "records.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def write_records(workspace: Path, run_folder: str, found: list[dict]) -> None:
    lines = "".join(json.dumps(record) + "\n" for record in found)
    (workspace / "runs" / run_folder / "records.jsonl").write_text(lines)


def refusal(workspace: Path, capsys) -> str:
    """The one error line of a run that must refuse its records and write nothing."""
    before = (workspace / "RESULTS.md").read_text()
    assert run(workspace) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1
    assert (workspace / "RESULTS.md").read_text() == before
    return error


def marker_block(text: str, name: str) -> str:
    """The generated text between table ``name``'s markers."""
    return text[text.index(f"<!-- results:{name} -->") : text.index(f"<!-- /results:{name} -->")]


def row_cells(text: str, first_cell: str) -> list[str]:
    """The cells of the table row that starts with ``first_cell``."""
    (line,) = [line for line in text.splitlines() if line.startswith(f"| {first_cell} |")]
    return [cell.strip() for cell in line.strip("|").split(" | ")]


def test_reproduces_the_fixture_results_exactly(workspace):
    results = workspace / "RESULTS.md"
    results.write_text(emptied(results.read_text()))
    assert run(workspace) == 0
    assert results.read_text() == (FIXTURE / "RESULTS.md").read_text()
    assert run(workspace, "--check") == 0


def test_fixture_numbers_match_a_brute_force_computation(workspace):
    text = (FIXTURE / "RESULTS.md").read_text()
    # WARG of c1: the duplicated record of an overlapping shard counts once.
    first_of_each_key = {}
    for record in records(workspace, "alignment_paper_k6_b16"):
        first_of_each_key.setdefault(record["key"], record)
    c1 = [r["warg"] for r in first_of_each_key.values() if r.get("condition") == "c1"]
    assert len(c1) == 3
    assert row_cells(text, "c1 top-4")[1:3] == ["3", f"{np.mean(c1):+.2f} [−0.25, +1.00]"]
    # c2: the record drawn once for every question (no "draws") is left out.
    drawn = [r for r in first_of_each_key.values() if r.get("condition") == "c2"]
    assert len(drawn) == 4 and row_cells(text, "c2 top-2, then 2 random")[1] == "3"
    # AIPC: a baseline minus [UNK], paired by question (the zero records come in another
    # order); a document [PAD] record without its [UNK] pair stays in the mean and drops out of
    # the difference; rows follow the declared baseline order, not the records'.
    ig = {
        (r["side"], r["baseline"], r["question_id"]): r["aipc"]
        for r in first_of_each_key.values()
        if r["phase"] == "ig"
    }
    zero = [ig["query", "zero", q] - ig["query", "unk", q] for q in ("q1", "q2", "q3")]
    low, high = (f"{v:+.3f}".replace("-", "−") for v in (min(zero), max(zero)))
    mean_zero = f"{np.mean(zero):+.3f}".replace("-", "−")
    query = [line for line in text.splitlines() if line.startswith("| query |")]
    assert [line.split(" | ")[1] for line in query] == [
        "[UNK]",
        "zero word embeddings (RAG-E's code)",
    ]
    query_zero = query[1]
    assert f"| {mean_zero} [{low}, {high}] (p .5) |" in query_zero  # n = 3: the CI is min..max
    document = [line for line in text.splitlines() if line.startswith("| document |")]
    assert [line.split(" | ")[1] for line in document] == ["[UNK]", "[PAD]", "[MASK]"]
    mean_pad = np.mean([ig["document", "pad", q] for q in ("q1", "q3")])
    pad_minus_unk = ig["document", "pad", "q1"] - ig["document", "unk", "q1"]
    assert f"| 2 | {mean_pad:+.3f} [" in document[1]
    assert (
        f"| {pad_minus_unk:+.3f} [{pad_minus_unk:+.3f}, {pad_minus_unk:+.3f}] (p 1) (n 1) |"
        in (document[1])
    )
    assert "| — (no [UNK] pair) |" in document[2]
    # Its claim: [UNK] minus the strongest other baseline by mean ([PAD]), on the paired texts.
    (claim,) = [line for line in text.splitlines() if "([PAD]) on retriever top documents" in line]
    assert f"| 1 | {-pad_minus_unk:+.3f} [".replace("-", "−") in claim
    (claim,) = [
        line for line in text.splitlines() if "(RAG-E's code)) on retriever queries" in line
    ]
    assert f"| 3 | {-np.mean(zero):+.3f} [".replace("-", "−") in claim
    # The paper rule's hallucination rate, a proportion in %, and its bootstrap interval.
    gating = records(workspace, "gating_paper/hotpotqa/paper")
    hallucinated = np.array([r["conditions"]["paper"]["hallucinated"] for r in gating], float)
    rng = np.random.default_rng(0)
    resampled = [hallucinated[rng.integers(0, 5, 5)].mean() for _ in range(2000)]
    low, high = 100 * np.quantile(resampled, [0.025, 0.975])
    expected = f"{100 * hallucinated.mean():.1f} [{low:.1f}, {high:.1f}]"
    rule = row_cells(marker_block(text, "gating"), "paper rule")
    assert rule[2] == expected == "20.0 [0.0, 60.0]"


def test_check_fails_with_a_diff_on_a_stale_file(workspace, capsys):
    results = workspace / "RESULTS.md"
    stale = results.read_text().replace("| c1 top-4 | 3 | +0.42", "| c1 top-4 | 4 | +0.44")
    results.write_text(stale)
    assert run(workspace, "--check") == 1
    diff = capsys.readouterr().out
    assert "-| c1 top-4 | 4 | +0.44" in diff and "+| c1 top-4 | 3 | +0.42" in diff
    assert results.read_text() == stale  # --check never writes


def test_text_outside_the_markers_survives(workspace):
    results = workspace / "RESULTS.md"
    edited = results.read_text().replace("Closing prose", "Edited closing prose\n\n| a | b |")
    results.write_text(emptied(edited))
    assert run(workspace) == 0
    rewritten = results.read_text()
    assert emptied(rewritten) == emptied(edited)
    assert rewritten.endswith("Edited closing prose\n\n| a | b | after the last table.\n")


def test_the_claims_block_may_lead_the_file(workspace):
    """A summary first: the claims block above the tables gathers the same claims."""
    results = workspace / "RESULTS.md"
    assert run(workspace) == 0
    text = results.read_text()
    claims = make_results.MARKER.search(text[text.index("<!-- results:claims -->") :])[0]
    results.write_text(claims + "\n\n" + text.replace(claims, ""))
    assert run(workspace) == 0
    assert claims in results.read_text()


def test_a_missing_run_folder_is_one_clear_line(workspace, capsys):
    shutil.rmtree(workspace / "runs" / "consensus_hotpotqa_d2")
    before = (workspace / "RESULTS.md").read_text()
    assert run(workspace) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1
    assert error.startswith("make_results: table consensus: run folder ")
    assert error.rstrip().endswith("consensus_hotpotqa_d2 is missing")
    assert (workspace / "RESULTS.md").read_text() == before


def test_an_optional_table_waits_for_its_run(workspace):
    shutil.rmtree(workspace / "runs" / "frontier_smollm2")
    results = workspace / "RESULTS.md"
    results.write_text(emptied(results.read_text()))
    assert run(workspace) == 0
    assert "<!-- results:frontier -->\n<!-- /results:frontier -->" in results.read_text()


@pytest.mark.parametrize(
    ("marker", "message"),
    [
        ("<!-- results:nosuch -->\n<!-- /results:nosuch -->", "results:nosuch: no such table"),
        ("<!-- results:gating -->\n", "results:gating has no closing"),
    ],
)
def test_a_bad_marker_is_one_clear_line(workspace, capsys, marker, message):
    (workspace / "RESULTS.md").write_text(f"# Results\n\n{marker}")
    assert run(workspace) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and message in error


def test_a_record_without_a_field_the_table_reads_is_one_clear_line(workspace, capsys):
    (workspace / "runs/gating_paper/hotpotqa/paper/records.jsonl").write_text('{"id": "q0"}\n')
    assert run(workspace) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "table gating: a record in" in error
    assert error.rstrip().endswith("lacks 'conditions'")


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), None, "high"])
def test_a_frontier_score_that_is_not_a_number_is_one_clear_line(workspace, capsys, bad):
    found = records(workspace, "frontier_smollm2")
    found[2]["scores"][0] = bad  # q0's attention (json writes NaN and Infinity)
    write_records(workspace, "frontier_smollm2", found)
    error = refusal(workspace, capsys)
    assert "frontier 4/q0: attention has scores that are not finite numbers" in error


def test_the_bootstrap_interval_is_seeded(workspace, tmp_path):
    spec = make_results.TABLES["gating"]
    first = make_results.render(spec, workspace / "runs")
    np.random.seed(12345)  # the global generator's state must not matter
    np.random.random(100)
    assert make_results.render(spec, workspace / "runs") == first
    other = tmp_path / "other"
    shutil.copytree(workspace, other)
    for folder in (workspace, other):
        (folder / "RESULTS.md").write_text(emptied((folder / "RESULTS.md").read_text()))
        assert run(folder) == 0
    assert (workspace / "RESULTS.md").read_bytes() == (other / "RESULTS.md").read_bytes()


def test_the_committed_results_are_what_the_committed_records_give(capsys):
    """RESULTS.md's generated tables equal what ``make results`` builds from the records."""
    assert make_results.main(["--check"]) == 0, capsys.readouterr().out


def test_frontier_speedups_pair_only_runs_timed_in_one_session(workspace):
    """Fixture: attention on q2 was timed in another session than exact, so the speed-up is
    (40 + 41) / (1 + 2) over q0 and q1 only; agreement still counts all three."""
    assert run(workspace) == 0
    text = (workspace / "RESULTS.md").read_text()
    row = next(line for line in text.splitlines() if line.startswith("| 4 | attention |"))
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    assert cells[2] == "3"
    assert cells[4].startswith(f"{(40 + 41) / (1 + 2):.1f}x [") and cells[4].endswith("(n = 2)")
    # q0's attention scores all tie: a random tie-break picks exact's top source 1 time in 4.
    assert cells[5].startswith(f"{(1 / 4 + 1 + 0) / 3:.2f}")


def test_frontier_speedups_leave_out_the_pairs_a_gpu_timed(workspace):
    """A GPU's seconds are not the CPU's: with q1 timed on CUDA (both of its records, one
    session), the speed-up is q0's alone, 40 / 1; records that name the CPU still count."""
    found = [
        {**r, "device": "cuda" if r["id"] == "q1" else "cpu"}
        for r in records(workspace, "frontier_smollm2")
    ]
    row = next(line for line in frontier_table(found).splitlines() if "| attention |" in line)
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    assert cells[2] == "3"
    assert cells[4].startswith(f"{40 / 1:.1f}x") and cells[4].endswith("(n = 1)")
    on_gpu = [{**r, "device": "cuda"} for r in found]
    row = next(line for line in frontier_table(on_gpu).splitlines() if "| attention |" in line)
    assert [cell.strip() for cell in row.strip("|").split("|")][4] == "— (timed on a GPU)"


def test_frontier_rows_follow_the_sizes_not_the_order_of_the_records(workspace):
    """Cut sizes by their number of sentences (10 after 4, not before it as text sorts), then
    the whole contexts, whatever order the records were written in; exact ARC-JSD first within
    a size. (The whole contexts' declared order is also alphabetical, so it is not tested.)"""
    found = records(workspace, "frontier_smollm2")
    relabelled = [{**r, "size": "10"} for r in found if r["size"] == "4"]
    table = frontier_table([*found[::-1], *relabelled])
    rows = [line.removeprefix("| ").split(" | ")[:2] for line in table.splitlines()[2:]]
    assert [size for size, _ in rows] == ["4"] * 3 + ["10"] * 3 + ["hotpotqa"] * 3
    assert [rows[i][1] for i in (0, 3, 6)] == ["exact"] * 3


def test_gemma_gets_the_frontier_tables_of_its_own_run_folder(workspace, tmp_path):
    """The Gemma 3 tables are built from ``frontier_gemma3``'s records alone (here the SmolLM2
    fixture without its whole-context rows), by the SmolLM2 tables' builders; its figure names
    the model."""
    found = records(workspace, "frontier_smollm2")
    gemma = [
        {**r, "settings": {**r["settings"], "model": "gemma3-270m"}}
        for r in found
        if r["size"] != "hotpotqa"
    ]
    (workspace / "runs/frontier_gemma3").mkdir()
    write_records(workspace, "frontier_gemma3", gemma)
    results = workspace / "RESULTS.md"
    names = ("frontier", "frontier_depth")
    markers = "".join(f"<!-- results:{n}_gemma3 -->\n<!-- /results:{n}_gemma3 -->\n" for n in names)
    results.write_text(results.read_text() + markers)
    assert run(workspace) == 0
    text = results.read_text()

    def rows(name: str) -> list[str]:
        block = text.split(f"<!-- results:{name} -->")[1].split(f"<!-- /results:{name} -->")[0]
        return [line for line in block.splitlines() if line.startswith("| ")]

    for name in names:
        smollm2 = rows(name)
        assert any(line.startswith("| hotpotqa |") for line in smollm2)
        expected = [line for line in smollm2 if not line.startswith("| hotpotqa |")]
        assert len(expected) > 2 and rows(f"{name}_gemma3") == expected
    assert set(make_results.FIGURES) <= set(make_results.TABLES)
    path = tmp_path / "figure.png"
    frontier_figure(gemma, path)
    assert path.stat().st_size > 0


def test_gemma_gets_the_paper_setting_tables_of_its_own_run_folder(workspace):
    """The paper-setting tables of ``frontier_gemma3`` are the SmolLM2 fixture's rows with
    the model's name (the same records under Gemma's name)."""
    gemma = [
        {**r, "settings": {**r["settings"], "model": "gemma3-270m"}}
        for r in records(workspace, "frontier_smollm2")
    ]
    (workspace / "runs/frontier_gemma3").mkdir()
    write_records(workspace, "frontier_gemma3", gemma)
    results = workspace / "RESULTS.md"
    names = ("paper_setting", "paper_setting_misses")
    markers = "".join(f"<!-- results:{n}_gemma3 -->\n<!-- /results:{n}_gemma3 -->\n" for n in names)
    claims = "<!-- results:claims -->"  # Gemma's paper-setting claims stand above it
    results.write_text(results.read_text().replace(claims, markers + claims))
    assert run(workspace) == 0
    text = results.read_text()
    for name in names:
        smollm2 = [line for line in marker_block(text, name).splitlines() if "| smollm2" in line]
        gemma_rows = [
            line for line in marker_block(text, f"{name}_gemma3").splitlines() if "| gemma3" in line
        ]
        assert len(smollm2) == 3
        assert gemma_rows == [
            line.replace("| smollm2-135m |", "| gemma3-270m |") for line in smollm2
        ]


def test_frontier_records_of_two_models_in_one_folder_are_one_clear_line(workspace, capsys):
    found = records(workspace, "frontier_smollm2")
    found[0]["settings"] = {**found[0]["settings"], "model": "gemma3-270m"}
    write_records(workspace, "frontier_smollm2", found)
    error = refusal(workspace, capsys)
    assert "frontier records of several models in one run folder" in error


def test_frontier_depth_counts_every_order_that_breaks_the_ties(workspace):
    """Brute force: over every order of the sources that sorts their scores (ties in every
    order), the share that puts exact's top source in the first k (q0's attention scores all
    tie, the overlap's tie on h0)."""
    found = records(workspace, "frontier_smollm2")
    exact = {(r["size"], r["id"]): r for r in found if r["method"] == "exact"}
    text = (FIXTURE / "RESULTS.md").read_text()
    text = text.split("<!-- results:frontier_depth -->")[1].split("<!-- /results")[0]
    for size, method in (("4", "attention"), ("hotpotqa", "query_overlap")):
        group = [r for r in found if (r["size"], r["method"]) == (size, method)]
        group = [r for r in group if (size, r["id"]) in exact]
        expected = []
        for depth in (1, 2, 3, 5):
            shares = []
            for record in group:
                target = int(np.argmax(exact[size, record["id"]]["scores"]))
                scores = record["scores"]
                orders = [
                    order
                    for order in itertools.permutations(range(len(scores)))
                    if all(scores[a] >= scores[b] for a, b in itertools.pairwise(order))
                ]
                shares.append(np.mean([target in order[:depth] for order in orders]))
            expected.append(np.mean(shares))
        cells = row_cells(text, f"{size} | {method}")
        assert cells[2] == str(len(group)) == "3"
        assert [cell.split(" [")[0] for cell in cells[3:]] == [f"{e:.2f}" for e in expected]
        assert expected[0] < expected[1] < expected[2]  # the ties make depth matter


def test_smallest_detectable_effect_is_the_paired_t_formula_and_has_its_power():
    """Closed form at n = 6 (n - 1 degrees of freedom, sd with ddof 1); at that effect the
    sign-flip test of the mean the claims use rejects in about 80% of simulated runs."""
    from scipy.stats import t as t_dist

    from mechrag.metrics.detection import mcnemar_exact, sign_flip_p

    six = np.array([0.1, 0.5, -0.2, 0.9, 0.3, 0.4])
    expected = (t_dist.ppf(0.975, 5) + t_dist.ppf(0.8, 5)) * six.std(ddof=1) / np.sqrt(6)
    at_six = Claim("c", "p", six, expected_sign=1, p=0.5)
    assert smallest_detectable(at_six) == pytest.approx(expected)
    rng = np.random.default_rng(1)
    n, observed = 30, rng.normal(0, 1.5, 30)
    effect = smallest_detectable(Claim("c", "p", observed, expected_sign=1, p=0.5))
    draws = rng.normal(effect, observed.std(ddof=1), size=(400, n))
    power = np.mean([sign_flip_p(d, n_resamples=2000, seed=i) < 0.05 for i, d in enumerate(draws)])
    assert 0.72 < power < 0.88
    one_way = lambda k: mcnemar_exact(np.ones(k, bool), np.zeros(k, bool))  # noqa: E731
    assert one_way(FEWEST) < 0.05 <= one_way(FEWEST - 1)
    assert mean_p(np.arange(1.0, FEWEST)) >= 0.05  # FEWEST - 1 all one way
    binary = Claim("c", "p", np.array([0.0] * 19 + [1.0]), expected_sign=-1, p=1.0, binary=True)
    assert smallest_detectable(binary) == FEWEST / 20  # the t formula gives less here
    too_few = Claim("c", "p", np.ones(FEWEST - 1), expected_sign=1, p=1.0)
    assert np.isinf(smallest_detectable(too_few))
    assert np.isnan(smallest_detectable(Claim("c", "p", np.zeros(20), expected_sign=-1, p=1.0)))


def test_a_claim_with_a_p_that_is_not_a_number_is_not_detected():
    claim = Claim("c", "p", np.array([0.3, 0.5]), expected_sign=1, p=float("nan"))
    assert verdict(claim) == "not detected"


@pytest.mark.parametrize(
    ("mean", "p", "expected"),
    [(0.4, 0.01, "yes"), (-0.4, 0.01, "no: the opposite"), (0.4, 0.06, "not detected")],
)
def test_a_claim_reproduces_with_the_papers_sign_at_p_below_05(mean, p, expected):
    claim = Claim("c", "p", np.array([mean, mean + 0.1]), expected_sign=1, p=p)
    assert verdict(claim) == expected


def test_the_claims_table_reads_each_tables_records():
    """The fixture's consensus claim: the per-example excess of |J∩S| over its null and its
    sign-flip p, recomputed from the records (by enumerating every sign pattern); at its n no
    effect is detectable."""
    text = (FIXTURE / "RESULTS.md").read_text()
    kept = make_results.table_records(make_results.TABLES["consensus"], FIXTURE / "runs")
    found = [r["result"]["consensus"]["attention"] for r in kept]
    excess = np.array([f["jsd_overlap"] - f["null_jsd_overlap"] for f in found])
    first = "the paper's reading of Table 3: attention layers by JSD and by gain agree"
    cells = row_cells(text, f"{first} (\\|J∩S\\| above its null)")
    assert cells[2] == str(len(excess))
    assert cells[3].startswith(f"{excess.mean():+.2f} [".replace("-", "−"))
    patterns = itertools.product((-1, 1), repeat=len(excess))
    flips = [abs(np.mean(np.multiply(signs, excess))) for signs in patterns]
    p = np.mean([m >= abs(excess.mean()) - 1e-12 for m in flips])
    assert cells[4] == f"{p:.2g}".removeprefix("0")
    # n = 4: even four differences of one sign give p = 2/16 > .05.
    assert cells[5] == "none at this n"


def test_paper_setting_splits_gold_top1_by_correct_responses(workspace):
    """Recomputed from the fixture's full-context records: gold top-1 over all examples and
    over the correct responses, and top-1 agreement with exact on the examples both ran (the
    attention ran on one example more than exact; the overlap ties at the top on h0, which
    earns half a hit)."""
    found = [r for r in records(workspace, "frontier_smollm2") if r["size"] == "hotpotqa"]
    exact = {r["id"]: r for r in found if r["method"] == "exact"}
    text = (FIXTURE / "RESULTS.md").read_text()
    data = "HotpotQA, all 10 paragraphs (training split)"

    def tie_broken(scores, hits) -> float:
        """The share of every order of the tied top sources that puts a hit first."""
        top = [i for i, score in enumerate(scores) if score == max(scores)]
        return sum(i in hits for i in top) / len(top)

    for method in ("attention_fitted", "query_overlap"):
        group = [r for r in found if r["method"] == method]
        gold = [
            tie_broken(r["scores"], {r["source_ids"].index(g) for g in r["gold_ids"]})
            for r in group
        ]
        when_correct = [g for g, r in zip(gold, group) if r["correct"]]
        agrees = [
            tie_broken(r["scores"], {int(np.argmax(exact[r["id"]]["scores"]))})
            for r in group
            if r["id"] in exact
        ]
        cells = row_cells(marker_block(text, "paper_setting"), f"{data} | smollm2-135m | {method}")
        assert cells[3] == str(len(group)) == "4"
        assert cells[4].startswith(f"{np.mean(gold):.2f} [")
        assert cells[5] == str(len(when_correct))
        assert cells[6].startswith(f"{np.mean(when_correct):.2f} [")
        assert cells[7].startswith(f"{np.mean(agrees):.2f} [") and cells[7].endswith("(3)")


def test_paper_setting_claim_pairs_exact_with_contextcite_on_gold_top1(workspace):
    """ARC-JSD's Table 2 claim, recomputed from the fixture's full-context records with
    ContextCite records added: per example exact ARC-JSD's gold top-1 minus ContextCite's (h1's
    ContextCite ties gold with another sentence at the top: half a hit), in points, beside the
    paper's mean over its four models."""
    found = records(workspace, "frontier_smollm2")
    exact = {r["id"]: r for r in found if r["size"] == "hotpotqa" and r["method"] == "exact"}
    scores = {"h0": [0.1, 0.6, 0.2], "h1": [0.2, 0.5, 0.5], "h2": [0.3, 0.1, 0.4]}
    contextcite = {
        i: {**exact[i], "method": "contextcite32", "scores": scores[i], "value": "logit_prob"}
        for i in scores
    }
    # The same pairs at the dev split (HotpotQA's claim again) and on SQuAD (not in the paper);
    # records of ContextCite's old target (made before records named theirs) make no claim.
    pairs = [*exact.values(), *contextcite.values()]
    elsewhere = [{**r, "size": size} for size in ("hotpotqa_dev", "squad") for r in pairs]
    old = [{k: v for k, v in r.items() if k != "value"} for r in contextcite.values()]
    old_target = [{**r, "scores": r["scores"][::-1]} for r in old]
    # The old target's records come first, as in the committed folders: were they not apart,
    # the per-key dedupe would keep them and the claim cells below would change.
    write_records(
        workspace, "frontier_smollm2", found + old_target + list(contextcite.values()) + elsewhere
    )
    assert run(workspace) == 0
    kept = make_results.table_records(make_results.TABLES["paper_setting"], workspace / "runs")
    (claim,) = paper_setting_claims([r for r in kept if r["size"] == "hotpotqa"])
    assert not claim.binary  # h1's tie: a sign-flip test of the mean
    untied = {**contextcite["h1"], "scores": [0.2, 0.6, 0.5]}  # ContextCite's top is gold
    (claim,) = paper_setting_claims([*exact.values(), untied])
    assert claim.binary and claim.p == 1.0  # exact McNemar on one discordant pair (h1)

    def gold_top1(record) -> float:
        top = [i for i, score in enumerate(record["scores"]) if score == max(record["scores"])]
        return np.mean([record["source_ids"][i] in record["gold_ids"] for i in top])

    differences = [gold_top1(exact[i]) - gold_top1(contextcite[i]) for i in exact]
    assert differences == [1.0, -0.5, 0.0]
    claim = "exact ARC-JSD ranks a gold sentence first more often than ContextCite"
    setting = "smollm2-135m; ContextCite at 32 ablations; ARC-JSD Table 2"
    text = (workspace / "RESULTS.md").read_text()
    assert text.count(f"| {claim} (") == 2  # SQuAD's pairs and the old target make no claim
    table = marker_block(text, "paper_setting")
    assert table.count("| contextcite32 (old target) |") == 1  # HotpotQA's training split only
    for split in ("training split", "dev split"):
        cells = row_cells(text, f"{claim} (HotpotQA, all 10 paragraphs ({split}), {setting})")
        assert cells[1] == (
            "74.9% against 62.1% (ContextCite at 256): +12.8 points, mean of four models "
            "(+9.0 to +16.2; dev split)"
        )
        assert cells[2] == "3"
        assert cells[3].startswith(f"{100 * np.mean(differences):+.1f} [")
        assert cells[-1] == "yes"  # +12.8 lies inside this fixture's wide interval


def test_paper_setting_misses_finds_the_sentence_a_wrong_response_repeats(workspace):
    """Recomputed from the fixture's full-context records by enumerating every order of the
    tied scores: how often each method's top source is one the response shares the most content
    words with (every such sentence counts), and gold top-1, on wrong and on correct responses
    (h2's response shares none: left out), with a random ranking's chance beside them."""
    found = [r for r in records(workspace, "frontier_smollm2") if r["size"] == "hotpotqa"]
    block = marker_block((FIXTURE / "RESULTS.md").read_text(), "paper_setting_misses")
    data = "HotpotQA, all 10 paragraphs (training split)"

    def first_in(scores, targets) -> float:
        orders = [
            order
            for order in itertools.permutations(range(len(scores)))
            if all(scores[a] >= scores[b] for a, b in itertools.pairwise(order))
        ]
        return sum(order[0] in targets for order in orders) / len(orders)

    def closest(record) -> set[int]:
        top = max(record["response_overlap"])
        return {i for i, o in enumerate(record["response_overlap"]) if o == top}

    def gold(record) -> set[int]:
        return {record["source_ids"].index(g) for g in record["gold_ids"]}

    expected_wrong = {"exact": 1.0, "attention_fitted": 0.0, "query_overlap": 0.0}
    for method, share in expected_wrong.items():
        group = [r for r in found if r["method"] == method and max(r["response_overlap"]) > 0]
        cells = row_cells(block, f"{data} | smollm2-135m | {method}")
        for correct, (n_cell, closest_cell, chance_cell) in ((False, (3, 4, 5)), (True, (7, 8, 9))):
            kept = [r for r in group if r["correct"] == correct]
            hits = [first_in(r["scores"], closest(r)) for r in kept]
            chance = [len(closest(r)) / r["n_sources"] for r in kept]
            assert cells[n_cell] == str(len(kept)) and len(kept) > 0
            assert cells[closest_cell].startswith(f"{np.mean(hits):.2f} [")
            assert cells[chance_cell] == f"{np.mean(chance):.2f}"
            if not correct:
                assert np.mean(hits) == share
                golds = [first_in(r["scores"], gold(r)) for r in kept]
                assert cells[6].startswith(f"{np.mean(golds):.2f} [")


def test_consensus_detail_counts_each_examples_own_test():
    kept = make_results.table_records(make_results.TABLES["consensus_detail"], FIXTURE / "runs")
    text = (FIXTURE / "RESULTS.md").read_text()
    gold = np.mean([r["result"]["top_source_is_gold"] for r in kept])
    assert row_cells(text, "top ARC-JSD sentence is gold")[1].startswith(f"{gold:.2f} [")
    for module, label in (("attention", "attention"), ("mlp", "MLP")):
        share = np.mean([r["result"]["consensus"][module]["jsd_overlap_p"] < 0.05 for r in kept])
        cell = row_cells(text, f"{label} \\|J∩S\\| above its null at p < .05")[1]
        assert cell.startswith(f"{share:.2f} [")
    assert len(kept) == 4  # the failed record of q2 is not counted


def test_gating_claims_take_the_rule_minus_its_control(workspace):
    """Recomputed from the fixture's gating records: rule − no gate, and rule − the mean of the
    random draws, in points."""
    gating = records(workspace, "gating_paper/hotpotqa/paper")
    text = (FIXTURE / "RESULTS.md").read_text()

    def rate(record, condition):
        return float(record["conditions"][condition]["hallucinated"])

    versus_none = [rate(r, "paper") - rate(r, "none") for r in gating]
    draws = [c for c in gating[0]["conditions"] if c.startswith("random")]
    versus_random = [rate(r, "paper") - np.mean([rate(r, d) for d in draws]) for r in gating]
    rows = {
        "the paper rule lowers the hallucination rate against no gating": versus_none,
        "the paper rule hallucinates less than the random-5 control": versus_random,
    }
    for claim, differences in rows.items():
        expected = f"{100 * np.mean(differences):+.1f} [".replace("-", "−")
        cells = row_cells(text, f"{claim} on the HotpotQA training sample (ICLR Table 4)")
        assert cells[3].startswith(expected)
    assert np.mean(versus_none) < 0  # the fixture's rule does lower it


def test_dev_gating_claims_are_the_papers_own_split(workspace):
    """The dev sample's claims are named for it, quote the paper's effects to hold (the paper ran
    HotpotQA dev) and keep the F1 claim; recomputed from the fixture's dev records."""
    dev = records(workspace, "gating_paper/hotpotqa_dev/paper")
    text = (FIXTURE / "RESULTS.md").read_text()

    def mean(condition: str, metric: str) -> float:
        return np.mean([float(r["conditions"][condition][metric]) for r in dev])

    draws = [c for c in dev[0]["conditions"] if c.startswith("random")]

    def control(metric: str) -> float:
        return np.mean([mean(d, metric) for d in draws])

    rule = mean("paper", "hallucinated")
    expected = {
        "the paper rule lowers the hallucination rate against no gating": rule
        - mean("none", "hallucinated"),
        "the paper rule hallucinates less than the random-5 control": rule
        - control("hallucinated"),
        "the random-5 control lowers factual F1 against no gating": control("f1")
        - mean("none", "f1"),
    }
    for claim, difference in expected.items():
        cells = row_cells(text, f"{claim} on the HotpotQA dev split (ICLR Table 4)")
        assert cells[2] == str(len(dev)) == "6"
        assert cells[3].startswith(f"{100 * difference:+.1f} [".replace("-", "−"))
        assert cells[-1] == "yes"  # the paper's effect is held (in this fixture, inside the CI)
    assert row_cells(marker_block(text, "gating_dev"), "paper rule")[1] == "6"
    assert row_cells(marker_block(text, "gating"), "paper rule")[1] == "5"


def test_the_claims_table_of_a_large_claim():
    """n = 40 differences all positive: sampled sign-flip p at its floor (shown as a bound), a
    finite smallest detectable effect, reproduced, and the paper's effect far above the CI."""
    differences = np.linspace(0.1, 0.5, 40)
    p = mean_p(differences)
    claim = Claim("c", "paper", differences, expected_sign=1, p=p, digits=2, paper_effect=5.0)
    (row,) = claims_table([claim]).splitlines()[2:]
    cells = [cell.strip() for cell in row.strip("|").split(" | ")]
    assert p == 1 / (1 + RESAMPLES_TEST)
    assert cells[2] == "40" and cells[3].startswith("+0.30 [")
    assert cells[4:] == [
        "≤ 5e-5",
        f"{smallest_detectable(claim):.2f}",
        "yes",
        "no: below it",
    ]
    assert p_text(p) == "5e-5"  # the same number, from an exact test, is not a bound


def test_squad_gating_splits_answerable_from_unanswerable_questions(workspace):
    """Each kind of question has its own rows, and the SQuAD claims read the unanswerable ones
    only (recomputed from the fixture's records)."""
    squad = records(workspace, "gating_paper/squad/paper")
    text = (FIXTURE / "RESULTS.md").read_text()
    for subset, answerable in (("unanswerable", False), ("answerable", True)):
        chosen = [r for r in squad if bool(r["answers"]) == answerable]
        for label, condition in (("no gate", "none"), ("paper rule", "paper")):
            rate = np.mean([r["conditions"][condition]["hallucinated"] for r in chosen])
            cells = row_cells(text, f"{subset}: {label}")
            assert cells[1] == str(len(chosen)) == "3"
            assert cells[2].startswith(f"{100 * rate:.1f} [")
    unanswerable = [r for r in squad if not r["answers"]]
    rule_minus_none = np.mean(
        [
            float(r["conditions"]["paper"]["hallucinated"])
            - float(r["conditions"]["none"]["hallucinated"])
            for r in unanswerable
        ]
    )
    claim = "the paper rule lowers the hallucination rate against no gating on SQuAD 2.0"
    cells = row_cells(text, f"{claim} unanswerable questions (ICLR Table 4)")
    expected = f"{100 * rule_minus_none:+.1f} [".replace("-", "−")
    assert cells[2] == "3" and cells[3].startswith(expected)
    assert rule_minus_none < 0  # the fixture's rule abstains once where no gate answered


def test_claims_stand_below_their_table(workspace):
    """A table that RESULTS.md does not show contributes no claims, though its records exist."""
    results = workspace / "RESULTS.md"
    text = results.read_text()
    hidden = make_results.MARKER.sub(lambda m: "" if m["name"] == "gating_squad" else m[0], text)
    results.write_text(hidden)
    assert run(workspace) == 0
    rewritten = results.read_text()
    assert "SQuAD 2.0 unanswerable" not in rewritten
    assert "against no gating on the HotpotQA training sample (ICLR Table 4)" in rewritten


def test_fit_losses_hold_out_each_training_case_once():
    from mechrag.attribution.attention_fit import fit_head_weights

    rng = np.random.default_rng(4)
    scores = [rng.random(5) for _ in range(6)]
    # Head 0 is each case's exact scores: every loss must find it, held out or not.
    perfect = [
        {"key": f"c{i}", "design": np.stack([y, rng.random(5)], 1).tolist(), "scores": y.tolist()}
        for i, y in enumerate(scores)
    ]
    table = fit_losses_table(perfect)
    for loss in ("pearson", "listwise"):
        for line in [line for line in table.splitlines() if line.startswith(f"| {loss} |")]:
            assert "| 6 | 1.00 [1.00, 1.00] | +1.00 [+1.00, +1.00] |" in line
    assert table.count("| 0 / 0 (p 1) |") == len(FIT_LOSSES) - 1
    # Noisy heads: the held-out top-1 of the Pearson row is a leave-one-out done by hand.
    noisy = [
        {"key": f"c{i}", "design": (np.stack([y, y[::-1]], 1) + rng.random((5, 2))).tolist(),
         "scores": y.tolist()}
        for i, y in enumerate(scores)
    ]  # fmt: skip
    hits = []
    for index, record in enumerate(noisy):
        rest = [r for r in noisy if r is not record]
        weights = fit_head_weights(
            [np.asarray(r["design"]) for r in rest], [np.asarray(r["scores"]) for r in rest],
            loss="pearson", **FIT_SETTINGS,
        )  # fmt: skip
        prediction = np.asarray(record["design"]) @ weights
        hits.append(np.argmax(prediction) == np.argmax(scores[index]))
    pearson = row_cells(fit_losses_table(noisy), "pearson")
    assert pearson[3].startswith(f"{np.mean(hits):.2f} [")


def test_a_refit_shows_its_own_weights_only(workspace):
    """Fitted attention on the hotpotqa examples was recorded under weights "old"; a refit
    reruns it on one example under "new": the tables read that one record for the weighted
    method and keep every other method's records."""
    found = records(workspace, "frontier_smollm2")
    old = [{**r, "settings": {**r["settings"], "weights": "old"}} for r in found]
    fitted = next(r for r in old if r["method"] == "attention_fitted" and r["size"] == "hotpotqa")
    refit = {**fitted, "settings": {**fitted["settings"], "weights": "new"}}
    write_records(workspace, "frontier_smollm2", [*old, refit])
    assert run(workspace) == 0
    block = marker_block((workspace / "RESULTS.md").read_text(), "paper_setting")
    counts = {
        method: sum(r["method"] == method and r["size"] == "hotpotqa" for r in found)
        for method in ("attention_fitted", "query_overlap")
    }
    assert counts["attention_fitted"] > 1 and counts["query_overlap"] > 1
    rows = [line.strip("|").split(" | ") for line in block.splitlines() if "| smollm2" in line]
    n_of = {cells[2].strip(): cells[3].strip() for cells in rows}
    overlap = str(counts["query_overlap"])
    assert n_of == {"exact": "3", "attention_fitted": "1", "query_overlap": overlap}
    selected = newest_weights([*old, refit])
    assert [r for r in selected if r["method"] == "attention_fitted"] == [refit]
    assert len(selected) == len(old) - counts["attention_fitted"] + 1


def test_an_old_contextcite_target_is_hollow_in_its_methods_colour_and_colours_never_run_out():
    methods = [f"m{i:02d}" for i in range(25)] + ["contextcite32", "contextcite32 (old target)"]
    styles = point_styles(methods)
    assert styles["contextcite32 (old target)"] == {
        "facecolors": "none",
        "edgecolors": [styles["contextcite32"]["color"]],
    }
    assert len({styles[m]["color"] for m in methods[:20]}) == 20  # tab20, then cycled


def test_the_weighted_methods_are_the_benchmarks():
    from frontier import WEIGHTED

    assert FRONTIER_WEIGHTED == WEIGHTED


def test_the_hierarchical_rule_is_chosen_on_training_records_alone():
    """Two training examples of four three-sentence documents: the top document alone misses
    the second's exact top sentence; "top 1 + within 0.5" catches it in 19 calls over both, as
    "top 1 + within 0.25" (listed later), against "top 2"'s 22 and exact ARC-JSD's 26. A dev
    example it misses does not change the choice, and the table marks it once per size."""

    def example(size: str, scores: list[float], top_document: int) -> dict:
        exact = np.zeros(12)
        exact[3 * top_document + 1] = 1.0
        return {
            "size": size,
            "id": f"{size}{scores}",
            "document_of": np.repeat(np.arange(4), 3).tolist(),
            "document_scores": scores,
            "exact_scores": exact.tolist(),
            "exact_model_calls": 13,
        }

    training = [
        example("hotpotqa", [1.0, 0.2, 0.1, 0.05], 0),
        example("hotpotqa", [1.0, 0.9, 0.1, 0.05], 1),
    ]
    assert replayed_rule(training[0], 1, None) == (1.0, 8)
    assert replayed_rule(training[1], 1, None) == (0.0, 8)
    assert replayed_rule(training[1], 2, None) == replayed_rule(training[1], 1, 0.5) == (1.0, 11)
    assert replayed_rule(training[1], 1, 0.1) == (1.0, 14)
    assert replayed_rule(training[1], 4, None) == (1.0, 13)  # every document: exact ARC-JSD
    tied = {**training[1], "exact_scores": [0.0, 0.0, 0.0, 0.0, 1.0, 1.0, *[0.0] * 6]}
    assert replayed_rule(tied, 2, None) == (0.5, 11)  # a tie at the top shared, as the frontier's
    # The frontier's own top-2 run, copied into a record, checks the replay.
    training[1]["frontier_hierarchical"] = {
        "documents": 2,
        "scores": [0.1, 0.2, 0.3, 0.4, 0.9, 0.5, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
        "model_calls": 11,
    }
    assert "on 1 of the 1 examples" in replay_check(training)
    training[1]["frontier_hierarchical"]["model_calls"] = 12
    assert "on 0 of the 1 examples" in replay_check(training)
    del training[1]["frontier_hierarchical"]
    dev = example("hotpotqa_dev", [1.0, 0.3, 0.2, 0.1], 2)
    assert chosen_rule(training) == chosen_rule([*training, dev]) == (1, 0.5)
    table = hierarchical_rules_table([*training, dev])
    chosen = [line for line in table.splitlines() if "(chosen)" in line]
    assert len(chosen) == 2 and all("top 1 + within 0.5 of the top (chosen)" in c for c in chosen)
    assert "| 0.00 [0.00, 0.00] |" in chosen[1]  # the dev example it misses
    assert chosen_rule([dev]) is None


def test_fit_size_scores_each_fit_on_questions_none_of_its_cases_came_from():
    """Cases whose every head ranks the sources as exact ARC-JSD does: each fit agrees on all of
    them, so the rows say which cases each fit was scored on (each evaluation set also fitted on
    itself, last); one dev case with random heads is
    scored by hand under the shipped weights, and the replay check counts the frontier scores
    that the shipped weights give back."""
    rng = np.random.default_rng(5)
    shipped = shipped_fitted_weights("smollm2-135m")

    def case(size: str, dataset: str, example_id: str, aligned: bool = True) -> dict:
        exact = rng.permutation(6) / 6.0  # gaps of 1/6, far above the heads' noise
        noise = rng.random((6, len(shipped)))
        design = np.outer(exact, np.ones(len(shipped))) + 0.01 * noise if aligned else noise
        return {"size": size, "dataset": dataset, "id": example_id, "model": "smollm2-135m",
                "design": design.tolist(), "exact_scores": exact.tolist()}  # fmt: skip

    # One shipped case shares its question with a dev case: no fit with it is scored on that.
    found = [case("shipped", "hotpotqa", "s0"), case("shipped", "hotpotqa", "d0")]
    found += [case("shipped", "musique", f"s{i}") for i in range(2, 4)]
    found += [case(size, "hotpotqa", f"q{i}") for size in ("10", "20", "40", "hotpotqa")
              for i in range(3)]  # fmt: skip
    found += [case("musique", "musique", f"m{i}") for i in range(3)]
    found += [case("hotpotqa_dev", "hotpotqa", f"d{i}") for i in range(2)]
    found.append(case("hotpotqa_dev", "hotpotqa", "d2", aligned=False))
    whole = [r for r in found if r["size"] == "hotpotqa"]
    for record in whole:
        record["frontier_fitted_scores"] = (np.asarray(record["design"]) @ shipped).tolist()
    whole[2]["frontier_fitted_scores"][0] += 1.0

    table = fit_size_table(found)
    rows = [
        [cell.strip() for cell in line.strip("|").split(" | ")]
        for line in table.splitlines()
        if line.startswith("| ") and not line.startswith("| fit on")
    ]
    scored = [(cells[1], cells[2], cells[3]) for cells in rows]
    dev, musique, hotpotqa = (
        FIT_SIZE_EVALUATION[size] for size in ("hotpotqa_dev", "musique", "hotpotqa")
    )
    assert scored == [
        ("4", dev, "2"), ("4", musique, "3"), ("4", hotpotqa, "3"),
        ("4", dev, "2"), ("4", musique, "3"), ("4", hotpotqa, "3"),
        ("13", dev, "2"), ("13", musique, "3"),  # not the whole contexts of their questions
        ("16", dev, "2"), ("16", musique, "3"),
        ("19", dev, "2"),
        ("6", dev, "3"),
        ("3", dev, "3"), ("3", musique, "3"), ("3", hotpotqa, "3"),  # each fitted on itself
    ]  # fmt: skip
    labels = list(dict.fromkeys(cells[0] for cells in rows))
    assert labels == [
        "the shipped weights, as shipped",
        "the shipped fit's cases, refitted",
        "+ HotpotQA training cut to 10, 20 and 40 sentences",
        "+ HotpotQA training, whole contexts",
        "+ MuSiQue training, whole contexts",
        "only HotpotQA training, whole contexts; MuSiQue training, whole contexts",
        FIT_SIZE_IN_SAMPLE,
    ]
    random_case = found[-1]
    prediction = np.asarray(random_case["design"]) @ shipped
    by_hand = (1 + float(np.argmax(prediction) == np.argmax(random_case["exact_scores"]))) / 2
    assert rows[0][4].startswith(f"{by_hand:.2f} [")
    assert all(cells[4] == "1.00 [1.00, 1.00]" for cells in rows if cells[2] != dev)
    assert "on 2 of 3 examples that have them" in table
    # Without MuSiQue's whole contexts, the sets that would add them add nothing: left out.
    fewer = fit_size_table([r for r in found if r["size"] != "musique"])
    lines = [line.strip("|").split(" | ") for line in fewer.splitlines()[2:] if "| " in line]
    assert [cells[1] for cells in lines] == ["4", "4", "4", "4", "13", "16", "3", "3", "3"]
    assert lines[-3][0].strip() == "only HotpotQA training, whole contexts"


def test_attention_features_rows_compare_each_set_with_mean_on_the_same_cases():
    """Two feature sets on three cases of one size: agreement counted by hand (one tie at the
    top, half credit), gained / lost against ``mean`` per case, and the cost table's ratio of
    summed seconds over the cases whose exact ARC-JSD the CPU timed."""
    exact = [0.1, 0.9, 0.3]

    def prediction(features: str, example_id: str, scores: list[float]) -> dict:
        return {"kind": "prediction", "features": features, "group": "HotpotQA dev",
                "size": "hotpotqa_dev", "id": example_id, "training_cases": 7,
                "scores": scores, "exact_scores": exact}  # fmt: skip

    records = [
        prediction("mean", "a", [0.0, 1.0, 0.5]),  # agrees
        prediction("mean", "b", [1.0, 0.0, 0.5]),  # does not
        prediction("mean", "c", [0.0, 1.0, 1.0]),  # tied at the top: half
        prediction("weighted+peak", "a", [1.0, 0.0, 0.5]),  # lost
        prediction("weighted+peak", "b", [0.0, 1.0, 0.5]),  # gained
        prediction("weighted+peak", "c", [0.0, 1.0, 0.5]),  # gained (a tie does not agree)
    ]
    records += [
        {"kind": "passes", "size": "hotpotqa_dev", "id": example_id, "exact_seconds": exact_s,
         "attention_seconds": attention_s, "no_source_seconds": 1.0}
        # c: exact ARC-JSD timed on a GPU (no CPU seconds), left out of the cost table
        for example_id, exact_s, attention_s in (("a", 30.0, 2.0), ("b", 50.0, 3.0),
                                                 ("c", None, 100.0))
    ]  # fmt: skip
    table = attention_features_table(records)
    rows = [
        [cell.strip() for cell in line.strip("|").split(" | ")]
        for line in table.splitlines()
        if line.startswith("| ") and not line.startswith(("| features", "| examples"))
    ]
    dev = FEATURE_SCORED["hotpotqa_dev"]
    assert rows[0][:4] == ["mean", dev, "7", "3"] and rows[0][4].startswith("0.50 [")
    assert rows[0][6] == "—"
    assert rows[1][:4] == ["weighted + peak", dev, "7", "3"] and rows[1][4].startswith("0.67 [")
    assert rows[1][6] == "2 / 1 (p 1)"
    assert rows[2][:3] == [dev, "2", "2.5"]
    assert rows[2][5].startswith("16.0x [") and rows[2][6].startswith("11.4x [")  # 80/5, 80/7


def test_frontier_misses_weigh_each_miss_by_exacts_score_of_the_picked_source(workspace):
    """Three examples whose method picks the source exact ARC-JSD scores at 1.0 (a tie with
    exact's top: no miss), 0.96 (a near tie) and 0.5 (a far miss) of its top score."""
    found = records(workspace, "frontier_smollm2")
    exact = {r["id"]: r for r in found if (r["size"], r["method"]) == ("hotpotqa", "exact")}
    for example_id, share in zip(sorted(exact), (1.0, 0.96, 0.5)):
        exact[example_id]["scores"] = [1.0, share, 0.0]
    for record in found:
        if (record["size"], record["method"]) == ("hotpotqa", "attention_fitted"):
            record["scores"] = [0.0, 1.0, 0.5]
    table = frontier_misses_table(found)
    rows = [line for line in table.splitlines() if line.startswith("| hotpotqa |")]
    assert rows == ["| hotpotqa | attention_fitted | 3 | 2 | 1 | 1 | 0.73 |"]


def test_a_record_the_selection_drops_does_not_hide_a_later_one_of_its_key():
    """The faithfulness tables keep the records scored on held-out masks: an older record of the
    same question and method (scored before the held-out stream) must not shadow the newer one,
    and a sweep failure is dropped before either."""
    from mechrag.metrics.faithfulness import HELD_OUT_STREAM

    spec = make_results.TABLES["faithfulness_smollm2"]
    old = {"size": "musique_dev", "id": "q", "method": "exact", "settings": {}, "lds": 0.1}
    new = {**old, "settings": {"held_out_stream": HELD_OUT_STREAM}, "lds": 0.4}
    failed = {**new, "status": "error", "lds": 0.9}
    assert make_results.usable_records(spec, [failed, old, new]) == [new]
    assert make_results.usable_records(spec, [old]) == []
