"""The house: a top level that shows the data flow, results below their views, and old import
paths that keep working (with a warning) after the 0.3 moves."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import mechrag

PACKAGE = Path(mechrag.__file__).parent
MOST_TOP_LEVEL_MODULES = 10


def test_the_top_level_has_at_most_ten_public_modules():
    modules = sorted(p.stem for p in PACKAGE.glob("*.py") if not p.stem.startswith("_"))
    assert len(modules) <= MOST_TOP_LEVEL_MODULES, modules


def module_level_imports(path: Path) -> set[str]:
    """The modules ``path`` imports at module level (not inside functions)."""
    found = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def test_results_sit_below_their_views_and_plots():
    for path in sorted((PACKAGE / "results").glob("*.py")):
        imports = module_level_imports(path)
        above = {m for m in imports if m.startswith(("mechrag.views", "mechrag.plots"))}
        assert not above, f"{path.name} imports {above} at module level"


@pytest.mark.parametrize(("old", "new"), sorted(mechrag.MOVED_MODULES.items()))
def test_a_moved_module_keeps_its_old_path_with_a_warning(old, new):
    code = (
        "import warnings, importlib\n"
        "warnings.simplefilter('error', DeprecationWarning)\n"
        f"new = importlib.import_module({new!r})\n"
        "try:\n"
        f"    importlib.import_module({old!r})\n"
        "except DeprecationWarning as warning:\n"
        "    print('WARNED', warning)\n"
        "warnings.simplefilter('ignore', DeprecationWarning)\n"
        f"print('SAME', importlib.import_module({old!r}) is new)\n"
        "print('OWN SPEC', new.__spec__.name == new.__name__)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False,
        env={"PYTHONPATH": str(PACKAGE.parent), "PATH": ""},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert f"WARNED {old} moved to {new}" in done.stdout
    assert "SAME True" in done.stdout and "OWN SPEC True" in done.stdout


def test_a_split_module_serves_each_name_from_its_new_home():
    from mechrag.results import base, files

    homes = {"mechrag.results.base": base, "mechrag.results.files": files}
    for name, home in mechrag.SPLIT_MODULES["mechrag.outputs"].items():
        with pytest.warns(DeprecationWarning, match=f"mechrag.outputs.{name} moved to {home}"):
            found = getattr(importlib.import_module("mechrag.outputs"), name)
        assert found is getattr(homes[home], name)


def test_documented_paths_work_without_a_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        from mechrag.data import RAGExample, Scenario, load_hotpotqa  # noqa: F401
        from mechrag.models import load_model  # noqa: F401
        from mechrag.results import Attribution, ComponentAttribution  # noqa: F401

        assert mechrag.load_model is load_model and mechrag.explain.__module__.endswith("rag_e")


def test_the_readme_is_short_and_results_headings_name_questions_not_dates():
    """A newcomer's first page stays a page; RESULTS.md is organised by question, not by when
    things ran (its history lives in experiments/archive/)."""
    import re

    from helpers import REPO

    assert len((REPO / "README.md").read_text().splitlines()) <= 250
    headings = [
        line for line in (REPO / "experiments" / "RESULTS.md").read_text().splitlines()
        if line.startswith("#")
    ]  # fmt: skip
    dated = [h for h in headings if re.search(r"\b20\d\d-\d\d|\bissue\b|\bsession\b", h, re.I)]
    assert headings and not dated
    assert "## Summary" in headings and headings.index("## Summary") < 3
