"""Fitting attention-attribution head weights against exact ARC-JSD (``mechrag fit-attention``).

Each training case gives a design matrix ``X_c`` (one row per source, one column per head: the
attention features of :mod:`mechrag.attribution.attention`) and a target ``y_c``: its exact
ARC-JSD scores (``target="scores"``) or their ranks (``target="ranks"``). The weights ``w``
minimise

    mean_c [1 - pearson(X_c w, y_c)] + l2 * |w|^2   over   w >= 0, sum(w) = 1,

the loss AT2 uses (its targets are random-ablation log-odds; ours are ARC-JSD's, so no labels and
no extra ablations are needed). The correlation is invariant to each case's scale, so cases with
large and small divergences count the same; the simplex fixes the scale that the correlation
leaves free, and the L2 term spreads the weight over heads that explain the same thing. It is
solved by projected Adam from a seeded start near uniform (projection onto the simplex after
every step).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from jaxtyping import Float
from scipy.stats import rankdata, spearmanr

from mechrag.errors import InputError

TARGETS = ("scores", "ranks")


def project_to_simplex(v: torch.Tensor) -> torch.Tensor:
    """The Euclidean projection of ``v`` onto ``{w >= 0, sum w = 1}`` (sort-based)."""
    ordered, _ = torch.sort(v, descending=True)
    cumulative = ordered.cumsum(0) - 1.0
    steps = torch.arange(1, len(v) + 1, dtype=v.dtype)
    support = (ordered - cumulative / steps) > 0
    count = int(support.nonzero().max()) + 1
    threshold = cumulative[count - 1] / count
    return (v - threshold).clamp(min=0.0)


def _prepared_target(scores: np.ndarray, target: str) -> np.ndarray:
    """What the correlation is taken with: the scores themselves, or their ranks."""
    return rankdata(scores) if target == "ranks" else np.asarray(scores, dtype=np.float64)


def fit_head_weights(
    designs: Sequence[Float[np.ndarray, "n_sources n_components"]],
    targets: Sequence[Float[np.ndarray, " n_sources"]],
    *,
    l2: float = 1e-3,
    target: str = "scores",
    steps: int = 400,
    learning_rate: float = 0.01,
    seed: int = 0,
) -> Float[np.ndarray, " n_components"]:
    """Non-negative weights on the simplex (see the module); ``seed`` draws the start."""
    if target not in TARGETS:
        raise InputError(f"unknown target {target!r}: choose from {TARGETS}")
    if len(designs) != len(targets) or not designs:
        raise InputError("give one target per design matrix, and at least one case")
    n_components = designs[0].shape[1]
    cases = []
    for design, scores in zip(designs, targets):
        y = torch.as_tensor(_prepared_target(scores, target))
        if y.std() == 0:
            continue  # a case whose sources all score the same says nothing about the weights
        x = torch.as_tensor(np.asarray(design, dtype=np.float64))
        cases.append((x - x.mean(0), (y - y.mean()) / y.norm()))
    if not cases:
        raise InputError("every training case has constant targets: nothing to fit")
    generator = torch.Generator().manual_seed(seed)
    start = 1.0 + 0.01 * torch.rand(n_components, generator=generator, dtype=torch.float64)
    weights = (start / start.sum()).requires_grad_(True)
    optimiser = torch.optim.Adam([weights], lr=learning_rate)
    for _ in range(steps):
        optimiser.zero_grad()
        loss = l2 * weights.pow(2).sum()
        for x, y in cases:
            prediction = x @ weights
            loss = loss + (1.0 - prediction @ y / prediction.norm().clamp(min=1e-12)) / len(cases)
        loss.backward()
        optimiser.step()
        with torch.no_grad():
            weights.copy_(project_to_simplex(weights))
    return weights.detach().numpy()


def fit_quality(
    weights: Float[np.ndarray, " n_components"],
    designs: Sequence[Float[np.ndarray, "n_sources n_components"]],
    targets: Sequence[Float[np.ndarray, " n_sources"]],
) -> dict[str, float]:
    """Top-1 agreement and mean Spearman of ``X_c w`` with each case's exact scores."""
    top1, spearman = [], []
    for design, scores in zip(designs, targets):
        prediction = np.asarray(design) @ weights
        top1.append(float(np.argmax(prediction) == np.argmax(scores)))
        rho = spearmanr(prediction, scores).statistic
        spearman.append(0.0 if np.isnan(rho) else float(rho))
    return {"top1": float(np.mean(top1)), "spearman": float(np.mean(spearman)), "n": len(top1)}


