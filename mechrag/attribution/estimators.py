"""Configured Shapley-family estimators: one small object per method, its parameters as fields.

``KernelSHAP(paired=True, budget=64)(case)`` attributes a case's response; ``case.attribute(
"kernel_shap", budget=64)`` is the same call on the defaults. Each object's fields hold its
only defaults; :meth:`Estimator.estimate` runs it on any value function (the game), so
:func:`shapley_values` is a thin function over the same objects. Each estimator says which value
game it uses on a case by default (``logprob``; pmcSHAP's ``token_prob``; ContextCite's
``logit_prob``).
"""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass, fields
from typing import ClassVar

import numpy as np

from mechrag.attribution.base import SourceMethod
from mechrag.attribution.contextcite import contextcite_surrogate
from mechrag.attribution.sampling import Known, Masks, ValueFn, resolve_budget
from mechrag.attribution.shapley import (
    Estimate,
    beta_position_weights,
    exact_shapley,
    leave_one_out,
    permutation_shapley,
    refitted_shapley,
    regression_shapley,
)
from mechrag.errors import InputError

# Fields of every estimator that say how it runs on a case, not which estimator it is.
CASE_SETTINGS = ("budget", "seed", "value", "reuse_scored")


@dataclass(frozen=True)
class Estimator(SourceMethod):
    """Base of the Shapley family.

    ``budget``: distinct new subsets it may score (default ``min(2^n, 10 n)``); ``seed``: its
    random draws; ``value``: the game on a case (``None``: the estimator's ``default_value``);
    ``reuse_scored``: hand the estimator every subset the case already scored (ARC-JSD's
    leave-one-out subsets, say) as free rows outside the budget: better estimates at small
    budgets, but the result then depends on what ran before.
    """

    default_value: ClassVar[str] = "logprob"
    _: KW_ONLY
    budget: int | None = None
    seed: int = 0
    value: str | None = None
    reuse_scored: bool = False

    def estimate(
        self, value_fn: ValueFn, n_players: int, known: Known | None = None
    ) -> Estimate:
        """Scores ``[n_players]`` (``[n_players, T]`` for a per-token game) of any game."""
        raise NotImplementedError

    def required_calls(self, n_players: int) -> int:
        """Value calls this estimator may spend on ``n_players``."""
        return resolve_budget(self.budget, n_players)

    def options(self) -> dict:
        """The estimator's own parameters (its fields less :data:`CASE_SETTINGS`)."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name not in CASE_SETTINGS}

    def __call__(self, case):
        """Attribute ``case``'s response; ``model_calls`` counts the distinct subsets the
        estimator used, ``forward_passes`` the passes this call actually ran."""
        value = self.value or self.default_value
        game, asked = case.game(value), set()

        def recorded(masks: Masks) -> np.ndarray:
            asked.update(row.tobytes() for row in np.asarray(masks, dtype=bool))
            return game(masks)

        meter = case.meter()
        known = case.scored_masks() if self.reuse_scored else None
        if known is not None:
            asked.update(row.tobytes() for row in known)
            known = (known, game(known))
        phi = self.estimate(recorded, case.n_sources, known)
        return case.attribution(
            self.name,
            phi.sum(-1) if phi.ndim == 2 else phi,
            meter,
            token_scores=phi if phi.ndim == 2 else None,
            model_calls=len(asked),
            metadata={
                "value": value,
                "budget": self.budget,
                "seed": self.seed,
                "reuse_scored": self.reuse_scored,
                "options": self.options(),
            },
        )


def _check_fixed_budget(estimator: Estimator, n_players: int) -> None:
    needed = estimator.required_calls(n_players)
    if estimator.budget is not None and estimator.budget < needed:
        raise InputError(f"{estimator.name} needs {needed} value calls for {n_players} players")


@dataclass(frozen=True)
class Exact(Estimator):
    """All ``2^n`` subsets (n <= 16)."""

    name: ClassVar[str] = "exact"
    description: ClassVar[str] = "exact Shapley values from all 2^n subsets"

    def required_calls(self, n_players: int) -> int:
        return 2**n_players

    def estimate(self, value_fn, n_players, known=None):
        _check_fixed_budget(self, n_players)
        return exact_shapley(value_fn, n_players, known)


@dataclass(frozen=True)
class LeaveOneOut(Estimator):
    """``v(N) - v(N without i)`` from ``n + 1`` subsets."""

    name: ClassVar[str] = "loo"
    description: ClassVar[str] = "leave-one-out: v(N) - v(N without i)"

    def required_calls(self, n_players: int) -> int:
        return n_players + 1

    def estimate(self, value_fn, n_players, known=None):
        _check_fixed_budget(self, n_players)
        return leave_one_out(value_fn, n_players, known)


@dataclass(frozen=True)
class _RegressionEstimator(Estimator):
    """Kernel SHAP's constrained fit on one pool drawn by :meth:`design` (fields ``paired``,
    ``interactions``, ``ridge`` in the subclasses)."""

    def design(self) -> str:
        raise NotImplementedError

    def estimate(self, value_fn, n_players, known=None):
        return regression_shapley(
            value_fn,
            n_players,
            budget=self.budget,
            seed=self.seed,
            paired=self.paired,
            design=self.design(),
            interactions=self.interactions,
            ridge=self.ridge,
            known=known,
        )


@dataclass(frozen=True)
class KernelSHAP(_RegressionEstimator):
    """Shapley-kernel least squares with the efficiency constraint (Lundberg & Lee, 2017);
    exact when ``budget >= 2^n``. ``paired`` adds complements; ``interactions = 3`` also fits
    pairwise and triple terms (``ridge``-penalised). Paired sampling already makes the additive
    fit exact on games of order 2, so with ``paired`` only ``interactions >= 3`` can change the
    estimate."""

    name: ClassVar[str] = "kernel_shap"
    description: ClassVar[str] = "Kernel SHAP (constrained weighted least squares)"
    paired: bool = False
    interactions: int = 1
    ridge: float = 0.01

    def design(self) -> str:
        return "kernel"


@dataclass(frozen=True)
class LeverageSHAP(_RegressionEstimator):
    """Kernel SHAP's constrained fit on a leverage-score sample (uniform over sizes), paired,
    without replacement, with Horvitz-Thompson weights (Musco & Witter, ICLR 2025).

    Sizes that fit are enumerated; sampled coalitions carry weights ``kernel(s) / P(S in
    sample)`` (see ``leverage_coalitions``). Efficiency holds exactly and a budget covering
    every coalition gives exact Shapley values. ``balanced`` (default): within each size,
    coalitions spread players, pairs and triples evenly over the sample, with the same
    inclusion probabilities, and a size group is enumerated only while it takes at most half of
    the budget left; ``balanced=False`` draws them uniformly, as in the paper. On HotpotQA games
    the balanced design is the more accurate (``experiments/RESULTS.md``).
    ``interactions``/``ridge``: as for :class:`KernelSHAP`.
    """

    name: ClassVar[str] = "leverage_shap"
    description: ClassVar[str] = "Leverage SHAP (leverage-score sample, balanced by default)"
    paired: bool = True
    balanced: bool = True
    interactions: int = 1
    ridge: float = 0.01

    def design(self) -> str:
        return "balanced" if self.balanced else "leverage"


@dataclass(frozen=True)
class _RefitEstimator(Estimator):
    """One pool scored once and ``refits`` fits on ``fraction`` of it, averaged; the subclass
    says whether the pool is paired and how it is drawn (:meth:`pool`)."""

    default_value: ClassVar[str] = "token_prob"

    def pool(self) -> tuple[bool, str]:
        """``(paired, design)`` of the pool."""
        raise NotImplementedError

    def estimate(self, value_fn, n_players, known=None):
        paired, design = self.pool()
        return refitted_shapley(
            value_fn,
            n_players,
            budget=self.budget,
            seed=self.seed,
            refits=self.refits,
            fraction=self.fraction,
            paired=paired,
            design=design,
            known=known,
        )


@dataclass(frozen=True)
class PMCSHAP(_RefitEstimator):
    """Paired Monte-Carlo Kernel SHAP (RAG-E): one paired pool, ``refits`` fits on ``fraction``
    of its complement pairs, averaged; the per-output-token probability game by default.

    ``sampling``: how the pool is drawn, ``kernel`` (RAG-E), ``leverage`` or ``balanced``
    (Leverage SHAP's designs and weights). The pool (``budget`` distinct coalitions) always
    holds the empty and full coalitions and each sampled coalition with its complement; it is
    scored once, so refits cost no model calls. Unlike RAG-E, which fits a ridge regression with
    a free intercept to every refit, each refit here is Kernel SHAP's weighted least squares with
    ``phi_0 = v(empty)`` fixed and the efficiency constraint imposed: the average is then
    efficient exactly, is not shrunk towards zero, and is exact on a complete pool.
    """

    name: ClassVar[str] = "pmc_shap"
    description: ClassVar[str] = "pmcSHAP (RAG-E: paired pool, averaged refits)"
    refits: int = 100
    fraction: float = 0.5
    sampling: str = "kernel"

    def pool(self) -> tuple[bool, str]:
        return True, self.sampling


@dataclass(frozen=True)
class MCSHAP(_RefitEstimator):
    """pmcSHAP without complement pairs (RAG-E's unpaired variant): each refit keeps a random
    ``fraction`` of the pool's coalitions."""

    name: ClassVar[str] = "mc_shap"
    description: ClassVar[str] = "mcSHAP (pmcSHAP without complement pairs)"
    refits: int = 100
    fraction: float = 0.5

    def pool(self) -> tuple[bool, str]:
        return False, "kernel"


@dataclass(frozen=True)
class _PermutationEstimator(Estimator):
    """Weighted marginals along random permutations (fields ``tolerance``, ``max_permutations``
    in the subclasses); :meth:`position_weights` weighs the marginal at each prefix size."""

    def position_weights(self, n_players: int) -> np.ndarray:
        raise NotImplementedError

    def estimate(self, value_fn, n_players, known=None):
        return permutation_shapley(
            value_fn,
            n_players,
            budget=self.budget,
            seed=self.seed,
            position_weights=self.position_weights(n_players),
            tolerance=self.tolerance,
            max_permutations=self.max_permutations,
            known=known,
        )


@dataclass(frozen=True)
class TMCShapley(_PermutationEstimator):
    """Truncated Monte-Carlo permutation sampling (truncation ``tolerance``)."""

    name: ClassVar[str] = "tmc"
    description: ClassVar[str] = "truncated Monte-Carlo Shapley (permutations)"
    tolerance: float = 0.05
    max_permutations: int = 1000

    def position_weights(self, n_players: int) -> np.ndarray:
        return np.ones(n_players)


@dataclass(frozen=True)
class BetaShapley(_PermutationEstimator):
    """Beta(alpha, beta)-Shapley by reweighted permutation sampling (alpha > beta favours
    small coalitions)."""

    name: ClassVar[str] = "beta"
    description: ClassVar[str] = "Beta(alpha, beta)-Shapley (reweighted permutations)"
    alpha: float = 16.0
    beta: float = 1.0
    tolerance: float = 0.0
    max_permutations: int = 1000

    def position_weights(self, n_players: int) -> np.ndarray:
        return beta_position_weights(n_players, self.alpha, self.beta)


@dataclass(frozen=True)
class ContextCite(Estimator):
    """LASSO surrogate on random keep-masks (ContextCite, Cohen-Wang et al., 2024); see
    :mod:`mechrag.attribution.contextcite`."""

    name: ClassVar[str] = "contextcite"
    description: ClassVar[str] = "ContextCite (LASSO on random keep-masks)"
    default_value: ClassVar[str] = "logit_prob"
    keep_prob: float = 0.5
    l1: float = 0.01

    def estimate(self, value_fn, n_players, known=None):
        return contextcite_surrogate(
            value_fn,
            n_players,
            budget=self.budget,
            seed=self.seed,
            keep_prob=self.keep_prob,
            l1=self.l1,
            known=known,
        )


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
# The estimators that sample under a budget (every one but exact and LOO).
SAMPLED = tuple(name for name in ESTIMATORS if name not in ("exact", "loo"))


def shapley_values(
    value_fn: ValueFn,
    n_players: int,
    method: str = "exact",
    budget: int | None = None,
    seed: int = 0,
    *,
    known: Known | None = None,
    **options,
) -> Estimate:
    """Attribution of a cooperative game to its players: ``[n_players]`` or ``[n_players, T]``.

    ``ESTIMATORS[method](budget=budget, seed=seed, **options).estimate(value_fn, n_players,
    known)``: ``options`` are the estimator's fields (``paired``, ``refits``, ``l1``, ...; see
    its class). ``budget``: distinct coalitions it may evaluate (exact needs ``2^n``, LOO
    ``n + 1``; a smaller budget is an error); ``known`` coalitions do not count.
    """
    if method not in ESTIMATORS:
        raise InputError(f"unknown method {method!r}: choose from {tuple(ESTIMATORS)}")
    estimator_class = ESTIMATORS[method]
    unknown = sorted(set(options) - set(estimator_class().options()))
    if unknown:
        raise InputError(
            f"{method} takes options {sorted(estimator_class().options())}, not {unknown}"
        )
    estimator = estimator_class(budget=budget, seed=seed, **options)
    return estimator.estimate(value_fn, n_players, known)
