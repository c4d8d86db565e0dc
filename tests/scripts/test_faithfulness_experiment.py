"""``experiments/faithfulness.py`` and its table: recorded scores evaluated on shared masks, the
random floor, question order, and the table's cells recomputed from the records."""

from __future__ import annotations

import runpy

import numpy as np
import pytest
import torch
from helpers import REPO
from result_tables.faithfulness import faithfulness_table

from mechrag import Case
from mechrag.metrics.faithfulness import held_out_masks, lds, topk_keep, topk_masks, topk_removal

SCRIPT = REPO / "experiments" / "faithfulness.py"
DOCS = ["Ana lives in Oslo.", "Bo likes tea.", "Oslo is cold.", "Cy is tall.", "Ana rows."]
SETTINGS = {"model": "tiny", "n_masks": 8, "seed": 0, "top_ks": [1, 3, 5]}


def frontier_record(case, method: str, scores, **fields) -> dict:
    return {
        "size": "hotpotqa_dev", "id": "q1", "method": method, "dataset": "hotpotqa",
        "correct": False, "gold_ids": [case.sources[2].id], "threads": 2,
        "response_ids": list(case.response_ids), "source_ids": [s.id for s in case.sources],
        "scores": list(scores), "forward_passes": 6, "seconds": 1.5, **fields,
    }  # fmt: skip


def scorer(case):
    """The replay's ``score``, counting its calls."""
    calls = []

    def score(masks):
        calls.append(len(masks))
        return case.token_logprobs(masks).sum(-1), 1, 0.5

    return score, calls


def test_recorded_scores_are_evaluated_on_one_set_of_masks(tiny_llama):
    script = runpy.run_path(str(SCRIPT))
    case = Case(tiny_llama, "Where does Ana live?", DOCS, "Oslo.")
    loo = case.attribute("loo")
    overlap = [0, 0, 3, 0, 1]
    records = [frontier_record(case, "loo", loo.scores),
               frontier_record(case, "query_overlap", overlap, forward_passes=0)]  # fmt: skip
    score, calls = scorer(case)
    evaluated, scored = script["evaluate_question"](records, SETTINGS, {}, score)
    assert [r["method"] for r in evaluated] == ["loo", "query_overlap", "random"]
    assert calls == [len(scored)] and evaluated[0]["evaluation_subsets"] == len(scored)
    fresh = Case(tiny_llama, "Where does Ana live?", DOCS, "Oslo.")
    masks = held_out_masks(len(DOCS), n_masks=8, seed=0)
    for record, source in zip(evaluated, [loo.scores, overlap, None]):
        scores = script["random_scores"]("q1", len(DOCS)) if source is None else source
        assert record["lds"] == pytest.approx(lds(fresh, scores, masks=masks).value)
        removal = {str(k): v for k, v in topk_removal(fresh, scores).items()}
        kept = {str(k): v for k, v in topk_keep(fresh, scores).items()}
        assert record["topk_removal"] == pytest.approx(removal, rel=1e-4, abs=1e-5)
        assert record["topk_keep"] == pytest.approx(kept, rel=1e-4, abs=1e-5)
    assert evaluated[1]["top1_gold"] and not evaluated[1]["correct"]
    assert evaluated[0]["forward_passes"] == 6 and evaluated[2]["forward_passes"] == 0
    np.testing.assert_array_equal(
        script["random_scores"]("q1", 5), script["random_scores"]("q1", 5)
    )


