"""Semantic gain: how far each component turns the residual stream toward a target's tokens.

With ``x_l^pre, x_l^mid, x_l^post`` the residual stream before layer ``l``'s attention, between
its attention and MLP, and after the MLP (ARC-JSD, Li et al. 2025, Eq. 6), read at every
response position ``t`` (full-context run, teacher-forced response: the position that predicts
``r_t``, as the official code reads its logits), a *readout* ``v(x)`` of a residual vector is
compared with the target directions by cosine, and

* attention block ``l``: ``G_attn[l] = mean_t [A_t(v(x_l^mid[t])) - A_t(v(x_l^pre[t]))]``
* MLP ``l``: ``G_mlp[l] = mean_t [A_t(v(x_l^post[t])) - A_t(v(x_l^mid[t]))]``

Targets: ``target="response"``: the token the response says next, ``A_t(v) = cos(v, W_U[:,
r_t])``; ``target="answer"``: the gold answer's tokens ``g_1..g_m`` (tokenised as a response),
``A_t(v) = mean_j cos(v, W_U[:, g_j])``, the same at every position. A positive gain means the
component moved the residual stream toward the target. Two definitions of the readout:

* ``"argmax_token"`` (the paper's, Eq. 7-10; the default): ``v(x) = W_U[:, argmax logit(x)]``,
  the unembedding column of the logit lens's greedy token, ``logit(x) = W_U final_norm(x)``
  (with the model's soft-cap, in float32, as :mod:`mechrag.models.adapter` applies it). The paper
  defines the gain per layer only (the attention block is the layer's whole ``a^l``), so there
  is no per-head gain: :attr:`SemanticGain.heads` is ``None``. Where a per-component gain for
  heads is needed (gating), use the layer's attention gain
  (:meth:`mechrag.results.components.ComponentAttribution.component_gains`). The text leaves
  layer 0's ``x^pre`` open; here it is the input to block 0 (the embedding output, as captured
  at ``hook_resid_pre``), and the official code has no semantic-gain code to follow.
* ``"residual_cosine"`` (mechrag's continuous gain): ``v(x) = final_norm(x)``, the residual
  vector itself through the final norm (for RMSNorm this rescales each coordinate by the norm's
  weight, for LayerNorm it also centres). It also defines a gain per head ``(l, h)``:
  ``G[l, h] = mean_t [A_t(v(x_l^pre[t] + w_lh[t])) - A_t(v(x_l^pre[t]))]`` where ``w_lh = z
  W_O[l, h]`` is the head's write (``W_O`` is built one layer at a time, so large models never
  hold the ``[n_layers, n_heads, d_head, d_model]`` tensor).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from jaxtyping import Float
from torch import Tensor

from mechrag.errors import InputError
from mechrag.mechanism.lens import ResponseActivations
from mechrag.models import adapter
from mechrag.results.components import DEFAULT_GAIN_DEFINITION, GAIN_DEFINITIONS

TARGETS = ("response", "answer")


@dataclass
class SemanticGain:
    """Mean gain toward the target per attention block and MLP, and per head where
    ``definition`` defines one (``"residual_cosine"``; ``None`` under ``"argmax_token"``)."""

    heads: Float[Tensor, "n_layers n_heads"] | None
    attention: Float[Tensor, " n_layers"]
    mlps: Float[Tensor, " n_layers"]
    target: str = "response"
    definition: str = DEFAULT_GAIN_DEFINITION


def check_definition(definition: str) -> str:
    """``definition`` when it is one of ``GAIN_DEFINITIONS``; else :class:`InputError`."""
    if definition not in GAIN_DEFINITIONS:
        raise InputError(f"definition must be one of {GAIN_DEFINITIONS}, got {definition!r}")
    return definition


def readout(
    model, x: Float[Tensor, "*batch d_model"], definition: str
) -> Float[Tensor, "*batch d_model"]:
    """The vector ``v(x)`` whose cosine with the target the gain compares (float32).

    ``"residual_cosine"``: ``final_norm(x)``; ``"argmax_token"``: ``W_U[:, argmax logit(x)]``
    (Eq. 7-8), one response position (axis -2) at a time, so that only one vocabulary-sized row
    per position is held.
    """
    normed = adapter.final_norm(model, x)
    if definition == "residual_cosine":
        return normed
    tokens = torch.stack([adapter.unembed(model, row).argmax(-1) for row in normed.unbind(-2)], -1)
    return adapter.unembedding_directions(model, tokens.flatten()).reshape(normed.shape)


def alignment(
    v: Float[Tensor, "*batch n_response d_model"], u: Float[Tensor, "n_response m d_model"]
) -> Float[Tensor, "*batch n_response"]:
    """``mean_j cos(v[t], u[t, j])`` at every position ``t`` (Eq. 9's cosine)."""
    v = v.to(u.device)
    return torch.nn.functional.cosine_similarity(v[..., None, :], u, dim=-1).mean(-1)


def _directions(model, response_ids, target: str, answer_ids) -> Tensor:
    """``[n_response, m, d_model]`` target directions per response position."""
    if target not in TARGETS:
        raise InputError(f"target must be one of {TARGETS}, got {target!r}")
    if target == "response":
        ids = torch.as_tensor(list(response_ids), device=adapter.device(model))
        return adapter.unembedding_directions(model, ids)[:, None]
    if not answer_ids:
        raise InputError("target='answer' needs the gold answer's token ids (answer_ids)")
    ids = torch.as_tensor(list(answer_ids), device=adapter.device(model))
    answer = adapter.unembedding_directions(model, ids)
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
    definition: str = DEFAULT_GAIN_DEFINITION,
) -> SemanticGain:
    """Semantic gain of every layer's attention and MLP (Eq. 9-10 under ``"argmax_token"``),
    and of every head under ``"residual_cosine"``, on batch row ``row`` (the full context)."""
    check_definition(definition)
    u = _directions(model, response_ids, target, answer_ids).to(activations.z.device)
    heads, attention, mlps = [], [], []
    for layer in range(adapter.n_layers(model)):
        pre = activations.resid_pre[layer, row]
        mid = activations.resid_mid[layer, row]
        post = activations.resid_post[layer, row]
        base = alignment(readout(model, pre, definition), u)
        middle = alignment(readout(model, mid, definition), u)
        attention.append((middle - base).mean())
        mlps.append((alignment(readout(model, post, definition), u) - middle).mean())
        if definition == "residual_cosine":
            writes = adapter.head_writes(model, layer, activations.z[layer, row])
            with_head = (pre[:, None] + writes.to(pre.device)).transpose(0, 1)
            heads.append((alignment(readout(model, with_head, definition), u) - base).mean(-1))
    return SemanticGain(
        heads=torch.stack(heads).cpu() if heads else None,
        attention=torch.stack(attention).cpu(),
        mlps=torch.stack(mlps).cpu(),
        target=target,
        definition=definition,
    )


@torch.inference_mode()
def case_semantic_gain(
    case,
    *,
    target: str = "response",
    answer: str | None = None,
    definition: str = DEFAULT_GAIN_DEFINITION,
) -> SemanticGain:
    """Semantic gain on a :class:`mechrag.Case`'s full-context prompt (one captured pass).

    ``answer``: the gold answer text, for ``target="answer"``; ``definition``: one of
    ``GAIN_DEFINITIONS`` (see the module docstring).
    """
    check_definition(definition)
    activations = ResponseActivations(**case.capture(case.full_mask()[None], tuple(adapter.SITES)))
    answer_ids = case.builder.response_ids(answer) if answer is not None else None
    return semantic_gain(
        case.model,
        activations,
        case.response_ids,
        target=target,
        answer_ids=answer_ids,
        definition=definition,
    )
