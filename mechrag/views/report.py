"""One self-contained HTML page of every result a command wrote to a folder (``mechrag report``).

The page is ``DIR/report.html``: the JSON results named in :data:`RESULT_FILES` read back with
their classes' ``from_dict`` and drawn by their views, inline CSS and SVG, nothing loaded.
Each result class is imported only when a file of it is present (``explain`` results need the
retrieval extra).
"""

from __future__ import annotations

import json
from fnmatch import fnmatch
from html import escape
from pathlib import Path

from mechrag.errors import InputError
from mechrag.results.files import write_text_atomic
from mechrag.views.render import to_html_page

REPORT_NAME = "report.html"


def _attribution(data: dict):
    from mechrag.results.attribution import Attribution

    return Attribution.from_dict(data)


def _components(data: dict):
    from mechrag.results.components import ComponentAttribution

    return ComponentAttribution.from_dict(data)


def _explanation(data: dict):
    from mechrag.retrieval.rag_e import PipelineExplanation

    return PipelineExplanation.from_dict(data)


def _gating(data: dict):
    from mechrag.mechanism.gating.comparison import GatingComparison

    return GatingComparison.from_dict(data)


# file name pattern -> reader, as ``attribute``, ``demo``, ``localize``, ``explain`` and ``gate``
# name their JSON
RESULT_FILES = {
    "attribution_*.json": _attribution,
    "demo_arc_jsd.json": _attribution,
    "components.json": _components,
    "explanation.json": _explanation,
    "gate.json": _gating,
}


def read_results(directory: str | Path) -> list[tuple[Path, object]]:
    """``(path, result)`` for each result JSON in ``directory``, by file name."""
    directory = Path(directory)
    if not directory.is_dir():
        raise InputError(f"{directory} is not a folder")
    found = []
    for path in sorted(directory.glob("*.json")):
        reader = next(
            (r for pattern, r in RESULT_FILES.items() if fnmatch(path.name, pattern)), None
        )
        if reader is None:
            continue
        try:
            found.append((path, reader(json.loads(path.read_text(encoding="utf-8")))))
        except (OSError, ValueError, KeyError, TypeError) as error:
            raise InputError(f"cannot read {path} as a result: {error}") from None
    if not found:
        raise InputError(f"{directory} holds no result JSON ({', '.join(RESULT_FILES)})")
    return found


def report_page(directory: str | Path) -> str:
    """The page of every result in ``directory``."""
    found = read_results(directory)
    files = ", ".join(escape(path.name) for path, _ in found)
    intro = f'<p class="muted">mechrag report of {escape(str(directory))}: {files}</p>'
    return to_html_page([result for _, result in found], f"mechrag report: {directory}", intro)


def write_report(directory: str | Path) -> Path:
    """Write ``directory``/report.html (see :func:`report_page`); returns its path."""
    return write_text_atomic(Path(directory) / REPORT_NAME, report_page(directory))