def test_a_method_added_later_scores_only_its_own_top_k_subsets(tiny_llama):
    script = runpy.run_path(str(SCRIPT))
    case = Case(tiny_llama, "Where does Ana live?", DOCS, "Oslo.")
    overlap = frontier_record(case, "query_overlap", [0, 0, 3, 0, 1], forward_passes=0)
    later = frontier_record(case, "screen", [0.1, 0.5, 0.2, 0.0, 0.3])
    score, calls = scorer(case)
    first, known = script["evaluate_question"]([overlap], SETTINGS, {}, score)
    again, scored = script["evaluate_question"]([overlap, later], SETTINGS, known, score)
    # The held-out masks and the earlier top-k subsets are reused; only the new method's
    # subsets (top 1, 3 of 5 kept and removed; top 5 removed is the empty context) are scored.
    _, kept = topk_masks([0.1, 0.5, 0.2, 0.0, 0.3], [1, 3, 5])
    new = {script["row_key"](row) for row in np.concatenate([kept, ~kept])} - set(known)
    assert set(scored) == new and calls == [len(known), len(new)]
    alone, _ = script["evaluate_question"]([overlap, later], SETTINGS, {}, scorer(case)[0])
    fresh = Case(tiny_llama, "Where does Ana live?", DOCS, "Oslo.")
    for replayed, direct in zip(again, alone):
        assert replayed["lds"] == pytest.approx(direct["lds"])
        assert replayed["topk_removal"] == pytest.approx(direct["topk_removal"], abs=1e-5)
        assert replayed["topk_keep"] == pytest.approx(direct["topk_keep"], abs=1e-5)
    kept = {str(k): v for k, v in topk_keep(fresh, [0.1, 0.5, 0.2, 0.0, 0.3]).items()}
    assert again[1]["topk_keep"] == pytest.approx(kept, rel=1e-4, abs=1e-5)
    assert first[0]["lds"] == pytest.approx(again[0]["lds"])
    assert script["evaluate_question"]([overlap], SETTINGS, {**known, **scored}, None)[1] == {}


