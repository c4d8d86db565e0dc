"""Source-attribution games: the value of a subset of sources for a fixed response.

All values derive from the teacher-forced log-probabilities ``l_t(S) = log P(r_t | query, S,
r_<t)``, scored through the engine and cached by mask, so a subset is never run twice whatever
game or estimator asks for it:

- ``logprob``: ``v(S) = sum_t l_t(S)`` (response log-likelihood; Nematov et al.);
- ``token_prob``: ``v_t(S) = exp(l_t(S))``, one game per response token (RAG-E);
- ``logit_prob``: ``v(S) = sum_t [l_t(S) - log(1 - exp(l_t(S)))]`` (ContextCite's target).

The empty subset renders the query with an empty context.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
from jaxtyping import Bool, Float

from mechrag.attribution.context import AttributionTask

# Keeps log(1 - p) finite when the model is certain of a token.
_MAX_LOGPROB = -1e-7


def _sum_logprob(logprobs: np.ndarray) -> np.ndarray:
    return logprobs.sum(-1)


def _token_prob(logprobs: np.ndarray) -> np.ndarray:
    return np.exp(logprobs)


def _logit_prob(logprobs: np.ndarray) -> np.ndarray:
    clipped = np.minimum(logprobs, _MAX_LOGPROB)
    return (clipped - np.log(-np.expm1(clipped))).sum(-1)


VALUES: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "logprob": _sum_logprob,
    "token_prob": _token_prob,
    "logit_prob": _logit_prob,
}


class SubsetScorer:
    """Cached ``log P(r_t | query, S, r_<t)`` for subsets ``S`` of one task's sources."""

    def __init__(self, task: AttributionTask) -> None:
        self.task = task
        self.cache: dict[bytes, np.ndarray] = {}

    @property
    def n_sources(self) -> int:
        return self.task.builder.n_sources

    @property
    def evaluations(self) -> int:
        """Distinct subsets scored so far (the model budget spent)."""
        return len(self.cache)

    def token_logprobs(
        self, masks: Bool[np.ndarray, "n_masks n_sources"]
    ) -> Float[np.ndarray, "n_masks n_response"]:
        """Per-token log-probabilities; unseen subsets are scored in one engine call."""
        masks = np.asarray(masks, dtype=bool)
        if masks.ndim != 2 or masks.shape[1] != self.n_sources:
            raise ValueError(f"masks must be [m, {self.n_sources}], got {masks.shape}")
        keys = [row.tobytes() for row in masks]
        missing = list(dict.fromkeys(k for k in keys if k not in self.cache))
        if missing:
            rows = torch.as_tensor(np.stack([np.frombuffer(k, dtype=bool) for k in missing]))
            task = self.task
            scored = task.engine.token_logprobs(task.builder, task.response_ids, rows)
            for key, row in zip(missing, scored.double().numpy()):
                self.cache[key] = row
        return np.stack([self.cache[k] for k in keys])

    def game(self, value: str = "logprob") -> Callable[[np.ndarray], np.ndarray]:
        """The value function ``masks -> [m]`` (or ``[m, T]`` for ``token_prob``)."""
        if value not in VALUES:
            raise ValueError(f"unknown value {value!r}: choose from {sorted(VALUES)}")
        transform = VALUES[value]
        return lambda masks: transform(self.token_logprobs(masks))
