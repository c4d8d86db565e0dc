"""Hierarchical ARC-JSD's expansion rules replayed on recorded level-one document scores: top-1
agreement with exact ARC-JSD against model calls, and the rule chosen on the training split."""

from __future__ import annotations

import numpy as np

from mechrag.errors import InputError

from .common import Table, grouped, interval, markdown, ratio_interval, table
from .frontier import PAPER_SETTING, size_and_id, size_order, within_top_credit

TABLES: dict[str, Table] = {}


# Hierarchical ARC-JSD's expansion rules, (documents, within), replayed on recorded level-one
# document scores (experiments/hierarchical_rules.py); the frontier runs (2, None).
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
    TABLES,
    "hierarchical_rules",
    run="hierarchical_smollm2",
    key=size_and_id,
    note="Per size and expansion rule of hierarchical ARC-JSD, replayed on each example's "
    "recorded document scores and exact ARC-JSD's sentence scores (no model pass): top-1 agrees "
    "with exact = exact's top sentence lies in an expanded document (ties at the top shared); "
    "fewer calls = summed exact model calls / summed calls of the rule (model calls, not "
    "seconds); [95% bootstrap CI]. "
    "Chosen: the rule with the fewest calls over the training-split examples whose top-1 "
    "agreement reaches 0.95 (the goal set for it) at every training size; the dev rows report it.",
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