def test_a_rerun_scores_nothing_and_stored_values_stand_for_their_sources(
    tiny_llama, tmp_path, monkeypatch, capsys
):
    import argparse

    import frontier_cases

    from mechrag.data.loaders import RAGExample
    from mechrag.models import loading
    from mechrag.results.files import append_jsonl, run_records
    from mechrag.sources import Source

    sources = [Source(f"s{i}", text) for i, text in enumerate(DOCS)]
    example = RAGExample("q1", "hotpotqa", "Where does Ana live?", sources, ["s2"], "Oslo")
    monkeypatch.setattr(frontier_cases, "examples_of_size", lambda size, n: [example])
    loaded = []

    def load_model(name, device=None, dtype=None):
        loaded.append((device, dtype))
        return tiny_llama

    monkeypatch.setattr(loading, "load_model", load_model)
    script = runpy.run_path(str(SCRIPT))
    case = Case.from_example(tiny_llama, example, response="Oslo.")
    frontier = tmp_path / "frontier"
    record = frontier_record(case, "query_overlap", [0, 0, 3, 0, 1], forward_passes=0)
    append_jsonl(frontier / "records.jsonl", {**record, "model": "tiny"})
    out = tmp_path / "out"
    args = argparse.Namespace(model="tiny", sizes=["hotpotqa_dev"], questions=None, threads=1,
                              frontier=str(frontier), out=str(out), device="cpu")  # fmt: skip
    script["run"](args)
    (line,) = run_records(out / "scored")
    assert line["source_ids"] == ["s0", "s1", "s2", "s3", "s4"] and line["dtype"] == "float32"
    assert loaded == [("cpu", torch.float32)]  # what the stored lines say, where asked
    assert [r["method"] for r in run_records(out)] == ["query_overlap", "random"]
    assert run_records(out)[0]["evaluation_subsets"] == len(line["log_p"])
    capsys.readouterr()
    script["run"](args)  # everything done: nothing scored, nothing written
    assert "subsets" not in capsys.readouterr().out and len(run_records(out)) == 2
    # A method added later scores only its own top-k subsets (here one the others lack)...
    later = [5, 4, 2, 3, 1]
    append_jsonl(frontier / "records.jsonl",
                 {**record, "model": "tiny", "method": "loo", "scores": later})  # fmt: skip
    script["run"](args)
    first, added = run_records(out / "scored")
    _, kept = topk_masks(later, [1, 3, 5])
    new = {script["row_key"](row) for row in np.concatenate([kept, ~kept])} - set(first["log_p"])
    assert new and set(added["log_p"]) == new and len(run_records(out)) == 3
    # A run stopped before a question's random record finishes it, scoring nothing.
    path = out / "records.jsonl"
    path.write_text("".join(line for line in path.read_text().splitlines(keepends=True)
                            if '"method": "random"' not in line))  # fmt: skip
    script["run"](args)
    assert sorted(r["method"] for r in run_records(out)) == ["loo", "query_overlap", "random"]
    assert len(run_records(out / "scored")) == 2
    # A ContextCite record refitted on its new target is evaluated beside the old one's record
    # (made before records named a target), and then stands: a rerun writes nothing more.
    old = {**record, "model": "tiny", "method": "contextcite32", "scores": later}
    append_jsonl(frontier / "records.jsonl", old)
    script["run"](args)
    append_jsonl(frontier / "records.jsonl", {**old, "value": "logit_prob"})
    script["run"](args)
    script["run"](args)
    evaluated = [r for r in run_records(out) if r["method"] == "contextcite32"]
    assert [r["value"] for r in evaluated] == [None, "logit_prob"]
    assert len(run_records(out)) == 5
    # So is an attention record made with refitted weights (by their hash); a method reading no
    # weights names none, and the old weights' records not evaluated before the refit never are.
    fitted = {**record, "model": "tiny", "method": "attention_fitted", "scores": later}
    append_jsonl(frontier / "records.jsonl", {**fitted, "settings": {"weights": "old"}})
    script["run"](args)
    rescored = {**fitted, "method": "attention_rescored5", "settings": {"weights": "old"}}
    append_jsonl(frontier / "records.jsonl", rescored)
    append_jsonl(frontier / "records.jsonl", {**fitted, "settings": {"weights": "refit"}})
    script["run"](args)
    script["run"](args)
    evaluated = [r for r in run_records(out) if r["method"].startswith("attention")]
    assert [(r["method"], r["weights"]) for r in evaluated] == [
        ("attention_fitted", "old"), ("attention_fitted", "refit")
    ]
    assert len(run_records(out)) == 7 and run_records(out)[0]["weights"] is None
    # ... and a stored value never stands for another order of the sources.
    stored = script["stored_log_ps"](out)
    reordered = {**first, "source_ids": first["source_ids"][::-1]}
    assert script["scored_key"](reordered) not in stored
    assert script["scored_key"](first) in stored


def test_questions_with_more_methods_come_first_and_other_responses_are_left_out(capsys):
    script = runpy.run_path(str(SCRIPT))

    def record(size, question, method, response=(1, 2)):
        return {"size": size, "id": question, "method": method, "response_ids": list(response)}

    frontier = [
        record("hotpotqa_dev", "a", "exact"),
        record("musique_dev", "b", "exact"), record("musique_dev", "b", "loo"),
        record("hotpotqa_dev", "c", "exact"), record("hotpotqa_dev", "c", "loo"),
        record("hotpotqa_dev", "c", "attention", response=(3,)),
        record("squad", "d", "exact"), record("squad", "d", "loo"), record("squad", "d", "x"),
    ]  # fmt: skip
    found = script["recorded_questions"](frontier, ("hotpotqa_dev", "musique_dev"))
    assert [(size, question, len(r)) for size, question, r in found] == [
        ("hotpotqa_dev", "c", 2), ("musique_dev", "b", 2), ("hotpotqa_dev", "a", 1),
    ]  # fmt: skip
    assert "hotpotqa_dev/c: 1 records of another response" in capsys.readouterr().out


