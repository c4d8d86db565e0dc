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

Each family of tables has its module in ``result_tables/``, which registers its tables with
:func:`result_tables.common.table`; an ``optional`` table (one whose run may not exist yet, such
as ``frontier``) is left as it stands while its run folder is missing, any other missing run
folder is an error.
"""

from __future__ import annotations

import argparse
import difflib
import re
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

from result_tables import (
    ablation,
    alignment,
    attention_fit,
    consensus,
    faithfulness,
    frontier,
    gating,
    gpu,
    hierarchical,
    paper_setting,
)
from result_tables.claims import CLAIMS_NOTE, claims_table
from result_tables.common import Claim, Table

from mechrag.errors import InputError, InputFileError
from mechrag.results.files import run_records, write_text_atomic
from mechrag.sweep import load_records

EXPERIMENTS = Path(__file__).resolve().parent
RESULTS = EXPERIMENTS / "RESULTS.md"
RUNS = EXPERIMENTS / "runs"
MARKER = re.compile(r"<!-- results:(?P<name>[\w-]+) -->\n.*?<!-- /results:(?P=name) -->", re.S)
OPENING = re.compile(r"<!-- results:([\w-]+) -->")

# Every family's tables, in the order their claims are gathered.
TABLES: dict[str, Table] = {
    **consensus.TABLES,
    **ablation.TABLES,
    **gating.TABLES,
    **alignment.TABLES,
    **frontier.TABLES,
    **hierarchical.TABLES,
    **attention_fit.TABLES,
    **paper_setting.TABLES,
    **faithfulness.TABLES,
    **gpu.TABLES,
}
CLAIMS = "claims"  # the marker of the table that gathers every table's claims


# Figures drawn from the same records (rewritten by ``make results``, not compared by --check).
FIGURES = {
    "frontier": (frontier.frontier_figure, EXPERIMENTS / "figures" / "frontier_smollm2.png"),
    "frontier_gemma3": (frontier.frontier_figure, EXPERIMENTS / "figures" / "frontier_gemma3.png"),
    "faithfulness_smollm2": (
        faithfulness.faithfulness_figure,
        EXPERIMENTS / "figures" / "faithfulness_smollm2.png",
    ),
    "faithfulness_gemma3": (
        faithfulness.faithfulness_figure,
        EXPERIMENTS / "figures" / "faithfulness_gemma3.png",
    ),
}


# ---------------------------------------------------------------- RESULTS.md


def usable_records(spec: Table, records: list[dict]) -> list[dict]:
    """The records ``spec`` reads: sweep failures (``status`` other than ``ok``) dropped, then
    those ``spec.select`` keeps, then the first of each ``spec.key`` (selecting first, so a
    record the selection drops cannot hide a later one of the same key that it keeps)."""
    records = [record for record in records if record.get("status", "ok") == "ok"]
    if spec.select is not None:
        records = spec.select(records)
    kept: dict[object, dict] = {}
    for record in records:
        kept.setdefault(spec.key(record), record)
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
    records = usable_records(spec, load_records(folder) if swept else run_records(folder))
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
    """The claims of every table with claims whose marker is in ``shown`` (anywhere in the
    file: the claims block may lead it) and whose run folder exists, in table order."""
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
