"""Small helpers shared by the tests: the intervention tests (hooks and gates) and the
benchmarks' replays of a frontier run."""

from __future__ import annotations

import json
import runpy
from pathlib import Path
from types import SimpleNamespace

import torch

from mechrag.engine import Engine

SEQUENCES = [[5, 17, 42, 99, 3, 250, 7, 8], [1, 2, 3, 4, 5]]


def hook_count(model) -> int:
    """Forward hooks registered on the model's hook points right now, as torch itself counts
    them (independent of TransformerLens's handle lists; a point with several names once)."""
    points = {id(point): point for point in model.hook_points()}.values()
    return sum(len(point._forward_hooks) for point in points)


def batch_logits(model):
    """Logits of a fixed left-padded two-row batch (hooks active on the model apply)."""
    ids, attention = Engine(model).batch_inputs(SEQUENCES)
    with torch.no_grad():
        return model(ids, attention_mask=attention)


def tiny_frontier_run(tiny_llama, monkeypatch, out: Path, *, examples: int) -> list[dict]:
    """``experiments/frontier.py`` with exact ARC-JSD and uniformly weighted attention (as
    ``attention_fitted``) on a tiny model at 10 sentences; its records."""
    from mechrag.attribution.attention import AttentionAttribution

    frontier = runpy.run_path(str(Path(__file__).resolve().parents[1] / "experiments/frontier.py"))
    monkeypatch.setattr("mechrag.models.loading.load_model", lambda name: tiny_llama)
    uniform = lambda name, model_name: AttentionAttribution(weights="uniform")  # noqa: E731
    monkeypatch.setitem(frontier["run"].__globals__, "configured", uniform)
    frontier["run"](
        SimpleNamespace(
            model="smollm2-135m", sizes=["10"], methods=["exact", "attention_fitted"],
            examples=examples, max_new_tokens=3, threads=1, reuse_only=False, out=str(out),
        )  # fmt: skip
    )
    return [json.loads(line) for line in (out / "records.jsonl").open()]
