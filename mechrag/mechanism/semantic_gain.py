"""Semantic gain: how far each component turns the residual stream toward the answer.

Definition. At response position ``t`` the model predicts response token ``r_t``; its answer
direction is the unembedding column ``u_t = W_U[:, r_t]``. With ``cos(x, u) = x.u / (|x| |u|)``
and ``x_l^pre, x_l^mid, x_l^post`` the residual stream before layer ``l``'s attention, between
its attention and MLP, and after the MLP (full-context run, teacher-forced response):

* attention block ``l``: ``G_attn[l] = mean_t [cos(x_l^mid[t], u_t) - cos(x_l^pre[t], u_t)]``
* MLP ``l``: ``G_mlp[l] = mean_t [cos(x_l^post[t], u_t) - cos(x_l^mid[t], u_t)]``
* head ``(l, h)``: ``G[l, h] = mean_t [cos(x_l^pre[t] + w_lh[t], u_t) - cos(x_l^pre[t], u_t)]``

where ``w_lh`` is the head's write ``z W_O[l, h]``. A positive gain means the component moved the
residual stream toward the tokens the response goes on to say. ``spearman`` compares component
JSD scores with these gains.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from jaxtyping import Float, Int
from scipy import stats
from torch import Tensor

from mechrag.mechanism.lens import ResponseActivations, head_writes, output_weight


@dataclass
class SemanticGain:
    """Mean cosine gain toward the answer directions, per head, attention block and MLP."""

    heads: Float[Tensor, "n_layers n_heads"]
    attention: Float[Tensor, " n_layers"]
    mlps: Float[Tensor, " n_layers"]


def answer_directions(
    model, response_ids: Int[Tensor, " n_response"]
) -> Float[Tensor, "n_response d_model"]:
    """Unembedding column ``W_U[:, r_t]`` of every response token."""
    return model.W_U.detach().float()[:, response_ids.to(model.W_U.device)].T


def cosine_to(
    x: Float[Tensor, "*batch n_response d_model"], u: Float[Tensor, "n_response d_model"]
) -> Float[Tensor, "*batch n_response"]:
    """Cosine similarity of each position's vector with that position's answer direction."""
    return torch.nn.functional.cosine_similarity(x, u.expand_as(x), dim=-1)


@torch.inference_mode()
def semantic_gain(
    model, activations: ResponseActivations, response_ids, row: int = 0
) -> SemanticGain:
    """Semantic gain of every component on batch row ``row`` (the full-context prompt)."""
    u = answer_directions(model, torch.as_tensor(list(response_ids))).to(activations.z.device)
    pre = activations.resid_pre[:, row]
    mid = activations.resid_mid[:, row]
    post = activations.resid_post[:, row]
    base = cosine_to(pre, u)
    writes = head_writes(activations.z[:, row], output_weight(model).to(u.device)[:, None])
    with_head = cosine_to((pre[:, :, None] + writes).transpose(1, 2), u)
    return SemanticGain(
        heads=(with_head - base[:, None]).mean(-1).cpu(),
        attention=(cosine_to(mid, u) - base).mean(-1).cpu(),
        mlps=(cosine_to(post, u) - cosine_to(mid, u)).mean(-1).cpu(),
    )


def spearman(scores, gains) -> tuple[float, float]:
    """Spearman rank correlation (rho, two-sided p-value) of two flat score arrays."""
    scores, gains = np.ravel(np.asarray(scores)), np.ravel(np.asarray(gains))
    if scores.shape != gains.shape or scores.size < 3:
        raise ValueError(
            f"need two equal-length arrays of >= 3 values, got {scores.shape}, {gains.shape}"
        )
    result = stats.spearmanr(scores, gains)
    return float(result.statistic), float(result.pvalue)
