"""Regenerate the generated tables of ``experiments/RESULTS.md`` from committed run records.

Each table is built by one function of one run folder's records (``experiments/runs/NAME``,
read with :func:`mechrag.results.files.run_records`; no model pass) and sits in RESULTS.md between
``<!-- results:TABLE -->`` and ``<!-- /results:TABLE -->``; everything outside the markers is
kept as written. Every cell gives its n (a column, or in the cell where it differs) and every
mean or proportion a seeded 95% percentile bootstrap interval (:func:`bootstrap_ci`, so the file
is byte-for-byte reproducible); paired differences give the seeded sign-flip permutation p of
their mean, paired binary comparisons the exact McNemar p. A ``claims`` block gathers the paper
claims the tables test.

    python experiments/make_results.py           # rewrite RESULTS.md in place (make results)
    python experiments/make_results.py --check   # exit 1 with a diff if RESULTS.md is stale

A table is registered with :func:`table`; an ``optional`` table (one whose run may not exist
yet, such as ``frontier``) is left as it stands while its run folder is missing, any other
missing run folder is an error.
"""

from __future__ import annotations

import argparse
import difflib
import itertools
import re
import sys
import textwrap
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np
from scipy.stats import t as t_dist

from mechrag.errors import InputError, InputFileError
from mechrag.metrics.agreement import spearman_test
from mechrag.metrics.detection import SIGN_FLIP_EXACT, bootstrap_ci, mcnemar_exact, sign_flip_p
from mechrag.results.files import run_records, write_text_atomic
from mechrag.retrieval.conditions import DRAWS
from mechrag.sweep import load_records

EXPERIMENTS = Path(__file__).resolve().parent
RESULTS = EXPERIMENTS / "RESULTS.md"
RUNS = EXPERIMENTS / "runs"
SEED = 0
RESAMPLES = 2000
RESAMPLES_TEST = 20000  # sign-flip draws beyond the exact enumeration
MARKER = re.compile(r"<!-- results:(?P<name>[\w-]+) -->\n.*?<!-- /results:(?P=name) -->", re.S)
OPENING = re.compile(r"<!-- results:([\w-]+) -->")
MINUS = "\N{MINUS SIGN}"


@dataclass(frozen=True)
class Table:
    """One generated table: its builder (records -> markdown), the run folder (under the runs
    root) it reads, what identifies a record (duplicates, e.g. from overlapping shards, count
    once), the caption saying how its cells were computed, whether it is left as it stands
    while its run folder does not exist yet, and which of the records it reads (``select``)."""

    name: str
    run: str
    key: Callable[[dict], object]
    build: Callable[[list[dict]], str]
    note: str
    optional: bool = False
    claims: Callable[[list[dict]], list[Claim]] | None = None
    select: Callable[[list[dict]], list[dict]] | None = None


@dataclass(frozen=True)
class Claim:
    """A paper's claim checked on one table's records: per-example paired differences (method
    minus its control) whose sign the paper reports, their test's p, and the paper's numbers.
    ``binary``: differences of 0/1 outcomes (tested exactly by McNemar); ``scale`` and
    ``digits`` print the effect (100 for a rate in percentage points); ``paper_effect``: the
    paper's own difference where it gives one, to say whether the interval here holds it."""

    claim: str
    paper: str
    differences: np.ndarray
    expected_sign: int
    p: float
    binary: bool = False
    scale: float = 1.0
    digits: int = 2
    paper_effect: float | None = None  # the paper's difference, in the differences' unit

    @classmethod
    def of_mean(
        cls,
        claim: str,
        paper: str,
        differences: np.ndarray,
        *,
        expected_sign: int,
        scale: float = 1.0,
        digits: int = 2,
        paper_effect: float | None = None,
    ) -> Claim:
        """A claim on the mean of ``differences``, tested by :func:`mean_p`."""
        return cls(
            claim,
            paper,
            differences,
            expected_sign,
            mean_p(differences),
            scale=scale,
            digits=digits,
            paper_effect=paper_effect,
        )


TABLES: dict[str, Table] = {}
CLAIMS = "claims"  # the marker of the table that gathers every table's claims


def table(
    name: str,
    *,
    run: str,
    key: Callable[[dict], object],
    note: str,
    optional=False,
    claims: Callable[[list[dict]], list[Claim]] | None = None,
    select: Callable[[list[dict]], list[dict]] | None = None,
):
    """Register the decorated ``records -> markdown`` function as table ``name`` (and
    ``claims``, its records' claims for the claims table)."""

    def register(build: Callable[[list[dict]], str]) -> Callable[[list[dict]], str]:
        TABLES[name] = Table(name, run, key, build, note, optional, claims, select)
        return build

    return register


# ---------------------------------------------------------------- cells


def number(value: float, digits: int, sign: bool = False) -> str:
    """``value`` to ``digits`` decimals with a typographic minus, as the hand-written tables
    (and an explicit plus with ``sign``, for differences and correlations)."""
    return f"{value:{'+' if sign else ''}.{digits}f}".replace("-", MINUS)


def interval(
    values, *, digits: int = 2, sign: bool = False, scale: float = 1.0, sd: float | None = None
) -> str:
    """Mean of ``values`` with its seeded 95% bootstrap interval, ``m [low, high]``
    (``m ± sd [low, high]`` when ``sd`` is given)."""
    found = bootstrap_ci(np.mean, np.asarray(values, float), n_resamples=RESAMPLES, seed=SEED)
    estimate, low, high = (
        number(scale * v, digits, sign=sign) for v in (found.estimate, found.low, found.high)
    )
    spread = "" if sd is None else f" ± {scale * sd:.{digits}f}"
    return f"{estimate}{spread} [{low}, {high}]"


def ratio_interval(numerators, denominators, *, digits: int = 1) -> str:
    """``sum(numerators) / sum(denominators)`` with a seeded bootstrap interval over the paired
    rows, e.g. a speed-up as summed reference seconds over summed method seconds."""
    found = bootstrap_ci(
        lambda top, bottom: top.sum() / bottom.sum(),
        np.asarray(numerators, float),
        np.asarray(denominators, float),
        n_resamples=RESAMPLES,
        seed=SEED,
    )
    return f"{found.estimate:.{digits}f}x [{found.low:.{digits}f}, {found.high:.{digits}f}]"


def p_text(p: float, *, sampled: bool = False) -> str:
    """A p-value in two significant digits, ``.062``, ``1``, ``4e-6``; a ``sampled`` sign-flip
    p at its floor ``1 / (1 + RESAMPLES_TEST)`` (no draw reached the observed mean) as an upper
    bound, ``≤ 5e-5``."""
    floor = 1 / (1 + RESAMPLES_TEST)
    if sampled and p <= floor:
        return f"≤ {p_text(floor)}"
    if p < 0.001:
        mantissa, exponent = f"{p:.0e}".split("e")
        return f"{mantissa}e{int(exponent)}"
    return f"{p:.2g}".removeprefix("0")


def sampled_test(n: int) -> bool:
    """Whether :func:`mean_p` samples signs at n differences (rather than enumerating them)."""
    return n > SIGN_FLIP_EXACT


def mean_p(differences) -> float:
    """Two-sided p of the paired sign-flip permutation test of the mean difference (seeded:
    exact up to 16 differences, :data:`RESAMPLES_TEST` draws beyond), the test of the statistic
    every interval here is around."""
    return sign_flip_p(np.asarray(differences, float), n_resamples=RESAMPLES_TEST, seed=SEED)


def paired_difference(differences, *, digits: int) -> str:
    """Mean paired difference with its interval and its sign-flip p, ``+0.43 [...] (p .062)``."""
    p = p_text(mean_p(differences), sampled=sampled_test(len(differences)))
    return f"{interval(differences, digits=digits, sign=True)} (p {p})"


