"""Component ablation through hooks: scale, zero or mean-ablate chosen heads and MLPs.

The hooks are those of :mod:`mechrag.mechanism.gates` (``zero``/``scale`` are uniform gates).

``ablate(model, heads=[(12, 3)], mlps=[10], mode="zero")`` is a context manager; while it is
active every forward pass of ``model`` (including :class:`mechrag.Engine` runs) sees the chosen
heads' ``z`` (their input to ``W_O``) and the chosen MLPs' outputs replaced. The hooks are removed
on exit, also when an exception is raised inside, and no parameter is ever modified.

* ``zero``: the component writes nothing (for a head, ``z = 0``; the output bias stays).
* ``scale``: the activation is multiplied by ``scale``.
* ``mean``: the activation is replaced by its mean over reference tokens (``component_means``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch
from jaxtyping import Float
from torch import Tensor

from mechrag import adapter
from mechrag.errors import InputError
from mechrag.mechanism.gates import check_components, edit_components, gate

MODES = ("zero", "scale", "mean")


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
    chosen component; ``mean`` replaces the activations with ``means``.
    """
    heads, mlps = [tuple(map(int, h)) for h in heads], sorted({int(m) for m in mlps})
    if mode not in MODES:
        raise InputError(f"mode must be one of {MODES}, got {mode!r}")
    if mode == "mean" and means is None:
        raise InputError("mode='mean' needs means=component_means(...)")
    if mode != "mean":
        factor = 0.0 if mode == "zero" else scale
        with gate(model, dict.fromkeys(heads, factor), dict.fromkeys(mlps, factor)):
            yield
        return
    check_components(model, heads, mlps)
    by_layer: dict[int, list[int]] = {}
    for layer, head in heads:
        by_layer.setdefault(layer, []).append(head)

    def replace_with(mean: Tensor):
        return lambda activation: mean.to(activation).expand_as(activation)

    head_edits = {
        layer: (chosen, replace_with(means.z[layer, chosen])) for layer, chosen in by_layer.items()
    }
    mlp_edits = {layer: replace_with(means.mlp_out[layer]) for layer in mlps}
    with edit_components(model, head_edits, mlp_edits):
        yield
