"""Every notebook in notebooks/ executes end to end in this environment's Python."""

from __future__ import annotations

import json
import sys

import pytest
from helpers import REPO

NOTEBOOKS = sorted((REPO / "notebooks").glob("*.ipynb"))


@pytest.fixture()
def kernel_name(tmp_path, monkeypatch) -> str:
    """A kernelspec that runs this interpreter (the venv's ipykernel), found first on the path."""
    name = "mechrag-test-python"
    spec = tmp_path / "kernels" / name
    spec.mkdir(parents=True)
    argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    (spec / "kernel.json").write_text(
        json.dumps({"argv": argv, "display_name": name, "language": "python"})
    )
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path))
    return name


@pytest.mark.integration
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_executes(path, kernel_name):
    import nbformat
    from nbclient import NotebookClient

    notebook = nbformat.read(path, as_version=4)
    client = NotebookClient(
        notebook,
        timeout=600,
        kernel_name=kernel_name,
        resources={"metadata": {"path": str(path.parent)}},
    )
    client.execute()
    errors = [
        o for c in notebook.cells for o in c.get("outputs", []) if o.get("output_type") == "error"
    ]
    assert not errors