def markdown(header: list[str], rows: list[list[str]]) -> str:
    """A pipe table."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in rows])


def grouped(records: list[dict], key: Callable[[dict], object]) -> dict[object, list[dict]]:
    """``records`` by ``key``, groups in order of first appearance."""
    groups: dict[object, list[dict]] = {}
    for record in records:
        groups.setdefault(key(record), []).append(record)
    return groups


def declared_order(declared: dict[str, str], name: str) -> int:
    """``name``'s place among the ``declared`` names, unknown names after them: a sort key
    that lists known names in their declared order and keeps the others as they appear."""
    names = list(declared)
    return names.index(name) if name in names else len(names)


# ---------------------------------------------------------------- tables

CONSENSUS_MODULES = {"attention": "attention", "mlp": "MLP"}
CONSENSUS_OVERLAPS = {"jsd_overlap": "J∩S", "gain_overlap": "G∩S", "jsd_gain_overlap": "J∩G"}


# Table 3 on HotpotQA against what independent rankings give at each model's depth (simulated
# here: 6.82 at 26 layers, 6.66 at 28, 5.70 at 42): the paper reads every row as agreement.
CONSENSUS_PAPER = {
    "attention": "read as agreement; its values: 6.65-6.81 of 10 against chance 6.66-6.82 "
    "(−0.1 to +0.2; Qwen2-1.5B/7B, Gemma2-2B), 6.72 against 5.70 (+1.0; Gemma2-9B)",
    "mlp": "read as agreement; its values: 7.49-8.06 of 10, above chance (5.70-6.82 by depth) "
    "in every row",
}


def consensus_claims(records: list[dict]) -> list[Claim]:
    """Table 3's reading: layers ranked by JSD agree with layers ranked by semantic gain, i.e.
    |J∩S| stands above what independent rankings give."""
    claims = []
    for module, label in CONSENSUS_MODULES.items():
        found = [r["result"]["consensus"][module] for r in records]
        excess = np.array([f["jsd_overlap"] - f["null_jsd_overlap"] for f in found], float)
        claims.append(
            Claim.of_mean(
                f"the paper's reading of Table 3: {label} layers by JSD and by gain agree "
                "(\\|J∩S\\| above its null)",
                CONSENSUS_PAPER[module],
                excess,
                expected_sign=1,
            )
        )
    return claims


@table(
    "consensus",
    run="consensus_hotpotqa_d2",
    key=lambda r: r["id"],
    note="Mean [95% bootstrap CI] over examples; null: mean of each example's permutation-null "
    "mean; obs − null: per-example excess over that null, sign-flip permutation p of its mean "
    f"(≤ 5e-5: no sampled sign pattern of {RESAMPLES_TEST:,} reached it).",
    claims=consensus_claims,
)
def consensus_table(records: list[dict]) -> str:
    """ARC-JSD's consensus overlaps (Eq. 11-12) per module against their permutation null, and
    the Spearman rho between the JSD and gain rankings over layers."""
    header = ["module", "n"]
    for label in CONSENSUS_OVERLAPS.values():
        header += [f"\\|{label}\\|", "its null", "obs − null (p)"]
    header.append("ρ(J, G) over layers")
    rows = []
    for module, label in CONSENSUS_MODULES.items():
        found = [r["result"]["consensus"][module] for r in records]
        row = [label, str(len(found))]
        for overlap in CONSENSUS_OVERLAPS:
            observed = np.array([f[overlap] for f in found], float)
            null = np.array([f[f"null_{overlap}"] for f in found], float)
            row += [
                interval(observed),
                f"{null.mean():.2f}",
                paired_difference(observed - null, digits=2),
            ]
        row.append(interval([f["rho"] for f in found], digits=3, sign=True))
        rows.append(row)
    return markdown(header, rows)


@table(
    "consensus_detail",
    run="consensus_hotpotqa_d2",
    key=lambda r: r["id"],
    note="Over examples, [95% bootstrap CI]: the share whose top ARC-JSD sentence is gold; per "
    "module and overlap, the share whose own overlap exceeds its permutation null at p < .05; "
    "Spearman ρ between component JSD and semantic gain over every component.",
)
def consensus_detail_table(records: list[dict]) -> str:
    """What the consensus table's means hide: per-example significance and the localisation's
    own gold top-1."""
    rows = [
        [
            "top ARC-JSD sentence is gold",
            interval([r["result"]["top_source_is_gold"] for r in records]),
        ]
    ]
    for module, label in CONSENSUS_MODULES.items():
        found = [r["result"]["consensus"][module] for r in records]
        for overlap in CONSENSUS_OVERLAPS:
            significant = [f[f"{overlap}_p"] < 0.05 for f in found]
            name = CONSENSUS_OVERLAPS[overlap]
            rows.append([f"{label} \\|{name}\\| above its null at p < .05", interval(significant)])
    rows.append(
        [
            "ρ(JSD, gain) over every component",
            interval([r["result"]["rho"] for r in records], digits=3, sign=True),
        ]
    )
    return markdown(["measure", f"over n = {len(records)} examples"], rows)


ABLATION_MODES = {"zero": "zero", "mean": "mean", "uniform": "uniform (paper's code)"}


def top_and_random(effects: list[dict], metric: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``metric`` of the top-k set per example, of its random sets averaged per example, and of
    every random set pooled, over examples' ``effects`` (condition name -> effect)."""
    top = np.array([e["top"][metric] for e in effects], float)
    draws = [[v[metric] for name, v in e.items() if name.startswith("random")] for e in effects]
    return top, np.array([np.mean(d) for d in draws], float), np.concatenate(draws)


def ablation_cells(
    effects: list[dict], metric: str, *, spread: bool = False, sign: bool = False
) -> list[str]:
    """Top-k, random and paired top − random cells of one metric over examples' ``effects``
    (condition name -> effect); random is each example's mean over its random sets; ``spread``
    adds the sd, ``sign`` signs a metric that is itself a change."""
    top, random, pooled = top_and_random(effects, metric)
    return [
        interval(top, digits=3, sign=sign, sd=top.std() if spread else None),
        interval(random, digits=3, sign=sign, sd=pooled.std() if spread else None),
        paired_difference(top - random, digits=3),
    ]


def ablation_effects(records: list[dict]) -> dict[str, list[dict]]:
    """Per masking style (those of :data:`ABLATION_MODES` first, in its order; others as they
    appear): the examples' effects under it."""
    found = dict.fromkeys(m for r in records for m in r["result"]["effects"])
    modes = sorted(found, key=lambda mode: declared_order(ABLATION_MODES, mode))
    return {
        mode: [r["result"]["effects"][mode] for r in records if mode in r["result"]["effects"]]
        for mode in modes
    }


# Table 5 as the paper gives it (v1, Appendix I): no n, no masking style.
PAPER_ABLATION = (
    "2.23 ± 0.12 against 1.53 ± 0.76: +0.70 (pooled over models and data sets; n and masking "
    "not stated)"
)


def ablation_claims(records: list[dict]) -> list[Claim]:
    """Table 5: masking the top-10 heads moves the output more than masking 10 random heads."""
    claims = []
    for mode, effects in ablation_effects(records).items():
        top, random, _ = top_and_random(effects, "output_jsd")
        claims.append(
            Claim.of_mean(
                f"top-10 heads move the output more than 10 random heads "
                f"({ABLATION_MODES.get(mode, mode)} masking, summed JSD; Table 5)",
                PAPER_ABLATION,
                top - random,
                expected_sign=1,
                digits=3,
                paper_effect=2.23 - 1.53,
            )
        )
    return claims


@table(
    "ablation",
    run="ablation_hotpotqa_d2",
    key=lambda r: r["id"],
    note="Mean [95% bootstrap CI over examples]; summed JSD also ± sd (top: over examples, "
    "random: over every draw); random: each example's mean over its draws; top − random: paired "
    "per example, sign-flip permutation p of its mean (≤ 5e-5: no sampled sign pattern of "
    f"{RESAMPLES_TEST:,} reached it).",
    claims=ablation_claims,
)
def ablation_table(records: list[dict]) -> str:
    """Top-k heads by component JSD against random heads per masking style: output JSD summed
    over the response and per token, and the change in the removed source's ARC-JSD."""
    header = [
        "masking", "n (random draws)",
        "summed JSD top-10", "random", "top − random (p)",
        "per-token top", "random", "top − random (p)",
        "Δ source JSD top", "random", "top − random (p)",
    ]  # fmt: skip
    rows = []
    for mode, effects in ablation_effects(records).items():
        draws = sum(name.startswith("random") for e in effects for name in e)
        rows.append(
            [ABLATION_MODES.get(mode, mode), f"{len(effects)} ({draws})"]
            + ablation_cells(effects, "output_jsd", spread=True)
            + ablation_cells(effects, "output_jsd_per_token")
            + ablation_cells(effects, "delta_source_jsd", sign=True)
        )
    return markdown(header, rows)


GATING_BINARY = ("hallucinated", "wrong")
GATING_METRICS = (*GATING_BINARY, "f1", "n_words")
GATING_REFERENCES = ("no gate", "paper rule")
GATING_HEADER = [
    "condition", "n", "hallucinated %", "wrong %", "F1 %", "words",
    "McNemar p vs no gate (halluc. / wrong)", "McNemar p vs paper rule (halluc. / wrong)",
]  # fmt: skip


def gating_label(condition: str) -> str:
    """A gating record's condition name in words: ``random:0`` is ``random draw 0``."""
    named = {"none": "no gate", "paper": "paper rule"}
    return named.get(condition, condition.replace("random:", "random draw "))


def gating_row(label: str, outcomes: dict[str, np.ndarray], versus: list[str]) -> list[str]:
    """One condition's cells: rates and F1 in %, words, then the McNemar cells ``versus``."""
    rates = [interval(outcomes[m], digits=1, scale=100) for m in (*GATING_BINARY, "f1")]
    words = interval(outcomes["n_words"], digits=1)
    return [label, str(len(outcomes["f1"])), *rates, words, *versus]


def mcnemar_cell(first: dict[str, np.ndarray], second: dict[str, np.ndarray]) -> str:
    """Exact McNemar p of each outcome of ``GATING_BINARY`` between two conditions, ``p / p``."""
    return " / ".join(
        p_text(mcnemar_exact(first[m].astype(bool), second[m].astype(bool))) for m in GATING_BINARY
    )


def gating_outcomes(records: list[dict]) -> dict[str, dict[str, np.ndarray]]:
    """Per condition in words: each metric of :data:`GATING_METRICS` over the examples."""
    return {
        gating_label(name): {
            m: np.array([float(r["conditions"][name][m]) for r in records]) for m in GATING_METRICS
        }
        for name in records[0]["conditions"]
    }


def random_control(conditions: dict[str, dict[str, np.ndarray]]) -> dict[str, np.ndarray] | None:
    """Each metric averaged over the random draws per example (``None`` without draws)."""
    draws = [outcomes for label, outcomes in conditions.items() if label.startswith("random")]
    if not draws:
        return None
    return {m: np.mean([d[m] for d in draws], axis=0) for m in GATING_METRICS}


