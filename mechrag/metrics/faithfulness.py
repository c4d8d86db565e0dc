"""Faithfulness as the field measures it: how well an attribution predicts what removing sources
does to the response, whatever method made it (ContextCite, Cohen-Wang et al. 2024; AT2).

* **Linear datamodeling score** (:func:`lds`): held-out random masks keep each source with
  probability ``keep``; each mask's output is the response's *logit-probability* (context-cite
  0.0.4's default): with ``log p = Σ_t log P(r_t | kept sources, r_<t)``, the output is
  ``log p − log(1 − p)``. The attribution predicts ``Σ_i score_i · mask_i``; LDS is the Spearman
  correlation between predictions and outputs over the masks.
* **Top-k removal and keeping** (:func:`topk_removal`, :func:`topk_keep`): the change in the
  response's log-probability ``log p`` when the ``k`` top-ranked sources are removed, or kept
  alone, against the full context (negative: the response leaned on them).

Every output comes from the case's subset cache (:meth:`mechrag.Case.token_logprobs`): the
masks are drawn from the seed and the number of sources alone, so every method evaluated on one
case shares them, and a mask already scored costs no pass. Token-level logit-probabilities are
``ℓ_t = log p_t − log(1 − p_t)`` (context-cite computes them from logits as the target's logit
minus the log-sum-exp of the others: the same number).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from jaxtyping import Bool, Float

from mechrag.errors import InputError
from mechrag.metrics.agreement import spearman
from mechrag.results.base import Serializable

N_MASKS = 32
KEEP = 0.5
TOP_KS = (1, 3, 5)
# The held-out masks' own random stream: ``default_rng(seed)`` is what ContextCite draws its
# training masks from, so the same seed would evaluate it on the masks it was fitted to.
HELD_OUT_STREAM = 0x5EED


def _log_one_minus(log_p: np.ndarray) -> np.ndarray:
    """``log(1 − p)`` from ``log p``, exact near ``p = 1`` (``-inf`` at ``p = 1``)."""
    with np.errstate(divide="ignore"):
        return np.log(-np.expm1(log_p))


def token_logit_probs(
    token_logprobs: Float[np.ndarray, "*batch n_response"],
) -> Float[np.ndarray, "*batch n_response"]:
    """``ℓ_t = log p_t − log(1 − p_t)`` per response token."""
    log_p = np.asarray(token_logprobs, dtype=np.float64)
    return log_p - _log_one_minus(log_p)


def response_logit_prob(
    token_logprobs: Float[np.ndarray, "*batch n_response"],
) -> Float[np.ndarray, " *batch"]:
    """The response's logit-probability ``log p − log(1 − p)``, ``log p = Σ_t log p_t``."""
    log_p = np.asarray(token_logprobs, dtype=np.float64).sum(-1)
    return log_p - _log_one_minus(log_p)


def held_out_masks(
    n_sources: int, n_masks: int = N_MASKS, keep: float = KEEP, seed: int = 0
) -> Bool[np.ndarray, "n_masks n_sources"]:
    """``n_masks`` random masks, each source kept with probability ``keep``, from ``seed`` and
    ``n_sources`` alone (so every method on one case gets the same masks), on a stream of their
    own (:data:`HELD_OUT_STREAM`): held out from any method's random masks of the same seed."""
    if n_masks < 2:
        raise InputError(f"LDS needs at least 2 masks, got {n_masks}")
    if not 0 < keep < 1:
        raise InputError(f"keep must lie in (0, 1), got {keep}")
    stream = np.random.default_rng(np.random.SeedSequence([seed, HELD_OUT_STREAM]))
    return stream.random((n_masks, n_sources)) < keep


@dataclass
class LDS(Serializable):
    """One attribution's linear datamodeling score on one case: ``value`` (Spearman rho of
    ``predictions`` against ``outputs`` over ``masks``)."""

    default_name = "lds"

    value: float
    masks: Bool[np.ndarray, "n_masks n_sources"]
    outputs: Float[np.ndarray, " n_masks"]
    predictions: Float[np.ndarray, " n_masks"]


