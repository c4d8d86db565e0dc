"""Divergences between next-token distributions given as log-probabilities.

All functions reduce over the last axis, compute in float32 (float64 inputs stay float64) and
are exact where probabilities are zero: a ``-inf`` log-probability contributes nothing and never
produces NaN. ``jsd`` is the standard Jensen-Shannon divergence with natural log,
``JSD(P, Q) = KL(P || M) / 2 + KL(Q || M) / 2`` with ``M = (P + Q) / 2``, bounded by ``ln 2``.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from jaxtyping import Float

LN2 = math.log(2.0)

Logprobs = Float[torch.Tensor, "*batch vocab"]


def _as_float_tensor(x: torch.Tensor | np.ndarray) -> torch.Tensor:
    tensor = torch.as_tensor(x)  # host: numpy stays on the host, a tensor keeps its device
    if tensor.dtype not in (torch.float32, torch.float64):
        tensor = tensor.float()
    return tensor


def _kl_terms(logp: torch.Tensor, logq: torch.Tensor) -> torch.Tensor:
    """Elementwise ``p * (log p - log q)``, zero where ``p == 0``."""
    p = logp.exp()
    diff = torch.where(p > 0, logp - logq, torch.zeros_like(logp))
    return p * diff


def _like_input(result: torch.Tensor, reference: torch.Tensor | np.ndarray):
    return result.numpy() if isinstance(reference, np.ndarray) else result  # host: numpy in


def kl(logp: Logprobs | np.ndarray, logq: Logprobs | np.ndarray):
    """KL(P || Q) along the last axis; ``inf`` where P puts mass on a zero of Q."""
    lp, lq = _as_float_tensor(logp), _as_float_tensor(logq)
    return _like_input(_kl_terms(lp, lq).sum(-1), logp)


def _jsd_unclamped(
    logp: Logprobs | np.ndarray, logq: Logprobs | np.ndarray
) -> Float[torch.Tensor, "*batch"]:
    """``KL(P || M) / 2 + KL(Q || M) / 2`` as computed, before :func:`jsd` clamps the round-off
    that can carry it just outside ``[0, ln 2]`` (kept apart so tests can bound that round-off)."""
    lp, lq = torch.broadcast_tensors(_as_float_tensor(logp), _as_float_tensor(logq))
    log_m = torch.logaddexp(lp, lq) - LN2
    return 0.5 * (_kl_terms(lp, log_m).sum(-1) + _kl_terms(lq, log_m).sum(-1))


def jsd(logp: Logprobs | np.ndarray, logq: Logprobs | np.ndarray):
    """Jensen-Shannon divergence (natural log) along the last axis, in ``[0, ln 2]``.

    Equals ``scipy.spatial.distance.jensenshannon(p, q) ** 2`` for normalised inputs.
    """
    value = _jsd_unclamped(logp, logq)
    return _like_input(value.clamp(0.0, LN2), logp)


def total_variation(logp: Logprobs | np.ndarray, logq: Logprobs | np.ndarray):
    """Total variation distance ``0.5 * sum |p - q|`` along the last axis, in ``[0, 1]``."""
    lp, lq = _as_float_tensor(logp), _as_float_tensor(logq)
    value = 0.5 * (lp.exp() - lq.exp()).abs().sum(-1)
    return _like_input(value.clamp(0.0, 1.0), logp)


# Divergences the engine records for every scored subset, by name.
DIVERGENCES = {"jsd": jsd, "kl": kl, "tv": total_variation}
