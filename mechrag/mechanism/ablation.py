"""Component ablation through hooks: zero, scale or mean-ablate heads and MLPs, or flatten a
head's attention to uniform.

``ablate(model, heads=[(12, 3)], mlps=[10], mode="zero")`` is a context manager; while it is
active every forward pass of ``model`` (including :class:`mechrag.Engine` runs and generation)
sees the chosen components masked. The hooks are removed on exit, also when an exception is
raised inside, and no parameter is ever modified. The masking styles of ARC-JSD's component
ablation (Li et al., arXiv 2505.16415, §7, Appendix I, Table 5):

* ``zero``: the component writes nothing (for a head, its ``z``, the input to ``W_O``, is 0; the
  output bias stays). The zero and scale modes are :func:`mechrag.gate` with one factor.
* ``scale``: the activation is multiplied by ``scale``.
* ``mean``: the activation is replaced by its mean over reference tokens (``component_means``).
* ``uniform``: the head's query states are zeroed, so ``QK^T = 0`` and the head attends
  uniformly to every key its mask allows: the causal prefix, the window on sliding-window
  layers, never padding. This is what the official code does (its flash-attention path, the
  default, sets the blocked heads' ``query_states`` to 0 after RoPE; the text does not say how
  heads are masked). mechrag zeroes ``hook_q``, the query projection's output (bias included),
  before the bridge applies RoPE and the RMS query norm of Gemma 3 / Qwen 3: both map 0 to 0
  (RoPE is linear; the norm scales by ``1 / sqrt(eps)`` at 0), so the queries reaching
  ``QK^T`` are zero exactly as after RoPE, on learned-position models (GPT-2) too. The masks
  (causal, window, padding) stay the model's own, which a hook on the scores would have to
  re-derive, and Gemma 2's score soft-cap keeps 0 at 0. (A model with attention sinks, whose
  learned logit joins the softmax, would not be uniform.) The head's own keys and values are
  untouched, but its uniform output changes every later layer's inputs, so no cache computed
  without the ablation is valid under it (the case keys its caches by the active hooks). The
  paper ablates heads only; uniform attention means nothing for an MLP, so ``mlps`` raise
  :class:`InputError` in this mode.

:func:`random_components` draws the control set of that experiment: components chosen
uniformly, independently for every example, never one of the example's top-k.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import torch
from jaxtyping import Float
from torch import Tensor

from mechrag.errors import InputError
from mechrag.mechanism.gating.gates import _head_hook, check_components, edit_components, gate
from mechrag.models import adapter

MODES = ("zero", "scale", "mean", "uniform")
KINDS = ("head", "mlp", "all")


@dataclass
class ComponentMeans:
    """Mean activations over the real (unpadded) tokens of reference prompts."""

    z: Float[Tensor, "n_layers n_heads d_head"]
    mlp_out: Float[Tensor, "n_layers d_model"]


def parse_heads(specs: Iterable[str]) -> list[tuple[int, int]]:
    """``["12.3", "14.0"]`` -> ``[(12, 3), (14, 0)]`` (layer.head)."""
    heads = []
    for spec in specs:
        layer, dot, head = str(spec).partition(".")
        if not dot or not layer.isdigit() or not head.isdigit():
            raise InputError(f"head {spec!r} must be written LAYER.HEAD, e.g. 12.3")
        heads.append((int(layer), int(head)))
    return heads


@torch.inference_mode()
def component_means(model, engine, sequences: list[list[int]]):
    """Mean ``z`` per head and mean MLP output per layer over all tokens of ``sequences``.

    Sequences are batched by the engine's planner (its token budget and padding overhead).
    """
    n_layers = adapter.n_layers(model)
    sums: dict[str, list] = {"z": [0.0] * n_layers, "mlp_out": [0.0] * n_layers}
    count = 0

    def adder(key: str, layer: int, mask: Tensor):
        def hook(activation: Tensor, hook) -> None:
            weights = mask.reshape(*mask.shape, *[1] * (activation.ndim - 2)).to(activation)
            sums[key][layer] = sums[key][layer] + (activation.float() * weights).sum((0, 1))

        return hook

    # No prefix is shared (nothing is cached), and only the last position's logits are asked.
    plan = engine.plan(sequences, prefixes=[0] * len(sequences), n_response=1)
    for batch in plan:
        ids, attention = engine.batch_inputs([sequences[row] for row in batch.rows])
        hooks = [
            (adapter.hook_name(layer, key), adder(key, layer, attention))
            for key in ("z", "mlp_out")
            for layer in range(n_layers)
        ]
        with model.hooks(fwd_hooks=hooks):
            adapter.forward(model, ids, attention, n_logits=1)
        count += int(attention.sum())
    if count == 0:
        raise ValueError("no reference tokens to average over")
    return ComponentMeans(
        z=torch.stack(sums["z"]) / count, mlp_out=torch.stack(sums["mlp_out"]) / count
    )


@contextmanager
def ablate(
    model,
    heads: Iterable[tuple[int, int]] = (),
    mlps: Iterable[int] = (),
    mode: str = "zero",
    scale: float = 0.0,
    means: ComponentMeans | None = None,
) -> Iterator[None]:
    """Ablate ``heads`` ((layer, head) pairs) and ``mlps`` (layers) while the block runs.

    ``zero`` and ``scale`` are :func:`mechrag.gate` with one factor (0 or ``scale``) for every
    chosen component; ``mean`` replaces the activations with ``means``; ``uniform`` zeroes the
    chosen heads' queries (heads only). See the module docstring.
    """
    heads, mlps = [tuple(map(int, h)) for h in heads], sorted({int(m) for m in mlps})
    if mode not in MODES:
        raise InputError(f"mode must be one of {MODES}, got {mode!r}")
    if mode == "mean" and means is None:
        raise InputError("mode='mean' needs means=component_means(...)")
    if mode == "uniform" and mlps:
        raise InputError("mode='uniform' masks attention heads only; ablate MLPs with zero/mean")
    if mode in ("zero", "scale"):
        factor = 0.0 if mode == "zero" else scale
        with gate(model, dict.fromkeys(heads, factor), dict.fromkeys(mlps, factor)):
            yield
        return
    check_components(model, heads, mlps)
    by_layer: dict[int, list[int]] = {}
    for layer, head in heads:
        by_layer.setdefault(layer, []).append(head)
    if mode == "uniform":
        hooks = [
            (adapter.hook_name(layer, "q"), _head_hook(chosen, torch.zeros_like))
            for layer, chosen in by_layer.items()
        ]
        with model.hooks(fwd_hooks=hooks):
            yield
        return

    def replace_with(mean: Tensor):
        return lambda activation: mean.to(activation).expand_as(activation)

    head_edits = {
        layer: (chosen, replace_with(means.z[layer, chosen])) for layer, chosen in by_layer.items()
    }
    mlp_edits = {layer: replace_with(means.mlp_out[layer]) for layer in mlps}
    with edit_components(model, head_edits, mlp_edits):
        yield


def random_components(
    n_layers: int,
    n_heads: int,
    k: int,
    *,
    exclude_heads: Iterable[tuple[int, int]] = (),
    exclude_mlps: Iterable[int] = (),
    kind: str = "head",
    rng: np.random.Generator,
) -> tuple[list[tuple[int, int]], list[int]]:
    """``k`` distinct components drawn uniformly from ``kind``'s pool minus the excluded ones.

    The pool is every head (``"head"``), every MLP (``"mlp"``) or both (``"all"``); the draw is
    the random control of ARC-JSD's Table 5, where the excluded components are the example's
    own top-k, and a fresh ``rng`` per example makes the draws independent across examples.
    Returns ``(heads, mlps)``, each in drawing order.
    """
    if kind not in KINDS:
        raise InputError(f"kind must be one of {KINDS}, got {kind!r}")
    excluded = {("head", int(layer), int(head)) for layer, head in exclude_heads}
    excluded |= {("mlp", int(layer), None) for layer in exclude_mlps}
    pool = []
    if kind in ("head", "all"):
        pool += [("head", layer, head) for layer in range(n_layers) for head in range(n_heads)]
    if kind in ("mlp", "all"):
        pool += [("mlp", layer, None) for layer in range(n_layers)]
    pool = [component for component in pool if component not in excluded]
    if not 0 <= k <= len(pool):
        raise InputError(f"cannot draw {k} components from {len(pool)} ({kind}, top-k excluded)")
    drawn = [pool[index] for index in rng.choice(len(pool), size=k, replace=False)]
    return (
        [(layer, head) for name, layer, head in drawn if name == "head"],
        [layer for name, layer, _ in drawn if name == "mlp"],
    )
