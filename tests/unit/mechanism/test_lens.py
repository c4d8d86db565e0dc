"""The logit lens and per-head writes: exact decomposition of the attention output."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from helpers import decomposition_error

from mechrag import Case
from mechrag.mechanism.lens import lens_logprobs
from mechrag.models import adapter
from mechrag.models.adapter import logit_soft_cap, output_bias

IDS = [[5, 17, 42, 99, 3, 250, 7, 8], [1, 2, 3, 4, 5, 6, 7, 9]]


def _batch(model):
    ids = torch.tensor(IDS) % model.cfg.d_vocab
    attention = torch.ones_like(ids)
    attention[1, :3] = 0  # a left-padded second row
    return ids, attention


def _decomposition_error(model) -> float:
    ids, attention = _batch(model)
    names = [
        name
        for layer in range(model.cfg.n_layers)
        for name in (adapter.hook_name(layer, "z"), f"blocks.{layer}.hook_attn_out")
    ]
    with torch.no_grad():
        _, cache = model.run_with_cache(ids, attention_mask=attention, names_filter=names)
    return max(
        decomposition_error(model, layer, cache) for layer in range(model.cfg.n_layers)
    )


@pytest.mark.parametrize("family", ["tiny_llama", "tiny_gpt2"])
def test_head_writes_sum_to_attention_output(family, request):
    model = request.getfixturevalue(family)
    assert _decomposition_error(model) < 1e-4


def test_gpt2_has_output_bias_and_llama_not(tiny_llama, tiny_gpt2):
    assert output_bias(tiny_llama, 0) is None
    assert output_bias(tiny_gpt2, 0).shape == (tiny_gpt2.cfg.d_model,)


def test_transposed_w_o_would_fail(tiny_llama, monkeypatch):
    """The check can fail: the ARC-JSD reference code's ``W`` instead of ``W^T``, fed to the
    head writes the package itself uses, is caught."""
    ids, attention = _batch(tiny_llama)
    with torch.no_grad():
        _, cache = tiny_llama.run_with_cache(ids, attention_mask=attention)
    correct = adapter.output_weight

    def transposed(model, layer: int):
        w_o = correct(model, layer)
        n_heads, d_head, d_model = w_o.shape
        return w_o.reshape(d_model, n_heads * d_head).T.reshape(n_heads, d_head, d_model)

    monkeypatch.setattr(adapter, "output_weight", transposed)
    total = adapter.head_writes(tiny_llama, 0, cache[adapter.hook_name(0, "z")]).sum(-2)
    assert (total - cache["blocks.0.hook_attn_out"]).abs().max() > 1e-2


@pytest.mark.parametrize("family", ["tiny_llama", "tiny_gpt2"])
def test_lens_of_final_residual_is_the_model_output(family, request):
    """Captured through the engine (prefix reuse, batched rows), the last residual's lens is
    the model's own output distribution at every response position."""
    model = request.getfixturevalue(family)
    case = Case(model, "Where is it?", ["It is here.", "Not there.", "Maybe."], "Here.")
    masks = np.array([[1, 1, 1], [1, 0, 1], [0, 1, 1]], dtype=bool)
    acts = case.capture(masks, sites=["z", "resid_post"])
    n = len(case.response_ids)
    assert acts["z"].shape == (model.cfg.n_layers, 3, n, model.cfg.n_heads, model.cfg.d_head)
    for row, mask in enumerate(masks):
        ids = case.builder.ids(mask) + case.response_ids[:-1]
        with torch.no_grad():
            expected = model(torch.tensor([ids]))[0, -n:].float().log_softmax(-1)
        lens = lens_logprobs(model, acts["resid_post"][-1, row])
        assert lens.dtype == torch.float32
        torch.testing.assert_close(lens, expected, atol=1e-4, rtol=1e-4)


def test_soft_cap_read_from_config(tiny_llama, monkeypatch):
    assert logit_soft_cap(tiny_llama) is None
    monkeypatch.setattr(
        tiny_llama.original_model.config, "final_logit_softcapping", 5.0, raising=False
    )
    assert logit_soft_cap(tiny_llama) == 5.0
    writes = torch.randn(3, tiny_llama.cfg.d_model) * 50
    logits = lens_logprobs(tiny_llama, writes)
    spread = logits.max(-1).values - logits.min(-1).values
    assert (spread <= 10.0 + 1e-4).all()  # capped logits lie in (-5, 5)


def test_capture_rejects_bad_masks(tiny_llama):
    case = Case(tiny_llama, "Where is it?", ["It is here.", "Not there."], "Here.")
    with pytest.raises(ValueError, match="masks must be"):
        case.capture(np.ones((1, 3), dtype=bool), sites=["z"])


@pytest.mark.integration
def test_smollm_head_writes_sum_to_attention_output(smollm):
    assert _decomposition_error(smollm) < 1e-4
