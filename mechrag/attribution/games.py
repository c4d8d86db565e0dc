"""Source-attribution games: the value of a subset of sources for a fixed response.

All values derive from the teacher-forced log-probabilities ``l_t(S) = log P(r_t | query, S,
r_<t)``, which :class:`mechrag.Case` scores through the engine and caches by mask, so a subset is
never run twice whatever game or estimator asks for it:

- ``logprob``: ``v(S) = sum_t l_t(S)`` (response log-likelihood; Nematov et al.);
- ``token_prob``: ``v_t(S) = exp(l_t(S))``, one game per response token (RAG-E);
- ``logit_prob``: ``v(S) = L(S) - log(1 - exp(L(S)))`` with ``L(S) = sum_t l_t(S)``, the
  response's log-odds (ContextCite's target, as context-cite 0.0.4 aggregates it);
- ``total_token_logit_prob``: ``v(S) = sum_t [l_t(S) - log(1 - exp(l_t(S)))]``, the summed
  per-token log-odds (context-cite's ``total_token_logit_prob``; mechrag's ``logit_prob``
  before 0.3).

The empty subset renders the query with an empty context.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from mechrag.errors import InputError

# Keeps log(1 - p) finite when the model is certain of a token.
_MAX_LOGPROB = -1e-7


def _sum_logprob(logprobs: np.ndarray) -> np.ndarray:
    return logprobs.sum(-1)


def _token_prob(logprobs: np.ndarray) -> np.ndarray:
    return np.exp(logprobs)


def _log_odds(logprobs: np.ndarray) -> np.ndarray:
    clipped = np.minimum(logprobs, _MAX_LOGPROB)
    return clipped - np.log(-np.expm1(clipped))


def _logit_prob(logprobs: np.ndarray) -> np.ndarray:
    return _log_odds(logprobs.sum(-1))


def _total_token_logit_prob(logprobs: np.ndarray) -> np.ndarray:
    return _log_odds(logprobs).sum(-1)


VALUES: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "logprob": _sum_logprob,
    "token_prob": _token_prob,
    "logit_prob": _logit_prob,
    "total_token_logit_prob": _total_token_logit_prob,
}


def value_game(
    token_logprobs: Callable[[np.ndarray], np.ndarray], value: str = "logprob"
) -> Callable[[np.ndarray], np.ndarray]:
    """The value function ``masks -> [m]`` (``[m, T]`` for ``token_prob``) of a subset scorer."""
    if value not in VALUES:
        raise InputError(f"unknown value {value!r}: choose from {sorted(VALUES)}")
    transform = VALUES[value]
    return lambda masks: transform(token_logprobs(masks))