def lds(
    case,
    attribution,
    *,
    masks: Bool[np.ndarray, "n_masks n_sources"] | None = None,
    n_masks: int = N_MASKS,
    keep: float = KEEP,
    seed: int = 0,
) -> LDS:
    """The linear datamodeling score of ``attribution`` on ``case`` (see the module docstring);
    ``masks`` replaces the drawn held-out masks."""
    scores = _scores_on(case, attribution)
    if masks is None:
        masks = held_out_masks(case.n_sources, n_masks, keep, seed)
    masks = np.asarray(masks, dtype=bool)
    if masks.ndim != 2 or masks.shape[1] != case.n_sources:
        raise InputError(f"masks must be [n_masks, {case.n_sources}], got {masks.shape}")
    outputs = response_logit_prob(case.token_logprobs(masks))
    value, predictions = lds_of_outputs(scores, masks, outputs)
    return LDS(value, masks, outputs, predictions)


def lds_of_outputs(
    scores: Float[np.ndarray, " n_sources"],
    masks: Bool[np.ndarray, "n_masks n_sources"],
    outputs: Float[np.ndarray, " n_masks"],
) -> tuple[float, Float[np.ndarray, " n_masks"]]:
    """``(LDS, predictions)`` from masks whose outputs are already known (a replay of stored
    scores): the Spearman correlation of ``masks @ scores`` with ``outputs``."""
    predictions = np.asarray(masks, dtype=np.float64) @ np.asarray(scores, dtype=np.float64)
    return float(spearman(predictions, np.asarray(outputs, dtype=np.float64))), predictions


def _scores_on(case, attribution) -> Float[np.ndarray, " n_sources"]:
    """The attribution's scores, checked to be for ``case``'s sources; ``attribution`` is a
    result or its scores, one per source in the case's order (as a run record keeps them)."""
    if not hasattr(attribution, "scores"):
        scores = np.asarray(attribution, dtype=np.float64)
        if scores.shape != (case.n_sources,):
            raise InputError(f"scores must be [{case.n_sources}], got {scores.shape}")
        return scores
    if [s.id for s in attribution.sources] != [s.id for s in case.sources]:
        raise InputError("the attribution was made for other sources than the case's")
    return np.asarray(attribution.scores, dtype=np.float64)


def topk_masks(
    scores: Float[np.ndarray, " n_sources"], ks: Sequence[int]
) -> tuple[list[int], Bool[np.ndarray, "n_ks n_sources"]]:
    """``(ks, masks)``: each ``k`` up to the number of sources, and the mask keeping the ``k``
    top-scored sources (ties rank in source order)."""
    ks = [int(k) for k in ks]
    if any(k < 1 for k in ks):
        raise InputError(f"k must be at least 1, got {ks}")
    ks = [k for k in ks if k <= len(scores)]
    order = np.argsort(-np.asarray(scores), kind="stable")
    masks = np.zeros((len(ks), len(scores)), dtype=bool)
    for row, k in enumerate(ks):
        masks[row, order[:k]] = True
    return ks, masks


def _top_k_changes(case, attribution, ks: Sequence[int], kept: bool) -> dict[int, float]:
    ks, masks = topk_masks(_scores_on(case, attribution), ks)
    masks = masks if kept else ~masks
    full = case.token_logprobs(case.full_mask()[None]).sum()
    changed = case.token_logprobs(masks).sum(-1) if ks else np.zeros(0)
    return {k: float(value - full) for k, value in zip(ks, changed)}


def topk_removal(case, attribution, k: Sequence[int] = TOP_KS) -> dict[int, float]:
    """``log p(without the top k) − log p(full context)`` per ``k`` (``k`` above the number of
    sources is left out; ties rank in source order)."""
    return _top_k_changes(case, attribution, k, kept=False)


def topk_keep(case, attribution, k: Sequence[int] = TOP_KS) -> dict[int, float]:
    """``log p(the top k alone) − log p(full context)`` per ``k``."""
    return _top_k_changes(case, attribution, k, kept=True)


def faithfulness(case, attribution, *, n_masks: int = N_MASKS, seed: int = 0) -> dict:
    """LDS (its value and mask count) and the top-k removal and keep changes, JSON-ready: what
    ``mechrag attribute --evaluate`` prints and writes, and what sweeps record."""
    found = lds(case, attribution, n_masks=n_masks, seed=seed)
    return {
        "lds": found.value,
        "lds_masks": len(found.masks),
        "topk_removal": {str(k): v for k, v in topk_removal(case, attribution).items()},
        "topk_keep": {str(k): v for k, v in topk_keep(case, attribution).items()},
    }
