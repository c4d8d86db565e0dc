"""Configured Shapley-family estimators: one small object per method, options as fields.

``case.attribute(KernelSHAP(paired=True), budget=64)`` runs a configured estimator;
``case.attribute("kernel_shap", budget=64)`` runs its defaults. Each object says which value
game it uses by default (``logprob``; ContextCite's ``logit_prob``) and delegates to
:func:`mechrag.attribution.shapley.shapley_values`, so the options an estimator takes are
written once, here.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import ClassVar

import numpy as np

from mechrag.attribution.sampling import ValueFn
from mechrag.attribution.shapley import shapley_values


@dataclass(frozen=True)
class Estimator:
    """Base: ``estimator(game, n_players, budget, seed)`` -> ``[n]`` or ``[n, T]`` scores."""

    name: ClassVar[str]
    default_value: ClassVar[str] = "logprob"

    def options(self) -> dict:
        return asdict(self)

    def __call__(
        self,
        game: ValueFn,
        n_players: int,
        budget: int | None,
        seed: int,
        known: tuple[np.ndarray, np.ndarray] | None = None,
    ) -> np.ndarray:
        """``known``: ``(masks, values)`` already scored, used as free rows (not budgeted)."""
        return shapley_values(
            game, n_players, self.name, budget, seed, known=known, **self.options()
        )


@dataclass(frozen=True)
class Exact(Estimator):
    """All ``2^n`` subsets (n <= 16)."""

    name: ClassVar[str] = "exact"


@dataclass(frozen=True)
class LeaveOneOut(Estimator):
    """``v(N) - v(N without i)`` from ``n + 1`` subsets."""

    name: ClassVar[str] = "loo"


@dataclass(frozen=True)
class KernelSHAP(Estimator):
    """Shapley-kernel least squares with the efficiency constraint; ``paired`` adds complements;
    ``interactions = 3`` also fits pairwise and triple terms (``ridge``-penalised)."""

    name: ClassVar[str] = "kernel_shap"
    paired: bool = False
    interactions: int = 1
    ridge: float = 0.01


@dataclass(frozen=True)
class LeverageSHAP(Estimator):
    """Kernel SHAP's constrained fit on a leverage-score sample (uniform over sizes), paired,
    without replacement, with Horvitz-Thompson weights (Musco & Witter, 2025); ``balanced``
    spreads players, pairs and triples evenly within each size (``False``: uniform draws, as in
    the paper); ``interactions``/``ridge`` as for :class:`KernelSHAP`."""

    name: ClassVar[str] = "leverage_shap"
    paired: bool = True
    balanced: bool = True
    interactions: int = 1
    ridge: float = 0.01


@dataclass(frozen=True)
class PMCSHAP(Estimator):
    """Paired pool scored once, ``refits`` Kernel SHAP fits on ``fraction`` of its sampled pairs
    (RAG-E); the per-output-token probability game by default; ``sampling="leverage"`` or
    ``"balanced"`` draws the pool by leverage score (see :class:`LeverageSHAP`)."""

    name: ClassVar[str] = "pmc_shap"
    default_value: ClassVar[str] = "token_prob"
    refits: int = 100
    fraction: float = 0.5
    sampling: str = "kernel"


@dataclass(frozen=True)
class MCSHAP(Estimator):
    """pmcSHAP without complement pairs (RAG-E's unpaired variant)."""

    name: ClassVar[str] = "mc_shap"
    default_value: ClassVar[str] = "token_prob"
    refits: int = 100
    fraction: float = 0.5


@dataclass(frozen=True)
class TMCShapley(Estimator):
    """Truncated Monte-Carlo permutation sampling."""

    name: ClassVar[str] = "tmc"
    tolerance: float = 0.05
    max_permutations: int = 1000


@dataclass(frozen=True)
class BetaShapley(Estimator):
    """Beta(alpha, beta)-Shapley by reweighted permutation sampling."""

    name: ClassVar[str] = "beta"
    alpha: float = 16.0
    beta: float = 1.0
    tolerance: float = 0.0
    max_permutations: int = 1000


@dataclass(frozen=True)
class ContextCite(Estimator):
    """LASSO surrogate on random keep-masks (ContextCite)."""

    name: ClassVar[str] = "contextcite"
    default_value: ClassVar[str] = "logit_prob"
    keep_prob: float = 0.5
    l1: float = 0.01


ESTIMATORS: dict[str, type[Estimator]] = {
    cls.name: cls
    for cls in (
        Exact,
        LeaveOneOut,
        KernelSHAP,
        LeverageSHAP,
        PMCSHAP,
        MCSHAP,
        TMCShapley,
        BetaShapley,
        ContextCite,
    )
}


def resolve_estimator(method: str | Estimator) -> Estimator:
    """A configured estimator from a name (defaults) or an estimator object."""
    if isinstance(method, Estimator):
        return method
    if method not in ESTIMATORS:
        raise ValueError(
            f"unknown method {method!r}: choose from {('arc_jsd', *ESTIMATORS)}"
        )
    return ESTIMATORS[method]()