def training_record(case, *, localize: bool = True) -> dict:
    """What the fit needs from one training case: its attention design matrix, its exact
    ARC-JSD scores and (``localize``) the head JSDs of its top source (for the localized
    weights). JSON-ready, rounded to float32 precision."""
    from mechrag.attribution.attention import attention_features

    exact = case.arc_jsd()
    design = attention_features(case).design().astype(np.float32)
    record = {
        "n_sources": case.n_sources,
        "response": case.response_text,
        "design": design.tolist(),
        "scores": exact.scores.tolist(),
    }
    if localize:
        record["heads"] = case.localize(gains=False).heads.tolist()
    return record


def _split(n: int, validation: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Seeded training and held-out indices: a ``validation`` share (at least one case when
    there are two or more and the share is positive)."""
    if not 0 <= validation < 1:
        raise InputError(f"validation must lie in [0, 1), got {validation}")
    order = np.random.default_rng(seed).permutation(n)
    n_validation = max(1, int(round(validation * n))) if n > 1 and validation > 0 else 0
    n_validation = min(n_validation, n - 1)  # always something to train on
    return np.sort(order[n_validation:]), np.sort(order[:n_validation])


def weights_from_records(
    records: Sequence[dict],
    model,
    *,
    l2: float = 1e-3,
    target: str = "scores",
    seed: int = 0,
    validation: float = 0.25,
    provenance: dict | None = None,
):
    """:class:`~mechrag.attribution.attention.AttentionWeights` from training records.

    Fit quality is measured on a seeded ``validation`` share of the records held out from a
    first fit; the shipped weights are then refitted on every record. The localized weights
    come from the records' head JSDs when they have them.
    """
    from mechrag import adapter
    from mechrag.attribution.attention import (
        AttentionWeights,
        localized_weights,
        model_key,
        model_shape,
    )

    if not records:
        raise InputError("no training records to fit on")
    designs = [np.asarray(r["design"], dtype=np.float64) for r in records]
    targets = [np.asarray(r["scores"], dtype=np.float64) for r in records]
    shape = (adapter.n_layers(model), adapter.n_heads(model))
    if designs[0].shape[1] != shape[0] * shape[1]:
        raise InputError(f"records have {designs[0].shape[1]} heads, the model {shape}")
    settings = {"l2": l2, "target": target, "seed": seed}
    train, held_out = _split(len(records), validation, seed)
    quality = {}
    if len(held_out):
        first = fit_head_weights(
            [designs[i] for i in train], [targets[i] for i in train], **settings
        )
        quality = {
            "validation": fit_quality(
                first, [designs[i] for i in held_out], [targets[i] for i in held_out]
            ),
            "validation_train": fit_quality(
                first, [designs[i] for i in train], [targets[i] for i in train]
            ),
        }
    weights = fit_head_weights(designs, targets, **settings)
    quality["train"] = fit_quality(weights, designs, targets)
    heads = [np.asarray(r["heads"]) for r in records if "heads" in r]
    localized = localized_weights(heads) if heads else None
    if localized is not None:
        flat = localized.reshape(-1)
        quality["localized_train"] = fit_quality(flat, designs, targets)
    uniform = np.full(shape[0] * shape[1], 1.0 / (shape[0] * shape[1]))
    quality["uniform_train"] = fit_quality(uniform, designs, targets)
    return AttentionWeights(
        model=model_key(model),
        shape=model_shape(model),
        fitted=weights.reshape(shape),
        localized=localized,
        provenance={
            **(provenance or {}),
            "fit": {**settings, "validation": validation},
            "quality": quality,
        },
    )
