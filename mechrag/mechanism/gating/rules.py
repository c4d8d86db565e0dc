"""Gating rules: gate factors from component context JSD and semantic gain.

Input: a :class:`~mechrag.results.components.ComponentAttribution` (per example, or averaged over a
calibration set with ``ComponentAttribution.average``) with scores ``J_c`` (summed logit-lens JSD
of component ``c``'s write when the top source is removed: how much context the component
carries) and semantic gains ``G_c`` (toward the response). ``T_k`` is the set of the ``k``
components with the highest ``J_c``; components outside the rule's set keep factor 1.

* ``paper`` (ARC-JSD, Li et al., arXiv 2505.16415, ICLR version §7 and Table 4, "Gate Top-5 Attn
  & MLP"): the ``k`` heads and the ``k_mlps`` MLPs with the highest ``J_c``, ranked separately as
  in Eq. 5, and of those only the ones with ``G_c < 0`` get ``f_c = a + (1 - a) * sigmoid(G_c)``
  (``a = factor`` = 0.7, ``k = k_mlps = 5``: ``0.7 + 0.3 * sigmoid(G)``). The paper defines the
  semantic gain per layer only (Eq. 9-10), so a head's ``G`` is its layer's attention gain
  (``attn_gain[layer]``) and the rule needs only ``attn_gain`` and ``mlp_gain``, never the
  per-head ``head_gain``. The paper publishes no gating code; mechrag applies the rule to each
  example's own localisation, with the gains unscaled (``scale`` = 1) as the formula reads.
* ``damp``: ``f_c = factor`` for ``c in T_k`` with ``G_c < 0``: damp components that carry
  context but push the residual stream away from what the model says.
* ``sigmoid``: ``f_c = a + (1 - a) * sigmoid(G_c / s)`` for ``c in T_k`` (``a = factor``, the
  floor; ``s = scale``, default the standard deviation of all gains): context carriers are damped
  toward ``a`` the more negative their gain, and kept near 1 when it is positive.
* ``amplify``: ``f_c = factor`` (> 1) for ``c in T_k``: amplify the context carriers.

``damp``, ``sigmoid`` and ``amplify`` rank heads and MLPs jointly and use the per-component gains
(``head_gain`` for heads). :func:`random_gates` places the same factors on randomly chosen
components (the control; for ``paper``: as many heads and MLPs as it gated, the gated ones
excluded).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

import numpy as np

from mechrag.errors import InputError
from mechrag.protocols import LOCALIZE_PROTOCOL, get_protocol

if TYPE_CHECKING:  # the rules themselves need only numpy: the command line reads RULES fast
    from mechrag.mechanism.gating.gates import Gates
    from mechrag.results.components import ComponentAttribution

RULES = ("paper", "damp", "sigmoid", "amplify")
# When gates act during generation: ``dynamic`` only at steps whose context echo is below the
# threshold (:mod:`mechrag.mechanism.gating.decoding`), ``static`` at every step.
GATING_MODES = ("dynamic", "static")
DEFAULT_FACTORS = {"paper": 0.7, "damp": 0.0, "sigmoid": 0.0, "amplify": 1.5}
# Components per rule when ``k`` is not given (``paper``: 5 heads and 5 MLPs, Table 4).
DEFAULT_K = {"paper": 5, "damp": 10, "sigmoid": 10, "amplify": 10}


def _gates_from_flat(attribution: ComponentAttribution, factors: dict[int, float]) -> Gates:
    """``Gates`` from flat component indices (heads layer-major, then MLPs) -> factor."""
    from mechrag.mechanism.gating.gates import Gates

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


def _squashed(gain: float, floor: float, scale: float) -> float:
    """``floor + (1 - floor) * sigmoid(gain / scale)``: near ``floor`` for very negative gains."""
    return floor + (1 - floor) * float(sigmoid(gain / scale))


@dataclass(frozen=True)
class GatingRule:
    """One rule, configured: ``name`` in :data:`RULES`; ``k`` components (``paper``: ``k`` heads
    and ``k_mlps`` MLPs, ``k_mlps`` = ``k`` unless given; other rules take no ``k_mlps``);
    ``factor`` (the damping factor, the sigmoid floor ``a``, or the amplification); ``scale``
    (``sigmoid``: default the gains' standard deviation; ``paper``: default 1, the paper's
    unscaled ``sigmoid(G)``). Unset ``k`` and ``factor`` take the rule's defaults
    (:data:`DEFAULT_K`, :data:`DEFAULT_FACTORS`), so ``GatingRule("paper")`` is the paper's rule.
    """

    name: str = "damp"
    k: int | None = None
    factor: float | None = None
    scale: float | None = None
    k_mlps: int | None = None

    def __post_init__(self) -> None:
        if self.name not in RULES:
            raise InputError(f"rule must be one of {RULES}, got {self.name!r}")
        if self.k is None:
            object.__setattr__(self, "k", DEFAULT_K[self.name])
        if self.name == "paper" and self.k_mlps is None:
            object.__setattr__(self, "k_mlps", self.k)
        if self.name != "paper" and self.k_mlps is not None:
            raise InputError(f"k_mlps applies to rule 'paper' only; {self.name!r} takes k")
        for field_name in ("k", "k_mlps"):
            value = getattr(self, field_name)
            if value is not None and value < 1:
                raise InputError(f"{field_name} must be at least 1, got {value}")
        if self.scale is not None and self.scale <= 0:
            raise InputError(f"scale must be positive, got {self.scale}")

    @classmethod
    def paper(cls) -> GatingRule:
        """ARC-JSD's Table 4 rule: top-5 heads and top-5 MLPs with ``G < 0`` get
        ``0.7 + 0.3 * sigmoid(G)``."""
        return cls("paper", k=5, factor=0.7, scale=1.0, k_mlps=5)

    @classmethod
    def for_protocol(
        cls,
        protocol: str = LOCALIZE_PROTOCOL,
        name: str | None = None,
        *,
        k: int | None = None,
        factor: float | None = None,
    ) -> GatingRule:
        """The rule ``name``, or where it is ``None`` the ``protocol``'s gating rule
        (:mod:`mechrag.protocols`), with ``k`` and ``factor`` when given."""
        return cls(name or get_protocol(protocol).setting("gating_rule"), k=k, factor=factor)

    @property
    def strength(self) -> float:
        return DEFAULT_FACTORS[self.name] if self.factor is None else float(self.factor)

    @property
    def gain_definition(self) -> str:
        """The semantic gain the rule was made for: the paper's per-layer gain (Eq. 6-10) for
        ``paper``; mechrag's per-head ``residual_cosine`` for ``damp``/``sigmoid``/``amplify``,
        whose thresholds were chosen on it."""
        return "argmax_token" if self.name == "paper" else "residual_cosine"

    @property
    def default_mode(self) -> str:
        """``static`` for ``paper`` (Table 4 gates every step), ``dynamic`` for mechrag's rules
        (gates only at steps whose context echo is low)."""
        return "static" if self.name == "paper" else "dynamic"

    def gates(self, attribution: ComponentAttribution) -> Gates:
        """The gate factors this rule gives ``attribution``'s components."""
        if self.name == "paper":
            return self._paper_gates(attribution)
        scores, gains = attribution.scores, attribution.gains
        if gains is None and self.name != "amplify":
            raise InputError(f"rule {self.name!r} needs semantic gains (localize(gains=True))")
        top = attribution.ranking[: min(self.k, scores.size)]
        if self.name == "damp":
            chosen = {int(i): self.strength for i in top if gains[i] < 0}
        elif self.name == "sigmoid":
            scale = self.scale or float(np.std(gains)) or 1.0
            chosen = {int(i): _squashed(gains[i], self.strength, scale) for i in top}
        else:
            chosen = dict.fromkeys((int(i) for i in top), self.strength)
        return _gates_from_flat(attribution, chosen)

    def _paper_gates(self, attribution: ComponentAttribution) -> Gates:
        """Top ``k`` heads and top ``k_mlps`` MLPs by JSD (ranked separately, ties in layer-major
        order); those whose layer's attention gain (heads) or MLP gain is negative are gated."""
        from mechrag.mechanism.gating.gates import Gates

        attn_gain, mlp_gain = attribution.attn_gain, attribution.mlp_gain
        if attn_gain is None or mlp_gain is None:
            raise InputError(
                "rule 'paper' needs per-layer semantic gains (attn_gain and mlp_gain;"
                " localize(gains=True))"
            )
        floor, scale = self.strength, self.scale or 1.0
        heads = {
            (c.layer, c.head): _squashed(attn_gain[c.layer], floor, scale)
            for c in attribution.top(self.k, kind="head")
            if attn_gain[c.layer] < 0
        }
        mlps = {
            c.layer: _squashed(mlp_gain[c.layer], floor, scale)
            for c in attribution.top(self.k_mlps, kind="mlp")
            if mlp_gain[c.layer] < 0
        }
        return Gates(heads, mlps)

    def to_dict(self) -> dict:
        return asdict(self)

    @property
    def label(self) -> str:
        if self.name == "paper":
            return f"paper(k={self.k}, k_mlps={self.k_mlps}, floor={self.strength:g})"
        return f"{self.name}(k={self.k}, factor={self.strength:g})"


