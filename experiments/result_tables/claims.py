"""The claims table: each paper claim the other tables test, its effect and p here, the
smallest effect its n could detect, and whether it reproduced."""

from __future__ import annotations

import numpy as np
from scipy.stats import t as t_dist

from mechrag.metrics.detection import bootstrap_ci

from .common import (
    RESAMPLES,
    RESAMPLES_TEST,
    SEED,
    Claim,
    interval,
    markdown,
    number,
    p_text,
    sampled_test,
)

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
