"""Faithfulness at the paper's setting (``experiments/faithfulness.py``): each method's linear
datamodeling score and top-k changes against its cost, correct and wrong responses apart, and
the plot of LDS against cost."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import NamedTuple

import numpy as np

from mechrag.metrics.detection import holm_adjusted, mcnemar_exact
from mechrag.metrics.faithfulness import HELD_OUT_STREAM

from .common import (
    Table,
    at_sampled_floor,
    gained_lost,
    grouped,
    interval,
    markdown,
    mean_p,
    number,
    p_text,
    paired_difference,
    save_with_legend,
    table,
)
from .frontier import (
    OLD_TARGET_NOTE,
    frontier_weights,
    newest_weights,
    old_targets_apart,
    point_styles,
)

TABLES: dict[str, Table] = {}
REFERENCE = "exact"  # the paired column compares every method with exact ARC-JSD
TOP_KS = ("1", "3", "5")
PAIRED_K = "5"  # the top-k removal paired with exact ARC-JSD's
SIZES = {"hotpotqa_dev": "HotpotQA dev", "musique_dev": "MuSiQue dev"}


def faithfulness_key(record: dict) -> tuple:
    """A question and method, and the attention weights a weighted method's record read (a
    refit's records do not replace the old ones: :func:`faithfulness_selection` picks)."""
    return record["size"], record["id"], record["method"], frontier_weights(record)


def cost(found: list[dict]) -> float:
    """A method's median forward passes per question (its own, not the evaluation's)."""
    return float(np.median([r["forward_passes"] for r in found]))


def by_size_and_method(records: list[dict]) -> dict[tuple[str, str], list[dict]]:
    """Records per (size, method): sizes in :data:`SIZES` order, methods by cost, then name."""
    groups = grouped(records, lambda r: (r["size"], r["method"]))
    order = list(SIZES)
    return dict(
        sorted(
            groups.items(),
            key=lambda item: (
                order.index(item[0][0]) if item[0][0] in order else len(order),
                cost(item[1]),
                item[0][1],
            ),
        )
    )


def split_lds(found: list[dict], correct: bool) -> str:
    values = [r["lds"] for r in found if r["correct"] == correct]
    return f"{number(np.mean(values), 2)} ({len(values)})" if values else "–"


def changes(found: list[dict], field: str, statistic=np.mean) -> str:
    """The mean (or ``statistic``) change in ``log p`` at k = 1 / 3 / 5 (questions with at least
    k sources)."""
    values = [[r[field][k] for r in found if k in r[field]] for k in TOP_KS]
    return " / ".join(number(statistic(v), 1) if v else "–" for v in values)


def reference_pairs(found: list[dict], reference: dict[tuple, dict], value) -> list[tuple]:
    """(the method's, exact ARC-JSD's) ``value`` of a record on the questions both have, where
    both have one (``value`` gives None where a record lacks it)."""
    pairs = []
    for record in found:
        twin = reference.get((record["size"], record["id"]))
        if twin is not None and value(record) is not None and value(twin) is not None:
            pairs.append((value(record), value(twin)))
    return pairs


class PairedTest(NamedTuple):
    """A paired test's p, and whether that p is an upper bound (a sampled one at its floor)."""

    p: float
    at_floor: bool