def random_gates(
    gates: Gates,
    n_layers: int,
    n_heads: int,
    seed: int | Sequence[int] = 0,
    *,
    exclude_gated: bool = False,
) -> Gates:
    """The same number of gated heads and of gated MLPs with the same factors (head factors on
    heads, MLP factors on MLPs, shuffled), on components drawn uniformly without replacement.

    ``exclude_gated`` draws only among the components ``gates`` leaves alone, so the control and
    the rule never share a component (the paper protocol's control). ``seed``: an int or a
    sequence such as ``(seed, example number)``, so each example draws afresh.
    """
    from mechrag.mechanism.gating.gates import Gates

    gated_heads = [layer * n_heads + head for layer, head in gates.heads] if exclude_gated else []
    head_pool = _free_slots(n_layers * n_heads, gated_heads)
    mlp_pool = _free_slots(n_layers, list(gates.mlps) if exclude_gated else [])
    for kind, pool, wanted in (("heads", head_pool, gates.heads), ("MLPs", mlp_pool, gates.mlps)):
        if len(wanted) > pool.size:
            free = "free " if exclude_gated else ""
            raise InputError(f"cannot draw {len(wanted)} random {kind} from {pool.size} {free}ones")
    rng = np.random.default_rng(seed)
    head_slots = rng.choice(head_pool, size=len(gates.heads), replace=False)
    mlp_slots = rng.choice(mlp_pool, size=len(gates.mlps), replace=False)
    heads = {
        divmod(int(slot), n_heads): factor
        for slot, factor in zip(head_slots, rng.permutation(list(gates.heads.values())))
    }
    mlps = {
        int(slot): factor
        for slot, factor in zip(mlp_slots, rng.permutation(list(gates.mlps.values())))
    }
    return Gates(heads, mlps)


def _free_slots(n_slots: int, taken: list[int]) -> np.ndarray:
    """``0 .. n_slots - 1`` without ``taken``."""
    free = np.ones(n_slots, dtype=bool)
    free[taken] = False
    return np.flatnonzero(free)
