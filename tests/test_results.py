"""The Attribution result type: ranking, tables, plots, serialisation, checkout to disk."""

import json

import numpy as np
import pandas as pd
import pytest

from mechrag.cli import main
from mechrag.results import Attribution
from mechrag.sources import as_sources


@pytest.fixture
def attribution():
    sources = as_sources(["A one.", "B two.", "C three."])
    return Attribution(
        method="arc_jsd",
        query="q?",
        sources=sources,
        scores=np.array([0.1, 0.5, 0.5]),
        response="ab",
        response_ids=[1, 2],
        response_tokens=["a", "b"],
        token_scores=np.array([[0.05, 0.05], [0.2, 0.3], [0.4, 0.1]]),
        model_calls=4,
    )


def test_ranking_top_and_frame(attribution):
    assert attribution.ranking.tolist() == [1, 2, 0]  # ties keep source order
    assert [s.id for s, _ in attribution.top(2)] == ["p0s1", "p0s2"]
    frame = attribution.to_frame()
    assert frame["rank"].tolist() == [3, 1, 2]
    assert list(frame.columns) == ["source_id", "rank", "score", "title", "paragraph", "text"]


def test_round_trip_through_json(attribution):
    restored = Attribution.from_dict(json.loads(json.dumps(attribution.to_dict())))
    np.testing.assert_array_equal(restored.token_scores, attribution.token_scores)
    assert restored.sources == attribution.sources


def test_shape_checks():
    with pytest.raises(ValueError, match="scores"):
        Attribution("m", "q", as_sources(["a", "b"]), np.zeros(3), "r", [1], ["r"])


def test_plots_return_figures(attribution):
    bars = attribution.plot(highlight=["p0s0"])
    assert len(bars.axes[0].patches) == 3
    heatmap = attribution.plot_tokens()
    assert heatmap.axes[0].images[0].get_array().shape == (3, 2)


def test_cli_reports_bad_input_without_writing(tmp_path, capsys):
    context = tmp_path / "context.txt"
    context.write_text("   \n")
    code = main(
        [
            "attribute",
            "--query",
            "q",
            "--context-file",
            str(context),
            "--model",
            str(tmp_path / "missing"),
            "--out",
            str(tmp_path / "out"),
        ]
    )
    assert code == 2
    assert "context file" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("method", ["arc_jsd", "kernel_shap"])
def test_cli_attribute_writes_table_json_and_chart(method, tiny_llama, tmp_path, monkeypatch):
    monkeypatch.setattr("mechrag.load_model", lambda name=None: tiny_llama)
    context = tmp_path / "context.txt"
    context.write_text("Alice went home.\n\nBob stayed at work.\n\nCarol flew to Rome.\n")
    out = tmp_path / "out"
    arguments = ["attribute", "--query", "Who flew?", "--context-file", str(context)]
    arguments += ["--unit", "document", "--method", method, "--response", "Carol."]
    budget = [] if method == "arc_jsd" else ["--budget", "6"]  # ARC-JSD takes no budget
    assert main([*arguments, *budget, "--out", str(out)]) == 0
    table = pd.read_csv(out / f"attribution_{method}.csv")
    assert table["source_id"].tolist() == ["p0", "p1", "p2"]
    saved = Attribution.from_dict(json.loads((out / f"attribution_{method}.json").read_text()))
    np.testing.assert_allclose(saved.scores, table["score"])
    assert (out / f"attribution_{method}_scores.png").stat().st_size > 0
