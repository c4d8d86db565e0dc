"""ARC-JSD's consensus (its Table 3): the overlaps of the layers ranked by JSD and by semantic
gain against their permutation null, and what the means hide per example."""

from __future__ import annotations

import numpy as np

from .common import RESAMPLES_TEST, Claim, Table, interval, markdown, paired_difference, table

TABLES: dict[str, Table] = {}


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
    TABLES,
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
    TABLES,
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