def gating_claims(
    records: list[dict], *, data: str | None = None, in_paper: bool = True
) -> list[Claim]:
    """ICLR Table 4: the rule curbs hallucination, against no gating and against the random
    control; the random control costs factual F1. ``data`` names the data in each claim.
    ``in_paper=False``: data the paper did not run (then its HotpotQA numbers are quoted for
    reference only, with no effect to hold, and the F1 claim is left out: on unanswerable
    questions F1 is 1 − hallucinated, the same claim again)."""
    missing = [c for c in ("paper", "none") if c not in records[0]["conditions"]]
    if missing:  # named by its record key, as call_builder reports it
        raise KeyError(missing[0])
    conditions = gating_outcomes(records)
    rule, ungated = conditions[gating_label("paper")], conditions[gating_label("none")]
    control = random_control(conditions)
    where = f" on {data}" if data else ""

    def quoted(text: str, effect: float) -> dict:
        if in_paper:
            return {"paper": text, "paper_effect": effect}
        return {"paper": f"not in the paper (HotpotQA: {text})", "paper_effect": None}

    claims = [
        Claim(
            f"the paper rule lowers the hallucination rate against no gating{where} (ICLR Table 4)",
            differences=rule["hallucinated"] - ungated["hallucinated"],
            expected_sign=-1,
            p=mcnemar_exact(rule["hallucinated"] > 0, ungated["hallucinated"] > 0),
            binary=True,
            scale=100,
            digits=1,
            **quoted("13.4% → 8.2%: −5.2 points (Qwen2-7B-IT, n = 200)", 0.082 - 0.134),
        )
    ]
    if control is None:
        return claims
    claims.append(
        Claim.of_mean(
            f"the paper rule hallucinates less than the random-5 control{where} (ICLR Table 4)",
            differences=rule["hallucinated"] - control["hallucinated"],
            expected_sign=-1,
            scale=100,
            digits=1,
            **quoted("8.2% against 12.7%: −4.5 points", 0.082 - 0.127),
        )
    )
    if in_paper:
        claims.append(
            Claim.of_mean(
                f"the random-5 control lowers factual F1 against no gating{where} (ICLR Table 4)",
                "76.1 → 69.4: −6.7 points (the rule: 75.9)",
                control["f1"] - ungated["f1"],
                expected_sign=-1,
                scale=100,
                digits=1,
                paper_effect=0.694 - 0.761,
            )
        )
    return claims


@table(
    "gating",
    run="gating_paper/hotpotqa/paper",
    key=lambda r: r["id"],
    note="Mean [95% bootstrap CI] over test examples; McNemar: exact p of the paired "
    "hallucinated / wrong outcomes; the random control's mean over its draws is not binary, so "
    "each draw is compared on its own.",
    claims=lambda records: gating_claims(records, data="the HotpotQA training sample"),
)
def gating_table(records: list[dict]) -> str:
    """The paper's gating rule against no gating and against the random control (the same
    factors on as many random components), per draw and averaged over draws."""
    return markdown(GATING_HEADER, gating_rows(records))


def gating_rows(records: list[dict]) -> list[list[str]]:
    """:func:`gating_table`'s rows: each condition, then the random draws' mean."""
    conditions = gating_outcomes(records)
    rows = [
        gating_row(
            label,
            outcomes,
            [
                "—" if label == reference else mcnemar_cell(outcomes, conditions[reference])
                for reference in GATING_REFERENCES
            ],
        )
        for label, outcomes in conditions.items()
    ]
    pooled = random_control(conditions)
    if pooled is not None:
        draws = sum(label.startswith("random") for label in conditions)
        label = f"random control (mean of {draws} draws)"
        rows.append(gating_row(label, pooled, ["—"] * len(GATING_REFERENCES)))
    return rows


# The same table on the HotpotQA dev sample, the paper's split.
table("gating_dev", run="gating_paper/hotpotqa_dev/paper", key=lambda r: r["id"],
      note="As the training-sample table, on the shipped HotpotQA dev sample (the paper's "
      "split).", optional=True,
      claims=lambda records: gating_claims(records, data="the HotpotQA dev split"),
      )(gating_table)  # fmt: skip


# SQuAD 2.0's questions apart: on an unanswerable one, any answer but an abstention is a
# hallucination; on an answerable one, a wrong answer that the context does not support.
SQUAD_SUBSETS = {"unanswerable": False, "answerable": True}


def squad_subset(records: list[dict], subset: str) -> list[dict]:
    """The records of ``subset`` (a key of :data:`SQUAD_SUBSETS`)."""
    return [r for r in records if bool(r["answers"]) == SQUAD_SUBSETS[subset]]


def squad_gating_claims(records: list[dict]) -> list[Claim]:
    """The gating claims on SQuAD 2.0's unanswerable questions (not in the paper)."""
    unanswerable = squad_subset(records, "unanswerable")
    if not unanswerable:
        return []
    return gating_claims(unanswerable, data="SQuAD 2.0 unanswerable questions", in_paper=False)


@table(
    "gating_squad",
    run="gating_paper/squad/paper",
    key=lambda r: r["id"],
    note="As the HotpotQA table, per kind of question: on an unanswerable question every "
    "answer but an abstention counts as hallucinated.",
    optional=True,
    claims=squad_gating_claims,
)
def gating_squad_table(records: list[dict]) -> str:
    """The gating table on SQuAD 2.0 dev, its unanswerable and answerable questions apart."""
    rows = []
    for subset in SQUAD_SUBSETS:
        if chosen := squad_subset(records, subset):
            rows += [[f"{subset}: {row[0]}", *row[1:]] for row in gating_rows(chosen)]
    return markdown(GATING_HEADER, rows)


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


FRONTIER_REFERENCE = "exact"


# The frontier's methods that read the shipped attention weights (benchmarks/frontier.py's
# WEIGHTED; a test ties the two).
FRONTIER_WEIGHTED = ("attention_localized", "attention_fitted", "attention_rescored5",
                     "attention_after_generation")  # fmt: skip


def frontier_weights(record: dict) -> str | None:
    """The hash of the attention weights a frontier record depends on: ``None`` for a method
    that does not read them."""
    if record["method"] not in FRONTIER_WEIGHTED:
        return None
    return record.get("settings", {}).get("weights")


def frontier_key(record: dict) -> tuple[str, str, str, str | None]:
    """What identifies a frontier record: its size, example and method, and for a method that
    reads the attention weights, their hash (a refit's records do not replace the old ones)."""
    return record["size"], record["id"], record["method"], frontier_weights(record)


def newest_weights(records: list[dict]) -> list[dict]:
    """Frontier records less those of a weighted method made under other attention weights
    than the folder's last record of such a method: after a refit, the tables show the new
    weights only, on the examples they have run."""
    weighted = [r for r in records if r["method"] in FRONTIER_WEIGHTED]
    if not weighted:
        return records
    newest = frontier_weights(weighted[-1])
    return [
        r for r in records if r["method"] not in FRONTIER_WEIGHTED or frontier_weights(r) == newest
    ]


def size_order(size: str) -> tuple[int, int]:
    """A sort key for the frontier's sizes: cut sizes by their sentences, then the whole
    contexts in :data:`PAPER_SETTING`'s order."""
    return (0, int(size)) if size.isdigit() else (1, declared_order(PAPER_SETTING, size))


def by_size_and_method(records: list[dict]) -> dict[tuple[str, str], list[dict]]:
    """Frontier records per (size, method): sizes in :func:`size_order`, exact ARC-JSD first
    within a size, the other methods as they first appear."""
    groups = grouped(records, lambda r: (r["size"], r["method"]))
    order = sorted(groups, key=lambda pair: (size_order(pair[0]), pair[1] != FRONTIER_REFERENCE))
    return {pair: groups[pair] for pair in order}


def check_frontier(records: list[dict], *, fields: tuple[str, ...] = ("scores",)) -> None:
    """One clear line for frontier records of several models, or whose per-source ``fields``
    are not finite numbers, one per source."""
    if len({r["settings"]["model"] for r in records}) > 1:
        raise InputError("frontier records of several models in one run folder")
    for record, field in itertools.product(records, fields):
        try:
            values = np.asarray(record[field], float)
            finite = values.shape == (len(record["source_ids"]),) and np.all(np.isfinite(values))
        except (TypeError, ValueError):
            finite = False
        if not finite:
            raise InputError(
                f"frontier {record['size']}/{record['id']}: {record['method']} has {field} that "
                "are not finite numbers, one per source"
            )


def frontier_pairs(records: list[dict]) -> dict[tuple, list[tuple[dict, dict]]]:
    """Per (size, method): each example's record paired with exact ARC-JSD's on it."""
    exact = {(r["size"], r["id"]): r for r in records if r["method"] == FRONTIER_REFERENCE}
    check_frontier(records)
    pairs = {}
    for (size, method), group in by_size_and_method(records).items():
        found = [(r, exact[size, r["id"]]) for r in group if (size, r["id"]) in exact]
        for record, reference in found:
            if record["source_ids"] != reference["source_ids"]:
                raise InputError(f"frontier {size}/{record['id']}: {method} scored other sources")
            if record.get("response_ids") != reference.get("response_ids"):
                raise InputError(
                    f"frontier {size}/{record['id']}: {method} explained another response"
                )
        if found:
            pairs[size, method] = found
    return pairs


def top1_credit(scores: list[float], targets: set[int]) -> float:
    """The chance that the top-ranked source is among ``targets`` when ties at the top are
    broken at random: the share of the sources tied at the maximum that are targets (a score
    that counts words ties often, and a tie must not go to the first source)."""
    scores = np.asarray(scores, float)
    tied = np.flatnonzero(scores == scores.max())
    return float(np.mean([i in targets for i in tied]))


def size_and_id(record: dict) -> tuple[str, str]:
    """What identifies a record of a replay of the frontier's examples: its size and example."""
    return record["size"], record["id"]


def within_top_credit(scores: list[float], target: int, depth: int) -> float:
    """The chance that source ``target`` is among the ``depth`` top-ranked sources when ties
    are broken at random: it takes each place among those tied with it equally often."""
    scores = np.asarray(scores, float)
    above = int(np.sum(scores > scores[target]))
    tied = int(np.sum(scores == scores[target]))
    return float(np.clip((depth - above) / tied, 0.0, 1.0))


def gold_credit(record: dict) -> float:
    """:func:`top1_credit` of a record's scores against its gold sources."""
    gold = {i for i, source in enumerate(record["source_ids"]) if source in record["gold_ids"]}
    return top1_credit(record["scores"], gold)


