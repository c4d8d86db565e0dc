"""The HTML views in a real headless Chromium: each page renders with no console message, holds
its expected elements, runs no script, and leaves a screenshot in outputs/test-artifacts/.

Chromium is Debian's ``chromium`` package: found on PATH, else installed once with apt-get when
running as root (the fixture says so), else the tests skip and say why.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from helpers import (
    REPO,
    SCRIPT,
    assert_inert,
    build_explanation,
    build_results,
    elements,
    save_results,
)

ARTIFACTS = REPO / "outputs" / "test-artifacts"
INSTALL_SECONDS = 600
RENDER_SECONDS = 60


@pytest.fixture(scope="module")
def shown(tiny_llama) -> dict:
    return build_results(tiny_llama)


@pytest.fixture(scope="session")
def chromium() -> str:
    """The path of a headless-capable Chromium."""
    found = shutil.which("chromium")
    if found:
        return found
    if os.name != "posix" or os.geteuid() != 0 or not shutil.which("apt-get"):
        pytest.skip("chromium is not on PATH and cannot be installed here (needs root apt-get)")
    print("\ninstalling Debian's chromium with apt-get for the browser tests")
    try:
        for command in (["apt-get", "update"], ["apt-get", "install", "-y", "chromium"]):
            subprocess.run(command, check=True, capture_output=True, timeout=INSTALL_SECONDS)
    except (subprocess.SubprocessError, OSError) as error:
        pytest.skip(f"chromium could not be installed: {error}")
    found = shutil.which("chromium")
    if not found:
        pytest.skip("apt-get installed no chromium binary")
    return found


def render(chromium: str, page: Path, name: str) -> str:
    """The DOM Chromium builds from ``page``; saves ``name``.png and fails on any console
    message (the pages hold no script, so one means an error or a blocked load)."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    screenshot = ARTIFACTS / f"{name}.png"
    screenshot.unlink(missing_ok=True)
    done = subprocess.run(
        [
            chromium,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--enable-logging=stderr",
            "--v=1",
            f"--screenshot={screenshot}",
            "--window-size=1200,1600",
            "--dump-dom",
            page.resolve().as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=RENDER_SECONDS,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    console = [
        line for line in done.stderr.splitlines() if ":CONSOLE" in line or "Uncaught" in line
    ]
    assert not console, "\n".join(console)
    assert screenshot.is_file() and screenshot.stat().st_size > 0
    return done.stdout


def assert_rendered(dom: str, views: list[str]) -> None:
    tags = elements(dom)
    assert [attrs.get("data-view") for tag, attrs in tags if tag == "section"] == views
    charts = [tag for tag, attrs in tags if tag == "svg" or attrs.get("class") == "tokens"]
    assert charts, "no chart and no token strip"
    assert_inert(dom)


@pytest.mark.parametrize("kind", ["attribution", "components", "gating"])
def test_result_page_renders(chromium, shown, kind, tmp_path):
    page = shown[kind].save_html(tmp_path / f"{kind}.html")
    dom = render(chromium, page, f"view_{kind}")
    assert_rendered(dom, [kind])
    if kind == "attribution":
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in dom  # shown as text
        assert "&lt;img src=x onerror=alert(1)&gt;" in dom


def test_explanation_page_renders(chromium, tiny_llama, tmp_path):
    explanation = build_explanation(tiny_llama, tmp_path / "bert")
    dom = render(chromium, explanation.save_html(tmp_path / "explanation.html"), "view_explanation")
    assert_rendered(dom, ["explanation"])


def test_report_page_renders(chromium, shown, tmp_path):
    from mechrag.views import write_report

    save_results(shown, tmp_path)
    dom = render(chromium, write_report(tmp_path), "report")
    assert_rendered(dom, ["attribution", "components", "gating"])
    assert SCRIPT not in dom
