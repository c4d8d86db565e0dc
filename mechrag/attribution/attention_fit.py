"""Fitting attention-attribution head weights against exact ARC-JSD (``mechrag fit-attention``).

Each training case gives a design matrix ``X_c`` (one row per source, one column per head: the
attention features of :mod:`mechrag.attribution.attention`) and a target ``y_c``: its exact
ARC-JSD scores (``target="scores"``) or their ranks (``target="ranks"``). The weights ``w``
minimise ``mean_c loss_c(X_c w, y_c) + l2 * |w|^2`` over ``w >= 0, sum(w) = 1``, with one of two
per-case losses:

* ``pearson``: ``1 - pearson(X_c w, y_c)``, the loss AT2 uses (its targets are random-ablation
  log-odds; ours are ARC-JSD's, so no labels and no extra ablations are needed);
* ``listwise``: the Kullback-Leibler divergence from ``softmax(z(y_c) / temperature)`` to
  ``softmax(z(X_c w) / temperature)``, ``z`` standardising a case's values to mean 0 and sd 1
  (ListNet's top-one loss, Cao et al., 2007). A low temperature puts the target's mass on the
  top sources, so the fit spends its freedom on the head of the ranking that top-1 agreement
  reads, where the correlation weighs every source alike.

Both are invariant to each case's scale, so cases with large and small divergences count the
same; the simplex fixes the scale they leave free, and the L2 term spreads the weight over heads
that explain the same thing. The fit is projected Adam from a seeded start near uniform
(projection onto the simplex after every step).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from jaxtyping import Bool, Float
from scipy.stats import rankdata, spearmanr

from mechrag.errors import InputError

TARGETS = ("scores", "ranks")
LOSSES = ("pearson", "listwise")
TEMPERATURE = 0.2  # the listwise loss's default, in standard deviations


def project_to_simplex(v: torch.Tensor) -> torch.Tensor:
    """The Euclidean projection of ``v`` onto ``{w >= 0, sum w = 1}`` (sort-based)."""
    ordered, _ = torch.sort(v, descending=True)
    cumulative = ordered.cumsum(0) - 1.0
    steps = torch.arange(1, len(v) + 1, dtype=v.dtype, device=v.device)
    support = (ordered - cumulative / steps) > 0
    count = int(support.nonzero().max()) + 1
    threshold = cumulative[count - 1] / count
    return (v - threshold).clamp(min=0.0)


def _prepared_target(scores: np.ndarray, target: str) -> np.ndarray:
    """What the loss compares the prediction with: the scores themselves, or their ranks."""
    return rankdata(scores) if target == "ranks" else np.asarray(scores, dtype=np.float64)


def _check_settings(*, target: str, loss: str, temperature: float) -> None:
    """One clear line for an unknown target or loss, or a temperature that is not positive."""
    if target not in TARGETS:
        raise InputError(f"unknown target {target!r}: choose from {TARGETS}")
    if loss not in LOSSES:
        raise InputError(f"unknown loss {loss!r}: choose from {LOSSES}")
    if not temperature > 0:
        raise InputError(f"temperature must be positive, got {temperature}")


@dataclass(frozen=True)
class TrainingBatch:
    """The training cases padded to one tensor: each case's design centred over its sources
    (padding rows zero), its prepared goal (the standardised target over its norm for
    ``pearson``; its softmax at the temperature for ``listwise``; zero on padding) and which
    rows are sources."""

    designs: Float[torch.Tensor, "n_cases n_sources n_components"]
    goals: Float[torch.Tensor, "n_cases n_sources"]
    valid: Bool[torch.Tensor, "n_cases n_sources"]
    loss: str
    temperature: float

    @classmethod
    def of(
        cls,
        designs: Sequence[Float[np.ndarray, "n_sources n_components"]],
        targets: Sequence[Float[np.ndarray, " n_sources"]],
        *,
        target: str = "scores",
        loss: str = "pearson",
        temperature: float = TEMPERATURE,
    ) -> TrainingBatch:
        """The batch of the cases whose targets vary (a case whose sources all score the same
        says nothing about the weights)."""
        _check_settings(target=target, loss=loss, temperature=temperature)
        if len(designs) != len(targets) or not designs:
            raise InputError("give one target per design matrix, and at least one case")
        if not all(np.all(np.isfinite(scores)) for scores in targets):
            raise InputError("training targets must be finite numbers")
        width = np.shape(designs[0])[-1]
        for design, scores in zip(designs, targets):
            if np.shape(design) != (len(scores), width) or not np.all(np.isfinite(design)):
                raise InputError(
                    f"each design must be finite numbers, one row per target and {width} columns"
                )
        kept = [
            (np.asarray(design, dtype=np.float64), _prepared_target(scores, target))
            for design, scores in zip(designs, targets)
            if np.std(scores) > 0
        ]
        if not kept:
            raise InputError("every training case has constant targets: nothing to fit")
        n_sources = max(len(y) for _, y in kept)
        # host: the fit runs on the CPU, from features already on the host
        x = torch.zeros((len(kept), n_sources, width), dtype=torch.float64)
        goals = torch.zeros((len(kept), n_sources), dtype=torch.float64)  # host
        valid = torch.zeros((len(kept), n_sources), dtype=torch.bool)  # host
        for row, (design, y) in enumerate(kept):
            size = len(y)
            x[row, :size] = torch.as_tensor(design - design.mean(0))  # host: numpy in
            z = torch.as_tensor((y - y.mean()) / y.std())  # host: numpy in
            goals[row, :size] = (z / temperature).softmax(0) if loss == "listwise" else z / z.norm()
            valid[row, :size] = True
        return cls(designs=x, goals=goals, valid=valid, loss=loss, temperature=temperature)

    def objective(self, weights: Float[torch.Tensor, " n_components"]) -> Float[torch.Tensor, ""]:
        """The mean per-case loss of ``weights`` (see the module), without the L2 term."""
        prediction = self.designs @ weights  # centred over each case's sources; 0 on padding
        if self.loss == "pearson":
            norms = prediction.norm(dim=1).clamp(min=1e-12)
            return (1.0 - (prediction * self.goals).sum(1) / norms).mean()
        count = self.valid.sum(1, keepdim=True)
        # Clamped before the root: a case whose heads all pay its sources the same attention
        # (a zero centred design) gets a uniform softmax and a zero gradient, not 0/0.
        rms = (prediction.pow(2).sum(1, keepdim=True) / count).clamp(min=1e-24).sqrt()
        logits = (prediction / rms / self.temperature).masked_fill(~self.valid, -torch.inf)
        predicted = logits.log_softmax(1).masked_fill(~self.valid, 0.0)
        entropy_gap = self.goals.clamp(min=1e-300).log() - predicted
        return (self.goals * entropy_gap).sum(1).mean()


def fit_objective(
    weights: Float[np.ndarray, " n_components"],
    designs: Sequence[Float[np.ndarray, "n_sources n_components"]],
    targets: Sequence[Float[np.ndarray, " n_sources"]],
    *,
    target: str = "scores",
    loss: str = "pearson",
    temperature: float = TEMPERATURE,
) -> float:
    """The fit's mean per-case loss of ``weights`` on these cases (without the L2 term)."""
    batch = TrainingBatch.of(designs, targets, target=target, loss=loss, temperature=temperature)
    weights = torch.as_tensor(np.asarray(weights, dtype=np.float64))  # host: the fit's device
    return float(batch.objective(weights))


