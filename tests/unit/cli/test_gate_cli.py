"""``mechrag gate``: prints both responses, marks low-echo tokens, writes JSON and echo strips."""

from __future__ import annotations

import json

import matplotlib

from mechrag.cli import main
from mechrag.cli.gate import marked
from mechrag.mechanism.echo import Echo

matplotlib.use("Agg")

QUERY = "Where does the cat sleep?"


def _run(arguments):
    assert main(arguments) == 0


def test_gate_command(tiny_llama, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr("mechrag.models.loading.load_model", lambda name=None: tiny_llama)
    context = tmp_path / "context.txt"
    context.write_text("The cat sleeps on the mat. Dogs bark.\n\nThe mat is red.\n")
    base = ["gate", "--query", QUERY, "--context-file", str(context), "--max-new-tokens", "4"]
    # Threshold 0: the dynamic gate never fires, so both responses are the same.
    _run([*base, "--mode", "dynamic", "--threshold", "0", "--out", str(tmp_path / "never")])
    record = json.loads((tmp_path / "never" / "gate.json").read_text())
    assert record["fired_steps"] == 0
    assert record["gated_response"] == record["response"]
    assert (tmp_path / "never" / "echo_response.svg").is_file()
    out = capsys.readouterr().out
    assert "without gating" in out and "with gating (dynamic" in out
    # Static amplification by 4 of the top components changes the response.
    _run(
        [
            *base,
            "--mode",
            "static",
            "--rule",
            "amplify",
            "--factor",
            "4",
            "--top-k",
            "6",
            "--out",
            str(tmp_path / "static"),
        ]
    )
    record = json.loads((tmp_path / "static" / "gate.json").read_text())
    assert len(record["gates"]["heads"]) + len(record["gates"]["mlps"]) == 6
    assert set(record["gates"]["heads"].values()) | set(record["gates"]["mlps"].values()) == {4.0}


def test_marked_wraps_low_answer_tokens():
    import numpy as np

    result = Echo(
        ["The", " cat", ".", " sat"],
        np.array([0.5, 0.01, 0.0, 0.3]),
        np.zeros(4),
        "s0",
        np.array([True, True, False, True]),
        threshold=0.1,
    )
    assert marked(result) == "The[[ cat]]. sat"


def test_gate_defaults_to_the_papers_rule_statically(tiny_llama, tmp_path, monkeypatch):
    """No --rule: the arc-jsd protocol's Table 4 rule, applied at every step (static), on at most
    5 heads and 5 MLPs with factors in [0.7, 0.85) (G < 0); --protocol mechrag gives damp."""
    monkeypatch.setattr("mechrag.models.loading.load_model", lambda name=None: tiny_llama)
    context = tmp_path / "context.txt"
    context.write_text("The cat sleeps on the mat. Dogs bark.\n\nThe mat is red.\n")
    base = ["gate", "--query", QUERY, "--context-file", str(context), "--max-new-tokens", "4"]
    _run([*base, "--out", str(tmp_path / "paper")])
    record = json.loads((tmp_path / "paper" / "gate.json").read_text())
    assert record["rule"]["name"] == "paper" and record["mode"] == "static"
    assert record["fired_steps"] is None
    heads, mlps = record["gates"]["heads"], record["gates"]["mlps"]
    assert len(heads) <= 5 and len(mlps) <= 5
    assert all(0.7 <= f < 0.85 for f in [*heads.values(), *mlps.values()])
    _run([*base, "--protocol", "mechrag", "--out", str(tmp_path / "own")])
    own = json.loads((tmp_path / "own" / "gate.json").read_text())
    assert own["rule"]["name"] == "damp" and own["mode"] == "dynamic"