@dataclass(frozen=True)
class Paired:
    """One method's records paired with exact ARC-JSD's on the questions both have (empty for
    exact ARC-JSD itself): its LDS minus exact's, and per question with a top
    :data:`PAIRED_K` removal on both sides whether the method's lowers ``log p`` further
    (``deeper``) or less far (``shallower``) than exact's (ties: the same sentences, or the
    same change, neither)."""

    lds_differences: np.ndarray
    deeper: np.ndarray
    shallower: np.ndarray

    @classmethod
    def of(cls, found: list[dict], reference: dict[tuple, dict]) -> Paired:
        if found[0]["method"] == REFERENCE:
            return cls(np.empty(0), np.empty(0, bool), np.empty(0, bool))
        lds = reference_pairs(found, reference, lambda r: r["lds"])
        removal = reference_pairs(found, reference, lambda r: r["topk_removal"].get(PAIRED_K))
        method, exact = np.transpose(removal) if removal else (np.empty(0), np.empty(0))
        differences = np.subtract(*np.transpose(lds)) if lds else np.empty(0)
        return cls(differences, method < exact, exact < method)

    def tests(self) -> tuple[PairedTest | None, PairedTest | None]:
        """The LDS's paired test (sign-flip test of the mean difference) and the top-k
        removal's (sign test), None without pairs."""
        lds = None
        if n := len(self.lds_differences):
            p = mean_p(self.lds_differences)
            lds = PairedTest(p, at_sampled_floor(p, n))
        removal = None
        if len(self.deeper):
            removal = PairedTest(mcnemar_exact(self.deeper, self.shallower), False)
        return lds, removal


def against_reference(paired: Paired) -> str:
    """The paired difference of LDS from exact ARC-JSD's on the questions both have."""
    differences = paired.lds_differences
    if not len(differences):
        return "–"
    return f"{paired_difference(differences, digits=2)}, n = {len(differences)}"


def removal_against_reference(paired: Paired) -> str:
    """On the questions both have: how often removing the method's top :data:`PAIRED_K` lowers
    ``log p`` further than removing exact ARC-JSD's, the reverse, and their sign test; robust
    to the few questions that carry the mean."""
    if not len(paired.deeper):
        return "–"
    return f"{gained_lost(paired.deeper, paired.shallower)}, n = {len(paired.deeper)}"


def holm_cells(pairings: dict[tuple[str, str], Paired]) -> dict[tuple[str, str], str]:
    """Per (size, method): its paired tests' p adjusted by Holm's step-down over the family of
    every paired test against exact ARC-JSD on that data set, ``LDS / top-k`` (– for a test
    without pairs; ``≤`` where the adjusted value rests on a sampled p at its floor)."""
    cells = {}
    for size in dict.fromkeys(size for size, _ in pairings):
        family = {key: paired.tests() for key, paired in pairings.items() if key[0] == size}
        present = [test for tests in family.values() for test in tests if test is not None]
        adjusted = holm_adjusted([test.p for test in present])
        # An adjusted p never falls as an input p rises, so with the floored p at 0 each is at
        # its least: where that is lower, the value shown is an upper bound.
        least = holm_adjusted([0.0 if test.at_floor else test.p for test in present])
        texts = iter(
            ("≤ " if low < high else "") + p_text(high) for low, high in zip(least, adjusted)
        )
        for key, tests in family.items():
            cells[key] = (
                "–" if tests == (None, None)
                else " / ".join("–" if test is None else next(texts) for test in tests)
            )  # fmt: skip
    return cells


def held_out(records: list[dict]) -> list[dict]:
    """The records scored on masks held out from every method's own (their stream named in the
    settings; records made before it scored ContextCite on its training masks)."""
    return [r for r in records if r["settings"].get("held_out_stream") == HELD_OUT_STREAM]


def faithfulness_selection(records: list[dict]) -> list[dict]:
    """What the faithfulness tables read: :func:`held_out`, the newest attention weights only
    and old ContextCite targets apart (as the frontier's tables:
    :func:`result_tables.frontier.frontier_selection`)."""
    return old_targets_apart(newest_weights(held_out(records)))


