"""Logit lens for component writes, at response positions only.

A component's *write* is what it adds to the residual stream: for attention head ``h`` of layer
``l`` that is ``z[l, h] @ W_O[l, h]`` (``z`` is the head's attention-weighted value,
``[d_head]``; ``W_O[l, h]`` its ``[d_head, d_model]`` slice of the output projection, so the head
writes ``z W_O[l, h]``, never ``z W_O^T``); for an MLP it is ``hook_mlp_out``. The per-head writes
(:func:`mechrag.models.adapter.head_writes`) plus the output bias sum to the attention block's
output. The lens maps any write ``x`` to ``log_softmax(cap(unembed(final_norm(x))))`` with the
model's own final-norm and unembedding modules and its logit soft-cap when it has one, always in
float32 (see :mod:`mechrag.models.adapter`). Activations are captured at response positions only,
through the engine; heads are projected in chunks so the ``[.., vocab]`` tensors stay under a fixed
element budget.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from einops import rearrange
from jaxtyping import Float
from torch import Tensor

from mechrag.divergences import jsd
from mechrag.models import adapter

DEFAULT_LOGIT_BUDGET = 1 << 25  # vocabulary-sized float32 elements held at once (128 MiB)


@dataclass
class ResponseActivations:
    """Activations at the response positions of each row (as :meth:`mechrag.Case.capture`).

    One entry per site of :data:`mechrag.models.adapter.SITES`: ``z[l]`` is layer ``l``'s per-head
    input to ``W_O``; ``resid_pre/mid/post[l]`` and ``mlp_out[l]`` are the residual stream before
    attention, between attention and MLP, after the block, and the MLP output of layer ``l``.
    """

    z: Float[Tensor, "n_layers batch n_response n_heads d_head"]
    resid_pre: Float[Tensor, "n_layers batch n_response d_model"]
    resid_mid: Float[Tensor, "n_layers batch n_response d_model"]
    resid_post: Float[Tensor, "n_layers batch n_response d_model"]
    mlp_out: Float[Tensor, "n_layers batch n_response d_model"]


@torch.inference_mode()
def lens_logprobs(model, writes: Float[Tensor, "*batch d_model"]) -> Float[Tensor, "*batch vocab"]:
    """Logit lens in float32: final norm, unembedding, soft-cap, then log-softmax."""
    return adapter.unembed(model, adapter.final_norm(model, writes)).log_softmax(-1)


def lens_jsd(
    model, writes: Float[Tensor, "2 n_response n_components d_model"]
) -> Float[Tensor, "n_response n_components"]:
    """Per-token JSD between the lens distributions of row 0 (full) and row 1 (ablated)."""
    logprobs = lens_logprobs(model, writes)
    return jsd(logprobs[0], logprobs[1]).cpu()


def chunked_lens_jsd(
    model,
    writes: Float[Tensor, "2 n_response n_components d_model"],
    budget: int = DEFAULT_LOGIT_BUDGET,
) -> Float[Tensor, "n_response n_components"]:
    """``lens_jsd`` over components in chunks of at most ``budget`` vocabulary elements."""
    n_response, n_components = writes.shape[1], writes.shape[2]
    chunk = max(1, budget // (2 * n_response * adapter.vocab_size(model)))
    parts = [
        lens_jsd(model, writes[:, :, start : start + chunk])
        for start in range(0, n_components, chunk)
    ]
    return torch.cat(parts, dim=-1)


def head_lens_jsd(
    model, activations: ResponseActivations, budget: int = DEFAULT_LOGIT_BUDGET
) -> Float[Tensor, "n_layers n_heads n_response"]:
    """Per-token lens JSD of every head's write, one layer's heads per write tensor."""
    per_layer = [
        chunked_lens_jsd(model, adapter.head_writes(model, layer, activations.z[layer]), budget)
        for layer in range(adapter.n_layers(model))
    ]
    return rearrange(torch.stack(per_layer), "layer response head -> layer head response")


def layer_lens_jsd(
    model, per_layer: Float[Tensor, "n_layers 2 n_response d_model"], budget: int
) -> Float[Tensor, "n_layers n_response"]:
    """Per-token lens JSD of one ``d_model`` vector per layer (MLP outputs, residual stream)."""
    writes = rearrange(per_layer, "layer row response d -> row response layer d")
    return rearrange(chunked_lens_jsd(model, writes, budget), "response layer -> layer response")
