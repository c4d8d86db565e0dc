"""``localize``: per-head and per-MLP scores against an independent computation, hygiene, API."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from helpers import (
    assert_gain_axis,
    assert_heads_axis,
    assert_layers_axis,
    assert_residual_axis,
    hook_count,
)
from scipy.spatial.distance import jensenshannon

from mechrag import Case, ComponentAttribution, localize
from mechrag.mechanism.lens import DEFAULT_LOGIT_BUDGET
from mechrag.mechanism.localize import localize_source
from mechrag.prompts import PromptBuilder
from mechrag.sources import as_sources

QUERY = "Where does the cat sleep?"
SOURCES = ["The cat sleeps on the mat.", "Dogs bark at night.", "The mat is red."]
RESPONSE = "On the mat."


def _state(model) -> dict:
    return {k: v.clone() for k, v in model.original_model.state_dict().items()}


def _reference_writes(model, ids):
    """Per-head writes and MLP outputs from the Hugging Face modules alone (no TL hooks)."""
    cfg = model.cfg
    captured, handles = {}, []
    for layer in range(cfg.n_layers):
        o_proj = model.blocks[layer].attn.o.original_component
        mlp = model.blocks[layer].mlp.original_component
        handles.append(
            o_proj.register_forward_pre_hook(
                lambda m, args, layer=layer: captured.__setitem__(("z", layer), args[0].detach())
            )
        )
        handles.append(
            mlp.register_forward_hook(
                lambda m, args, out, layer=layer: captured.__setitem__(("mlp", layer), out.detach())
            )
        )
    try:
        with torch.no_grad():
            model.original_model(torch.tensor([ids]))
    finally:
        for handle in handles:
            handle.remove()
    heads, mlps = [], []
    for layer in range(cfg.n_layers):
        o_proj = model.blocks[layer].attn.o.original_component
        weight = o_proj.weight.detach().double()
        # nn.Linear stores [d_model, n_heads*d_head]; GPT-2's Conv1D the transpose.
        w = weight.T if isinstance(o_proj, torch.nn.Linear) else weight
        z = captured[("z", layer)][0].double().reshape(len(ids), cfg.n_heads, cfg.d_head)
        w = w.reshape(cfg.n_heads, cfg.d_head, cfg.d_model)
        heads.append(torch.stack([z[:, h] @ w[h] for h in range(cfg.n_heads)]))
        mlps.append(captured[("mlp", layer)][0].double())
    return torch.stack(heads), torch.stack(mlps)  # [L, H, pos, D], [L, pos, D]


def _reference_distributions(model, writes):
    # A float64 copy: the session-scoped model itself is never touched.
    norm = copy.deepcopy(model.ln_final.original_component).double()
    unembed = model.original_model.get_output_embeddings().original_component.weight.double()
    with torch.no_grad():
        logits = norm(writes) @ unembed.T
    return logits.softmax(-1).numpy()


def _reference_scores(model, removed: int):
    builder = PromptBuilder(model.tokenizer, QUERY, as_sources(SOURCES))
    response = builder.response_ids(RESPONSE)
    keep = builder.full_mask()
    keep[removed] = False
    runs = [
        _reference_writes(model, builder.ids(mask) + response[:-1])
        for mask in (builder.full_mask(), keep)
    ]
    n = len(response)
    scores = []
    for full, ablated in zip(*runs):  # heads, then MLPs
        p = _reference_distributions(model, full[..., -n:, :])
        q = _reference_distributions(model, ablated[..., -n:, :])
        scores.append((jensenshannon(p, q, axis=-1) ** 2).sum(-1))
    return scores


@pytest.mark.parametrize("family", ["tiny_llama", "tiny_gpt2"])
def test_scores_match_independent_computation(family, request):
    model = request.getfixturevalue(family)
    result = localize(model, QUERY, SOURCES, source="p0s0", response=RESPONSE, logit_budget=1000)
    heads, mlps = _reference_scores(model, removed=0)
    assert result.heads.shape == (model.cfg.n_layers, model.cfg.n_heads)
    np.testing.assert_allclose(result.heads, heads, rtol=2e-3, atol=2e-5)
    np.testing.assert_allclose(result.mlps, mlps, rtol=2e-3, atol=2e-5)
    assert result.heads.max() > 1e-3  # the comparison is not vacuous


def test_default_source_is_top_arc_jsd(tiny_llama):
    from mechrag import arc_jsd

    attribution = arc_jsd(tiny_llama, QUERY, SOURCES, response=RESPONSE)
    result = localize(tiny_llama, QUERY, SOURCES, response=RESPONSE)
    assert result.source_id == attribution.top(1)[0][0].id
    assert set(result.metadata["source_scores"]) == {"p0s0", "p0s1", "p0s2"}


def test_hooks_removed_and_parameters_unchanged(tiny_gpt2, monkeypatch):
    hooks, state = hook_count(tiny_gpt2), _state(tiny_gpt2)
    localize(tiny_gpt2, QUERY, SOURCES, source="p0s1", response=RESPONSE)
    assert hook_count(tiny_gpt2) == hooks

    from mechrag.models import adapter

    forward = adapter.forward

    def boom(*args, n_logits, **kwargs):  # fails inside the capture, while its hooks are on
        if n_logits == 1:
            raise RuntimeError("boom")
        return forward(*args, n_logits=n_logits, **kwargs)

    monkeypatch.setattr(adapter, "forward", boom)
    with pytest.raises(RuntimeError, match="boom"):
        localize(tiny_gpt2, QUERY, SOURCES, source="p0s1", response=RESPONSE)
    assert hook_count(tiny_gpt2) == hooks
    for name, value in _state(tiny_gpt2).items():
        assert torch.equal(value, state[name]), name


def test_unknown_source_raises(tiny_llama):
    with pytest.raises(ValueError, match="unknown source 'nope'"):
        localize(tiny_llama, QUERY, SOURCES, source="nope", response=RESPONSE)


def test_result_api(tiny_llama, tmp_path):
    result = localize(tiny_llama, QUERY, SOURCES, source="p0s0", response=RESPONSE)
    n_layers, n_heads = result.heads.shape
    frame = result.to_frame()
    assert list(frame.columns[:5]) == ["kind", "layer", "head", "score", "rank"]
    assert len(frame) == n_layers * n_heads + n_layers
    assert sorted(frame["rank"]) == list(range(1, len(frame) + 1))
    top = result.top(3)
    assert [c.score for c in top] == sorted(result.scores, reverse=True)[:3]
    assert frame.loc[frame["rank"] == 1, "score"].item() == top[0].score
    assert all(c.kind == "mlp" and c.head is None for c in result.top(2, kind="mlp"))
    assert result.resid_post.shape == (n_layers,)
    record = result.to_dict()
    # Eq. 5: heads ranked over all (layer, head) jointly, MLPs over layers, separately.
    flat = np.argsort(-result.heads.ravel(), kind="stable")[:10]
    assert [(r["layer"], r["head"]) for r in record["top_heads"]] == [
        divmod(int(i), n_heads) for i in flat
    ]
    assert [r["score"] for r in record["top_heads"]] == result.heads.ravel()[flat].tolist()
    mlp_order = np.argsort(-result.mlps, kind="stable")[:10]
    assert [r["label"] for r in record["top_mlps"]] == [f"MLP{i}" for i in mlp_order]
    assert all(r["head"] is None and r["kind"] == "mlp" for r in record["top_mlps"])
    again = ComponentAttribution.from_dict(record)
    assert again.to_dict() == record
    np.testing.assert_array_equal(again.heads, result.heads)
    mean = ComponentAttribution.average([result, again])
    np.testing.assert_allclose(mean.heads, result.heads)
    assert mean.metadata["n"] == 2


@pytest.mark.parametrize("family", ["tiny_llama", "tiny_gpt2"])
def test_plots(family, request, tmp_path):
    import matplotlib.pyplot as plt

    from mechrag.plots import save_figure
    from mechrag.plots.components import plot_gain_scatter, plot_summary

    model = request.getfixturevalue(family)
    case = Case(model, QUERY, SOURCES, RESPONSE)
    # assert_gain_axis reads per-head gains: mechrag's residual-cosine definition has them.
    result = localize_source(
        case, 0, gains=True, logit_budget=DEFAULT_LOGIT_BUDGET, gain_definition="residual_cosine"
    )
    assert_heads_axis(result.plot_heads(k=3).axes[0], result, k=3)
    assert_layers_axis(result.plot_layers().axes[0], result)
    assert_residual_axis(result.plot_residual().axes[0], result)
    assert_gain_axis(result.plot_gain().axes[0], [result])
    assert_gain_axis(plot_gain_scatter([result, result]).axes[0], [result, result])
    heads, layers, residual, gain, colorbar = plot_summary(result, k=4).axes
    assert_heads_axis(heads, result, k=4)
    assert_layers_axis(layers, result)
    assert_residual_axis(residual, result)
    assert_gain_axis(gain, [result])
    written = save_figure(result.plot_heads(), tmp_path / "heads")
    assert all(path.stat().st_size > 0 for path in written)
    # The paper's gain defines none per head: each head's point carries its layer's gain.
    paper = localize(model, QUERY, SOURCES, source="p0s0", response=RESPONSE)
    heads, mlps = paper.plot_gain().axes[0].collections
    expected = np.column_stack([paper.heads.ravel(), np.repeat(paper.attn_gain, paper.n_heads)])
    np.testing.assert_array_equal(heads.get_offsets(), expected)
    np.testing.assert_array_equal(mlps.get_offsets(), np.column_stack([paper.mlps, paper.mlp_gain]))
    plt.close("all")


def test_cli_localize(tiny_llama, tmp_path, monkeypatch, capsys):
    from mechrag.cli import main

    monkeypatch.setattr("mechrag.models.loading.load_model", lambda name=None: tiny_llama)
    context = tmp_path / "context.txt"
    context.write_text("The cat sleeps on the mat. Dogs bark.\n\nThe mat is red.\n")
    arguments = ["localize", "--query", QUERY, "--context-file", str(context)]
    arguments += ["--response", RESPONSE, "--out", str(tmp_path / "out")]
    assert main([*arguments, "--top-k", "4", "--source", "p1s0"]) == 0
    out = capsys.readouterr().out
    assert "removed source: p1s0" in out and "rank" in out
    assert (tmp_path / "out" / "components_heads.svg").is_file()
    assert (tmp_path / "out" / "components.json").is_file()


def test_cli_localize_protocols(tiny_llama, tmp_path, monkeypatch, capsys):
    """``--protocol arc-jsd`` (the default) writes the paper's record: per-layer JSD and gains
    and the consensus with its null, equal to computing them from the saved result;
    ``--protocol mechrag`` writes the continuous gains and no consensus."""
    import json

    from mechrag.cli import main
    from mechrag.mechanism.consensus import Consensus, consensus

    monkeypatch.setattr("mechrag.models.loading.load_model", lambda name=None: tiny_llama)
    context = tmp_path / "context.txt"
    context.write_text("The cat sleeps on the mat. Dogs bark.\n\nThe mat is red.\n")
    arguments = ["localize", "--query", QUERY, "--context-file", str(context)]
    arguments += ["--response", RESPONSE, "--source", "p1s0"]
    assert main([*arguments, "--out", str(tmp_path / "paper")]) == 0
    assert "consensus (attention" in capsys.readouterr().out
    record = json.loads((tmp_path / "paper" / "components.json").read_text())
    result = ComponentAttribution.from_dict(record)
    assert result.gain_definition == "argmax_token" and record["protocol"] == "arc-jsd"
    np.testing.assert_allclose(record["attention_jsd"], result.heads.mean(1))
    saved = Consensus.from_dict(record["consensus"])
    again = consensus(result)
    assert saved.attention.jsd_overlap == again.attention.jsd_overlap
    assert saved.mlp.null_gain_overlap == pytest.approx(again.mlp.null_gain_overlap)
    assert main([*arguments, "--protocol", "mechrag", "--out", str(tmp_path / "own")]) == 0
    own = json.loads((tmp_path / "own" / "components.json").read_text())
    assert own["gain_definition"] == "residual_cosine" and "consensus" not in own
