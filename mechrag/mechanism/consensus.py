"""ARC-JSD's consensus statistic (Li et al. 2025, §6.2, Eq. 11-12, Table 3), with a null.

Per module type (attention, MLP: ranked separately), over the ``L`` layers of one
:class:`~mechrag.results.components.ComponentAttribution`:

* ``J[l]``: the layer's JSD: for attention the mean of its heads' JSD ("we first average the
  JSD scores of all attention heads in the same layer"), for the MLP its own;
* ``G[l]``: the layer's semantic gain (Eq. 10; the paper's ``"argmax_token"`` definition by
  default, see :mod:`mechrag.mechanism.semantic_gain`);
* ranks 1 (largest) .. ``L``; ``S(+)[l] = 1/2 (rank_J[l] + rank_G[l]) / L`` (Eq. 12), in
  ``[1/L, 1]``, smaller = stronger joint evidence;
* top-``N`` sets (``N = 10``, or ``L`` with fewer layers): ``J_Top-N`` and ``G_Top-N`` the ``N``
  largest, ``S_Top-N`` the ``N`` smallest ``S(+)``; the overlaps ``|J_Top-N ∩ S_Top-N|`` and
  ``|G_Top-N ∩ S_Top-N|``, and ``|J_Top-N ∩ G_Top-N|``.

The paper's text calls its statistic "Spearman rho of J_Top-N ∩ S(+)_Top-N and G_Top-N ∩
S(+)_Top-N", but Table 3's values (6.67-8.06) cannot be correlations: they read as overlap
counts out of 10, and that is what ``*_overlap`` holds. The Spearman rho of ``J`` against
``G`` over layers is reported beside them. How the paper aggregates over examples, and which
test gives its p-values, is not in the text (and the official code has no consensus code):
:func:`consensus` scores one result (one example, or ``ComponentAttribution.average``).

Since ``S(+)`` is built from ``J`` and ``G``, the overlaps are large even when ``J`` and ``G``
are unrelated (two independent rankings over 26-28 layers give ``|J ∩ S|`` near 6.7 of 10), so
each overlap comes with a permutation null: the gain ranking is shuffled over layers (``J``
kept), ``S(+)`` and the overlaps recomputed, ``n_permutations`` times (seeded); the null mean
and the one-sided p-value ``(1 + #{null >= observed}) / (1 + n_permutations)``. Under the null
``|J ∩ G|`` is hypergeometric with mean ``N^2 / L``.

Ties: ranks are ordinal (``scipy.stats.rankdata(-score, method="ordinal")``): equal scores rank
in layer order. Equal ``S(+)`` (frequent: it sums two integers) also order by layer (a stable
sort), a rule that favours neither ``J`` nor ``G``. The plain Spearman over all components
(``ComponentAttribution.spearman``) is kept as ``component_rho``/``component_p``, a robustness
check.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from jaxtyping import Float, Int
from scipy import stats

from mechrag.errors import InputError
from mechrag.metrics.agreement import spearman_test
from mechrag.results.base import Serializable
from mechrag.results.components import ComponentAttribution

TOP_N = 10
N_PERMUTATIONS = 1000
MODULES = ("attention", "mlp")


def descending_ranks(scores: Float[np.ndarray, " n"]) -> Int[np.ndarray, " n"]:
    """Rank 1 = largest; equal scores rank in index order."""
    return stats.rankdata(-np.asarray(scores, dtype=np.float64), method="ordinal").astype(int)


def joint_top(
    jsd_ranks: Int[np.ndarray, "*batch n_layers"],
    gain_ranks: Int[np.ndarray, "*batch n_layers"],
    n: int,
) -> Int[np.ndarray, "*batch n"]:
    """The ``n`` layers of smallest ``S(+)`` (equal ``S(+)`` in layer order), best first."""
    return np.argsort(jsd_ranks + gain_ranks, axis=-1, kind="stable")[..., :n]


@dataclass
class ModuleConsensus(Serializable):
    """The consensus of ``J`` and ``G`` over the layers of one module type.

    ``*_top`` list layers best first; ``*_overlap`` are the observed overlaps, ``null_*`` the
    permutation null's means and ``*_p`` its one-sided p-values. ``tied_layers``: layers whose
    gain equals another layer's (an ``argmax_token`` gain is exactly 0 where the lens's argmax
    never changes); the null shuffles the gain *values* and ranks each draw by the same rule, so
    the tie-break is part of the null too.
    """

    module: str
    jsd: Float[np.ndarray, " n_layers"]
    gain: Float[np.ndarray, " n_layers"]
    jsd_rank: Int[np.ndarray, " n_layers"]
    gain_rank: Int[np.ndarray, " n_layers"]
    s_plus: Float[np.ndarray, " n_layers"]
    jsd_top: list[int]
    gain_top: list[int]
    s_top: list[int]
    jsd_overlap: int
    gain_overlap: int
    jsd_gain_overlap: int
    rho: float
    rho_p: float
    null_jsd_overlap: float
    null_gain_overlap: float
    null_jsd_gain_overlap: float
    jsd_overlap_p: float
    gain_overlap_p: float
    jsd_gain_overlap_p: float
    tied_layers: int = 0

    def __post_init__(self) -> None:
        """Arrays, also when read back from lists (``from_dict``)."""
        self.jsd, self.gain = np.asarray(self.jsd, float), np.asarray(self.gain, float)
        self.jsd_rank, self.gain_rank = np.asarray(self.jsd_rank), np.asarray(self.gain_rank)
        self.s_plus = np.asarray(self.s_plus, float)

    @property
    def n_layers(self) -> int:
        return self.jsd.size

    @property
    def top_n(self) -> int:
        return len(self.s_top)


def module_consensus(
    module: str,
    jsd: Float[np.ndarray, " n_layers"],
    gain: Float[np.ndarray, " n_layers"],
    *,
    top_n: int,
    n_permutations: int,
    rng: np.random.Generator,
) -> ModuleConsensus:
    """Eq. 12's ``S(+)``, the top-``N`` overlaps and their permutation null for one module."""
    n_layers = len(jsd)
    n = min(top_n, n_layers)
    jsd_rank, gain_rank = descending_ranks(jsd), descending_ranks(gain)
    s_top = joint_top(jsd_rank, gain_rank, n)
    observed = np.array(
        [
            (jsd_rank[s_top] <= n).sum(),
            (gain_rank[s_top] <= n).sum(),
            ((jsd_rank <= n) & (gain_rank <= n)).sum(),
        ]
    )
    # Shuffle the values, then rank each draw as the observed gains are ranked: ties broken by
    # layer order in both, so the tie-break cannot pass for agreement with J.
    shuffled = np.stack([descending_ranks(rng.permutation(gain)) for _ in range(n_permutations)])
    null_top = joint_top(jsd_rank[None], shuffled, n)
    null = np.stack(
        [
            (jsd_rank[null_top] <= n).sum(-1),
            (np.take_along_axis(shuffled, null_top, -1) <= n).sum(-1),
            ((jsd_rank[None] <= n) & (shuffled <= n)).sum(-1),
        ],
        axis=-1,
    )  # [n_permutations, 3]
    p_values = (1 + (null >= observed).sum(0)) / (1 + n_permutations)
    rho, rho_p = spearman_test(jsd, gain)
    return ModuleConsensus(
        module=module,
        jsd=jsd,
        gain=gain,
        jsd_rank=jsd_rank,
        gain_rank=gain_rank,
        s_plus=(jsd_rank + gain_rank) / (2 * n_layers),
        jsd_top=np.argsort(jsd_rank)[:n].tolist(),
        gain_top=np.argsort(gain_rank)[:n].tolist(),
        s_top=s_top.tolist(),
        jsd_overlap=int(observed[0]),
        gain_overlap=int(observed[1]),
        jsd_gain_overlap=int(observed[2]),
        rho=float(rho),
        rho_p=float(rho_p),
        null_jsd_overlap=float(null[:, 0].mean()),
        null_gain_overlap=float(null[:, 1].mean()),
        null_jsd_gain_overlap=float(null[:, 2].mean()),
        jsd_overlap_p=float(p_values[0]),
        gain_overlap_p=float(p_values[1]),
        jsd_gain_overlap_p=float(p_values[2]),
        tied_layers=int(n_layers - (np.unique(gain, return_counts=True)[1] == 1).sum()),
    )


