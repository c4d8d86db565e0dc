"""Semantic gain: how far each component turns the residual stream toward a target's tokens.

Geometry: the logit lens's. A residual vector ``x`` is read through the model's final norm, and
its alignment with a token ``v`` is ``a(x, v) = cos(final_norm(x), W_U[:, v])`` (the unembedding
column; for RMSNorm ``final_norm`` rescales each coordinate by the norm's weight, for LayerNorm it
also centres). Targets, at response position ``t`` (full-context run, teacher-forced response):

* ``target="response"``: the token the response says next, ``A_t(x) = a(x, r_t)``;
* ``target="answer"``: the gold answer's tokens ``g_1..g_m`` (tokenised as a response),
  ``A_t(x) = mean_j a(x, g_j)``, the same at every position.

With ``x_l^pre, x_l^mid, x_l^post`` the residual stream before layer ``l``'s attention, between
its attention and MLP, and after the MLP:

* attention block ``l``: ``G_attn[l] = mean_t [A_t(x_l^mid[t]) - A_t(x_l^pre[t])]``
* MLP ``l``: ``G_mlp[l] = mean_t [A_t(x_l^post[t]) - A_t(x_l^mid[t])]``
* head ``(l, h)``: ``G[l, h] = mean_t [A_t(x_l^pre[t] + w_lh[t]) - A_t(x_l^pre[t])]``

where ``w_lh = z W_O[l, h]`` is the head's write (``W_O`` is built one layer at a time, so large
models never hold the ``[n_layers, n_heads, d_head, d_model]`` tensor). A positive gain means the
component moved the residual stream toward the target. ``spearman`` compares component JSD
scores with these gains.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from jaxtyping import Float
from torch import Tensor

from mechrag import adapter
from mechrag.errors import InputError
from mechrag.mechanism.lens import ResponseActivations

TARGETS = ("response", "answer")


@dataclass
class SemanticGain:
    """Mean alignment gain toward the target, per head, attention block and MLP."""

    heads: Float[Tensor, "n_layers n_heads"]
    attention: Float[Tensor, " n_layers"]
    mlps: Float[Tensor, " n_layers"]
    target: str = "response"


def alignment(
    model, x: Float[Tensor, "*batch n_response d_model"], u: Float[Tensor, "n_response m d_model"]
) -> Float[Tensor, "*batch n_response"]:
    """``mean_j cos(final_norm(x[t]), u[t, j])`` at every position ``t``."""
    normed = adapter.final_norm(model, x).to(u.device)
    cosines = torch.nn.functional.cosine_similarity(normed[..., None, :], u, dim=-1)
    return cosines.mean(-1)


def _directions(model, response_ids, target: str, answer_ids) -> Tensor:
    """``[n_response, m, d_model]`` target directions per response position."""
    if target not in TARGETS:
        raise InputError(f"target must be one of {TARGETS}, got {target!r}")
    if target == "response":
        return adapter.unembedding_directions(model, torch.as_tensor(list(response_ids)))[:, None]
    if not answer_ids:
        raise InputError("target='answer' needs the gold answer's token ids (answer_ids)")
    answer = adapter.unembedding_directions(model, torch.as_tensor(list(answer_ids)))
    return answer[None].expand(len(response_ids), -1, -1)


@torch.inference_mode()
def semantic_gain(
    model,
    activations: ResponseActivations,
    response_ids: Sequence[int],
    row: int = 0,
    *,
    target: str = "response",
    answer_ids: Sequence[int] | None = None,
) -> SemanticGain:
    """Semantic gain of every component on batch row ``row`` (the full-context prompt)."""
    u = _directions(model, response_ids, target, answer_ids).to(activations.z.device)
    heads, attention, mlps = [], [], []
    for layer in range(adapter.n_layers(model)):
        pre = activations.resid_pre[layer, row]
        mid = activations.resid_mid[layer, row]
        post = activations.resid_post[layer, row]
        base, middle = alignment(model, pre, u), alignment(model, mid, u)
        writes = adapter.head_writes(model, layer, activations.z[layer, row])
        with_head = alignment(model, (pre[:, None] + writes.to(pre.device)).transpose(0, 1), u)
        heads.append((with_head - base).mean(-1))
        attention.append((middle - base).mean())
        mlps.append((alignment(model, post, u) - middle).mean())
    return SemanticGain(
        heads=torch.stack(heads).cpu(),
        attention=torch.stack(attention).cpu(),
        mlps=torch.stack(mlps).cpu(),
        target=target,
    )


@torch.inference_mode()
def case_semantic_gain(case, *, target: str = "response", answer: str | None = None):
    """Semantic gain on a :class:`mechrag.Case`'s full-context prompt (one captured pass).

    ``answer``: the gold answer text, for ``target="answer"``.
    """
    activations = ResponseActivations(**case.capture(case.full_mask()[None], tuple(adapter.SITES)))
    answer_ids = case.builder.response_ids(answer) if answer is not None else None
    return semantic_gain(
        case.model, activations, case.response_ids, target=target, answer_ids=answer_ids
    )