def agreement_credit(record: dict, reference: dict, depth: int = 1) -> float:
    """:func:`within_top_credit` of the reference's top source (its first one) in a record's
    top ``depth``: at depth 1, top-1 agreement."""
    return within_top_credit(record["scores"], int(np.argmax(reference["scores"])), depth)


def frontier_measures(pairs: list[tuple[dict, dict]]) -> dict:
    """Seconds of the pairs timed in one session (the speed-up's), top-1 agreement, the
    defined Spearman values, gold top-1."""
    rhos = np.array([spearman_test(r["scores"], e["scores"])[0] for r, e in pairs])
    timed = [(r, e) for r, e in pairs if r["session"] == e["session"]]
    return {
        "exact_seconds": [e["seconds"] for _, e in timed],
        "seconds": [r["seconds"] for r, _ in timed],
        "agrees": [agreement_credit(r, e) for r, e in pairs],
        "rhos": rhos[~np.isnan(rhos)],
        "gold": [gold_credit(r) for r, _ in pairs],
        "model_free": all(r["forward_passes"] == 0 for r, _ in pairs),
    }


def speedup_cell(measured: dict, n_pairs: int) -> str:
    """The speed-up over the pairs timed in one session; their n when fewer than all."""
    n_timed = len(measured["seconds"])
    if measured["model_free"]:
        return "— (no model pass)"
    if not n_timed:
        return "— (timed apart)"
    cell = ratio_interval(measured["exact_seconds"], measured["seconds"])
    return cell if n_timed == n_pairs else f"{cell} (n = {n_timed})"


@table(
    "frontier",
    run="frontier_smollm2",
    key=frontier_key, select=newest_weights,
    note="Per size and method over the examples exact ARC-JSD also ran: speed-up = summed exact "
    "seconds / summed method seconds over the examples both were timed on in one session (n "
    "given when fewer); agreement and Spearman against exact; [95% bootstrap CI]; Spearman over "
    "examples where it is defined (n given when fewer).",
    optional=True,
)
def frontier_table(records: list[dict]) -> str:
    """Accuracy against cost of the fast attribution methods, per context size."""
    header = [
        "size", "method", "n", "sentences", "speed-up", "top-1 agrees with exact",
        "Spearman with exact", "gold top-1",
    ]  # fmt: skip
    rows = []
    for (size, method), pairs in frontier_pairs(records).items():
        measured = frontier_measures(pairs)
        rhos = measured["rhos"]
        spearman_cell = interval(rhos, sign=True) if len(rhos) else "—"
        if len(rhos) < len(pairs):
            spearman_cell += f" (n = {len(rhos)})"
        rows.append(
            [
                str(size),
                method,
                str(len(pairs)),
                f"{np.mean([r['n_sources'] for r, _ in pairs]):.1f}",
                speedup_cell(measured, len(pairs)),
                interval(measured["agrees"]),
                spearman_cell,
                interval(measured["gold"]),
            ]
        )
    return markdown(header, rows)


FRONTIER_DEPTHS = (1, 2, 3, 5)


@table(
    "frontier_depth",
    run="frontier_smollm2",
    key=frontier_key, select=newest_weights,
    note="Per size and method over the examples exact ARC-JSD also ran: the share whose exact "
    "top source is among the method's top k (ties broken at random, in expectation) [95% "
    "bootstrap CI]. For fitted attention this is how often attention then exact ARC-JSD on its "
    "top k (`AttentionAttribution(rescore=k)`) finds exact's top source.",
    optional=True,
)
def frontier_depth_table(records: list[dict]) -> str:
    """How deep in each method's ranking exact ARC-JSD's top source lies, from the records
    alone: for a method without ties, what rescoring its top k by exact ARC-JSD recovers
    (:func:`mechrag.attribution.screening.exact_on_top` breaks ties by position)."""
    header = ["size", "method", "n", *(f"in top {depth}" for depth in FRONTIER_DEPTHS)]
    rows = []
    for (size, method), pairs in frontier_pairs(records).items():
        if method == FRONTIER_REFERENCE:
            continue
        shares = [[agreement_credit(r, e, depth) for r, e in pairs] for depth in FRONTIER_DEPTHS]
        rows.append([str(size), method, str(len(pairs)), *(interval(share) for share in shares)])
    return markdown(header, rows)


# The methods whose misses the misses table weighs (a method that ranks with ties, as word
# overlap does, has no single top source to weigh).
FRONTIER_MISS_METHODS = ("attention_fitted", "attention_localized", "proxy", "contextcite32", "loo")
NEAR_TIE = 0.95  # a top source exact ARC-JSD scores at least this share of its own top's
FAR_MISS = 0.75  # one it scores below this share


@table(
    "frontier_misses",
    run="frontier_smollm2",
    key=frontier_key,
    select=newest_weights,
    note="Per size and method over the examples exact ARC-JSD also ran: misses = examples whose "
    "top source (the first of the method's highest scores) is not exact's (a pick tied with "
    "exact's top is not a miss); for those, how many "
    f"tops exact scores at least {NEAR_TIE} of its own top's score (near ties of the reference) "
    f"and how many below {FAR_MISS}, and the median of that share.",
    optional=True,
)
def frontier_misses_table(records: list[dict]) -> str:
    """Whether a method's disagreements with exact ARC-JSD are near ties of exact's own
    ranking (then a stricter method could not be told from noise in the reference) or far
    misses (then the method points elsewhere)."""
    header = ["size", "method", "n", "misses", f"near ties (≥ {NEAR_TIE})",
              f"far (< {FAR_MISS})", "median share of exact's top"]  # fmt: skip
    rows = []
    for (size, method), pairs in frontier_pairs(records).items():
        if method not in FRONTIER_MISS_METHODS:
            continue
        shares = []
        for record, reference in pairs:
            exact = np.asarray(reference["scores"], float)
            picked = exact[int(np.argmax(record["scores"]))]
            if picked < exact.max():
                shares.append(picked / exact.max() if exact.max() > 0 else 0.0)
        shares = np.asarray(shares)
        rows.append(
            [
                str(size),
                method,
                str(len(pairs)),
                str(len(shares)),
                str(int((shares >= NEAR_TIE).sum())),
                str(int((shares < FAR_MISS).sum())),
                f"{np.median(shares):.2f}" if len(shares) else "—",
            ]
        )
    return markdown(header, rows)


# The same two tables with Gemma 3 270M as the target model (its own exact ARC-JSD the reference;
# ``proxy`` there is SmolLM2).
table("frontier_gemma3", run="frontier_gemma3", key=frontier_key, select=newest_weights,
      note=TABLES["frontier"].note, optional=True)(frontier_table)  # fmt: skip
table("frontier_depth_gemma3", run="frontier_gemma3", key=frontier_key, select=newest_weights,
      note=TABLES["frontier_depth"].note, optional=True)(frontier_depth_table)  # fmt: skip


# Hierarchical ARC-JSD's expansion rules, (documents, within), replayed on recorded level-one
# document scores (benchmarks/hierarchical_rules.py); the frontier runs (2, None).
HIERARCHICAL_RULES = (
    (1, None), (2, None), (3, None), (4, None),
    (1, 0.5), (1, 0.35), (1, 0.25),
    (2, 0.5), (2, 0.35), (2, 0.25),
)  # fmt: skip


def replayed_rule(record: dict, documents: int, within: float | None) -> tuple[float, int]:
    """Hierarchical ARC-JSD's top-1 agreement with exact ARC-JSD under a rule (its expanded
    sentences keep their exact scores and rank above every other, so it agrees when exact's top
    sentence is expanded; ties at the top shared as in the frontier's agreement) and its model
    calls as the method counts them, from a record of level-one document scores."""
    from mechrag.attribution.hierarchical import expanded_documents

    owner = np.asarray(record["document_of"])
    scores = np.asarray(record["document_scores"], float)
    exact = np.asarray(record["exact_scores"], float)
    if owner.shape != exact.shape or owner.max(initial=-1) >= len(scores):
        raise InputError(f"hierarchical {record['size']}/{record['id']}: sources do not match")
    sizes = np.bincount(owner, minlength=len(scores))
    if len(scores) <= documents:  # every document expanded, no level one: exact ARC-JSD
        expanded, calls = np.ones(len(owner), dtype=bool), len(owner) + 1
    else:
        expanded = expanded_documents(scores, sizes, documents=documents, within=within)[owner]
        # The full context, every document, and the sentences of expanded multi-sentence ones.
        calls = 1 + len(scores) + int(np.sum(expanded & (sizes[owner] > 1)))
    top = int(np.argmax(exact))
    return within_top_credit(np.where(expanded, exact, -np.inf), top, depth=1), calls


def rule_name(documents: int, within: float | None) -> str:
    """A rule in words, as the table lists it."""
    return f"top {documents}" + ("" if within is None else f" + within {within:g} of the top")


HIERARCHICAL_GOAL = 0.95  # issue 19's top-1 agreement goal for hierarchical ARC-JSD


def chosen_rule(records: list[dict]) -> tuple[int, float | None] | None:
    """The rule with the fewest model calls over the training-split records (every size not
    ``*_dev``) among those whose top-1 agreement reaches :data:`HIERARCHICAL_GOAL` at every
    training size: chosen without the dev records, which then report it."""
    training = grouped([r for r in records if not r["size"].endswith("_dev")], lambda r: r["size"])
    if not training:
        return None
    reaching = []
    for index, rule in enumerate(HIERARCHICAL_RULES):
        replayed = [[replayed_rule(r, *rule) for r in group] for group in training.values()]
        # A slack for tie-shared credits whose mean lands a rounding below the goal.
        if all(np.mean([c for c, _ in found]) >= HIERARCHICAL_GOAL - 1e-12 for found in replayed):
            reaching.append((sum(calls for found in replayed for _, calls in found), index))
    return HIERARCHICAL_RULES[min(reaching)[1]] if reaching else None


