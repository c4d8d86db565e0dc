"""Regenerate the generated tables of ``experiments/RESULTS.md`` from committed run records.

Each table is built by one function of one run folder's records (``experiments/runs/NAME``,
read with :func:`mechrag.outputs.run_records`; no model pass) and sits in RESULTS.md between
``<!-- results:TABLE -->`` and ``<!-- /results:TABLE -->``; everything outside the markers is
kept as written. Every cell gives its n (a column, or in the cell where it differs) and every
mean or proportion a seeded 95% percentile bootstrap interval (:func:`bootstrap_ci`, so the file
is byte-for-byte reproducible); paired binary comparisons give the exact McNemar p.

    python experiments/make_results.py           # rewrite RESULTS.md in place (make results)
    python experiments/make_results.py --check   # exit 1 with a diff if RESULTS.md is stale

A table is registered with :func:`table`; an ``optional`` table (one whose run may not exist
yet, such as ``frontier``) is left as it stands while its run folder is missing, any other
missing run folder is an error.
"""

from __future__ import annotations

import argparse
import difflib
import re
import sys
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.stats import wilcoxon

from mechrag.errors import InputError, InputFileError
from mechrag.metrics.agreement import spearman_test
from mechrag.metrics.detection import bootstrap_ci, mcnemar_exact
from mechrag.outputs import run_records, write_text_atomic
from mechrag.sweep import load_records

EXPERIMENTS = Path(__file__).resolve().parent
RESULTS = EXPERIMENTS / "RESULTS.md"
RUNS = EXPERIMENTS / "runs"
SEED = 0
RESAMPLES = 2000
MARKER = re.compile(r"<!-- results:(?P<name>[\w-]+) -->\n.*?<!-- /results:(?P=name) -->", re.S)
OPENING = re.compile(r"<!-- results:([\w-]+) -->")
MINUS = "\N{MINUS SIGN}"


@dataclass(frozen=True)
class Table:
    """One generated table: its builder (records -> markdown), the run folder (under the runs
    root) it reads, what identifies a record (duplicates, e.g. from overlapping shards, count
    once), the caption saying how its cells were computed, and whether it is left as it stands
    while its run folder does not exist yet."""

    name: str
    run: str
    key: Callable[[dict], object]
    build: Callable[[list[dict]], str]
    note: str
    optional: bool = False


TABLES: dict[str, Table] = {}


def table(name: str, *, run: str, key: Callable[[dict], object], note: str, optional=False):
    """Register the decorated ``records -> markdown`` function as table ``name``."""

    def register(build: Callable[[list[dict]], str]) -> Callable[[list[dict]], str]:
        TABLES[name] = Table(name, run, key, build, note, optional)
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


def p_text(p: float) -> str:
    """A p-value in two significant digits, ``.062``, ``1``, ``4e-6``."""
    if p < 0.001:
        mantissa, exponent = f"{p:.0e}".split("e")
        return f"{mantissa}e{int(exponent)}"
    return f"{p:.2g}".removeprefix("0")


def wilcoxon_p(differences) -> float:
    """Two-sided Wilcoxon signed-rank p of paired differences (1 when every one is 0)."""
    differences = np.asarray(differences, float)
    return float(wilcoxon(differences).pvalue) if differences.any() else 1.0