@dataclass
class Consensus(Serializable):
    """ARC-JSD's consensus for attention and for the MLPs, with the component-level check.

    ``component_rho``/``component_p``: Spearman over all heads and MLPs
    (``ComponentAttribution.spearman``; under ``"argmax_token"`` each head carries its layer's
    attention gain).
    """

    default_name = "consensus"

    attention: ModuleConsensus
    mlp: ModuleConsensus
    component_rho: float
    component_p: float
    gain_definition: str
    top_n: int
    n_permutations: int
    seed: int

    def __post_init__(self) -> None:
        """Nested records, also when read back from dictionaries (``from_dict``)."""
        for module in MODULES:
            value = getattr(self, module)
            if isinstance(value, dict):
                setattr(self, module, ModuleConsensus.from_dict(value))


def consensus(
    result: ComponentAttribution,
    *,
    top_n: int = TOP_N,
    n_permutations: int = N_PERMUTATIONS,
    seed: int = 0,
) -> Consensus:
    """The consensus statistic of ``result``'s per-layer JSD and semantic gains (Eq. 11-12).

    ``top_n``: the paper's ``N`` (capped at the number of layers); ``n_permutations``: draws of
    the null (gain ranking shuffled), from ``numpy.random.default_rng(seed)``; attention then
    MLPs.
    """
    if result.attn_gain is None or result.mlp_gain is None:
        raise InputError("consensus needs per-layer semantic gains (localize(gains=True))")
    if top_n < 1:
        raise InputError(f"top_n must be at least 1, got {top_n}")
    if n_permutations < 1:
        raise InputError(f"n_permutations must be at least 1, got {n_permutations}")
    rng = np.random.default_rng(seed)
    layers = {
        "attention": (result.heads.mean(1), result.attn_gain),
        "mlp": (result.mlps, result.mlp_gain),
    }
    modules = {
        module: module_consensus(
            module, jsd, gain, top_n=top_n, n_permutations=n_permutations, rng=rng
        )
        for module, (jsd, gain) in layers.items()
    }
    rho, p = result.spearman()
    return Consensus(
        **modules,
        component_rho=float(rho),
        component_p=float(p),
        gain_definition=result.gain_definition,
        top_n=min(top_n, result.n_layers),
        n_permutations=n_permutations,
        seed=seed,
    )


def paper_record(result: ComponentAttribution, consensus: Consensus) -> dict:
    """The JSON record of ``localize --protocol arc-jsd``: ``result.to_dict()`` (per-head and
    per-MLP JSD, per-layer gains, the top heads and top MLPs, ranked separately) plus the
    per-layer attention JSD (head mean), and ``consensus`` (with its null).

    ``ComponentAttribution.from_dict`` reads the record back (extra entries skipped);
    ``Consensus.from_dict(record["consensus"])`` the consensus.
    """
    return {
        **result.to_dict(),
        "protocol": "arc-jsd",
        "attention_jsd": result.heads.mean(1).tolist(),
        "consensus": consensus.to_dict(),
    }
