"""Component ablation: matches an independent intervention, always undone, weights untouched."""

from __future__ import annotations

import pytest
import torch
from helpers import SEQUENCES, batch_logits, hook_count

from mechrag.engine import Engine
from mechrag.mechanism import ablate, component_means, parse_heads


def _reference_zeroed(model, layer: int, head: int, mlp: int):
    """Zero one head's slice of the ``W_O`` input and one MLP output with plain torch hooks."""
    d_head = model.cfg.d_head

    def drop_head(module, args):
        z = args[0].clone()
        flat = z.reshape(*z.shape[:2], -1)
        flat[..., head * d_head : (head + 1) * d_head] = 0
        return (flat.reshape(z.shape),)

    handles = [
        model.blocks[layer].attn.o.original_component.register_forward_pre_hook(drop_head),
        model.blocks[mlp].mlp.original_component.register_forward_hook(
            lambda m, a, out: torch.zeros_like(out)
        ),
    ]
    try:
        return batch_logits(model)
    finally:
        for handle in handles:
            handle.remove()


@pytest.mark.parametrize("family", ["tiny_llama", "tiny_gpt2"])
def test_zero_ablation_matches_independent_intervention(family, request):
    model = request.getfixturevalue(family)
    clean = batch_logits(model)
    with ablate(model, heads=[(1, 2)], mlps=[0], mode="zero"):
        ablated = batch_logits(model)
    expected = _reference_zeroed(model, layer=1, head=2, mlp=0)
    assert (ablated - clean).abs().max() > 1e-2
    torch.testing.assert_close(ablated, expected, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(batch_logits(model), clean)


def test_scale_one_is_identity_and_scale_zero_is_zero(tiny_llama):
    clean = batch_logits(tiny_llama)
    with ablate(tiny_llama, heads=[(0, 1)], mlps=[1], mode="scale", scale=1.0):
        torch.testing.assert_close(batch_logits(tiny_llama), clean)
    with ablate(tiny_llama, heads=[(0, 1)], mlps=[1], mode="scale", scale=0.0):
        scaled = batch_logits(tiny_llama)
    with ablate(tiny_llama, heads=[(0, 1)], mlps=[1], mode="zero"):
        torch.testing.assert_close(batch_logits(tiny_llama), scaled)


def test_mean_ablation_uses_reference_means(tiny_gpt2):
    engine = Engine(tiny_gpt2)
    means = component_means(tiny_gpt2, engine, SEQUENCES)
    assert means.z.shape == (2, tiny_gpt2.cfg.n_heads, tiny_gpt2.cfg.d_head)
    # Independent mean of the MLP output over the real tokens of each sequence.
    outputs = []
    for sequence in SEQUENCES:
        with torch.no_grad():
            _, cache = tiny_gpt2.run_with_cache(torch.tensor([sequence]))
        outputs.append(cache["blocks.1.hook_mlp_out"][0])
    torch.testing.assert_close(means.mlp_out[1], torch.cat(outputs).mean(0), atol=1e-5, rtol=1e-5)
    seen = []
    with ablate(tiny_gpt2, mlps=[1], mode="mean", means=means):
        with tiny_gpt2.hooks(fwd_hooks=[("blocks.1.hook_mlp_out", lambda x, hook: seen.append(x))]):
            batch_logits(tiny_gpt2)
    torch.testing.assert_close(seen[0][0, -1], means.mlp_out[1])


def test_hooks_removed_and_weights_unchanged_on_exception(tiny_llama):
    hooks = hook_count(tiny_llama)
    state = {k: v.clone() for k, v in tiny_llama.original_model.state_dict().items()}
    with pytest.raises(RuntimeError, match="inside"):
        with ablate(tiny_llama, heads=[(0, 0), (1, 3)], mlps=[0, 1]):
            batch_logits(tiny_llama)
            assert hook_count(tiny_llama) > hooks
            raise RuntimeError("inside")
    assert hook_count(tiny_llama) == hooks
    for name, value in tiny_llama.original_model.state_dict().items():
        assert torch.equal(value, state[name]), name


def test_bad_input(tiny_llama):
    with pytest.raises(ValueError, match="out of range"):
        with ablate(tiny_llama, heads=[(5, 0)]):
            pass
    with pytest.raises(ValueError, match="out of range"):
        with ablate(tiny_llama, mlps=[2]):
            pass
    with pytest.raises(ValueError, match="mode"):
        with ablate(tiny_llama, heads=[(0, 0)], mode="resample"):
            pass
    with pytest.raises(ValueError, match="means"):
        with ablate(tiny_llama, heads=[(0, 0)], mode="mean"):
            pass
    assert parse_heads(["12.3", "0.0"]) == [(12, 3), (0, 0)]
    with pytest.raises(ValueError, match="LAYER.HEAD"):
        parse_heads(["12"])
