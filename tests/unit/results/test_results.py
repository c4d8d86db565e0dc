"""Result types (Attribution, ComponentAttribution): ranking, tables, plots, serialisation,
saving to disk, and the CLI that writes them."""

import json

import numpy as np
import pandas as pd
import pytest
from helpers import (
    assert_gain_axis,
    assert_heads_axis,
    assert_layers_axis,
    assert_residual_axis,
)

from mechrag.cli import main
from mechrag.mechanism import Component, ComponentAttribution
from mechrag.plots.results import save_figures
from mechrag.results import Attribution
from mechrag.results.files import json_ready, write_json
from mechrag.sources import Source, as_sources


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
        forward_passes=2,
        metadata={"seed": np.int64(3)},
    )


@pytest.fixture
def components():
    """Two layers of three heads; L0H2 and MLP1 tie for first, L1H0 and MLP0 for third."""
    return ComponentAttribution(
        query="q?",
        source_id="s1",
        response="ab",
        response_ids=[1, 2],
        heads=np.array([[0.1, 0.0, 0.9], [0.5, 0.2, 0.3]]),
        mlps=np.array([0.5, 0.9]),
        resid_post=np.array([0.4, 1.0]),
        head_gain=np.array([[0.0, -0.1, 0.3], [0.2, 0.1, 0.1]]),
        attn_gain=np.array([0.2, 0.4]),
        mlp_gain=np.array([0.2, 0.4]),
        model_calls=2,
        forward_passes=1,
    )


def test_ranking_top_and_frame(attribution):
    assert attribution.ranking.tolist() == [1, 2, 0]  # ties keep source order
    assert [s.id for s, _ in attribution.top(2)] == ["p0s1", "p0s2"]
    assert attribution.top(1) == [(attribution.sources[1], 0.5)]
    frame = attribution.to_frame()
    assert frame["rank"].tolist() == [3, 1, 2]
    assert list(frame.columns) == ["source_id", "score", "rank", "title", "paragraph", "text"]


def test_component_ranking_ties_top_and_frame(components):
    # Flat order: L0H0 L0H1 L0H2 L1H0 L1H1 L1H2 MLP0 MLP1; ties keep that order.
    assert components.ranking.tolist() == [2, 7, 3, 6, 5, 4, 0, 1]
    assert components.labels[2] == "L0H2" and components.labels[7] == "MLP1"
    assert components.top(3) == [
        Component("head", 0, 2, 0.9),
        Component("mlp", 1, None, 0.9),
        Component("head", 1, 0, 0.5),
    ]
    assert [c.label for c in components.top(2, kind="mlp")] == ["MLP1", "MLP0"]
    assert [c.label for c in components.top(2, kind="head")] == ["L0H2", "L1H0"]
    with pytest.raises(ValueError, match="kind"):
        components.top(1, kind="attn")
    frame = components.to_frame()
    assert list(frame.columns) == ["kind", "layer", "head", "score", "rank", "semantic_gain"]
    assert frame["rank"].tolist() == [7, 8, 1, 3, 6, 5, 4, 2]
    assert frame.loc[frame["rank"] == 1, "head"].item() == 2
    assert frame["head"].isna().tolist() == [False] * 6 + [True] * 2
    np.testing.assert_array_equal(frame["semantic_gain"], components.gains)


def test_repr_shows_the_top_three(attribution, components):
    assert repr(attribution) == (
        "Attribution(method='arc_jsd', n_sources=3, n_response=2, "
        "top=[p0s1=0.5, p0s2=0.5, p0s0=0.1])"
    )
    assert repr(components) == (
        "ComponentAttribution(method='component_jsd', source='s1', layers=2, heads=3, "
        "top=[L0H2=0.9, MLP1=0.9, L1H0=0.5])"
    )


@pytest.mark.parametrize("name", ["attribution", "components"])
def test_round_trip_through_json(name, request):
    result = request.getfixturevalue(name)
    data = json.loads(json.dumps(result.to_dict()))  # raises on anything not JSON-ready
    restored = type(result).from_dict(data)
    assert restored.to_dict() == result.to_dict()
    np.testing.assert_array_equal(restored.scores, result.scores)
    assert (restored.model_calls, restored.forward_passes) == (
        result.model_calls,
        result.forward_passes,
    )


def test_round_trip_keeps_sources_and_token_scores(attribution):
    restored = Attribution.from_dict(json.loads(json.dumps(attribution.to_dict())))
    np.testing.assert_array_equal(restored.token_scores, attribution.token_scores)
    assert restored.sources == attribution.sources
    assert restored.metadata == {"seed": 3}


def test_from_dict_reads_records_of_the_previous_version(attribution, components):
    old = attribution.to_dict()
    del old["forward_passes"]
    old["metadata"] = {"forward_passes": 7}
    restored = Attribution.from_dict(old)
    assert restored.forward_passes == 7 and restored.model_calls == 4
    old = components.to_dict()
    for name in ("method", "model_calls", "forward_passes"):
        del old[name]
    restored = ComponentAttribution.from_dict(old)
    assert restored.method == "component_jsd"
    assert restored.model_calls is None and restored.forward_passes is None
    np.testing.assert_array_equal(restored.heads, components.heads)


