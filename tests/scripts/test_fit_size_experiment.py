"""``experiments/fit_size.py``: design matrices for the frontier's exact ARC-JSD records."""

from __future__ import annotations

import json
import runpy
from types import SimpleNamespace

import numpy as np
from helpers import REPO, tiny_frontier_run

EXPERIMENTS = REPO / "experiments"


def test_designs_give_back_the_frontiers_attention_scores(tiny_llama, monkeypatch, tmp_path):
    """A frontier run of exact ARC-JSD and (uniformly weighted) attention on a tiny model, then
    the fit-size run on its records: one record per exact record, with exact's scores, and a
    design whose uniform mean over heads is the attention method's scores; the shipped fit's
    records of this model are copied in once, another model's not at all."""
    frontier_out = tmp_path / "frontier"
    ran = tiny_frontier_run(tiny_llama, monkeypatch, frontier_out, examples=2)
    fit_folder = tmp_path / "fit"
    fit_folder.mkdir()
    fit_records = [
        {"key": f"hotpotqa:f{i}", "settings": {"model": model, "sentences": 20},
         "design": [[float(i)]], "scores": [1.0]}
        for i, model in enumerate(("smollm2-135m", "gemma3-270m"))
    ]  # fmt: skip
    (fit_folder / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in fit_records))
    script = runpy.run_path(str(EXPERIMENTS / "fit_size.py"))
    args = SimpleNamespace(
        model="smollm2-135m", sizes=["10"], threads=1, frontier=str(frontier_out),
        fit=str(fit_folder), out=str(tmp_path / "out"),
    )  # fmt: skip
    script["run"](args)
    script["run"](args)  # resumed: nothing to add
    found = [json.loads(line) for line in (tmp_path / "out" / "records.jsonl").open()]
    copied = [r for r in found if r["size"] == "shipped"]
    assert [(r["id"], r["design"], r["exact_scores"]) for r in copied] == [("f0", [[0.0]], [1.0])]
    made = [r for r in found if r["size"] != "shipped"]
    exact = {r["id"]: r for r in ran if r["method"] == "exact"}
    attention = {r["id"]: r for r in ran if r["method"] == "attention_fitted"}
    assert sorted(r["id"] for r in made) == sorted(exact) and len(made) == 2
    for record in made:
        assert record["exact_scores"] == exact[record["id"]]["scores"]
        design = np.asarray(record["design"])
        assert design.shape == (len(record["source_ids"]), 2 * 4)  # tiny_llama: 2 layers, 4 heads
        mean_over_heads = design.mean(1)
        assert np.allclose(mean_over_heads, attention[record["id"]]["scores"], atol=1e-6)
        assert record["frontier_fitted_scores"] == attention[record["id"]]["scores"]