def replay_check(records: list[dict]) -> str:
    """How often the replay of the frontier's own rule reproduces the frontier's hierarchical
    records of the same examples (their scores and model calls, copied into each record): the
    document scores were recomputed in other batches, so a near tie may order two documents
    otherwise."""
    checked = [r for r in records if r.get("frontier_hierarchical")]
    same = 0
    for record in checked:
        found = record["frontier_hierarchical"]
        top = int(np.argmax(record["exact_scores"]))
        recorded = within_top_credit(found["scores"], top, depth=1), found["model_calls"]
        same += replayed_rule(record, found["documents"], None) == recorded
    return (
        f"The replay of the frontier's own rule reproduces its hierarchical ARC-JSD records (top-1 "
        f"agreement and model calls) on {same} of the {len(checked)} examples both ran."
    )


@table(
    "hierarchical_rules",
    run="hierarchical_smollm2",
    key=size_and_id,
    note="Per size and expansion rule of hierarchical ARC-JSD, replayed on each example's "
    "recorded document scores and exact ARC-JSD's sentence scores (no model pass): top-1 agrees "
    "with exact = exact's top sentence lies in an expanded document (ties at the top shared); "
    "fewer calls = summed exact model calls / summed calls of the rule (model calls, not "
    "seconds); [95% bootstrap CI]. "
    "Chosen: the rule with the fewest calls over the training-split examples whose top-1 "
    "agreement reaches 0.95 (the issue's goal) at every training size; the dev rows report it.",
    optional=True,
)
def hierarchical_rules_table(records: list[dict]) -> str:
    """Top-1 agreement against cost of hierarchical ARC-JSD's expansion rules."""
    header = ["size", "rule", "n", "documents", "top-1 agrees with exact", "fewer calls"]
    rows = []
    chosen = chosen_rule(records)
    groups = grouped(records, lambda r: r["size"])
    for size in sorted(groups, key=size_order):
        group = groups[size]
        for documents, within in HIERARCHICAL_RULES:
            replayed = [replayed_rule(r, documents, within) for r in group]
            rows.append(
                [
                    PAPER_SETTING.get(size, f"HotpotQA cut to {size} sentences (training split)"),
                    rule_name(documents, within)
                    + (" (chosen)" if (documents, within) == chosen else ""),
                    str(len(group)),
                    f"{np.mean([len(r['document_scores']) for r in group]):.1f}",
                    interval([credit for credit, _ in replayed]),
                    ratio_interval(
                        [r["exact_model_calls"] for r in group], [calls for _, calls in replayed]
                    ),
                ]
            )
    return f"{markdown(header, rows)}\n\n{replay_check(records)}"


def gained_lost(agrees, baseline) -> str:
    """Cases that agree (full credit: a tie at the top does not) under one fit and not under
    its baseline, the reverse, and their exact McNemar p: ``2 / 1 (p 1)``."""
    now, before = np.asarray(agrees) == 1, np.asarray(baseline) == 1
    return (
        f"{int((now & ~before).sum())} / {int((~now & before).sum())} "
        f"(p {p_text(mcnemar_exact(now, before))})"
    )


def top1_and_spearman(predicted, exact) -> tuple[float, float]:
    """How far one case's predicted scores follow its exact ones: the top-1 credit (ties broken
    at random, in expectation) and the Spearman correlation (0 where it is undefined)."""
    from scipy.stats import spearmanr

    top = within_top_credit(predicted, int(np.argmax(exact)), 1)
    rho = spearmanr(predicted, exact).statistic
    return top, 0.0 if np.isnan(rho) else float(rho)


# The fit's losses compared by leave-one-case-out on the training records, each refitted without
# the held-out case under the shipped fits' settings.
FIT_LOSSES = (
    {"loss": "pearson"},
    {"loss": "listwise", "temperature": 0.1},
    {"loss": "listwise", "temperature": 0.2},
    {"loss": "listwise", "temperature": 0.5},
)
FIT_SETTINGS = {"l2": 1e-3, "seed": 0, "steps": 400, "learning_rate": 0.01}


