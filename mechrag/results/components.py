"""Component attributions: a score per attention head and MLP, plus the residual-stream curve.

:class:`ComponentAttribution` is what :func:`mechrag.localize` returns: a
:class:`~mechrag.results.Result` whose items are the heads (flat, layer-major) then the MLPs,
labelled ``L{layer}H{head}`` and ``MLP{layer}``. Results also average over examples
(``average``) and draw layer-wise figures. ARC-JSD's Eq. 5 ranks heads (over all ``(l, h)``
jointly) and MLPs separately: that is ``top(k, kind="head")`` and ``top(k, kind="mlp")``, and
``to_dict`` carries both lists (``top_heads``, ``top_mlps``: derived, skipped by ``from_dict``).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import NamedTuple

import numpy as np
import pandas as pd
from jaxtyping import Float

from mechrag.errors import InputError
from mechrag.protocols import UNFIXED
from mechrag.results.base import Result

ARRAYS = ("heads", "mlps", "resid_post", "head_gain", "attn_gain", "mlp_gain")
# Semantic-gain definitions (see mechrag.mechanism.semantic_gain); the first is the paper's.
GAIN_DEFINITIONS = ("argmax_token", "residual_cosine")
DEFAULT_GAIN_DEFINITION = UNFIXED["gain_definition"]
LEGACY_GAIN_DEFINITION = "residual_cosine"  # the only one before ``gain_definition`` existed
HEAD_GAINS = ("auto", "own", "layer")
TOP_N = 10  # ARC-JSD's N: the length of the top-head and top-MLP lists in ``to_dict``


class Component(NamedTuple):
    """One ranked component; ``head`` is ``None`` for an MLP."""

    kind: str
    layer: int
    head: int | None
    score: float

    @property
    def label(self) -> str:
        return f"L{self.layer}H{self.head}" if self.kind == "head" else f"MLP{self.layer}"


@dataclass(repr=False)
class ComponentAttribution(Result):
    """Summed logit-lens JSD per component when ``source`` is removed from the context.

    ``heads[l, h]``, ``mlps[l]`` and ``resid_post[l]`` are ``sum_t JSD(lens_full || lens_ablated)``
    over response tokens for head ``(l, h)``'s write, MLP ``l``'s output and the residual stream
    after layer ``l``. ``head_gain``/``attn_gain``/``mlp_gain`` are semantic gains (see
    :mod:`mechrag.mechanism.semantic_gain`), when computed, under ``gain_definition``
    (``"argmax_token"``, the paper's, defines no per-head gain: ``head_gain`` is ``None``; a
    result with gains and no definition is ``"residual_cosine"``, as every record written before
    the field existed).
    """

    method: str = field(default="component_jsd", kw_only=True)
    query: str
    source_id: str
    response: str
    response_ids: list[int]
    heads: Float[np.ndarray, "n_layers n_heads"]
    mlps: Float[np.ndarray, " n_layers"]
    resid_post: Float[np.ndarray, " n_layers"]
    head_gain: Float[np.ndarray, "n_layers n_heads"] | None = None
    attn_gain: Float[np.ndarray, " n_layers"] | None = None
    mlp_gain: Float[np.ndarray, " n_layers"] | None = None
    gain_definition: str | None = None

    def __post_init__(self) -> None:
        for name in ARRAYS:
            value = getattr(self, name)
            if value is not None:
                setattr(self, name, np.asarray(value, dtype=np.float64))
        n_layers = self.heads.shape[0]
        if self.heads.ndim != 2:
            raise ValueError(f"heads must be [n_layers, n_heads], got {self.heads.shape}")
        for name in ("mlps", "resid_post", "attn_gain", "mlp_gain"):
            value = getattr(self, name)
            if value is not None and value.shape != (n_layers,):
                raise ValueError(f"{name} must be [{n_layers}], got {value.shape}")
        if self.head_gain is not None and self.head_gain.shape != self.heads.shape:
            raise ValueError(f"head_gain must be {self.heads.shape}, got {self.head_gain.shape}")
        has_gains = any(g is not None for g in (self.head_gain, self.attn_gain, self.mlp_gain))
        if self.gain_definition is None and has_gains:
            self.gain_definition = LEGACY_GAIN_DEFINITION
        if self.gain_definition is not None and self.gain_definition not in GAIN_DEFINITIONS:
            raise InputError(
                f"gain_definition must be one of {GAIN_DEFINITIONS}, got {self.gain_definition!r}"
            )
        if self.gain_definition == "argmax_token" and self.head_gain is not None:
            raise InputError("gain_definition 'argmax_token' defines no per-head gain (head_gain)")

    @property
    def n_layers(self) -> int:
        return self.heads.shape[0]

    @property
    def n_heads(self) -> int:
        return self.heads.shape[1]

    @property
    def attention(self) -> Float[np.ndarray, " n_layers"]:
        """Sum of the head scores of each layer."""
        return self.heads.sum(1)

    @property
    def scores(self) -> Float[np.ndarray, " n_components"]:
        """All component scores in flat order: heads (layer-major), then MLPs."""
        return np.concatenate([self.heads.ravel(), self.mlps])

    @property
    def gains(self) -> Float[np.ndarray, " n_components"] | None:
        """Semantic gains in the order of ``scores``: ``component_gains("auto")``."""
        return self.component_gains()

    def component_gains(self, head_gain: str = "auto") -> Float[np.ndarray, " n_components"] | None:
        """A semantic gain per component in the order of ``scores`` (``None`` without gains).

        ``head_gain``: what a head gets. ``"own"``: its own gain (``"residual_cosine"`` only;
        ``None`` where the result has none); ``"layer"``: its layer's attention gain, the
        paper's per-layer ``Delta^{l,Attn}`` (Eq. 9-10), which is all ARC-JSD defines for the
        heads of layer ``l``; ``"auto"``: ``"own"`` where the result has head gains, else
        ``"layer"``. MLPs always get their own gain.
        """
        if head_gain not in HEAD_GAINS:
            raise InputError(f"head_gain must be one of {HEAD_GAINS}, got {head_gain!r}")
        if head_gain == "auto":
            head_gain = "layer" if self.head_gain is None else "own"
        if head_gain == "own":
            heads = self.head_gain
        elif self.attn_gain is not None:
            heads = np.repeat(self.attn_gain[:, None], self.n_heads, axis=1)
        else:
            heads = None
        if heads is None or self.mlp_gain is None:
            return None
        return np.concatenate([heads.ravel(), self.mlp_gain])

    def component(self, index: int) -> Component:
        """The component at flat ``index`` with its score."""
        n_head_slots = self.heads.size
        if index < n_head_slots:
            layer, head = divmod(index, self.n_heads)
            return Component("head", layer, head, float(self.heads[layer, head]))
        layer = index - n_head_slots
        return Component("mlp", layer, None, float(self.mlps[layer]))

    @property
    def labels(self) -> list[str]:
        return [self.component(i).label for i in range(self.scores.size)]

    _item = component

    def _key_columns(self) -> dict:
        components = [self.component(i) for i in range(self.scores.size)]
        return {
            "kind": [c.kind for c in components],
            "layer": [c.layer for c in components],
            "head": pd.array([c.head for c in components], dtype="Int64"),
        }

    def _extra_columns(self) -> dict:
        gains = self.gains
        return {"semantic_gain": gains if gains is not None else np.nan}

    def _summary(self) -> str:
        return f"source={self.source_id!r}, layers={self.n_layers}, heads={self.n_heads}"

    def top(self, k: int = 10, kind: str | None = None) -> list[Component]:
        """The ``k`` highest-scoring components, optionally only ``kind`` ("head" or "mlp")."""
        if kind not in (None, "head", "mlp"):
            raise InputError(f"kind must be 'head', 'mlp' or None, got {kind!r}")
        if kind is None:
            return super().top(k)
        return [c for c in map(self.component, self.ranking.tolist()) if c.kind == kind][:k]

    def spearman(self) -> tuple[float, float]:
        """Spearman rho and p-value of all component scores against ``gains`` (heads and MLPs
        pooled: a robustness check beside the paper's per-layer consensus,
        :mod:`mechrag.mechanism.consensus`)."""
        from mechrag.metrics import spearman_test

        if self.gains is None:
            raise InputError("this result has no semantic gains")
        return spearman_test(self.scores, self.gains)

    @classmethod
    def average(cls, results: list[ComponentAttribution]) -> ComponentAttribution:
        """Element-wise mean over examples (``metadata['std']`` holds the standard deviations)."""
        if not results:
            raise InputError("nothing to average")
        shapes = {r.heads.shape for r in results}
        if len(shapes) != 1:
            raise InputError(f"results come from different models: head shapes {shapes}")
        definitions = {r.gain_definition for r in results}
        if len(definitions) != 1:
            named = sorted(map(str, definitions))
            raise InputError(f"results use different gain definitions: {named}")
        means, stds = {}, {}
        for name in ARRAYS:
            values = [getattr(r, name) for r in results]
            if all(v is not None for v in values):
                means[name], stds[name] = np.mean(values, 0), np.std(values, 0)
        return cls(
            method=results[0].method,
            query=f"mean over {len(results)} examples",
            source_id="",
            response="",
            response_ids=[],
            **means,
            gain_definition=definitions.pop(),
            metadata={"n": len(results), "std": {k: v.tolist() for k, v in stds.items()}},
        )

    def to_dict(self) -> dict:
        """The fields, plus the top :data:`TOP_N` heads and MLPs (Eq. 5), ranked separately."""
        return {
            **super().to_dict(),
            "top_heads": [_component_record(c) for c in self.top(TOP_N, kind="head")],
            "top_mlps": [_component_record(c) for c in self.top(TOP_N, kind="mlp")],
        }

    @classmethod
    def from_dict(cls, data: dict) -> ComponentAttribution:
        """Inverse of ``to_dict``; entries that are not fields (``top_heads``, ``top_mlps``, or
        what :func:`mechrag.mechanism.consensus.paper_record` adds) are skipped, and a record
        without ``gain_definition`` but with gains reads as ``"residual_cosine"``."""
        names = {f.name for f in fields(cls) if f.init}
        return super().from_dict({k: v for k, v in data.items() if k in names})

    def plot_heads(self, k: int = 10, ax=None, **kwargs):
        """Layers x heads heatmap with the top-``k`` heads annotated; returns the figure."""
        from mechrag.plots.components import plot_heads

        return plot_heads(self, k=k, ax=ax, **kwargs)

    def plot_layers(self, ax=None, **kwargs):
        """MLP and attention-sum scores across layers; returns the figure."""
        from mechrag.plots.components import plot_layers

        return plot_layers(self, ax=ax, **kwargs)

    def plot_residual(self, ax=None, **kwargs):
        """Residual-stream logit-lens JSD across layers; returns the figure."""
        from mechrag.plots.components import plot_residual

        return plot_residual(self, ax=ax, **kwargs)

    def plot_gain(self, ax=None, **kwargs):
        """Semantic gain against component JSD, with Spearman rho; returns the figure."""
        from mechrag.plots.components import plot_gain_scatter

        return plot_gain_scatter(self, ax=ax, **kwargs)


def _component_record(component: Component) -> dict:
    """One ranked component as JSON: label, kind, layer, head (``None`` for an MLP), score."""
    return {"label": component.label, **component._asdict()}
