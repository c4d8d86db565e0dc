"""The shipped demo on the real embedded model: the top source is a gold supporting sentence."""

import pandas as pd
import pytest

from mechrag.cli import main
from mechrag.cli.demo import DEMO_EXAMPLE_ID
from mechrag.data import load_hotpotqa


@pytest.mark.integration
def test_demo_top_source_is_gold(tmp_path, capsys, smollm, monkeypatch):
    monkeypatch.setattr("mechrag.models.loading.load_model", lambda *args, **kwargs: smollm)
    assert main(["demo", "--out", str(tmp_path)]) == 0
    assert "top-1 is gold: True" in capsys.readouterr().out
    table = pd.read_csv(tmp_path / "demo_arc_jsd.csv")
    gold = next(e for e in load_hotpotqa(distractors=2) if e.id == DEMO_EXAMPLE_ID).gold_ids
    assert table.sort_values("rank").iloc[0]["source_id"] in gold
    assert (tmp_path / "demo_arc_jsd_scores.png").stat().st_size > 10_000