@contextmanager
def one_torch_thread():
    """Torch on one thread inside the block, so that the fits' sums, and with them near-ties,
    do not depend on the machine's cores."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


@table(
    "fit_losses",
    run="fit_attention_smollm2",
    key=lambda record: record["key"],
    note="Per loss of `mechrag fit-attention` (temperature in sds): each training case held out "
    "once, the weights refitted on the others (L2 0.001, seed 0, 400 Adam steps at rate 0.01, one "
    "thread); top-1 agreement and Spearman of the held-out case's fitted attention scores with "
    "its exact ARC-JSD [95% bootstrap CI]; gained / lost: held-out cases whose top-1 agrees under "
    "this loss and not under `pearson`, and the reverse, with their exact McNemar p.",
    optional=True,
)
def fit_losses_table(records: list[dict]) -> str:
    """Which loss of the attention fit generalises to a held-out training case, by
    leave-one-case-out on the records (no model pass; one torch thread, so that the fits' sums,
    and with them near-ties, do not depend on the machine's cores)."""
    from mechrag.attribution.attention_fit import fit_head_weights, fit_quality

    designs = [np.asarray(r["design"], float) for r in records]
    targets = [np.asarray(r["scores"], float) for r in records]
    with one_torch_thread():
        held_out = []
        for variant in FIT_LOSSES:
            outcomes = []
            for index in range(len(records)):
                rest = [i for i in range(len(records)) if i != index]
                weights = fit_head_weights(
                    [designs[i] for i in rest], [targets[i] for i in rest], **variant,
                    **FIT_SETTINGS,
                )  # fmt: skip
                case = slice(index, index + 1)
                outcomes.append(fit_quality(weights, designs[case], targets[case]))
            held_out.append(outcomes)
    baseline = np.array([o["top1"] for o in held_out[0]], bool)
    rows = []
    for variant, outcomes in zip(FIT_LOSSES, held_out):
        agrees = np.array([o["top1"] for o in outcomes], bool)
        changed = "—" if variant is FIT_LOSSES[0] else gained_lost(agrees, baseline)
        rows.append(
            [
                variant["loss"],
                f"{variant['temperature']:g}" if "temperature" in variant else "—",
                str(len(agrees)),
                interval(agrees.astype(float)),
                interval([o["spearman"] for o in outcomes], sign=True),
                changed,
            ]
        )
    header = ["loss", "temperature", "n", "held-out top-1", "held-out Spearman", "gained / lost"]
    return markdown(header, rows)


table("fit_losses_gemma3", run="fit_attention_gemma3", key=lambda record: record["key"],
      note=TABLES["fit_losses"].note, optional=True)(fit_losses_table)  # fmt: skip


# The training sets the fit-size table refits on, by the fit-size records' size labels ("shipped":
# the shipped fit's own cases), in order of growth; None: the shipped weights as they are. A set
# that adds no case to the one before it (its run has no such records) is left out.
FIT_SIZE_TRAINING = (
    None,
    ("shipped",),
    ("shipped", "10", "20", "40"),
    ("shipped", "10", "20", "40", "hotpotqa"),
    ("shipped", "10", "20", "40", "hotpotqa", "musique"),
    ("hotpotqa", "musique"),
)
# The label of each evaluation set's fit on itself, scored on itself: how far head-weighted
# attention follows exact ARC-JSD on the very cases it was fitted on (not held out).
FIT_SIZE_IN_SAMPLE = "in sample: fitted on the scored cases themselves (not held out)"
FIT_SIZE_CUTS = ("10", "20", "40")  # HotpotQA training cut to this many sentences
FIT_SIZE_WHOLE = {
    "hotpotqa": "HotpotQA training, whole contexts",
    "musique": "MuSiQue training, whole contexts",
}
# Where each fit is scored, on the questions none of its cases came from.
FIT_SIZE_EVALUATION = {
    "hotpotqa_dev": "HotpotQA dev, whole contexts",
    "musique": "MuSiQue training, whole contexts",
    "hotpotqa": "HotpotQA training, whole contexts",
}


class AttentionFit(NamedTuple):
    """One fit of the fit-size table: its label, its training cases, whether it is the shipped
    weights as they are (not refitted), the questions (dataset, id) it may not be scored on, and
    the sizes it is scored on."""

    label: str
    training: list[dict]
    as_shipped: bool
    unscored: set[tuple[str, str]]
    evaluation: tuple[str, ...]


def fit_size_groups(sizes: set[str]) -> str:
    """The record groups of ``sizes`` in words: ``HotpotQA training cut to 10 and 20 sentences;
    MuSiQue training, whole contexts``."""
    cuts = [size for size in FIT_SIZE_CUTS if size in sizes]
    words = []
    if cuts:
        counts = ", ".join(cuts[:-1]) + " and " + cuts[-1] if len(cuts) > 1 else cuts[0]
        words.append(f"HotpotQA training cut to {counts} sentences")
    words += [text for size, text in FIT_SIZE_WHOLE.items() if size in sizes]
    return "; ".join(words)


def shipped_fitted_weights(model: str) -> np.ndarray:
    """The fitted head weights that ship for ``model``, flattened layer-major (no model pass)."""
    from mechrag.attribution.attention import AttentionWeights, shipped_weights_path

    return AttentionWeights.load(shipped_weights_path(model)).fitted.reshape(-1)


def shipped_replay_check(records: list[dict], weights: np.ndarray) -> str:
    """Whether the shipped weights times each recorded design give the frontier's own
    fitted-attention scores of the example (the designs are the frontier's features)."""
    checked = [r for r in records if "frontier_fitted_scores" in r]
    if not checked:
        return "No record has the frontier's fitted-attention scores to check the designs by."
    gaps = [
        np.max(np.abs(np.asarray(r["design"]) @ weights - r["frontier_fitted_scores"]))
        / max(np.max(np.abs(r["frontier_fitted_scores"])), 1e-300)
        for r in checked
    ]
    agree = sum(gap < 1e-3 for gap in gaps)  # the designs are rounded to 6 decimals
    return (
        f"Check: the shipped weights times each design give the frontier's fitted-attention "
        f"scores of the example on {agree} of {len(checked)} examples that have them (largest "
        f"difference {max(gaps):.1e} of the example's largest score)."
    )


@table(
    "fit_size",
    run="fit_size_smollm2",
    key=size_and_id,
    note="Per training set of the attention fit (the Pearson loss, L2 0.001, seed 0, 400 Adam "
    "steps at rate 0.01, one thread; targets: exact ARC-JSD from the frontier's records; + adds "
    "to the set above) and per evaluation set (its examples whose question no training case came "
    "from; in sample: the fit's own training cases): top-1 agreement with exact ARC-JSD (ties "
    "broken at random, in expectation) and Spearman [95% bootstrap CI]; gained / lost: examples "
    "whose top-1 agrees under this fit and not under the shipped weights, and the reverse (a tie "
    "at the top counts as not agreeing), with their exact McNemar p.",
    optional=True,
)
def fit_size_table(records: list[dict]) -> str:
    """Whether more training cases, or cases at the full context, lift the fitted attention's
    agreement with exact ARC-JSD on unseen questions (no model pass)."""
    from mechrag.attribution.attention_fit import fit_head_weights

    (model,) = {r["model"] for r in records}
    shipped = shipped_fitted_weights(model)
    design = {id(r): np.asarray(r["design"], float) for r in records}

    def scored(weights: np.ndarray, cases: list[dict]) -> tuple[np.ndarray, np.ndarray]:
        agrees, rhos = zip(
            *(top1_and_spearman(design[id(r)] @ weights, r["exact_scores"]) for r in cases)
        )
        return np.array(agrees), np.array(rhos)

    def fits():
        """Each row group's :class:`AttentionFit`, in the table's order."""
        previous = []
        for sizes in FIT_SIZE_TRAINING:
            training = [r for r in records if r["size"] in (sizes or ("shipped",))]
            present, before = {r["size"] for r in training}, {r["size"] for r in previous}
            seen = {(r["dataset"], r["id"]) for r in training}
            if sizes is None:
                yield AttentionFit("the shipped weights, as shipped", training, True, seen,
                                   tuple(FIT_SIZE_EVALUATION))  # fmt: skip
                continue
            if not training or [id(r) for r in training] == [id(r) for r in previous]:
                continue  # the set adds no case to the one before it
            previous = training
            if present == {"shipped"}:
                label = "the shipped fit's cases, refitted"
            elif before < present:
                label = f"+ {fit_size_groups(present - before)}"
            else:
                label = f"only {fit_size_groups(present)}"
            yield AttentionFit(label, training, False, seen, tuple(FIT_SIZE_EVALUATION))
        for size in FIT_SIZE_EVALUATION:
            training = [r for r in records if r["size"] == size]
            if training:
                yield AttentionFit(FIT_SIZE_IN_SAMPLE, training, False, set(), (size,))

    rows, shipped_agrees = [], {}
    with one_torch_thread():
        for label, training, as_shipped, unscored, evaluation in fits():
            weights = shipped if as_shipped else fit_head_weights(
                [design[id(r)] for r in training],
                [np.asarray(r["exact_scores"], float) for r in training],
                loss="pearson", **FIT_SETTINGS,
            )  # fmt: skip
            for size in evaluation:
                cases = [
                    r
                    for r in records
                    if r["size"] == size and (r["dataset"], r["id"]) not in unscored
                ]
                if not cases:
                    continue
                agrees, rhos = scored(weights, cases)
                chosen = tuple(id(r) for r in cases)
                if chosen not in shipped_agrees:
                    shipped_agrees[chosen] = scored(shipped, cases)[0]
                baseline = shipped_agrees[chosen]
                changed = "—" if as_shipped else gained_lost(agrees, baseline)
                rows.append(
                    [
                        label,
                        str(len(training)),
                        FIT_SIZE_EVALUATION[size],
                        str(len(cases)),
                        interval(agrees),
                        interval(rhos, sign=True),
                        changed,
                    ]
                )
    header = [
        "fit on", "training cases", "scored on", "n", "top-1 agrees with exact",
        "Spearman with exact", "gained / lost against the shipped weights",
    ]  # fmt: skip
    return f"{markdown(header, rows)}\n\n{shipped_replay_check(records, shipped)}"


table("fit_size_gemma3", run="fit_size_gemma3", key=TABLES["fit_size"].key,
      note=TABLES["fit_size"].note, optional=True)(fit_size_table)  # fmt: skip


# How the attention-features table names the frontier's sizes it scores.
FEATURE_SCORED = {
    "10": "HotpotQA training, 10 sentences",
    "20": "HotpotQA training, 20 sentences",
    "40": "HotpotQA training, 40 sentences",
    "hotpotqa": "HotpotQA training, whole contexts",
    "musique": "MuSiQue training, whole contexts",
    "hotpotqa_dev": "HotpotQA dev, whole contexts",
}
BASELINE_FEATURES = "mean"  # the shipped feature


def features_key(record: dict) -> tuple:
    """What identifies an attention-features record: a case's passes, or one feature set's
    prediction of one case."""
    return record["kind"], record.get("features"), record["size"], record["id"]


@table(
    "attention_features",
    run="attention_features_smollm2",
    key=features_key,
    note="Per feature set of the attention fit (kinds side by side; see "
    "`benchmarks/attention_features.py`) and per scored set: the weights fitted (Pearson loss, "
    "L2 0.001, seed 0, 400 Adam steps at rate 0.01, one thread) on the other two question groups "
    "(HotpotQA training at every size; MuSiQue training; HotpotQA dev), so no scored question "
    "was fitted on; top-1 agreement with exact ARC-JSD (ties broken at random, in expectation) "
    "and Spearman [95% bootstrap CI]; gained / lost: cases whose top-1 agrees under this set and "
    "not under `mean` (the shipped feature, refitted on the same cases), and the reverse (a tie "
    "at the top counts as not agreeing), with their exact McNemar p. Below: the passes' seconds "
    "against exact ARC-JSD's on the same examples (its frontier record; timed apart).",
    optional=True,
)
def attention_features_table(records: list[dict]) -> str:
    """Whether richer attention features than the response-averaged mass follow exact ARC-JSD
    more closely on questions no fit saw (the fits ran in the benchmark; records -> table)."""
    predicted = [r for r in records if r["kind"] == "prediction"]
    by_set: dict[str, dict[tuple[str, str], dict]] = {}
    for record in predicted:
        by_set.setdefault(record["features"], {})[record["size"], record["id"]] = record

    def agreement(record: dict) -> tuple[float, float]:
        return top1_and_spearman(record["scores"], record["exact_scores"])

    rows = []
    baseline = by_set.get(BASELINE_FEATURES, {})
    for features, cases in by_set.items():
        for size, label in FEATURE_SCORED.items():
            keys = sorted(key for key in cases if key[0] == size)
            if not keys:
                continue
            agrees, rhos = np.array([agreement(cases[key]) for key in keys]).T
            if features == BASELINE_FEATURES or not all(key in baseline for key in keys):
                changed = "—"
            else:
                changed = gained_lost(agrees, [agreement(baseline[key])[0] for key in keys])
            rows.append(
                [
                    features.replace("+", " + "),
                    label,
                    str(cases[keys[0]]["training_cases"]),
                    str(len(keys)),
                    interval(agrees),
                    interval(rhos, sign=True),
                    changed,
                ]
            )
    header = [
        "features", "scored on", "training cases", "n", "top-1 agrees with exact",
        "Spearman with exact", "gained / lost against `mean`",
    ]  # fmt: skip
    passes = [r for r in records if r["kind"] == "passes"]
    cost_rows = []
    for size, label in FEATURE_SCORED.items():
        chosen = [r for r in passes if r["size"] == size]
        if not chosen:
            continue
        exact = [r["exact_seconds"] for r in chosen]
        attention = [r["attention_seconds"] for r in chosen]
        both = [r["attention_seconds"] + r["no_source_seconds"] for r in chosen]
        cost_rows.append(
            [
                label,
                str(len(chosen)),
                f"{np.mean(attention):.1f}",
                f"{np.mean([r['no_source_seconds'] for r in chosen]):.1f}",
                f"{np.mean(exact):.1f}",
                ratio_interval(exact, attention),
                ratio_interval(exact, both),
            ]
        )
    cost_header = [
        "examples", "n", "attention pass, s", "pass without sources, s", "exact ARC-JSD, s",
        "speed-up, attention only", "speed-up, with the pass without sources",
    ]  # fmt: skip
    return f"{markdown(header, rows)}\n\n{markdown(cost_header, cost_rows)}"


# The frontier's sizes that are the paper's own setting (and SQuAD's long-context setting, which
# the paper does not run), and their data in words (with the split).
PAPER_SETTING = {
    "hotpotqa": "HotpotQA, all 10 paragraphs (training split)",
    "hotpotqa_dev": "HotpotQA, all 10 paragraphs (dev split)",
    "musique": "MuSiQue, all 20 paragraphs (training split)",
    "musique_dev": "MuSiQue, all 20 paragraphs (dev split)",
    "squad": "SQuAD 2.0, whole articles, answerable questions (dev split; not in the paper)",
}


# ARC-JSD (arXiv v1) Table 2, top-1 context-attribution accuracy in % per model (Qwen2-1.5B-IT,
# Qwen2-7B-IT, Gemma2-2B-IT, Gemma2-9B-IT): (ARC-JSD, ContextCite at 256 ablations).
PAPER_TABLE_2 = {
    "hotpotqa": ((71.1, 82.3, 67.0, 79.4), (54.9, 68.4, 54.8, 70.4)),
    "musique": ((60.6, 76.8, 65.3, 78.2), (54.5, 60.3, 51.8, 60.9)),
}


def paper_setting_claims(records: list[dict]) -> list[Claim]:
    """ARC-JSD's Table 2: exact ARC-JSD ranks a gold sentence first more often than ContextCite,
    paired per example on the examples both ran (ContextCite at 32 ablations here, 256 there:
    the paper's later versions name ContextCite-32 too, as less accurate). Exact McNemar when
    no top is tied (every credit 0 or 1), else the sign-flip test of the mean."""
    claims = []
    for (size, method), found in frontier_pairs(records).items():
        data = size.removesuffix("_dev")
        if method != "contextcite32" or data not in PAPER_TABLE_2:
            continue
        arc_jsd, contextcite = (np.mean(values) for values in PAPER_TABLE_2[data])
        per_model = np.subtract(*PAPER_TABLE_2[data])
        exact_credit = np.array([gold_credit(exact) for _, exact in found])
        contextcite_credit = np.array([gold_credit(r) for r, _ in found])
        differences = exact_credit - contextcite_credit
        binary = bool(np.isin([*exact_credit, *contextcite_credit], (0.0, 1.0)).all())
        claims.append(
            Claim(
                "exact ARC-JSD ranks a gold sentence first more often than ContextCite "
                f"({PAPER_SETTING[size]}, {found[0][0]['settings']['model']}; ContextCite at 32 "
                "ablations; ARC-JSD Table 2)",
                f"{arc_jsd:.1f}% against {contextcite:.1f}% (ContextCite at 256): "
                f"{arc_jsd - contextcite:+.1f} points, mean of four models ({per_model.min():+.1f} "
                f"to {per_model.max():+.1f}; dev split)",
                differences,
                expected_sign=1,
                p=mcnemar_exact(exact_credit > 0, contextcite_credit > 0)
                if binary
                else mean_p(differences),
                binary=binary,
                scale=100,
                digits=1,
                paper_effect=(arc_jsd - contextcite) / 100,
            )
        )
    return claims


@table(
    "paper_setting",
    run="frontier_smollm2",
    key=frontier_key, select=newest_weights,
    claims=paper_setting_claims,
    note="Per data set and method at the paper's context size: gold top-1 = a gold sentence "
    "ranked first (ties at the top broken at random, in expectation), over all examples and over "
    "those whose response is correct (contains a gold answer or alias, or token F1 ≥ 0.5; a yes/no "
    "answer: its first word); agreement: top-1 equal to exact ARC-JSD's on the examples both ran "
    "(their n); [95% bootstrap CI].",
    optional=True,
)
def paper_setting_table(records: list[dict]) -> str:
    """Gold top-1 at the paper's context size (its Table 1's protocol, another model), every
    method on the same responses, split by whether the response is correct."""
    header = [
        "data", "model", "method", "n", "gold top-1", "correct responses",
        "gold top-1 when correct", "top-1 agrees with exact (n)",
    ]  # fmt: skip
    pairs = frontier_pairs(records)
    rows = []
    at_size = [r for r in records if r["size"] in PAPER_SETTING]
    for (size, method), group in by_size_and_method(at_size).items():
        correct = [gold_credit(r) for r in group if r["correct"]]
        paired = pairs.get((size, method), [])
        agrees = [agreement_credit(r, e) for r, e in paired]
        rows.append(
            [
                PAPER_SETTING[size],
                group[0]["settings"]["model"],
                method,
                str(len(group)),
                interval([gold_credit(r) for r in group]),
                str(len(correct)),
                interval(correct) if correct else "—",
                "—"
                if method == FRONTIER_REFERENCE or not paired
                else f"{interval(agrees)} ({len(paired)})",
            ]
        )
    return markdown(header, rows)


def closest_credit(record: dict) -> float | None:
    """:func:`top1_credit` of a record's scores against the sources that share the most
    content words with its response (its ``response_overlap``); ``None`` when the response
    shares no content word with any source (it repeats no sentence)."""
    overlap = np.asarray(record["response_overlap"], float)
    if overlap.max() == 0:
        return None
    return top1_credit(record["scores"], set(np.flatnonzero(overlap == overlap.max())))


def closest_chance(record: dict) -> float:
    """A random ranking's chance of putting a closest sentence first."""
    overlap = np.asarray(record["response_overlap"], float)
    return float(np.mean(overlap == overlap.max()))


def closest_cells(credited: list[tuple[dict, float]]) -> list[str]:
    """n, the share whose top source is the closest sentence, and its chance, over records
    paired with their :func:`closest_credit`."""
    if not credited:
        return ["0", "—", "—"]
    chance = np.mean([closest_chance(record) for record, _ in credited])
    return [str(len(credited)), interval([credit for _, credit in credited]), f"{chance:.2f}"]


@table(
    "paper_setting_misses",
    run="frontier_smollm2",
    key=frontier_key, select=newest_weights,
    note="Per data set and method at the paper's context size, over the responses that share at "
    "least one content word beyond the question's with some source (their n): how often the "
    "method's top source is the response's closest sentence, the one sharing the most of those "
    "words (for a wrong response, the one it likely paraphrased; every sentence tied for the most "
    "counts; ties at the top of the ranking broken at random, in expectation), against a random "
    "ranking's chance (the closest sentences' share of the sources), and gold top-1 over the same "
    "wrong responses; split by whether the response is correct (as in the paper-setting table); "
    "[95% bootstrap CI].",
    optional=True,
)
def paper_setting_misses_table(records: list[dict]) -> str:
    """Where a method points when the response is wrong: at the sentence the response repeats,
    or at a gold one. A contributive method should point at what a wrong response used, which
    is not a gold sentence: one reading of a low gold top-1."""
    header = [
        "data", "model", "method", "wrong responses", "top-1 is the closest sentence (wrong)",
        "chance (wrong)", "gold top-1 (wrong)", "correct responses",
        "top-1 is the closest sentence (correct)", "chance (correct)",
    ]  # fmt: skip
    rows = []
    at_size = [r for r in records if r["size"] in PAPER_SETTING]
    check_frontier(at_size, fields=("scores", "response_overlap"))
    for (size, method), group in by_size_and_method(at_size).items():
        credited = [(r, credit) for r in group if (credit := closest_credit(r)) is not None]
        wrong = [(r, credit) for r, credit in credited if not r["correct"]]
        correct = [(r, credit) for r, credit in credited if r["correct"]]
        gold = interval([gold_credit(r) for r, _ in wrong]) if wrong else "—"
        rows.append(
            [
                PAPER_SETTING[size],
                group[0]["settings"]["model"],
                method,
                *closest_cells(wrong),
                gold,
                *closest_cells(correct),
            ]
        )
    return markdown(header, rows)


# Both paper-setting tables with Gemma 3 270M as the model (its own records and exact ARC-JSD).
table("paper_setting_gemma3", run="frontier_gemma3", key=frontier_key, select=newest_weights,
      note=TABLES["paper_setting"].note, optional=True,
      claims=paper_setting_claims)(paper_setting_table)  # fmt: skip
table("paper_setting_misses_gemma3", run="frontier_gemma3", key=frontier_key, select=newest_weights,
      note=TABLES["paper_setting_misses"].note,
      optional=True)(paper_setting_misses_table)  # fmt: skip


def frontier_figure(records: list[dict], path: Path) -> None:
    """Spearman with exact against the speed-up (log), one panel per context size; one colour
    per method (legend), each point labelled with its top-1 agreement and n."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pairs = frontier_pairs(records)
    model = records[0]["settings"]["model"]  # one per run folder (frontier_pairs checks)
    sizes = list(dict.fromkeys(size for size, _ in pairs))
    methods = list(dict.fromkeys(method for _, method in pairs))
    colours = dict(zip(methods, plt.get_cmap("tab10").colors))
    figure, axes = plt.subplots(1, len(sizes), figsize=(5.2 * len(sizes), 4.2), squeeze=False)
    for ax, size in zip(axes[0], sizes):
        for (at, method), found in pairs.items():
            measured = frontier_measures(found)
            if at != size or not measured["seconds"] or measured["model_free"]:
                continue  # no pair timed in one session, or no model cost: no speed-up to place
            speedup = sum(measured["exact_seconds"]) / sum(measured["seconds"])
            rho = float(np.mean(measured["rhos"])) if len(measured["rhos"]) else np.nan
            ax.scatter(speedup, rho, s=40, color=colours[method], label=method)
            label = f"{np.mean(measured['agrees']):.2f} (n={len(found)})"
            ax.annotate(label, (speedup, rho), fontsize=7, xytext=(4, -10),
                        textcoords="offset points")  # fmt: skip
        ax.set(xscale="log", xlim=(0.7, 60), ylim=(-0.2, 1.05),
               xlabel="speed-up over exact ARC-JSD (log)", ylabel="mean Spearman with exact",
               title=f"context size {size} (labels: top-1 agreement)")  # fmt: skip
        ax.grid(alpha=0.3)
    handles = {}
    for ax in axes[0]:
        handles.update(zip(*reversed(ax.get_legend_handles_labels())))
    figure.legend(handles.values(), handles.keys(), loc="center right", fontsize=8)
    figure.suptitle(f"{model}: fast attribution against exact ARC-JSD")
    figure.tight_layout(rect=(0, 0, 0.8, 1))
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=120)
    plt.close(figure)


ALPHA = 0.05
POWER = 0.8
# Fewest pairs that can reach two-sided p < ALPHA: all k discordant one way under exact McNemar,
# or all k differences of one sign under the exact sign-flip test (both p = 2 / 2**k).
FEWEST = next(k for k in range(1, 64) if 2 * 0.5**k < ALPHA)


def smallest_detectable(claim: Claim) -> float:
    """The mean paired difference that ``claim``'s n detects with :data:`POWER` at two-sided
    :data:`ALPHA`, by the paired t approximation ``(t_.975 + t_.8) sd / sqrt(n)`` (n − 1 degrees
    of freedom, the observed sd; the sign-flip test of the mean is about as powerful from n ≈ 10
    on, less below: simulated, 61% at n = 6, 79% at n = 8); for 0/1
    outcomes at least ``FEWEST / n``, the least effect an exact McNemar test can detect.
    ``inf`` when n is below :data:`FEWEST` (no exact p can reach ALPHA), ``nan`` when the
    differences do not vary (their noise is unknown)."""
    differences = claim.differences
    n = len(differences)
    if n < FEWEST:
        return float("inf")
    sd = differences.std(ddof=1)
    if sd == 0:
        return float("nan")
    quantiles = t_dist.ppf(1 - ALPHA / 2, n - 1) + t_dist.ppf(POWER, n - 1)
    detectable = quantiles * sd / np.sqrt(n)
    return max(detectable, FEWEST / n) if claim.binary else detectable


def verdict(claim: Claim) -> str:
    """``yes`` for the paper's sign at p < ALPHA, ``no: the opposite`` for the other sign at
    p < ALPHA, ``not detected`` otherwise (a p that is not a number included)."""
    if not claim.p < ALPHA:
        return "not detected"
    same = np.sign(claim.differences.mean()) == claim.expected_sign  # the tested statistic
    return "yes" if same else "no: the opposite"


def detectable_text(detectable: float, digits: int) -> str:
    """The smallest detectable effect's cell: ``—`` when undefined (nan), ``none at this n``
    when nothing is detectable (inf), else the effect."""
    if np.isnan(detectable):
        return "—"
    return "none at this n" if np.isinf(detectable) else number(detectable, digits)


def holds_paper_effect(claim: Claim) -> str:
    """Whether the 95% bootstrap interval here contains the paper's own difference: ``yes``,
    ``no: below it`` / ``no: above it``, ``—`` where the paper gives no single number."""
    if claim.paper_effect is None:
        return "—"
    found = bootstrap_ci(np.mean, claim.differences, n_resamples=RESAMPLES, seed=SEED)
    if found.high < claim.paper_effect:
        return "no: below it"
    return "no: above it" if found.low > claim.paper_effect else "yes"


def claims_table(claims: list[Claim]) -> str:
    """Each paper claim of the tables above: the effect here, its p, the smallest effect its n
    could detect, what the paper reported, and whether it reproduced."""
    header = [
        "claim", "paper reported", "n", "here: mean difference [95% CI]", "p",
        "smallest detectable (80% power)", "reproduced", "paper's effect in the CI",
    ]  # fmt: skip
    rows = []
    for claim in claims:
        detectable = smallest_detectable(claim)
        rows.append(
            [
                claim.claim,
                claim.paper,
                str(len(claim.differences)),
                interval(claim.differences, digits=claim.digits, sign=True, scale=claim.scale),
                p_text(claim.p, sampled=not claim.binary and sampled_test(len(claim.differences))),
                detectable_text(claim.scale * detectable, claim.digits),
                verdict(claim),
                holds_paper_effect(claim),
            ]
        )
    return markdown(header, rows)


CLAIMS_NOTE = (
    "Per claim of a paper: the mean per-example difference (method − control) with its 95% "
    "bootstrap CI; p: sign-flip permutation test of that mean (exact McNemar for 0/1 "
    "outcomes); smallest detectable: (t.975 + t.8)·sd/√n, the difference detected with 80% "
    f"power at two-sided α = .05 (0/1 outcomes: at least {FEWEST}/n; none below n = {FEWEST}, "
    "where no exact p reaches .05; —: the differences do not vary); ≤ 5e-5: no sampled sign "
    f"pattern (of {RESAMPLES_TEST:,}) reached the observed mean; reproduced: the paper's sign at "
    "p < .05, each claim tested on its own (no correction for the number of claims); paper's "
    "effect in the CI: whether the interval here holds the paper's own difference."
)


# Figures drawn from the same records (rewritten by ``make results``, not compared by --check).
FIGURES = {
    "frontier": (frontier_figure, EXPERIMENTS / "figures" / "frontier_smollm2.png"),
    "frontier_gemma3": (frontier_figure, EXPERIMENTS / "figures" / "frontier_gemma3.png"),
}


# ---------------------------------------------------------------- RESULTS.md


def usable_records(records: list[dict], key: Callable[[dict], object]) -> list[dict]:
    """The records a table reads: sweep failures (``status`` other than ``ok``) dropped, then
    the first record of each ``key``."""
    kept: dict[object, dict] = {}
    for record in records:
        if record.get("status", "ok") == "ok":
            kept.setdefault(key(record), record)
    return list(kept.values())


def table_records(spec: Table, runs_root: Path) -> list[dict] | None:
    """The records ``spec`` reads; ``None`` for an optional table whose run folder does not
    exist yet."""
    folder = runs_root / spec.run
    if not folder.is_dir():
        if spec.optional:
            return None
        raise InputFileError(f"table {spec.name}: run folder {folder} is missing")
    # A sweep folder's records: the newest of each example under its current config.
    swept = (folder / "config.json").is_file()
    records = usable_records(load_records(folder) if swept else run_records(folder), spec.key)
    if spec.select is not None:
        records = spec.select(records)
    if not records:
        raise InputFileError(f"table {spec.name}: no records in {folder}")
    return records


def call_builder(
    spec: Table, build: Callable[[list[dict]], object], records: list[dict], runs_root: Path
):
    """``build(records)``, a missing record field one clear error."""
    try:
        return build(records)
    except KeyError as error:
        folder = runs_root / spec.run
        raise InputFileError(f"table {spec.name}: a record in {folder} lacks {error}") from None


def gathered_claims(runs_root: Path, shown: set[str]) -> list[Claim]:
    """The claims of every table with claims whose marker is in ``shown`` and whose run folder
    exists, in table order (:func:`regenerate` has checked that their markers stand above the
    claims block)."""
    claims = []
    for spec in TABLES.values():
        if spec.claims is None or spec.name not in shown:
            continue
        if (records := table_records(spec, runs_root)) is not None:
            claims += call_builder(spec, spec.claims, records, runs_root)
    return claims


def render(spec: Table, runs_root: Path) -> str | None:
    """The marker block's content for ``spec``; ``None`` for an optional table whose run folder
    does not exist yet."""
    records = table_records(spec, runs_root)
    if records is None:
        return None
    content = call_builder(spec, spec.build, records, runs_root)
    return captioned(spec.note, f"`experiments/runs/{spec.run}`", content)


def render_claims(runs_root: Path, shown: set[str]) -> str:
    """The claims block: the claims of the tables in ``shown`` (:func:`gathered_claims`)."""
    content = claims_table(gathered_claims(runs_root, shown))
    return captioned(CLAIMS_NOTE, "the runs of the tables its claims name", content)


def captioned(note: str, source: str, content: str) -> str:
    """``content`` under its italic caption: how its cells were computed, and from what."""
    text = f"_{note} Generated by `make results` from {source}._"
    return f"{textwrap.fill(text, width=100, break_on_hyphens=False)}\n\n{content}"


def regenerate(text: str, runs_root: Path) -> str:
    """``text`` with every marker block rebuilt from its run's records, the rest unchanged."""
    blocks = list(MARKER.finditer(text))
    closed = {match["name"] for match in blocks}
    for name in OPENING.findall(text):
        if name not in closed:
            raise InputError(f"marker results:{name} has no closing <!-- /results:{name} -->")
        if name not in TABLES and name != CLAIMS:
            known = ", ".join([*TABLES, CLAIMS])
            raise InputError(f"marker results:{name}: no such table (known: {known})")
    names = [match["name"] for match in blocks]
    if CLAIMS in names:
        below = sorted(n for n in names[names.index(CLAIMS) :] if n in TABLES and TABLES[n].claims)
        if below:
            raise InputError(
                f"marker results:{CLAIMS} must come after the tables whose claims it gathers; "
                f"move it below {', '.join(below)}"
            )

    def rebuilt(match: re.Match) -> str:
        name = match["name"]
        if name == CLAIMS:
            content = render_claims(runs_root, closed)
        else:
            content = render(TABLES[name], runs_root)
        if content is None:
            return match[0]
        return f"<!-- results:{match['name']} -->\n{content}\n<!-- /results:{match['name']} -->"

    return MARKER.sub(rebuilt, text)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--check", action="store_true", help="exit 1 with a diff if RESULTS.md is stale"
    )
    return parser.parse_args(argv)


