"""Gating rules: gate factors from component context JSD and semantic gain.

Input: a :class:`~mechrag.mechanism.result.ComponentAttribution` (per example, or averaged over a
calibration set with ``ComponentAttribution.average``) with scores ``J_c`` (summed logit-lens JSD
of component ``c``'s write when the top source is removed: how much context the component
carries) and semantic gains ``G_c`` (toward the response). ``T_k`` is the set of the ``k``
components with the highest ``J_c``; components outside the rule's set keep factor 1.

* ``damp``: ``f_c = factor`` for ``c in T_k`` with ``G_c < 0``: damp components that carry
  context but push the residual stream away from what the model says.
* ``sigmoid``: ``f_c = a + (1 - a) * sigmoid(G_c / s)`` for ``c in T_k`` (``a = factor``, the
  floor; ``s = scale``, default the standard deviation of all gains): context carriers are damped
  toward ``a`` the more negative their gain, and kept near 1 when it is positive.
* ``amplify``: ``f_c = factor`` (> 1) for ``c in T_k``: amplify the context carriers.

:func:`random_gates` places the same factors on randomly chosen components (the control).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

import numpy as np

from mechrag.errors import InputError

if TYPE_CHECKING:  # the rules themselves need only numpy: the command line reads RULES fast
    from mechrag.mechanism.gates import Gates
    from mechrag.mechanism.result import ComponentAttribution

RULES = ("damp", "sigmoid", "amplify")
# When gates act during generation: ``dynamic`` only at steps whose context echo is below the
# threshold (:mod:`mechrag.mechanism.gated_decoding`), ``static`` at every step.
GATING_MODES = ("dynamic", "static")
DEFAULT_FACTORS = {"damp": 0.0, "sigmoid": 0.0, "amplify": 1.5}


def _gates_from_flat(attribution: ComponentAttribution, factors: dict[int, float]) -> Gates:
    """``Gates`` from flat component indices (heads layer-major, then MLPs) -> factor."""
    from mechrag.mechanism.gates import Gates

    heads, mlps = {}, {}
    for index, factor in factors.items():
        component = attribution.component(int(index))
        if component.kind == "head":
            heads[(component.layer, component.head)] = float(factor)
        else:
            mlps[component.layer] = float(factor)
    return Gates(heads, mlps)


def sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


@dataclass(frozen=True)
class GatingRule:
    """One rule, configured: ``name`` in :data:`RULES`, ``k`` components, ``factor`` (the damping
    factor, the sigmoid floor ``a``, or the amplification), ``scale`` (sigmoid only)."""

    name: str = "damp"
    k: int = 10
    factor: float | None = None
    scale: float | None = None

    def __post_init__(self) -> None:
        if self.name not in RULES:
            raise InputError(f"rule must be one of {RULES}, got {self.name!r}")
        if self.k < 1:
            raise InputError(f"k must be at least 1, got {self.k}")
        if self.scale is not None and self.scale <= 0:
            raise InputError(f"scale must be positive, got {self.scale}")

    @property
    def strength(self) -> float:
        return DEFAULT_FACTORS[self.name] if self.factor is None else float(self.factor)

    def gates(self, attribution: ComponentAttribution) -> Gates:
        """The gate factors this rule gives ``attribution``'s components."""
        scores, gains = attribution.scores, attribution.gains
        if gains is None and self.name != "amplify":
            raise InputError(f"rule {self.name!r} needs semantic gains (localize(gains=True))")
        top = attribution.ranking[: min(self.k, scores.size)]
        if self.name == "damp":
            chosen = {int(i): self.strength for i in top if gains[i] < 0}
        elif self.name == "sigmoid":
            scale = self.scale or float(np.std(gains)) or 1.0
            floor = self.strength
            chosen = {int(i): floor + (1 - floor) * float(sigmoid(gains[i] / scale)) for i in top}
        else:
            chosen = dict.fromkeys((int(i) for i in top), self.strength)
        return _gates_from_flat(attribution, chosen)

    def to_dict(self) -> dict:
        return asdict(self)

    @property
    def label(self) -> str:
        return f"{self.name}(k={self.k}, factor={self.strength:g})"


def random_gates(gates: Gates, n_layers: int, n_heads: int, seed: int = 0) -> Gates:
    """The same number of gated heads and MLPs with the same factors, on random components."""
    from mechrag.mechanism.gates import Gates

    rng = np.random.default_rng(seed)
    head_slots = rng.choice(n_layers * n_heads, size=len(gates.heads), replace=False)
    mlp_slots = rng.choice(n_layers, size=len(gates.mlps), replace=False)
    heads = {
        divmod(int(slot), n_heads): factor
        for slot, factor in zip(head_slots, rng.permutation(list(gates.heads.values())))
    }
    mlps = {
        int(slot): factor
        for slot, factor in zip(mlp_slots, rng.permutation(list(gates.mlps.values())))
    }
    return Gates(heads, mlps)
