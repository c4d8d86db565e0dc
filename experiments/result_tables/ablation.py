"""Component ablation (ARC-JSD's Table 5): the top-k heads by component JSD masked against as
many random heads, per masking style."""

from __future__ import annotations

import numpy as np

from .common import (
    RESAMPLES_TEST,
    Claim,
    Table,
    declared_order,
    interval,
    markdown,
    paired_difference,
    table,
)

TABLES: dict[str, Table] = {}


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
    TABLES,
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
