"""RAG-E's retriever-generator alignment per prompt condition, and the retriever's
integrated-gradient baselines by AIPC."""

from __future__ import annotations

import numpy as np

from mechrag.errors import InputError
from mechrag.retrieval.conditions import DRAWS

from .common import (
    Claim,
    Table,
    declared_order,
    grouped,
    interval,
    markdown,
    paired_difference,
    table,
)

TABLES: dict[str, Table] = {}


def prompt_layout(record: dict) -> str:
    """The prompt condition in words from its retrieved flags: ``c2 top-3, then 3 random``."""
    retrieved = record["retrieved"]
    k, n_random = len(retrieved), retrieved.count(False)
    layouts = {
        "c1": f"top-{k}",
        "c2": f"top-{k - n_random}, then {n_random} random",
        "c3": f"{n_random} random, then top-{k - n_random}",
        "c4": f"top-{k} shuffled",
    }
    return f"{record['condition']} {layouts.get(record['condition'], '')}".strip()


@table(
    TABLES,
    "alignment",
    run="alignment_paper_k6_b16",
    key=lambda r: r["key"],
    note="Mean [95% bootstrap CI] over questions; retriever scored by prompt slot; a question "
    "recorded twice (overlapping shards) counts once; c2-c4 drawn per question (records drawn "
    "once for every question, before that fix, are left out).",
)
def alignment_table(records: list[dict]) -> str:
    """RAG-E's WARG, Spearman, Wasted Retrieval@3 and Noise Distraction@3 per prompt condition."""
    alignment = [
        r
        for r in records
        if r["phase"] == "alignment" and (r["condition"] == "c1" or r.get("draws") == DRAWS)
    ]
    kinds = {r["retriever_score_kind"] for r in alignment}
    if kinds != {"position"}:
        raise InputError(f"alignment records must score the retriever by position, got {kinds}")
    header = ["condition", "n", "WARG", "Spearman", "WR@3", "ND@3"]
    rows = []
    for layout, group in grouped(alignment, prompt_layout).items():
        rows.append(
            [
                layout,
                str(len(group)),
                interval([r["warg"] for r in group], sign=True),
                interval([r["spearman"] for r in group], sign=True),
                interval([r["wr@3"] for r in group]),
                interval([r["nd@3"] for r in group]),
            ]
        )
    return markdown(header, rows)


AIPC_SIDES = {"query": "queries", "document": "top documents"}
AIPC_REFERENCE = "unk"  # RAG-E's baseline, the one every other is compared with
AIPC_BASELINES = {
    "unk": "[UNK]",
    "pad": "[PAD]",
    "mask": "[MASK]",
    "zero": "zero word embeddings (RAG-E's code)",
    "zero_all": "zero input embeddings (as RAG-E's paper)",
}


def aipc_groups(records: list[dict]) -> dict[str, dict[str, list[dict]]]:
    """The integrated-gradient records by side, then by baseline, in ``AIPC_SIDES`` and
    ``AIPC_BASELINES`` order; every side must have [UNK] records."""
    explained = [r for r in records if r["phase"] == "ig"]
    if not explained:
        raise InputError("aipc: no integrated-gradient records (run --phase ig)")
    groups = {}
    by_side = grouped(explained, lambda r: r["side"])
    for side in sorted(by_side, key=lambda name: declared_order(AIPC_SIDES, name)):
        by_baseline = grouped(by_side[side], lambda r: r["baseline"])
        if AIPC_REFERENCE not in by_baseline:
            raise InputError(f"aipc: no [UNK] records for the {side} side")
        ordered = sorted(by_baseline, key=lambda name: declared_order(AIPC_BASELINES, name))
        groups[side] = {name: by_baseline[name] for name in ordered}
    return groups


def minus_reference(found: list[dict], reference: list[dict]) -> np.ndarray:
    """AIPC of ``found`` minus [UNK]'s on the same question (questions without [UNK] left out)."""
    by_question = {r["question_id"]: r["aipc"] for r in reference}
    paired = [
        r["aipc"] - by_question[r["question_id"]] for r in found if r["question_id"] in by_question
    ]
    return np.array(paired, float)


PAPER_AIPC = (
    "RAG-E uses [UNK]; its code compares zeros, [MASK], [UNK] and [PAD] on 200 MS MARCO queries "
    "(Dragon+, arctic-embed-l-v2.0), with curves but no AIPC values in what we have"
)


def aipc_claims(records: list[dict]) -> list[Claim]:
    """RAG-E's default: [UNK] is more faithful than the strongest other baseline, per side: the
    one with the highest mean paired difference from [UNK] (on the texts both explained)."""
    claims = []
    for side, by_baseline in aipc_groups(records).items():
        reference = by_baseline[AIPC_REFERENCE]
        paired = {
            name: differences
            for name, found in by_baseline.items()
            if name != AIPC_REFERENCE and len(differences := minus_reference(found, reference))
        }
        if not paired:
            raise InputError(f"aipc: no baseline to compare with [UNK] on the {side} side")
        runner_up = max(paired, key=lambda name: paired[name].mean())
        label, texts = AIPC_BASELINES.get(runner_up, runner_up), AIPC_SIDES.get(side, side)
        claims.append(
            Claim.of_mean(
                f"[UNK] is a more faithful IG baseline than the strongest other one ({label}) "
                f"on retriever {texts} (AIPC, [UNK] minus it)",
                PAPER_AIPC,
                -paired[runner_up],
                expected_sign=1,
                digits=3,
            )
        )
    return claims


@table(
    TABLES,
    "aipc",
    run="alignment_paper_k6_b16",
    key=lambda r: r["key"],
    note="Mean AIPC [95% bootstrap CI] over the texts explained (query: target the summed "
    "similarity to the top 6; top document: its similarity to the query); the difference from "
    "[UNK] is paired by text, with its sign-flip p (the claims below give [UNK] minus the "
    "strongest other baseline: the opposite sign).",
    claims=aipc_claims,
)
def aipc_table(records: list[dict]) -> str:
    """The integrated-gradient baselines of the retriever by AIPC, per side (query, top
    document), each against RAG-E's [UNK] on the same texts."""
    header = ["side", "baseline", "n", "AIPC", "minus [UNK]", "completeness (range)"]
    rows = []
    for side, by_baseline in aipc_groups(records).items():
        for baseline, found in by_baseline.items():
            paired = minus_reference(found, by_baseline[AIPC_REFERENCE])
            completeness = [r["completeness"] for r in found]
            if baseline == AIPC_REFERENCE:
                versus = ""
            elif paired.size == 0:
                versus = "— (no [UNK] pair)"
            else:
                versus = paired_difference(paired, digits=3)
                versus += f" (n {len(paired)})" if len(paired) != len(found) else ""
            rows.append(
                [
                    side,
                    AIPC_BASELINES.get(baseline, baseline),
                    str(len(found)),
                    interval([r["aipc"] for r in found], digits=3, sign=True),
                    versus,
                    f"{min(completeness):.4f}–{max(completeness):.4f}",
                ]
            )
    return markdown(header, rows)