def test_json_ready_converts_numpy_tuples_paths_and_dataclasses(attribution, tmp_path):
    value = {
        "array": np.arange(3, dtype=np.int32),
        "scalar": np.float32(0.5),
        "pair": (1, np.bool_(True)),
        "path": tmp_path / "x",
        "source": Source("p0", "text"),  # a plain dataclass: its fields
        "result": attribution,  # a dataclass with to_dict: that
    }
    ready = json_ready(value)
    assert ready["array"] == [0, 1, 2] and ready["scalar"] == 0.5
    assert ready["pair"] == [1, True] and type(ready["pair"][1]) is bool
    assert ready["path"] == str(tmp_path / "x")
    assert ready["source"] == {"id": "p0", "text": "text", "title": None, "paragraph": None}
    assert ready["result"] == attribution.to_dict()
    path = write_json(tmp_path / "sub" / "value.json", value)
    assert path.read_text() == json.dumps(ready, indent=1)
    assert [p.name for p in (tmp_path / "sub").iterdir()] == ["value.json"]  # no temporaries


def test_save_figures_draws_saves_and_closes_each(attribution, tmp_path):
    import matplotlib.pyplot as plt

    figures = plt.get_fignums()
    written = save_figures({"bars": attribution.plot, "tokens": attribution.plot_tokens}, tmp_path)
    assert [p.name for p in written] == ["bars.png", "bars.svg", "tokens.png", "tokens.svg"]
    assert plt.get_fignums() == figures


def test_positional_construction_and_shape_checks():
    sources = as_sources(["a", "b"])
    result = Attribution("m", "q", sources, np.zeros(2), "r", [1], ["r"])
    assert (result.method, result.model_calls, result.forward_passes) == ("m", None, None)
    with pytest.raises(ValueError, match="scores"):
        Attribution("m", "q", sources, np.zeros(3), "r", [1], ["r"])
    with pytest.raises(ValueError, match="token_scores"):
        Attribution("m", "q", sources, np.zeros(2), "r", [1], ["r"], np.zeros((2, 2)))
    with pytest.raises(TypeError):  # the cost fields are keyword-only
        Attribution("m", "q", sources, np.zeros(2), "r", [1], ["r"], None, 3)


@pytest.mark.parametrize("name", ["attribution", "components"])
def test_save_writes_table_json_and_figures(name, request, tmp_path):
    import matplotlib.pyplot as plt

    result = request.getfixturevalue(name)
    figures = plt.get_fignums()
    written = result.save(tmp_path / "out", "result")
    assert plt.get_fignums() == figures  # the figure it drew is closed
    expected = ["result.csv", "result.json", "result_scores.png", "result_scores.svg"]
    assert [p.name for p in written] == expected
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == expected  # no temporaries
    assert all(p.stat().st_size > 0 for p in written)
    table = pd.read_csv(tmp_path / "out" / "result.csv")
    ranking = table.sort_values("rank").index.to_numpy()
    np.testing.assert_array_equal(ranking, result.ranking)
    np.testing.assert_allclose(table["score"], result.scores)
    saved = type(result).from_dict(json.loads((tmp_path / "out" / "result.json").read_text()))
    assert saved.to_dict() == result.to_dict()


def test_save_uses_a_given_figure_and_leaves_it_open(attribution, tmp_path):
    import matplotlib.pyplot as plt

    figure = attribution.plot(highlight=["p0s0"])
    attribution.save(tmp_path, "mine", figure=figure)
    assert plt.fignum_exists(figure.number)
    plt.close(figure)


def test_plots_return_figures(attribution, components):
    import matplotlib.pyplot as plt

    bars = attribution.plot(highlight=["p0s0"])
    assert len(bars.axes[0].patches) == 3
    assert bars.axes[0].get_legend().get_texts()[0].get_text() == "gold source"
    assert bars.axes[0].get_yticklabels()[0].get_text().startswith("p0s1: B two.")
    heatmap = attribution.plot_tokens()
    assert heatmap.axes[0].images[0].get_array().shape == (3, 2)
    bars = components.plot(k=4, highlight=["MLP1"])
    axis = bars.axes[0]
    assert [t.get_text() for t in axis.get_yticklabels()] == ["L0H2", "MLP1", "L1H0", "MLP0"]
    assert [p.get_width() for p in axis.patches] == [0.9, 0.9, 0.5, 0.5]
    colours = [p.get_facecolor() for p in axis.patches]
    assert colours[1] != colours[0] and colours[0] == colours[2]
    heads = components.plot_heads(k=3).axes[0]
    assert_heads_axis(heads, components, k=3)
    assert [t.get_text() for t in heads.texts] == ["1", "2", "3"]
    assert [t.get_position() for t in heads.texts] == [(2, 0), (0, 1), (2, 1)]  # L0H2, L1H0, L1H2
    assert_layers_axis(components.plot_layers().axes[0], components)
    assert_residual_axis(components.plot_residual().axes[0], components)
    assert_gain_axis(components.plot_gain().axes[0], [components])
    plt.close("all")


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
    monkeypatch.setattr("mechrag.models.loading.load_model", lambda name=None: tiny_llama)
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


def test_compacted_records_read_back_in_order(tmp_path):
    from mechrag.results.files import append_jsonl, compact_records, run_records

    for i in range(3):
        append_jsonl(tmp_path / "records.jsonl", {"i": i})
    target = compact_records(tmp_path)
    assert target.name == "records.jsonl.gz" and not (tmp_path / "records.jsonl").exists()
    append_jsonl(tmp_path / "records.jsonl", {"i": 3})
    assert [r["i"] for r in run_records(tmp_path)] == [0, 1, 2, 3]
    compact_records(tmp_path)
    assert [r["i"] for r in run_records(tmp_path)] == [0, 1, 2, 3]
