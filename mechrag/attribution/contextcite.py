"""ContextCite-style surrogate (Cohen-Wang et al., 2024): a sparse linear model of ablations.

Random coalitions keep each source with probability ``keep_prob`` (0.5); a LASSO regression of
the target on the keep-masks gives one weight per source. For RAG the target is the response's
logit-probability, the log-odds of the whole response (:mod:`mechrag.attribution.games`,
``value="logit_prob"``, as context-cite computes it). The LASSO is solved
here by cyclic coordinate descent on standardised features (no scikit-learn dependency).
"""

from __future__ import annotations

import numpy as np
from jaxtyping import Float

from mechrag.attribution.sampling import Known, Oracle, ValueFn, resolve_budget
from mechrag.errors import InputError


def lasso(
    features: Float[np.ndarray, "m n"],
    targets: Float[np.ndarray, " m"],
    l1: float,
    max_iter: int = 1000,
    tol: float = 1e-8,
) -> tuple[Float[np.ndarray, " n"], float]:
    """Weights and intercept minimising ``||y - b - X w||^2 / (2m) + l1 ||w||_1``.

    Columns are standardised for the fit and the weights mapped back to the original scale, so
    ``l1`` penalises standardised weights (with keep probability 1/2 a mask column has standard
    deviation 1/2: about ``l1 / 2`` on raw 0/1 masks, unlike scikit-learn's ``Lasso(alpha)``);
    constant columns (a source kept in every or no sample) get weight zero.
    """
    x = np.asarray(features, dtype=float)
    y = np.asarray(targets, dtype=float)
    if x.ndim != 2 or y.shape != (x.shape[0],):
        raise ValueError(f"need features [m, n] and targets [m], got {x.shape} and {y.shape}")
    if l1 < 0:
        raise InputError(f"l1 penalty must be >= 0, got {l1}")
    mean, scale = x.mean(0), x.std(0)
    varying = scale > 1e-12
    z = np.where(varying, (x - mean) / np.where(varying, scale, 1.0), 0.0)
    residual = y - y.mean()
    w = np.zeros(x.shape[1])
    m = len(y)
    for _ in range(max_iter):
        largest_step = 0.0
        for j in np.flatnonzero(varying):
            rho = z[:, j] @ residual / m + w[j]  # standardised column: z_j . z_j / m = 1
            updated = np.sign(rho) * max(abs(rho) - l1, 0.0)
            if updated != w[j]:
                residual -= (updated - w[j]) * z[:, j]
                largest_step = max(largest_step, abs(updated - w[j]))
                w[j] = updated
        if largest_step < tol:
            break
    weights = np.where(varying, w / np.where(varying, scale, 1.0), 0.0)
    return weights, float(y.mean() - mean @ weights)


def contextcite_surrogate(
    value_fn: ValueFn,
    n_players: int,
    *,
    budget: int | None,
    seed: int,
    keep_prob: float,
    l1: float,
    known: Known | None = None,
) -> Float[np.ndarray, " n_players"]:
    """LASSO weights of ``value_fn`` on ``budget`` random keep-masks (per column if ``[m, T]``).

    Repeated masks are evaluated once but kept as rows of the regression; ``known`` coalitions
    are free when drawn.
    """
    if not 0 < keep_prob < 1:
        raise InputError(f"keep_prob must be in (0, 1), got {keep_prob}")
    budget = resolve_budget(budget, n_players)
    oracle = Oracle(value_fn, n_players, budget, known)
    masks = np.random.default_rng(seed).random((budget, n_players)) < keep_prob
    values = oracle(masks)
    weights = np.stack([lasso(masks, column, l1)[0] for column in values.T], axis=1)
    return oracle.shape(weights)
