"""HTML views: each result draws itself, every text is escaped, values are labelled, pages are
self-contained; ``mechrag report`` and ``--html`` write one page of a command's folder."""

from __future__ import annotations

import re

import pytest
from helpers import (
    HOSTILE_QUERY,
    HOSTILE_RESPONSE,
    IMAGE,
    SCRIPT,
    assert_inert,
    build_explanation,
    build_results,
    elements,
    save_results,
)

from mechrag.errors import InputError
from mechrag.results.base import Serializable
from mechrag.views import VIEWS, view_of, write_report
from mechrag.views.blocks import Scale, visible


@pytest.fixture(scope="module")
def results(tiny_llama) -> dict:
    return build_results(tiny_llama)


@pytest.fixture(scope="module")
def explanation(tiny_llama, tmp_path_factory):
    return build_explanation(tiny_llama, tmp_path_factory.mktemp("bert"))


@pytest.mark.parametrize("kind", ["attribution", "components", "echo", "gating"])
def test_every_result_has_its_view_and_is_inert(results, kind):
    result = results[kind]
    markup = result.to_html()
    assert markup == result._repr_html_()
    assert f'data-view="{kind}"' in markup and "<style>" in markup
    assert_inert(markup)
    page = result.to_html_page()
    assert page.startswith("<!DOCTYPE html>") and "Content-Security-Policy" in page
    assert_inert(page)


@pytest.mark.parametrize("kind", ["attribution", "components"])
def test_show_draws_the_view_in_a_notebook_and_the_table_in_a_terminal(
    results, kind, monkeypatch, capsys
):
    import types

    pytest.importorskip("IPython", reason="IPython is not installed")
    import IPython
    import IPython.display

    result = results[kind]
    result.show()  # no notebook kernel here: the table
    assert capsys.readouterr().out.strip() == result.to_frame().to_string(index=False).strip()
    shown = []
    notebook = types.SimpleNamespace(kernel=object())
    monkeypatch.setattr(IPython, "get_ipython", lambda: notebook)
    monkeypatch.setattr(IPython.display, "display", shown.append)
    result.show()
    assert [item.data for item in shown] == [result.to_html()]


def test_source_query_and_response_text_is_escaped(results):
    markup = results["attribution"].to_html()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in markup
    assert "&lt;img src=x onerror=alert(1)&gt;" in markup
    assert "&amp; why &lt;not&gt; &quot;here&quot; &#x27;now&#x27;?" in markup
    assert "Cats &amp; &lt;i&gt;dogs&lt;/i&gt;" in markup
    assert [tag for tag, _ in elements(markup) if tag in ("img", "i")] == []
    gating = results["gating"].to_html()
    assert "On the mat &amp; &lt;b&gt;rug&lt;/b&gt; &quot;yes&quot; &#x27;ok&#x27;" in gating
    assert_inert(gating)


def test_attribution_labels_every_score_and_token(results):
    attribution = results["attribution"]
    markup = attribution.to_html()
    for source, score in zip(attribution.sources, attribution.scores):
        assert f"{source.id} {score:.3g}</span>" in markup  # the visible badge
        assert f"{source.id}: score {score:.4g}" in markup  # the tooltip
    top = int(attribution.ranking[0])
    for value in attribution.token_scores[top]:
        assert f'<span class="v">{value:.2g}</span>' in markup
    assert f"model calls</dt><dd>{attribution.model_calls}" in markup
    assert f"forward passes</dt><dd>{attribution.forward_passes}" in markup


def test_attribution_shows_the_chosen_source(results):
    attribution = results["attribution"]
    markup = attribution.to_html(source="p0s0")
    assert "rests on p0s0" in markup
    for value in attribution.token_scores[0]:
        assert f'<span class="v">{value:.2g}</span>' in markup
    with pytest.raises(InputError, match="unknown source"):
        attribution.to_html(source="nope")


def test_component_view_has_the_heatmap_profile_and_top_components(results):
    result = results["components"]
    markup = result.to_html()
    assert markup.count("<svg") == 3  # heads heatmap, MLP bars, residual bars
    for layer in range(result.n_layers):
        for head in range(result.n_heads):
            assert f"L{layer} × H{head}: JSD {result.heads[layer, head]:.4g}" in markup
        assert f"MLP{layer}: {result.mlps[layer]:.4g}</title>" in markup
    for component in result.top(10):
        assert f"<td>{component.label}</td>" in markup
    assert "semantic gain" in markup