def fit_head_weights(
    designs: Sequence[Float[np.ndarray, "n_sources n_components"]],
    targets: Sequence[Float[np.ndarray, " n_sources"]],
    *,
    l2: float = 1e-3,
    target: str = "scores",
    loss: str = "pearson",
    temperature: float = TEMPERATURE,
    steps: int = 400,
    learning_rate: float = 0.01,
    seed: int = 0,
) -> Float[np.ndarray, " n_components"]:
    """Non-negative weights on the simplex (see the module); ``seed`` draws the start;
    ``temperature`` is the listwise loss's (in standard deviations). Every case enters one
    batched objective, so a step costs a few tensor operations however many cases there are."""
    batch = TrainingBatch.of(designs, targets, target=target, loss=loss, temperature=temperature)
    generator = torch.Generator().manual_seed(seed)
    n_components = batch.designs.shape[-1]
    # host: the fit runs on the CPU; a CPU generator draws the same start everywhere
    start = 1.0 + 0.01 * torch.rand(n_components, generator=generator, dtype=torch.float64)
    weights = (start / start.sum()).requires_grad_(True)
    optimiser = torch.optim.Adam([weights], lr=learning_rate)
    for _ in range(steps):
        optimiser.zero_grad()
        total = l2 * weights.pow(2).sum() + batch.objective(weights)
        total.backward()
        optimiser.step()
        with torch.no_grad():
            weights.copy_(project_to_simplex(weights))
    return weights.detach().numpy()  # host: fitted on the CPU


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
    loss: str = "pearson",
    temperature: float = TEMPERATURE,
    seed: int = 0,
    validation: float = 0.25,
    provenance: dict | None = None,
):
    """:class:`~mechrag.attribution.attention.AttentionWeights` from training records.

    Fit quality is measured on a seeded ``validation`` share of the records held out from a
    first fit; the shipped weights are then refitted on every record. The localized weights
    come from the records' head JSDs when they have them.
    """
    from mechrag.attribution.attention import (
        AttentionWeights,
        localized_weights,
        model_key,
        model_shape,
    )
    from mechrag.models import adapter

    if not records:
        raise InputError("no training records to fit on")
    designs = [np.asarray(r["design"], dtype=np.float64) for r in records]
    targets = [np.asarray(r["scores"], dtype=np.float64) for r in records]
    shape = (adapter.n_layers(model), adapter.n_heads(model))
    if designs[0].shape[1] != shape[0] * shape[1]:
        raise InputError(f"records have {designs[0].shape[1]} heads, the model {shape}")
    settings = {"l2": l2, "target": target, "loss": loss, "seed": seed}
    if loss == "listwise":  # the only loss the temperature changes
        settings["temperature"] = temperature
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
    quality["train"]["objective"] = fit_objective(
        weights, designs, targets, target=target, loss=loss, temperature=temperature
    )
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
