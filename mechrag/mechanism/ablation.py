"""Component ablation through hooks: scale, zero or mean-ablate chosen heads and MLPs.

``ablate(model, heads=[(12, 3)], mlps=[10], mode="zero")`` is a context manager; while it is
active every forward pass of ``model`` (including :class:`mechrag.Engine` runs) sees the chosen
heads' ``z`` (their input to ``W_O``) and the chosen MLPs' outputs replaced. The hooks are removed
on exit, also when an exception is raised inside, and no parameter is ever modified.

* ``zero``: the component writes nothing (for a head, ``z = 0``; the output bias stays).
* ``scale``: the activation is multiplied by ``scale``.
* ``mean``: the activation is replaced by its mean over reference tokens (``component_means``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import torch
from jaxtyping import Float
from torch import Tensor

from mechrag import adapter

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
            raise ValueError(f"head {spec!r} must be written LAYER.HEAD, e.g. 12.3")
        heads.append((int(layer), int(head)))
    return heads


def _check(model, heads: Sequence[tuple[int, int]], mlps: Sequence[int]) -> None:
    n_layers, n_heads = model.cfg.n_layers, model.cfg.n_heads
    for layer, head in heads:
        if not (0 <= layer < n_layers and 0 <= head < n_heads):
            raise ValueError(f"head {layer}.{head} out of range ({n_layers} x {n_heads} heads)")
    for layer in mlps:
        if not 0 <= layer < n_layers:
            raise ValueError(f"MLP {layer} out of range ({n_layers} layers)")


@torch.inference_mode()
def component_means(model, engine, sequences: list[list[int]], batch_size: int = 4):
    """Mean ``z`` per head and mean MLP output per layer over all tokens of ``sequences``."""
    n_layers = model.cfg.n_layers
    sums: dict[str, list] = {"z": [0.0] * n_layers, "mlp_out": [0.0] * n_layers}
    count = 0

    def adder(key: str, layer: int, mask: Tensor):
        def hook(activation: Tensor, hook) -> None:
            weights = mask.reshape(*mask.shape, *[1] * (activation.ndim - 2)).to(activation)
            sums[key][layer] = sums[key][layer] + (activation.float() * weights).sum((0, 1))

        return hook

    for start in range(0, len(sequences), batch_size):
        ids, attention = engine.batch_inputs(sequences[start : start + batch_size])
        hooks = [
            (f"blocks.{layer}.{name}", adder(key, layer, attention))
            for key, name in (("z", "attn.hook_z"), ("mlp_out", "hook_mlp_out"))
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


def _replace(mode: str, scale: float, mean: Tensor | None):
    def edit(activation: Tensor) -> Tensor:
        if mode == "mean":
            return mean.to(activation).expand_as(activation)
        return activation * (0.0 if mode == "zero" else scale)

    return edit


@contextmanager
def ablate(
    model,
    heads: Iterable[tuple[int, int]] = (),
    mlps: Iterable[int] = (),
    mode: str = "zero",
    scale: float = 0.0,
    means: ComponentMeans | None = None,
) -> Iterator[None]:
    """Ablate ``heads`` ((layer, head) pairs) and ``mlps`` (layers) while the block runs."""
    heads, mlps = [tuple(map(int, h)) for h in heads], sorted({int(m) for m in mlps})
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    if mode == "mean" and means is None:
        raise ValueError("mode='mean' needs means=component_means(...)")
    _check(model, heads, mlps)
    by_layer: dict[int, list[int]] = {}
    for layer, head in heads:
        by_layer.setdefault(layer, []).append(head)

    def head_hook(layer: int, chosen: list[int]):
        edit = _replace(mode, scale, None if means is None else means.z[layer, chosen])

        def hook(z: Tensor, hook) -> Tensor:
            z = z.clone()
            z[..., chosen, :] = edit(z[..., chosen, :])
            return z

        return hook

    def mlp_hook(layer: int):
        edit = _replace(mode, scale, None if means is None else means.mlp_out[layer])
        return lambda out, hook: edit(out)

    hooks = [
        (f"blocks.{layer}.attn.hook_z", head_hook(layer, chosen))
        for layer, chosen in by_layer.items()
    ]
    hooks += [(f"blocks.{layer}.hook_mlp_out", mlp_hook(layer)) for layer in mlps]
    with model.hooks(fwd_hooks=hooks):
        yield