def test_echo_and_gating_views_mark_low_tokens_and_show_both_answers(results):
    result = results["echo"]
    markup = result.to_html()
    assert len(re.findall(r'class="tok[ "]', markup)) == 2 * len(result.response_tokens)
    assert markup.count("tok low") == int(result.low_tokens.sum())
    gating = results["gating"]
    markup = gating.to_html()
    assert "Without gating" in markup and "With gating" in markup
    for label in gating.gates.labels():
        assert label in markup


def test_explanation_view_shows_both_sides_and_saliency(explanation):
    markup = explanation.to_html()
    assert 'data-view="explanation"' in markup
    assert f"WARG</dt><dd>{explanation.warg:.3g}" in markup
    for name in explanation.flags:
        assert f"{name.upper()}</dt>" in markup
    assert "IG saliency of the query" in markup
    assert markup.count("IG saliency of document") == len(explanation.documents)
    for document, score in zip(explanation.documents, explanation.generator.scores):
        assert f"{document.id}: {score:.4g}</title>" in markup
    assert_inert(markup)


def test_a_result_without_a_view_gets_the_table_of_its_scalars():
    from dataclasses import dataclass

    @dataclass
    class Tally(Serializable):
        name: str
        count: int
        details: dict

    tally = Tally("<b>x</b>", 3, {"share": 0.25, "list": [1, 2]})
    markup = tally.to_html()
    assert view_of(tally).__name__ == "generic_view"
    assert "<td>name</td><td>&lt;b&gt;x&lt;/b&gt;</td>" in markup
    assert '<td>details.share</td><td class="num">0.25</td>' in markup
    assert "details.list" not in markup
    assert set(VIEWS) >= {"Attribution", "ComponentAttribution", "PipelineExplanation"}


def test_scales_are_monotone_in_lightness_and_mark_negatives():
    sequential = Scale.fit([0.0, 1.0, 2.0])
    assert not sequential.signed
    lightness = [sequential.lightness(v) for v in (0.0, 0.5, 1.0, 2.0)]
    assert lightness == sorted(lightness, reverse=True)
    diverging = Scale.fit([-1.0, 2.0])
    assert diverging.signed and diverging.is_negative(-0.5) and not diverging.is_negative(0.5)
    assert diverging.fill(-1.0) != diverging.fill(1.0)
    assert "striped" in diverging.legend("IG")


def test_tokens_never_render_as_nothing():
    assert visible(" ") == "␣" and visible("\n") == "↵" and visible("\x05a") == "\\x05a"
    assert visible(" the") == " the"


def test_report_reads_every_result_of_a_folder(results, tmp_path):
    save_results(results, tmp_path)
    path = write_report(tmp_path)
    page = path.read_text(encoding="utf-8")
    assert path == tmp_path / "report.html"
    for kind in ("attribution", "components", "gating"):
        assert f'data-view="{kind}"' in page
    assert "other.json" not in page
    assert_inert(page)


def test_report_of_a_bad_folder_is_bad_input(tmp_path, capsys):
    from mechrag.cli import main

    with pytest.raises(InputError, match="not a folder"):
        write_report(tmp_path / "missing")
    with pytest.raises(InputError, match="no result JSON"):
        write_report(tmp_path)
    (tmp_path / "components.json").write_text("{not json")
    with pytest.raises(InputError, match="cannot read"):
        write_report(tmp_path)
    assert main(["report", str(tmp_path / "missing")]) == 2
    assert "mechrag report: error:" in capsys.readouterr().err


def test_cli_attribute_html_then_report(tiny_llama, tmp_path, monkeypatch, capsys):
    from mechrag.cli import main

    loads = []
    monkeypatch.setattr(
        "mechrag.models.loading.load_model", lambda name=None: loads.append(name) or tiny_llama
    )
    context = tmp_path / "context.txt"
    context.write_text(f"The cat sleeps on the mat. {SCRIPT}\n\n{IMAGE} The mat is red.\n")
    arguments = ["attribute", "--query", HOSTILE_QUERY, "--context-file", str(context)]
    arguments += ["--response", HOSTILE_RESPONSE]
    assert main([*arguments, "--html"]) == 2  # --html without --out: nothing loaded
    assert "--html needs --out" in capsys.readouterr().err and not loads
    out = tmp_path / "out"
    assert main([*arguments, "--out", str(out), "--html"]) == 0
    page = (out / "report.html").read_text(encoding="utf-8")
    assert f"wrote {out / 'report.html'}" in capsys.readouterr().out
    assert 'data-view="attribution"' in page and "&lt;script&gt;" in page
    assert_inert(page)
    (out / "report.html").unlink()
    assert main(["report", str(out)]) == 0
    assert (out / "report.html").read_text(encoding="utf-8") == page