def test_the_table_orders_by_cost_and_pairs_with_exact():
    def record(question, method, value, passes, correct):
        changes = {"topk_removal": {"1": -value, "3": -2 * value}, "topk_keep": {"1": value}}
        return {"size": "hotpotqa_dev", "id": question, "method": method, "lds": value,
                "forward_passes": passes, "correct": correct, "top1_gold": value > 0.5,
                **changes}  # fmt: skip

    records = [
        record("a", "exact", 0.9, 40, True), record("b", "exact", 0.7, 40, False),
        record("a", "overlap", 0.3, 0, True), record("b", "overlap", 0.5, 0, False),
    ]  # fmt: skip
    rows = [line.split(" | ") for line in faithfulness_table(records).splitlines()[2:]]
    assert [row[1] for row in rows] == ["overlap", "exact"]
    overlap, exact = rows
    assert overlap[2:4] == ["2", "0"] and exact[3] == "40"
    assert overlap[4].startswith("0.40 ") and exact[4].startswith("0.80 ")
    assert overlap[5:7] == ["0.30 (1)", "0.50 (1)"]
    assert overlap[7].startswith("\N{MINUS SIGN}0.40 ") and overlap[7].endswith("n = 2")
    assert exact[7] == "–"
    assert overlap[8] == "\N{MINUS SIGN}0.4 / \N{MINUS SIGN}0.8 / –"
    assert overlap[10] == exact[10] == "–"  # no top 5 to pair
    assert overlap[13].rstrip(" |") == "0.00" and exact[13].rstrip(" |") == "1.00"
    # One response resting on one sentence moves the mean removal, not its median.
    records.append(record("c", "overlap", 30.0, 0, False))
    rows = [line.split(" | ") for line in faithfulness_table(records).splitlines()[2:]]
    overlap = next(row for row in rows if row[1] == "overlap")
    assert overlap[8].startswith("\N{MINUS SIGN}10.3 / ")
    assert overlap[9] == "\N{MINUS SIGN}0.5 / \N{MINUS SIGN}1.0 / –"


def test_the_tables_show_contextcites_old_target_apart():
    """The faithfulness tables read the held-out stream's records, ContextCite's of its old
    target (made before records named one) under their own name, beside its refit's."""
    from result_tables.faithfulness import faithfulness_selection

    from mechrag.metrics.faithfulness import HELD_OUT_STREAM

    held_out = {"held_out_stream": HELD_OUT_STREAM}
    records = [
        {"method": "contextcite32", "settings": held_out},
        {"method": "contextcite32", "settings": held_out, "value": "logit_prob"},
        {"method": "contextcite32", "settings": {}, "value": "logit_prob"},  # an older stream's
        {"method": "loo", "settings": held_out},
    ]
    selected = [r["method"] for r in faithfulness_selection(records)]
    assert selected == ["contextcite32 (old target)", "contextcite32", "loo"]


def test_the_tables_read_the_newest_attention_weights():
    """After a refit, a weighted method's faithfulness records of the old weights neither show
    nor hide the new ones (the first record of a key is the one a table reads)."""
    from result_tables.faithfulness import faithfulness_key, faithfulness_selection

    from mechrag.metrics.faithfulness import HELD_OUT_STREAM

    def record(question, method, weights):
        return {"size": "hotpotqa_dev", "id": question, "method": method, "weights": weights,
                "settings": {"held_out_stream": HELD_OUT_STREAM}}  # fmt: skip

    old = [record("a", "attention_fitted", "old"), record("b", "attention_fitted", "old")]
    overlap = record("a", "query_overlap", None)
    refit = record("a", "attention_fitted", "refit")
    selected = faithfulness_selection([*old, overlap, refit])
    assert selected == [overlap, refit]
    assert faithfulness_key(old[0]) != faithfulness_key(refit)


