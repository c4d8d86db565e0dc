"""What every family of tables shares: the :class:`Table` and :class:`Claim` types, their
registration (:func:`table`), and the cells: numbers, seeded bootstrap intervals, p-values,
pipe tables."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mechrag.metrics.detection import SIGN_FLIP_EXACT, bootstrap_ci, mcnemar_exact, sign_flip_p

SEED = 0
RESAMPLES = 2000
RESAMPLES_TEST = 20000  # sign-flip draws beyond the exact enumeration
SAMPLED_FLOOR = 1 / (1 + RESAMPLES_TEST)  # a sampled sign-flip p where no draw reached the mean
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


def table(
    tables: dict[str, Table],
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
    ``claims``, its records' claims for the claims table) in ``tables``, its family module's
    ``TABLES``."""

    def register(build: Callable[[list[dict]], str]) -> Callable[[list[dict]], str]:
        tables[name] = Table(name, run, key, build, note, optional, claims, select)
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
    p at its floor :data:`SAMPLED_FLOOR` (no draw reached the observed mean) as an upper bound,
    ``≤ 5e-5``."""
    if sampled and p <= SAMPLED_FLOOR:
        return f"≤ {p_text(SAMPLED_FLOOR)}"
    if p < 0.001:
        mantissa, exponent = f"{p:.0e}".split("e")
        return f"{mantissa}e{int(exponent)}"
    return f"{p:.2g}".removeprefix("0")


def sampled_test(n: int) -> bool:
    """Whether :func:`mean_p` samples signs at n differences (rather than enumerating them)."""
    return n > SIGN_FLIP_EXACT


def at_sampled_floor(p: float, n: int) -> bool:
    """Whether :func:`mean_p` of ``n`` differences gave a sampled p at its floor (an upper
    bound: no draw reached the observed mean)."""
    return sampled_test(n) and p <= SAMPLED_FLOOR


def mean_p(differences) -> float:
    """Two-sided p of the paired sign-flip permutation test of the mean difference (seeded:
    exact up to 16 differences, :data:`RESAMPLES_TEST` draws beyond), the test of the statistic
    every interval here is around."""
    return sign_flip_p(np.asarray(differences, float), n_resamples=RESAMPLES_TEST, seed=SEED)


def paired_difference(differences, *, digits: int) -> str:
    """Mean paired difference with its interval and its sign-flip p, ``+0.43 [...] (p .062)``."""
    p = p_text(mean_p(differences), sampled=sampled_test(len(differences)))
    return f"{interval(differences, digits=digits, sign=True)} (p {p})"


def gained_lost(agrees, baseline) -> str:
    """Pairs where only the first outcome holds (e.g. a case agrees under one fit and not under
    its baseline), the reverse, and their exact McNemar p (a sign test): ``2 / 1 (p 1)``. An
    outcome holds where it equals 1 (True, or full credit: a tie's fractional credit does not)."""
    now, before = np.asarray(agrees) == 1, np.asarray(baseline) == 1
    return (
        f"{int((now & ~before).sum())} / {int((~now & before).sum())} "
        f"(p {p_text(mcnemar_exact(now, before))})"
    )


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


def save_with_legend(figure, axes, title: str, path: Path, right: float) -> None:
    """One legend for the methods of every panel in ``axes`` (the figure's right, beyond
    ``right``, a fraction of its width), ``title`` above, written to ``path``."""
    import matplotlib.pyplot as plt

    handles = {}
    for ax in axes:
        handles.update(zip(*reversed(ax.get_legend_handles_labels())))
    figure.legend(handles.values(), handles.keys(), loc="center right", fontsize=8)
    figure.suptitle(title)
    figure.tight_layout(rect=(0, 0, right, 1))
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=120)
    plt.close(figure)
