"""Per-component gates: scale chosen attention heads and MLPs by their own factors.

``with gate(model, heads={(12, 3): 0.0, (14, 1): 1.5}, mlps={10: 0.5}):`` multiplies head
``(12, 3)``'s input to ``W_O`` (its ``z``) by 0, head ``(14, 1)``'s by 1.5 and MLP 10's output by
0.5 in every forward pass while the block runs (engine runs and generation included). A factor of
0 ablates the component (its write vanishes; the attention output bias stays), 1 leaves it
unchanged, above 1 amplifies it and a negative factor flips its write. Hooks are removed on exit,
also when an exception is raised inside, and no parameter is ever modified.

:func:`edit_components` is the hook machinery underneath: any per-layer edit of chosen heads' ``z``
and of MLP outputs. :func:`mechrag.ablate` uses it for its zero, scale and mean modes.
:class:`Gates` is a set of factors that gating rules return, serialise and apply.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch
from jaxtyping import Float
from torch import Tensor

from mechrag.errors import InputError
from mechrag.models import adapter

# ``edit(activation)`` returns the replacement for a [..., n_chosen, d_head] slice of ``z`` (heads)
# or for a [..., d_model] MLP output.
Edit = Callable[[Tensor], Tensor]


def check_components(model, heads: Sequence[tuple[int, int]], mlps: Sequence[int]) -> None:
    """Raise ``ValueError`` for a head or MLP the model does not have."""
    n_layers, n_heads = adapter.n_layers(model), adapter.n_heads(model)
    for layer, head in heads:
        if not (0 <= layer < n_layers and 0 <= head < n_heads):
            raise InputError(f"head {layer}.{head} out of range ({n_layers} x {n_heads} heads)")
    for layer in mlps:
        if not 0 <= layer < n_layers:
            raise InputError(f"MLP {layer} out of range ({n_layers} layers)")


def _head_hook(chosen: list[int], edit: Edit):
    def hook(z: Float[Tensor, "batch pos n_heads d_head"], hook) -> Tensor:
        z = z.clone()
        z[..., chosen, :] = edit(z[..., chosen, :])
        return z

    return hook


def _mlp_hook(edit: Edit):
    return lambda out, hook: edit(out)


@contextmanager
def edit_components(
    model,
    heads: Mapping[int, tuple[list[int], Edit]],
    mlps: Mapping[int, Edit],
) -> Iterator[None]:
    """Apply ``heads[layer] = (chosen heads, edit)`` to ``z`` and ``mlps[layer] = edit`` to the
    MLP output of each listed layer while the block runs; hooks are always removed."""
    check_components(
        model, [(layer, h) for layer, (chosen, _) in heads.items() for h in chosen], list(mlps)
    )
    hooks = [
        (adapter.hook_name(layer, "z"), _head_hook(list(chosen), edit))
        for layer, (chosen, edit) in heads.items()
    ]
    hooks += [
        (adapter.hook_name(layer, "mlp_out"), _mlp_hook(edit)) for layer, edit in mlps.items()
    ]
    with model.hooks(fwd_hooks=hooks):
        yield


def _scaler(factors: Sequence[float]) -> Edit:
    """Multiply a [..., n_chosen, d_head] slice by one factor per chosen head."""
    weights = torch.tensor(list(factors), dtype=torch.float64)  # host: moved to each z below

    def edit(z: Tensor) -> Tensor:
        return z * weights.to(z.device, z.dtype)[:, None]

    return edit


def _mlp_scaler(factor: float) -> Edit:
    return lambda out: out * factor


def _check_factor(factor: float) -> float:
    factor = float(factor)
    if not math.isfinite(factor):
        raise InputError(f"gate factors must be finite, got {factor}")
    return factor


@contextmanager
def gate(
    model,
    heads: Mapping[tuple[int, int], float] | None = None,
    mlps: Mapping[int, float] | None = None,
) -> Iterator[None]:
    """Scale head ``(layer, head)``'s ``z`` by ``heads[(layer, head)]`` and MLP ``layer``'s output
    by ``mlps[layer]`` while the block runs (0 ablates, 1 keeps, > 1 amplifies)."""
    by_layer: dict[int, dict[int, float]] = {}
    for (layer, head), factor in (heads or {}).items():
        by_layer.setdefault(int(layer), {})[int(head)] = _check_factor(factor)
    head_edits = {
        layer: (list(chosen), _scaler(list(chosen.values()))) for layer, chosen in by_layer.items()
    }
    mlp_edits = {int(layer): _mlp_scaler(_check_factor(f)) for layer, f in (mlps or {}).items()}
    with edit_components(model, head_edits, mlp_edits):
        yield


@dataclass
class Gates:
    """Gate factors for heads ``(layer, head)`` and MLPs ``layer`` (unlisted components: 1)."""

    heads: dict[tuple[int, int], float] = field(default_factory=dict)
    mlps: dict[int, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.heads = {
            (int(layer), int(head)): _check_factor(f) for (layer, head), f in self.heads.items()
        }
        self.mlps = {int(layer): _check_factor(f) for layer, f in self.mlps.items()}

    def __len__(self) -> int:
        return len(self.heads) + len(self.mlps)

    def apply(self, model):
        """The :func:`gate` context manager for these factors."""
        return gate(model, self.heads, self.mlps)

    def to_dict(self) -> dict:
        """JSON-ready: ``{"heads": {"12.3": 0.5}, "mlps": {"10": 0.0}}``."""
        return {
            "heads": {f"{layer}.{head}": f for (layer, head), f in self.heads.items()},
            "mlps": {str(layer): f for layer, f in self.mlps.items()},
        }

    @classmethod
    def from_dict(cls, data: dict) -> Gates:
        heads = {tuple(map(int, k.split("."))): f for k, f in data.get("heads", {}).items()}
        return cls(heads, {int(k): f for k, f in data.get("mlps", {}).items()})

    def labels(self) -> list[str]:
        """``L{layer}H{head}=factor`` and ``MLP{layer}=factor`` strings, for tables."""
        return [f"L{layer}H{head}={f:.3g}" for (layer, head), f in self.heads.items()] + [
            f"MLP{layer}={f:.3g}" for layer, f in self.mlps.items()
        ]