def test_the_top_5_removal_is_paired_with_exact_arc_jsd_by_sign():
    """Deeper / shallower counts the questions where the method's top 5 removed lower log p
    more / less than exact ARC-JSD's; a tie (the same change) counts for neither."""

    def record(question, method, removed):
        return {"size": "hotpotqa_dev", "id": question, "method": method, "lds": 0.5,
                "forward_passes": 1, "correct": False, "top1_gold": False,
                "topk_removal": {"5": removed}, "topk_keep": {"5": 0.0}}  # fmt: skip

    exact = {"a": -5.0, "b": -2.0, "c": -1.0, "d": -3.0, "e": -4.0}
    method = {"a": -6.0, "b": -2.0, "c": -0.5, "d": -3.5, "e": -9.0}
    records = [record(q, "exact", v) for q, v in exact.items()]
    records += [record(q, "attention", v) for q, v in method.items()]
    records.append(record("f", "attention", -50.0))  # no exact record to pair with: left out
    lines = faithfulness_table(records).splitlines()
    assert lines[0].split(" | ")[10] == "top-5 deeper / shallower"
    cells = {row[1]: row[10] for row in (line.split(" | ") for line in lines[2:])}
    # 3 deeper, 1 shallower: exact two-sided binomial p = 2 * (1 + 4) / 16.
    assert cells == {"attention": "3 / 1 (p .62), n = 5", "exact": "–"}


def test_the_holm_column_adjusts_over_every_paired_test_on_a_data_set():
    """Per data set the paired tests against exact ARC-JSD form one family: two per method,
    fewer where a method has no top 5 to pair; each cell adjusts its own two by Holm's step-down
    over the family (hand-computed here from exact p-values)."""

    def record(size, question, method, lds, removed):
        removal = {} if removed is None else {"5": removed}
        return {"size": size, "id": question, "method": method, "lds": lds,
                "forward_passes": 1, "correct": False, "top1_gold": False,
                "topk_removal": removal, "topk_keep": {}}  # fmt: skip

    records = []
    for i, q in enumerate("abcde"):
        records += [
            record("hotpotqa_dev", q, "exact", 0.5, -1.0),
            record("hotpotqa_dev", q, "deeper", 0.6, -2.0),  # LDS +0.1 and deeper on all 5
            record("hotpotqa_dev", q, "level", 0.5 + 0.1 * (-1) ** i, -1.0),  # ties at k = 5
            record("hotpotqa_dev", q, "unpaired_k", 0.3, None),  # LDS −0.2 on all 5, no top 5
        ]
    # Each "all 5 one way" test has exact p 2 / 32 = .0625; the others 1. The family of five:
    # .0625 x 5 = .3125, then .25 and .1875 (stepped up to .3125), then 1 x 2 and 1.
    lines = faithfulness_table(records).splitlines()
    assert lines[0].split(" | ")[11] == "Holm p: LDS / top-5"
    cells = {row[1]: row[11] for row in (line.split(" | ") for line in lines[2:])}
    assert cells == {"exact": "–", "deeper": ".31 / .31", "level": "1 / 1", "unpaired_k": ".31 / –"}
    # Another data set is its own family. Its two LDS tests on 20 questions are sampled p at
    # their floor (1 / 20001), the top-5 test exact (2 / 2**20): Holm gives 3 x 1.9e-6 = 6e-6
    # to the latter, 2 x floor = 1e-4 to the former, and both are upper bounds (the floored p
    # could be below 1.9e-6, which would lower the top-5 test's multiplier).
    for q in map(str, range(20)):
        records += [
            record("musique_dev", q, "exact", 0.5, -1.0),
            record("musique_dev", q, "deeper", 0.6, -2.0),
            record("musique_dev", q, "unpaired_k", 0.4, None),
        ]
    rows = [line.split(" | ") for line in faithfulness_table(records).splitlines()[2:]]
    cells = {(row[0].strip("| "), row[1]): row[11] for row in rows}
    assert cells["MuSiQue dev", "deeper"] == "≤ 1e-4 / ≤ 6e-6"
    assert cells["MuSiQue dev", "unpaired_k"] == "≤ 1e-4 / –"
    assert cells["HotpotQA dev", "deeper"] == ".31 / .31"
