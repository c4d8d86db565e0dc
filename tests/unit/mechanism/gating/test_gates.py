"""Per-component gates: identity at 1, zero-ablation at 0, linear in each factor, always undone."""

from __future__ import annotations

import pytest
import torch
from helpers import SEQUENCES, batch_logits, hook_count

from mechrag.engine import Engine
from mechrag.mechanism.ablation import ablate
from mechrag.mechanism.gating.gates import Gates, gate


def _attn_out(model, layer: int):
    seen = []
    ids, attention = Engine(model).batch_inputs(SEQUENCES)
    hook = (f"blocks.{layer}.hook_attn_out", lambda x, hook: seen.append(x.clone()))
    with torch.no_grad(), model.hooks(fwd_hooks=[hook]):
        model(ids, attention_mask=attention)
    return seen[0]


@pytest.mark.parametrize("family", ["tiny_llama", "tiny_gpt2"])
def test_factor_one_everywhere_is_bit_identical(family, request):
    model = request.getfixturevalue(family)
    clean = batch_logits(model)
    every_head = {(layer, head): 1.0 for layer in range(2) for head in range(model.cfg.n_heads)}
    with gate(model, heads=every_head, mlps={0: 1.0, 1: 1.0}):
        assert hook_count(model) > 0
        assert torch.equal(batch_logits(model), clean)


@pytest.mark.parametrize("family", ["tiny_llama", "tiny_gpt2"])
def test_factor_zero_equals_zero_ablation(family, request):
    model = request.getfixturevalue(family)
    with ablate(model, heads=[(1, 2), (0, 3)], mlps=[0], mode="zero"):
        ablated = batch_logits(model)
    with gate(model, heads={(1, 2): 0.0, (0, 3): 0.0}, mlps={0: 0.0}):
        gated = batch_logits(model)
    assert (gated - batch_logits(model)).abs().max() > 1e-2
    assert torch.equal(gated, ablated)


def test_head_factor_scales_its_write_linearly(tiny_gpt2):
    """attn_out = bias + sum_h factor_h * w_h: the output moves linearly in each factor."""
    model, layer = tiny_gpt2, 1
    clean = _attn_out(model, layer)
    with gate(model, heads={(layer, 2): 0.0}):
        without = _attn_out(model, layer)
    with gate(model, heads={(layer, 2): 2.5}):
        amplified = _attn_out(model, layer)
    write = clean - without
    assert write.abs().max() > 1e-3
    torch.testing.assert_close(amplified, without + 2.5 * write, atol=1e-5, rtol=1e-5)
    # Different factors on heads of one layer act independently.
    with gate(model, heads={(layer, 0): 0.0}):
        write_0 = clean - _attn_out(model, layer)
    with gate(model, heads={(layer, 0): 0.5, (layer, 2): 3.0}):
        both = _attn_out(model, layer)
    torch.testing.assert_close(both, clean - 0.5 * write_0 + 2.0 * write, atol=1e-5, rtol=1e-5)


def test_mlp_factor_scales_its_output(tiny_llama):
    seen = []
    hook = ("blocks.0.hook_mlp_out", lambda x, hook: seen.append(x.clone()))
    ids, attention = Engine(tiny_llama).batch_inputs(SEQUENCES)
    with torch.no_grad():
        with tiny_llama.hooks(fwd_hooks=[hook]):
            tiny_llama(ids, attention_mask=attention)
        with gate(tiny_llama, mlps={0: 0.25}), tiny_llama.hooks(fwd_hooks=[hook]):
            tiny_llama(ids, attention_mask=attention)
    # The observer hook runs after the gate's hook on the same point.
    torch.testing.assert_close(seen[1], 0.25 * seen[0])


def test_hooks_removed_and_model_unchanged_on_exception(tiny_llama):
    hooks = hook_count(tiny_llama)
    state = {k: v.clone() for k, v in tiny_llama.original_model.state_dict().items()}
    clean = batch_logits(tiny_llama)
    with pytest.raises(RuntimeError, match="inside"):
        with gate(tiny_llama, heads={(0, 0): 0.0, (1, 3): 2.0}, mlps={1: 0.5}):
            assert hook_count(tiny_llama) > hooks
            raise RuntimeError("inside")
    assert hook_count(tiny_llama) == hooks
    for name, value in tiny_llama.original_model.state_dict().items():
        assert torch.equal(value, state[name]), name
    assert torch.equal(batch_logits(tiny_llama), clean)


def test_gates_object_round_trip_and_bad_input(tiny_llama):
    gates = Gates(heads={(1, 2): 0.5}, mlps={0: 2.0})
    assert len(gates) == 2
    assert Gates.from_dict(gates.to_dict()) == gates
    assert gates.labels() == ["L1H2=0.5", "MLP0=2"]
    with gates.apply(tiny_llama):
        gated = batch_logits(tiny_llama)
    with gate(tiny_llama, heads={(1, 2): 0.5}, mlps={0: 2.0}):
        assert torch.equal(batch_logits(tiny_llama), gated)
    with pytest.raises(ValueError, match="out of range"):
        with gate(tiny_llama, heads={(2, 0): 0.5}):
            pass
    with pytest.raises(ValueError, match="finite"):
        Gates(mlps={0: float("nan")})
