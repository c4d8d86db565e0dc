"""The fast attribution methods against exact ARC-JSD per context size (the frontier): speed-up,
agreement and gold top-1, how deep exact's top source lies in each ranking, whether the
misses are near ties, and its figure; with the pairing of the frontier's records and the
top-1 credits that the later families read too."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
from frontier_cases import on_contextcite_target, timed_on_cpu

from mechrag.errors import InputError
from mechrag.metrics.agreement import spearman_test

from .common import (
    Table,
    declared_order,
    grouped,
    interval,
    markdown,
    ratio_interval,
    save_with_legend,
    table,
)

TABLES: dict[str, Table] = {}


FRONTIER_REFERENCE = "exact"


# The frontier's methods that read the shipped attention weights (experiments/frontier.py's
# WEIGHTED; a test ties the two).
FRONTIER_WEIGHTED = ("attention_localized", "attention_fitted", "attention_rescored5",
                     "attention_after_generation")  # fmt: skip


def frontier_weights(record: dict) -> str | None:
    """The hash of the attention weights a frontier record depends on (its settings'), or a
    faithfulness record replaying it (its ``weights``): ``None`` for a method that does not read
    them."""
    if record["method"] not in FRONTIER_WEIGHTED:
        return None
    return record.get("weights", record.get("settings", {}).get("weights"))


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


OLD_TARGET = " (old target)"  # how a ContextCite record of another game than its own is shown
OLD_TARGET_NOTE = (
    " `contextcite32 (old target)` (any budget): ContextCite fitted on the summed per-token "
    "log-odds (the records made before it fitted context-cite's target, the response's "
    "log-odds), apart."
)


def old_targets_apart(records: list[dict]) -> list[dict]:
    """``records`` with each ContextCite record fitted on another game than ContextCite's own
    (:func:`frontier_cases.on_contextcite_target`: the summed per-token log-odds, made before it
    fitted context-cite's) renamed ``METHOD (old target)``: a table never mixes the two, and no
    paper claim reads the old one (frontier and faithfulness records alike)."""
    return [r if on_contextcite_target(r) else {**r, "method": r["method"] + OLD_TARGET}
            for r in records]  # fmt: skip


def point_styles(methods: list[str]) -> dict[str, dict]:
    """The figures' ``scatter`` keywords per method: one colour per method (``tab20``, cycled),
    its old ContextCite target hollow in the same colour."""
    import matplotlib.pyplot as plt

    bases = sorted({method.removesuffix(OLD_TARGET) for method in methods})
    colours = dict(zip(bases, itertools.cycle(plt.get_cmap("tab20").colors)))
    styles = {}
    for method in methods:
        colour = colours[method.removesuffix(OLD_TARGET)]
        hollow = {"facecolors": "none", "edgecolors": [colour]}
        styles[method] = hollow if method.endswith(OLD_TARGET) else {"color": colour}
    return styles


def frontier_selection(records: list[dict]) -> list[dict]:
    """What every frontier table reads: :func:`newest_weights`, old ContextCite targets apart."""
    return old_targets_apart(newest_weights(records))


# The frontier's sizes that are the paper's own setting (and SQuAD's long-context setting, which
# the paper does not run), and their data in words (with the split).
PAPER_SETTING = {
    "hotpotqa": "HotpotQA, all 10 paragraphs (training split)",
    "hotpotqa_dev": "HotpotQA, all 10 paragraphs (dev split)",
    "musique": "MuSiQue, all 20 paragraphs (training split)",
    "musique_dev": "MuSiQue, all 20 paragraphs (dev split)",
    "squad": "SQuAD 2.0, whole articles, answerable questions (dev split; not in the paper)",
}


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
    """Seconds of the pairs timed in one session on the CPU (the speed-up's: a GPU's ratios
    differ), top-1 agreement, the defined Spearman values, gold top-1."""
    rhos = np.array([spearman_test(r["scores"], e["scores"])[0] for r, e in pairs])
    timed = [(r, e) for r, e in pairs if r["session"] == e["session"] and timed_on_cpu(r)]
    return {
        "gpu_timed": bool(pairs) and not any(timed_on_cpu(r) for r, _ in pairs),
        "exact_seconds": [e["seconds"] for _, e in timed],
        "seconds": [r["seconds"] for r, _ in timed],
        "agrees": [agreement_credit(r, e) for r, e in pairs],
        "rhos": rhos[~np.isnan(rhos)],
        "gold": [gold_credit(r) for r, _ in pairs],
        "model_free": all(r["forward_passes"] == 0 for r, _ in pairs),
    }


def speedup_cell(measured: dict, n_pairs: int) -> str:
    """The speed-up over the pairs timed in one session on the CPU; their n when fewer than
    all."""
    n_timed = len(measured["seconds"])
    if measured["model_free"]:
        return "— (no model pass)"
    if not n_timed:
        return "— (timed on a GPU)" if measured["gpu_timed"] else "— (timed apart)"
    cell = ratio_interval(measured["exact_seconds"], measured["seconds"])
    return cell if n_timed == n_pairs else f"{cell} (n = {n_timed})"


@table(
    TABLES,
    "frontier",
    run="frontier_smollm2",
    key=frontier_key, select=frontier_selection,
    note="Per size and method over the examples exact ARC-JSD also ran: speed-up = summed exact "
    "seconds / summed method seconds over the examples both were timed on in one session on the "
    "CPU (n given when fewer); agreement and Spearman against exact; [95% bootstrap CI]; "
    "Spearman over examples where it is defined (n given when fewer)." + OLD_TARGET_NOTE,
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
    TABLES,
    "frontier_depth",
    run="frontier_smollm2",
    key=frontier_key, select=frontier_selection,
    note="Per size and method over the examples exact ARC-JSD also ran: the share whose exact "
    "top source is among the method's top k (ties broken at random, in expectation) [95% "
    "bootstrap CI]. For fitted attention this is how often attention then exact ARC-JSD on its "
    "top k (`AttentionAttribution(rescore=k)`) finds exact's top source." + OLD_TARGET_NOTE,
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
    TABLES,
    "frontier_misses",
    run="frontier_smollm2",
    key=frontier_key,
    select=frontier_selection,
    note="Per size and method over the examples exact ARC-JSD also ran: misses = examples whose "
    "top source (the first of the method's highest scores) is not exact's (a pick tied with "
    "exact's top is not a miss); for those, how many "
    f"tops exact scores at least {NEAR_TIE} of its own top's score (near ties of the reference) "
    f"and how many below {FAR_MISS}, and the median of that share." + OLD_TARGET_NOTE,
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
        if method.removesuffix(OLD_TARGET) not in FRONTIER_MISS_METHODS:
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
table(TABLES, "frontier_gemma3", run="frontier_gemma3", key=frontier_key,
      select=frontier_selection, note=TABLES["frontier"].note,
      optional=True)(frontier_table)  # fmt: skip
table(TABLES, "frontier_depth_gemma3", run="frontier_gemma3", key=frontier_key,
      select=frontier_selection, note=TABLES["frontier_depth"].note,
      optional=True)(frontier_depth_table)  # fmt: skip


def frontier_figure(records: list[dict], path: Path) -> None:
    """Spearman with exact against the speed-up (log), one panel per context size; one colour
    per method (legend; :func:`point_styles`), each point labelled with its top-1 agreement and
    n."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pairs = frontier_pairs(records)
    model = records[0]["settings"]["model"]  # one per run folder (frontier_pairs checks)
    sizes = list(dict.fromkeys(size for size, _ in pairs))
    methods = list(dict.fromkeys(method for _, method in pairs))
    styles = point_styles(methods)
    figure, axes = plt.subplots(1, len(sizes), figsize=(5.2 * len(sizes), 4.2), squeeze=False)
    for ax, size in zip(axes[0], sizes):
        for (at, method), found in pairs.items():
            measured = frontier_measures(found)
            if at != size or not measured["seconds"] or measured["model_free"]:
                continue  # no pair timed in one CPU session, or no model cost: nothing to place
            speedup = sum(measured["exact_seconds"]) / sum(measured["seconds"])
            rho = float(np.mean(measured["rhos"])) if len(measured["rhos"]) else np.nan
            ax.scatter(speedup, rho, s=40, label=method, **styles[method])
            label = f"{np.mean(measured['agrees']):.2f} (n={len(found)})"
            ax.annotate(label, (speedup, rho), fontsize=7, xytext=(4, -10),
                        textcoords="offset points")  # fmt: skip
        ax.set(xscale="log", xlim=(0.7, 60), ylim=(-0.2, 1.05),
               xlabel="speed-up over exact ARC-JSD (log)", ylabel="mean Spearman with exact",
               title=f"context size {size} (labels: top-1 agreement)")  # fmt: skip
        ax.grid(alpha=0.3)
    title = f"{model}: fast attribution against exact ARC-JSD"
    save_with_legend(figure, axes[0], title, path, right=0.8)
