"""The adapter boundary: hook names, model dimensions and the active-hook signature."""

from __future__ import annotations

from contextlib import contextmanager

import numpy as np
import pytest
import torch
from helpers import SEQUENCES, hook_count

from mechrag.attribution.screening import source_gates
from mechrag.engine import Engine
from mechrag.mechanism.ablation import ablate, component_means
from mechrag.mechanism.gating.gates import gate
from mechrag.models import adapter

FAMILIES = ["tiny_llama", "tiny_gpt2"]


def _keep(activation, hook):
    return None


@pytest.mark.parametrize("family", FAMILIES)
def test_every_hook_name_is_a_hook_point(family, request):
    model = request.getfixturevalue(family)
    for layer in range(adapter.n_layers(model)):
        for site in adapter.HOOKS:
            assert adapter.hook_name(layer, site) in model.hook_dict, (layer, site)
    assert adapter.attention_scores_hook(1) == adapter.hook_name(1, "attn_scores")


@pytest.mark.parametrize("family", FAMILIES)
def test_dimensions_match_the_model(family, request):
    model = request.getfixturevalue(family)
    z = model.run_with_cache(torch.tensor([[1, 2, 3]]))[1][adapter.hook_name(0, "z")]
    assert adapter.n_layers(model) == len(model.blocks) == 2
    assert adapter.n_heads(model) == z.shape[-2] == 4
    assert adapter.vocab_size(model) == 259


@contextmanager
def _added_with_add_hook(model):
    """Two hooks attached by ``model.add_hook`` (one of them permanent), then removed."""
    model.add_hook(adapter.hook_name(0, "resid_pre"), _keep)
    model.add_hook(adapter.hook_name(1, "mlp_out"), _keep, is_permanent=True)
    try:
        yield
    finally:
        model.reset_hooks(including_permanent=True)


def _interventions(model):
    """``(label, context manager, forward hooks it adds)`` for every way hooks get attached."""
    means = component_means(model, Engine(model), SEQUENCES)
    n_layers = adapter.n_layers(model)
    return [
        ("model.hooks", model.hooks(fwd_hooks=[(adapter.hook_name(0, "z"), _keep)] * 2), 2),
        ("model.add_hook", _added_with_add_hook(model), 2),
        ("ablate zero", ablate(model, heads=[(0, 1), (1, 2)], mlps=[1]), 3),
        ("ablate mean", ablate(model, heads=[(1, 0)], mlps=[0], mode="mean", means=means), 2),
        ("gate", gate(model, {(0, 0): 0.5, (0, 1): 2.0}, {0: 0.0, 1: 1.5}), 3),
        (
            "screening attention bias",
            source_gates(model, np.array([0, -1]), torch.ones(1, 1), length=4),
            n_layers,
        ),
    ]


@pytest.mark.parametrize("family", FAMILIES)
def test_active_hooks_sees_every_intervention(family, request):
    """Each way of attaching hooks changes the signature by exactly its hooks, agreeing with
    torch's own count, and leaving restores it."""
    model = request.getfixturevalue(family)
    before = adapter.active_hooks(model)
    assert len(before) == hook_count(model)
    for label, intervention, n_hooks in _interventions(model):
        with intervention:
            inside = adapter.active_hooks(model)
            assert len(inside) == len(before) + n_hooks == hook_count(model), label
            assert set(before) < set(inside), label
        assert adapter.active_hooks(model) == before, label


def test_active_hooks_is_equal_for_the_same_set_and_fresh_per_registration(tiny_llama):
    before = adapter.active_hooks(tiny_llama)
    with gate(tiny_llama, mlps={0: 0.5}):
        first = adapter.active_hooks(tiny_llama)
        assert adapter.active_hooks(tiny_llama) == first
        with gate(tiny_llama, mlps={1: 0.5}):
            assert adapter.active_hooks(tiny_llama) != first
        assert adapter.active_hooks(tiny_llama) == first
    with gate(tiny_llama, mlps={0: 0.5}):
        assert adapter.active_hooks(tiny_llama) not in (before, first)


def test_active_hooks_ignores_backward_hooks(tiny_llama):
    """A backward hook cannot change a forward pass, so cached forward results stay valid."""
    before = adapter.active_hooks(tiny_llama)
    with tiny_llama.hooks(bwd_hooks=[(adapter.hook_name(0, "resid_post"), _keep)]):
        assert adapter.active_hooks(tiny_llama) == before
