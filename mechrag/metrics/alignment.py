"""Retriever-generator alignment: WARG, Wasted Retrieval, Noise Distraction, AIPC.

Plain functions on score arrays over the same documents (one entry per document in the prompt):
``retriever`` holds the retriever's scores, ``generator`` the generator's document attributions
(e.g. Shapley values of the response's token probabilities).

The retriever's scores are either its similarities or, as RAG-E's code scores its prompt
conditions, the prompt positions (:func:`position_scores`: ``[n − 1, ..., 0]``, the first slot
highest). Every function here reads whichever it is given; :func:`mechrag.retrieval.rag_e.explain`
chooses (``retriever_scores="position" | "similarity"``).

Ranks and ``k`` count from 1: "top k" is the set of the ``k`` highest scores (ranks 1..k, ties
broken by document order), so ``k = 1`` is the single best document.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from jaxtyping import Bool, Float

from mechrag.errors import InputError
from mechrag.metrics.agreement import top_k

Scores = Float[np.ndarray, " n_documents"]
WARG_TAU = 1.5


def _pair(retriever, generator) -> tuple[np.ndarray, np.ndarray]:
    retriever, generator = np.asarray(retriever, float), np.asarray(generator, float)
    if retriever.shape != generator.shape or retriever.ndim != 1 or len(retriever) < 1:
        raise InputError(
            f"need one score per document on both sides, got {retriever.shape} and "
            f"{generator.shape}"
        )
    return retriever, generator


def position_scores(n_documents: int) -> Scores:
    """Retriever scores by prompt slot: ``[n − 1, ..., 0]``, slot 0 (first in the prompt) highest.

    RAG-E's code scores the retriever this way in its prompt conditions (``RET_SCORES =
    [9, 8, ..., 0]``, "pos 0 = top ranked", "position-based ground truth", for WARG, Spearman and
    Pearson alike; scripts/data/plot_warg_tau.py of k-randl/Interpretable_RAG). The score follows
    the slot, not the document: a random document placed first scores ``n − 1``, so in a prompt
    that puts random documents before the retrieved ones (c3) a generator that reads the
    retrieved documents gets a negative WARG. Where the prompt is the top ``k`` in rank order (c1)
    these scores rank the documents as the similarities do (the WARG values differ: positions
    are evenly spaced, similarities are not).
    """
    if n_documents < 1:
        raise InputError(f"need at least one document, got {n_documents}")
    return np.arange(n_documents - 1, -1, -1, dtype=float)


def ranks(scores: Scores) -> np.ndarray:
    """Rank of each document, 1 = highest score (ties keep document order)."""
    order = top_k(scores, len(scores))
    result = np.empty(len(order), dtype=int)
    result[order] = np.arange(1, len(order) + 1)
    return result


def generator_high_set(generator: Scores, tau: float = WARG_TAU) -> Bool[np.ndarray, " n"]:
    """Documents the generator relies on: normalised attribution above ``tau / |D|``.

    Attributions are divided by the sum of the positive ones, so if the generator spread its
    (positive) attribution uniformly each document would get ``1/|D|``; ``tau`` times that is the
    threshold. With no positive attribution the set is empty.
    """
    generator = np.asarray(generator, float)
    positive = generator[generator > 0].sum()
    if positive <= 0:
        return np.zeros(len(generator), dtype=bool)
    return generator / positive > tau / len(generator)


def warg(retriever: Scores, generator: Scores, tau: float = WARG_TAU) -> float:
    """Weighted Attribution-Relevance Gap (RAG-E), in [-1, 1].

    ``H`` = the documents the generator relies on (:func:`generator_high_set`), ``h = |H|``. The
    gap is the mean retriever score inside ``H`` minus the mean outside; it is divided by the
    largest gap any ``h`` documents could give (the retriever's own top ``h`` against the rest),
    so 1 means the generator relies on exactly the retriever's top-``h`` documents, 0 no
    relation, negative values that it relies on documents the retriever ranked low (clipped at
    -1: the reversed split can exceed the oracle gap in size).

    Degenerate cases are 0 by definition, never NaN: ``h = 0`` (the generator relies on no
    document above the threshold, e.g. no positive attribution) and ``h = |D|`` (possible only for
    ``tau < 1``: it relies on all documents alike) leave no split to compare, and when the
    retriever's top ``h`` and the rest tie on average (e.g. all scores equal) the retriever ranks
    nothing for the generator to agree with. (RAG-E's code, ``RAGExplanation.warg``, gives a
    nonzero value at ``h = 0`` and ``h = |D|`` and NaN for a zero denominator.) Its oracle takes
    the first ``h`` scores in list order, which is the top ``h`` only for descending scores such
    as :func:`position_scores`; we sort, so both agree there and ours stays right for any order.
    With :func:`position_scores` the denominator is positive whenever ``0 < h < |D|``.
    """
    retriever, generator = _pair(retriever, generator)
    high = generator_high_set(generator, tau)
    h = int(high.sum())
    if h in (0, len(retriever)):
        return 0.0
    gap = retriever[high].mean() - retriever[~high].mean()
    ordered = np.sort(retriever)[::-1]
    oracle = ordered[:h].mean() - ordered[h:].mean()
    if oracle <= 0:
        return 0.0
    return float(np.clip(gap / oracle, -1.0, 1.0))


def wasted_retrieval(retriever: Scores, generator: Scores, k: int) -> bool:
    """The retriever's top document is not among the generator's top ``k`` (ranks 1..k).

    RAG-E (v1 §5.2) flags it at ``k = 3``. With :func:`position_scores` the retriever's top
    document is the one in the first prompt slot, as in RAG-E's code, where retriever ranks are
    prompt positions.
    """
    retriever, generator = _pair(retriever, generator)
    return int(top_k(retriever, 1)[0]) not in set(top_k(generator, k).tolist())


def noise_distraction(retriever: Scores, generator: Scores, k: int) -> bool:
    """The generator's top document is not among the retriever's top ``k`` (ranks 1..k).

    With :func:`position_scores`: not among the first ``k`` prompt slots (RAG-E v1 §5.2, k = 3).
    """
    retriever, generator = _pair(retriever, generator)
    return int(top_k(generator, 1)[0]) not in set(top_k(retriever, k).tolist())


def alignment_flags(retriever: Scores, generator: Scores, ks=(1, 3, 5)) -> dict[str, bool]:
    """``wr@k`` and ``nd@k`` for each ``k`` in ``ks``."""
    flags = {}
    for k in ks:
        flags[f"wr@{k}"] = wasted_retrieval(retriever, generator, k)
        flags[f"nd@{k}"] = noise_distraction(retriever, generator, k)
    return flags


# ---------------------------------------------------------------- perturbation curves, AIPC


ValueFunction = Callable[[Bool[np.ndarray, "m n"]], Float[np.ndarray, " m"]]


def removal_masks(order, n: int) -> Bool[np.ndarray, "n_plus_1 n"]:
    """Row ``t`` keeps every feature except the first ``t`` of ``order`` (row 0 keeps all)."""
    masks = np.ones((n + 1, n), dtype=bool)
    for t, feature in enumerate(order, start=1):
        masks[t:, feature] = False
    return masks


def perturbation_curves(value_fn: ValueFunction, attributions: Scores) -> dict[str, np.ndarray]:
    """MoRF and LeRF curves: the value as features are removed, most / least relevant first.

    ``value_fn(masks)`` scores boolean masks ``[m, n]`` (True = feature kept). Returns the
    fractions removed (``0, 1/n, ..., 1``) and, for each order, the normalised drop
    ``y_t = (v(all) − v(mask_t)) / |v(all) − v(none)|``: 0 before any removal, ±1 once all are
    removed. (If removing everything leaves ``v`` unchanged the largest absolute drop on either
    curve normalises instead, and an all-flat pair stays 0.) Ties in the attributions keep the
    feature order.
    """
    attributions = np.asarray(attributions, float)
    n = len(attributions)
    if n < 1:
        raise InputError("need at least one feature")
    morf = np.argsort(-attributions, kind="stable")
    lerf = np.argsort(attributions, kind="stable")
    values = np.asarray(value_fn(np.concatenate([removal_masks(morf, n), removal_masks(lerf, n)])))
    morf_values, lerf_values = values[: n + 1], values[n + 1 :]
    full = morf_values[0]
    drops = np.stack([full - morf_values, full - lerf_values])
    scale = abs(full - morf_values[-1]) or np.abs(drops).max()
    drops = drops / scale if scale > 0 else drops
    return {"fractions": np.arange(n + 1) / n, "morf": drops[0], "lerf": drops[1]}


def aipc(value_fn: ValueFunction, attributions: Scores) -> float:
    """Area inside the perturbation curves: ``∫ (MoRF drop − LeRF drop) d(fraction removed)``.

    Removing the most relevant features first should lower the value faster than removing the
    least relevant first, so a faithful attribution gives a positive area (at most 1), a random
    one about 0, an inverted one a negative area. Trapezoid rule over the ``n + 1`` points.
    (RAG-E takes ``|area under MoRF| − |area under LeRF|`` of the signed changes; without the
    absolute values a curve that crosses zero cannot look faithful by its size alone.)
    """
    curves = perturbation_curves(value_fn, attributions)
    return float(np.trapezoid(curves["morf"] - curves["lerf"], curves["fractions"]))


def bootstrap_ci(
    values, n_resamples: int = 1000, confidence: float = 0.95, seed: int = 0
) -> tuple[float, float, float]:
    """``(mean, low, high)``: percentile bootstrap interval of the mean (seeded)."""
    values = np.asarray(values, float)
    values = values[~np.isnan(values)]
    if len(values) == 0:
        return float("nan"), float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    means = values[rng.integers(0, len(values), (n_resamples, len(values)))].mean(1)
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail])
    return float(values.mean()), float(low), float(high)