def main(
    argv: list[str] | None = None, *, results_path: Path = RESULTS, runs_root: Path = RUNS
) -> int:
    """Rewrite ``results_path`` from the records under ``runs_root`` (``--check``: compare
    only); the exit status: 0 up to date or rewritten, 1 stale under ``--check``, 2 bad input."""
    args = parse_args(argv)
    try:
        current = results_path.read_text(encoding="utf-8")
        expected = regenerate(current, Path(runs_root))
        if results_path == RESULTS and not args.check:
            draw_figures(Path(runs_root))  # before RESULTS.md is written: bad records write nothing
    except (InputError, OSError) as error:
        print(f"make_results: {error}", file=sys.stderr)
        return 2
    if args.check:
        if current == expected:
            return 0
        diff = difflib.unified_diff(
            current.splitlines(keepends=True),
            expected.splitlines(keepends=True),
            fromfile=f"{results_path} (committed)",
            tofile=f"{results_path} (from records)",
        )
        sys.stdout.writelines(diff)
        return 1
    if current != expected:
        write_text_atomic(results_path, expected)
        print(f"rewrote {results_path}")
    return 0


def draw_figures(runs_root: Path) -> None:
    """Every figure of :data:`FIGURES` whose run folder exists."""
    for name, (draw, path) in FIGURES.items():
        spec = TABLES[name]
        if (runs_root / spec.run).is_dir():
            draw(table_records(spec, runs_root), path)
            print(f"drew {path}")


if __name__ == "__main__":
    sys.exit(main())
