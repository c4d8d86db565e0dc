"""Component ablation: matches an independent intervention, always undone, weights untouched;
uniform attention is exactly uniform; random components are uniform over the pool without the
excluded ones."""

from __future__ import annotations

from itertools import combinations

import numpy as np
import pytest
import torch
from helpers import SEQUENCES, batch_logits, hook_count
from scipy.stats import chisquare

from mechrag.engine import Engine
from mechrag.errors import InputError
from mechrag.mechanism import ablate, component_means, parse_heads
from mechrag.mechanism.ablation import random_components


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
    with pytest.raises(InputError, match="heads only"):
        with ablate(tiny_llama, heads=[(0, 0)], mlps=[1], mode="uniform"):
            pass
    with pytest.raises(InputError, match="out of range"):
        with ablate(tiny_llama, heads=[(0, 4)], mode="uniform"):
            pass
    assert parse_heads(["12.3", "0.0"]) == [(12, 3), (0, 0)]
    with pytest.raises(ValueError, match="LAYER.HEAD"):
        parse_heads(["12"])


@pytest.fixture(scope="module")
def tiny_mistral():
    from mechrag.models.toy import tiny_model

    return tiny_model("mistral")  # a 32-token sliding window on every layer


def _patterns(model, ids, attention=None) -> list[torch.Tensor]:
    """Every layer's attention pattern ``[batch, head, q, k]`` read from the cache."""
    with torch.no_grad():
        _, cache = model.run_with_cache(ids, attention_mask=attention)
    return [cache[f"blocks.{layer}.attn.hook_pattern"] for layer in range(model.cfg.n_layers)]


def _uniform_over(allowed: torch.Tensor) -> torch.Tensor:
    """Rows of 1/(number of allowed keys) on the allowed keys, 0 elsewhere."""
    allowed = allowed.float()
    return allowed / allowed.sum(-1, keepdim=True)


@pytest.mark.parametrize("family", ["tiny_llama", "tiny_gpt2"])
def test_uniform_attention_is_one_over_prefix_length(family, request):
    model = request.getfixturevalue(family)
    ids = torch.tensor([SEQUENCES[0]])
    n = ids.shape[1]
    clean = _patterns(model, ids)
    # Heads 0 and 2 of layer 1; on the Llama model head 1 shares head 0's keys and values.
    with ablate(model, heads=[(1, 0), (1, 2)], mode="uniform"):
        ablated = _patterns(model, ids)
    expected = torch.tril(torch.ones(n, n)) / torch.arange(1, n + 1)[:, None]
    assert expected[3, 0] == 1 / 4
    for head in (0, 2):
        torch.testing.assert_close(ablated[1][0, head], expected, atol=0, rtol=0)
        assert not torch.allclose(clean[1][0, head], expected)
    torch.testing.assert_close(ablated[0], clean[0], atol=0, rtol=0)
    torch.testing.assert_close(ablated[1][:, [1, 3]], clean[1][:, [1, 3]], atol=0, rtol=0)
    torch.testing.assert_close(_patterns(model, ids)[1], clean[1], atol=0, rtol=0)  # undone


def test_uniform_attention_skips_padding_and_keeps_the_window(tiny_llama, tiny_mistral):
    ids, attention = Engine(tiny_llama).batch_inputs(SEQUENCES)
    with ablate(tiny_llama, heads=[(0, 3)], mode="uniform"):
        pattern = _patterns(tiny_llama, ids, attention)[0][:, 3]
    for row, mask in enumerate(attention.bool()):
        real = mask.nonzero().squeeze(-1)  # left padding: the real tokens are the last ones
        allowed = torch.tril(torch.ones(len(mask), len(mask), dtype=torch.bool)) & mask
        torch.testing.assert_close(pattern[row, real], _uniform_over(allowed)[real])
    # Sliding window: key j is visible from query i when 0 <= i - j < 32 (beyond it: masked).
    n = 40
    ids = torch.arange(5, 5 + n)[None]
    clean = _patterns(tiny_mistral, ids)[1]
    with ablate(tiny_mistral, heads=[(1, 1)], mode="uniform"):
        ablated = _patterns(tiny_mistral, ids)[1]
    offset = torch.arange(n)[:, None] - torch.arange(n)[None]
    window = (offset >= 0) & (offset < 32)
    torch.testing.assert_close(ablated[0, 1], _uniform_over(window), atol=0, rtol=1e-6)
    assert (ablated[0, 1, -1] > 0).sum() == 32
    torch.testing.assert_close(ablated[0, [0, 2, 3]], clean[0, [0, 2, 3]], atol=0, rtol=0)


def test_uniform_attention_matches_zeroed_query_projection(tiny_llama):
    """The same forward pass as zeroing the head's rows of ``q_proj``'s output by hand."""
    head, d_head = 2, tiny_llama.cfg.d_head

    def zero_query(module, args, output):
        output = output.clone()
        output[..., head * d_head : (head + 1) * d_head] = 0
        return output

    q_proj = tiny_llama.blocks[1].attn.q.original_component
    handle = q_proj.register_forward_hook(zero_query)
    try:
        expected = batch_logits(tiny_llama)
    finally:
        handle.remove()
    clean = batch_logits(tiny_llama)
    with ablate(tiny_llama, heads=[(1, head)], mode="uniform"):
        ablated = batch_logits(tiny_llama)
    assert (ablated - clean).abs().max() > 1e-3
    torch.testing.assert_close(ablated, expected, atol=1e-5, rtol=1e-5)


def test_uniform_hooks_removed_on_exception(tiny_llama):
    hooks = hook_count(tiny_llama)
    clean = batch_logits(tiny_llama)
    with pytest.raises(RuntimeError, match="inside"):
        with ablate(tiny_llama, heads=[(0, 0), (1, 3)], mode="uniform"):
            assert hook_count(tiny_llama) == hooks + 2  # one query hook per layer
            raise RuntimeError("inside")
    assert hook_count(tiny_llama) == hooks
    torch.testing.assert_close(batch_logits(tiny_llama), clean, atol=0, rtol=0)


def test_random_components_is_uniform_over_the_pool_without_the_excluded():
    excluded = [(0, 1), (2, 3), (1, 0)]
    eligible = [(layer, h) for layer in range(3) for h in range(4) if (layer, h) not in excluded]
    draws = [
        random_components(3, 4, 3, exclude_heads=excluded, rng=np.random.default_rng([0, i]))
        for i in range(2000)
    ]
    assert all(mlps == [] and len(set(heads)) == 3 for heads, mlps in draws)
    picks = [head for heads, _ in draws for head in heads]
    assert not set(picks) & set(excluded)
    assert chisquare([picks.count(c) for c in eligible]).pvalue > 1e-3
    subsets = [frozenset(heads) for heads, _ in draws]
    assert chisquare([subsets.count(frozenset(c)) for c in combinations(eligible, 3)]).pvalue > 1e-3
    # The whole pool: every head and MLP but the excluded ones.
    heads, mlps = random_components(
        2, 2, 4, exclude_heads=[(0, 0)], exclude_mlps=[1], kind="all", rng=np.random.default_rng(0)
    )
    assert sorted(heads) == [(0, 1), (1, 0), (1, 1)] and mlps == [0]
    assert random_components(3, 4, 2, kind="mlp", rng=np.random.default_rng(0))[0] == []
    with pytest.raises(InputError, match="cannot draw 4"):
        random_components(2, 2, 4, exclude_heads=[(0, 0)], rng=np.random.default_rng(0))
    with pytest.raises(InputError, match="kind"):
        random_components(2, 2, 1, kind="heads", rng=np.random.default_rng(0))


