"""The fitted attention against exact ARC-JSD on cases its fit did not see: the fit's losses
(leave one case out), its training sets, and richer attention features than the shipped one."""

from __future__ import annotations

from contextlib import contextmanager
from typing import NamedTuple

import numpy as np

from .common import Table, gained_lost, interval, markdown, ratio_interval, table
from .frontier import size_and_id, within_top_credit

TABLES: dict[str, Table] = {}


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
    TABLES,
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


table(TABLES, "fit_losses_gemma3", run="fit_attention_gemma3", key=lambda record: record["key"],
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
    TABLES,
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


table(TABLES, "fit_size_gemma3", run="fit_size_gemma3", key=TABLES["fit_size"].key,
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
    TABLES,
    "attention_features",
    run="attention_features_smollm2",
    key=features_key,
    note="Per feature set of the attention fit (kinds side by side; see "
    "`experiments/attention_features.py`) and per scored set: the weights fitted (Pearson loss, "
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
        # The examples whose exact ARC-JSD the CPU timed (a GPU's seconds are not comparable)
        chosen = [r for r in passes if r["size"] == size and r["exact_seconds"] is not None]
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