@table(
    TABLES,
    "faithfulness_smollm2",
    run="faithfulness_smollm2",
    key=faithfulness_key,
    select=faithfulness_selection,
    optional=True,
    note="Per data set (dev split, every paragraph) and method, by cost: passes = the method's "
    "median forward passes per question (the frontier's records); LDS = Spearman ρ between the "
    "attribution's linear prediction and the response's logit-probability over 32 held-out "
    "masks keeping each sentence with probability ½ (the same masks for every method on a "
    "question), mean with its 95% bootstrap interval, then for correct and wrong responses "
    "apart (n); the paired difference from exact ARC-JSD's LDS on the same questions (sign-flip "
    "p); top-k removal / keep = mean change of the response's log-probability (nats) when the "
    "method's top 1 / 3 / 5 sentences are removed / kept alone (more negative removal and less "
    "negative keep = more faithful); removal median = the median of the same changes (the mean "
    "can rest on a few questions whose response rests on one sentence, tens of nats each); "
    "top-5 deeper / shallower = the number of questions where removing the method's top 5 "
    "lowers the log-probability more / less than removing exact ARC-JSD's (a tie, the same "
    "change, counts for neither; n = questions paired, ties included; – where exact ARC-JSD has "
    "no record), with their exact sign-test p; Holm p = the p of those two paired tests (LDS, "
    "top-5) adjusted by Holm's step-down over every paired test against exact ARC-JSD on that "
    "data set in this table, two per method (– without pairs; ≤ where the adjusted value rests "
    "on a sampled p at its floor): below .05, the difference stands after correcting for every "
    "paired test on that data set (family-wise error at most .05); `random` = seeded "
    "random scores in [0, 1), the floor (positive weights partly track how many sentences a "
    "mask keeps, which alone predicts some of the output); gold top-1 = the share of questions "
    "whose top sentence is a gold one." + OLD_TARGET_NOTE,
)
def faithfulness_table(records: list[dict]) -> str:
    header = ["data", "method", "n", "passes", "LDS", "LDS correct (n)", "LDS wrong (n)",
              "LDS − exact's", "top-k removal", "removal median", "top-5 deeper / shallower",
              "Holm p: LDS / top-5", "top-k keep", "gold top-1"]  # fmt: skip
    rows = []
    reference = {(r["size"], r["id"]): r for r in records if r["method"] == REFERENCE}
    groups = by_size_and_method(records)
    pairings = {key: Paired.of(found, reference) for key, found in groups.items()}
    holm = holm_cells(pairings)
    for (size, method), found in groups.items():
        paired = pairings[size, method]
        rows.append([
            SIZES.get(size, size), method, str(len(found)), f"{cost(found):g}",
            interval([r["lds"] for r in found]), split_lds(found, True), split_lds(found, False),
            against_reference(paired), changes(found, "topk_removal"),
            changes(found, "topk_removal", np.median), removal_against_reference(paired),
            holm[size, method], changes(found, "topk_keep"),
            f"{np.mean([r['top1_gold'] for r in found]):.2f}",
        ])  # fmt: skip
    return markdown(header, rows)


TABLES["faithfulness_gemma3"] = replace(
    TABLES["faithfulness_smollm2"], name="faithfulness_gemma3", run="faithfulness_gemma3"
)


def faithfulness_figure(records: list[dict], path: Path) -> None:
    """Mean LDS against a method's median passes (log; no-pass methods at ½), one panel per
    data set, each point labelled with its n (:func:`result_tables.frontier.point_styles`)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = by_size_and_method(records)
    sizes = list(dict.fromkeys(size for size, _ in groups))
    methods = sorted({method for _, method in groups})
    styles = point_styles(methods)
    legend_width = 2.4  # inches to the right of the panels
    width = 5.2 * len(sizes) + legend_width
    figure, axes = plt.subplots(1, len(sizes), figsize=(width, 4.2), squeeze=False)
    for ax, size in zip(axes[0], sizes):
        for (at, method), found in groups.items():
            if at != size:
                continue
            passes, value = max(cost(found), 0.5), float(np.mean([r["lds"] for r in found]))
            ax.scatter(passes, value, s=40, label=method, **styles[method])
            ax.annotate(f"n={len(found)}", (passes, value), fontsize=7, xytext=(4, -10),
                        textcoords="offset points")  # fmt: skip
        ax.set(xscale="log", ylim=(-0.2, 1.0), title=SIZES.get(size, size),
               xlabel="forward passes per question (log; ½: none)",
               ylabel="mean LDS (32 held-out masks)")  # fmt: skip
        ax.grid(alpha=0.3)
    title = f"{records[0]['settings']['model']}: faithfulness (LDS) against cost"
    save_with_legend(figure, axes[0], title, path, right=1 - legend_width / width)