def paired_difference(differences, *, digits: int) -> str:
    """Mean paired difference with its interval and its Wilcoxon p, ``+0.43 [...] (p .062)``."""
    return (
        f"{interval(differences, digits=digits, sign=True)} (p {p_text(wilcoxon_p(differences))})"
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


# ---------------------------------------------------------------- tables

CONSENSUS_MODULES = {"attention": "attention", "mlp": "MLP"}
CONSENSUS_OVERLAPS = {"jsd_overlap": "J∩S", "gain_overlap": "G∩S", "jsd_gain_overlap": "J∩G"}


@table(
    "consensus",
    run="consensus_hotpotqa_d2",
    key=lambda r: r["id"],
    note="Mean [95% bootstrap CI] over examples; null: mean of each example's permutation-null "
    "mean; obs − null: per-example excess over that null, Wilcoxon signed-rank p.",
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


ABLATION_MODES = {"zero": "zero", "mean": "mean", "uniform": "uniform (paper's code)"}


def ablation_cells(
    effects: list[dict], metric: str, *, spread: bool = False, sign: bool = False
) -> list[str]:
    """Top-k, random and paired top − random cells of one metric over examples' ``effects``
    (condition name -> effect); random is each example's mean over its random sets; ``spread``
    adds the sd, ``sign`` signs a metric that is itself a change."""
    top = np.array([e["top"][metric] for e in effects], float)
    draws = [[v[metric] for name, v in e.items() if name.startswith("random")] for e in effects]
    random = np.array([np.mean(d) for d in draws], float)
    pooled = np.concatenate(draws)
    return [
        interval(top, digits=3, sign=sign, sd=top.std() if spread else None),
        interval(random, digits=3, sign=sign, sd=pooled.std() if spread else None),
        paired_difference(top - random, digits=3),
    ]


@table(
    "ablation",
    run="ablation_hotpotqa_d2",
    key=lambda r: r["id"],
    note="Mean [95% bootstrap CI over examples]; summed JSD also ± sd (top: over examples, "
    "random: over every draw); random: each example's mean over its draws; top − random: paired "
    "per example, Wilcoxon signed-rank p.",
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
    for mode in dict.fromkeys(m for r in records for m in r["result"]["effects"]):
        effects = [r["result"]["effects"][mode] for r in records if mode in r["result"]["effects"]]
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


@table(
    "gating",
    run="gating_paper/hotpotqa/paper",
    key=lambda r: r["id"],
    note="Mean [95% bootstrap CI] over test examples; McNemar: exact p of the paired "
    "hallucinated / wrong outcomes; the random control's mean over its draws is not binary, so "
    "each draw is compared on its own.",
)
def gating_table(records: list[dict]) -> str:
    """The paper's gating rule against no gating and against the random control (the same
    factors on as many random components), per draw and averaged over draws."""
    conditions = {
        gating_label(name): {
            m: np.array([float(r["conditions"][name][m]) for r in records]) for m in GATING_METRICS
        }
        for name in records[0]["conditions"]
    }
    header = [
        "condition", "n", "hallucinated %", "wrong %", "F1 %", "words",
        "McNemar p vs no gate (halluc. / wrong)", "McNemar p vs paper rule (halluc. / wrong)",
    ]  # fmt: skip
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
    draws = [outcomes for label, outcomes in conditions.items() if label.startswith("random")]
    if draws:
        pooled = {m: np.mean([d[m] for d in draws], axis=0) for m in GATING_METRICS}
        label = f"random control (mean of {len(draws)} draws)"
        rows.append(gating_row(label, pooled, ["—"] * len(GATING_REFERENCES)))
    return markdown(header, rows)


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
    "recorded twice (overlapping shards) counts once.",
)
def alignment_table(records: list[dict]) -> str:
    """RAG-E's WARG, Spearman, Wasted Retrieval@3 and Noise Distraction@3 per prompt condition."""
    alignment = [r for r in records if r["phase"] == "alignment"]
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


FRONTIER_REFERENCE = "exact"


def frontier_pairs(records: list[dict]) -> dict[tuple, list[tuple[dict, dict]]]:
    """Per (size, method): each example's record paired with exact ARC-JSD's on it."""
    exact = {(r["size"], r["id"]): r for r in records if r["method"] == FRONTIER_REFERENCE}
    if len({r["settings"]["model"] for r in records}) > 1:
        raise InputError("frontier records of several models in one run folder")
    pairs = {}
    for (size, method), group in grouped(records, lambda r: (r["size"], r["method"])).items():
        found = [(r, exact[size, r["id"]]) for r in group if (size, r["id"]) in exact]
        for record, reference in found:
            if record["source_ids"] != reference["source_ids"]:
                raise InputError(f"frontier {size}/{record['id']}: {method} scored other sources")
        if found:
            pairs[size, method] = found
    return pairs


def frontier_measures(pairs: list[tuple[dict, dict]]) -> dict:
    """Seconds of the pairs timed in one session (the speed-up's), top-1 agreement, the
    defined Spearman values, gold top-1."""
    rhos = np.array([spearman_test(r["scores"], e["scores"])[0] for r, e in pairs])
    timed = [(r, e) for r, e in pairs if r["session"] == e["session"]]
    return {
        "exact_seconds": [e["seconds"] for _, e in timed],
        "seconds": [r["seconds"] for r, _ in timed],
        "agrees": [np.argmax(r["scores"]) == np.argmax(e["scores"]) for r, e in pairs],
        "rhos": rhos[~np.isnan(rhos)],
        "gold": [r["top1_gold"] for r, _ in pairs],
    }


def speedup_cell(measured: dict, n_pairs: int) -> str:
    """The speed-up over the pairs timed in one session; their n when fewer than all."""
    n_timed = len(measured["seconds"])
    if not n_timed:
        return "— (timed apart)"
    cell = ratio_interval(measured["exact_seconds"], measured["seconds"])
    return cell if n_timed == n_pairs else f"{cell} (n = {n_timed})"


@table(
    "frontier",
    run="frontier_smollm2",
    key=lambda r: (r["size"], r["id"], r["method"]),
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


def frontier_figure(records: list[dict], path: Path) -> None:
    """Spearman with exact against the speed-up (log), one panel per context size; one colour
    per method (legend), each point labelled with its top-1 agreement and n."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pairs = frontier_pairs(records)
    sizes = list(dict.fromkeys(size for size, _ in pairs))
    methods = list(dict.fromkeys(method for _, method in pairs))
    colours = dict(zip(methods, plt.get_cmap("tab10").colors))
    figure, axes = plt.subplots(1, len(sizes), figsize=(5.2 * len(sizes), 4.2), squeeze=False)
    for ax, size in zip(axes[0], sizes):
        for (at, method), found in pairs.items():
            measured = frontier_measures(found)
            if at != size or not measured["seconds"]:
                continue  # no pair timed in one session: no speed-up to place
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
    figure.tight_layout(rect=(0, 0, 0.8, 1))
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=120)
    plt.close(figure)


# Figures drawn from the same records (rewritten by ``make results``, not compared by --check).
FIGURES = {"frontier": (frontier_figure, EXPERIMENTS / "figures" / "frontier_smollm2.png")}


# ---------------------------------------------------------------- RESULTS.md


def usable_records(records: list[dict], key: Callable[[dict], object]) -> list[dict]:
    """The records a table reads: sweep failures (``status`` other than ``ok``) dropped, then
    the first record of each ``key``."""
    kept: dict[object, dict] = {}
    for record in records:
        if record.get("status", "ok") == "ok":
            kept.setdefault(key(record), record)
    return list(kept.values())


def render(spec: Table, runs_root: Path) -> str | None:
    """The marker block's content for ``spec``; ``None`` for an optional table whose run folder
    does not exist yet."""
    folder = runs_root / spec.run
    if not folder.is_dir():
        if spec.optional:
            return None
        raise InputFileError(f"table {spec.name}: run folder {folder} is missing")
    # A sweep folder's records: the newest of each example under its current config.
    swept = (folder / "config.json").is_file()
    records = usable_records(load_records(folder) if swept else run_records(folder), spec.key)
    if not records:
        raise InputFileError(f"table {spec.name}: no records in {folder}")
    try:
        built = spec.build(records)
    except KeyError as error:
        raise InputFileError(f"table {spec.name}: a record in {folder} lacks {error}") from None
    source = f"Generated by `make results` from `experiments/runs/{spec.run}`."
    caption = textwrap.fill(f"_{spec.note} {source}_", width=100, break_on_hyphens=False)
    return f"{caption}\n\n{built}"


def regenerate(text: str, runs_root: Path) -> str:
    """``text`` with every marker block rebuilt from its run's records, the rest unchanged."""
    blocks = list(MARKER.finditer(text))
    closed = {match["name"] for match in blocks}
    for name in OPENING.findall(text):
        if name not in closed:
            raise InputError(f"marker results:{name} has no closing <!-- /results:{name} -->")
        if name not in TABLES:
            raise InputError(f"marker results:{name}: no such table (known: {', '.join(TABLES)})")

    def rebuilt(match: re.Match) -> str:
        content = render(TABLES[match["name"]], runs_root)
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
    if results_path == RESULTS:
        draw_figures(Path(runs_root))
    return 0


def draw_figures(runs_root: Path) -> None:
    """Every figure of :data:`FIGURES` whose run folder exists."""
    for name, (draw, path) in FIGURES.items():
        spec = TABLES[name]
        folder = runs_root / spec.run
        if folder.is_dir():
            draw(usable_records(run_records(folder), spec.key), path)
            print(f"drew {path}")


if __name__ == "__main__":
    sys.exit(main())
