"""Logit lens for component writes, at response positions only.

A component's *write* is what it adds to the residual stream: for attention head ``h`` of layer
``l`` that is ``z[l, h] @ W_O[l, h]`` (``z`` is the head's attention-weighted value,
``[d_head]``; ``W_O[l, h]`` its ``[d_head, d_model]`` slice of the output projection, so the head
writes ``z W_O[l, h]``, never ``z W_O^T``); for an MLP it is ``hook_mlp_out``. The per-head
writes plus the output bias sum to the attention block's output. The lens maps any write ``x``
to ``log_softmax(cap(unembed(final_norm(x))))`` with the model's own final-norm and unembedding
modules and its logit soft-cap when it has one. Only response positions are captured, and heads
are projected in chunks so the ``[.., vocab]`` tensors stay under a fixed element budget.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from jaxtyping import Float, Int
from torch import Tensor

from mechrag.divergences import jsd
from mechrag.engine import logits_to_keep

DEFAULT_LOGIT_BUDGET = 1 << 25  # vocabulary-sized float32 elements held at once (128 MiB)


@dataclass
class ResponseActivations:
    """Activations at the last ``n_response`` positions of each row of a batch.

    ``z[l]`` is ``blocks.{l}.attn.hook_z``; ``resid_pre/mid/post[l]`` and ``mlp_out[l]`` are the
    residual stream before attention, between attention and MLP, after the block, and the MLP
    output of layer ``l``.
    """

    z: Float[Tensor, "n_layers batch n_response n_heads d_head"]
    resid_pre: Float[Tensor, "n_layers batch n_response d_model"]
    resid_mid: Float[Tensor, "n_layers batch n_response d_model"]
    resid_post: Float[Tensor, "n_layers batch n_response d_model"]
    mlp_out: Float[Tensor, "n_layers batch n_response d_model"]


CAPTURED = {
    "z": "attn.hook_z",
    "resid_pre": "hook_resid_pre",
    "resid_mid": "hook_resid_mid",
    "resid_post": "hook_resid_post",
    "mlp_out": "hook_mlp_out",
}


@torch.inference_mode()
def capture_response_activations(
    model,
    ids: Int[Tensor, "batch pos"],
    attention_mask: Int[Tensor, "batch pos"],
    n_response: int,
) -> ResponseActivations:
    """Run ``model`` once on a left-padded batch and keep every layer's activations at the
    last ``n_response`` positions (the response positions the engine lays out)."""
    if not 1 <= n_response <= ids.shape[1]:
        raise ValueError(f"n_response must be in [1, {ids.shape[1]}], got {n_response}")
    n_layers = model.cfg.n_layers
    store: dict[str, list] = {key: [None] * n_layers for key in CAPTURED}

    def keeper(key: str, layer: int) -> Callable:
        def hook(activation: Tensor, hook) -> None:
            store[key][layer] = activation[:, -n_response:].detach().float().clone()

        return hook

    hooks = [
        (f"blocks.{layer}.{name}", keeper(key, layer))
        for key, name in CAPTURED.items()
        for layer in range(n_layers)
    ]
    with model.hooks(fwd_hooks=hooks):
        # The lens needs no output logits: ask for one position only.
        model(ids, attention_mask=attention_mask, **logits_to_keep(model, 1))
    return ResponseActivations(**{key: torch.stack(values) for key, values in store.items()})


def output_weight(model) -> Float[Tensor, "n_layers n_heads d_head d_model"]:
    """``W_O`` per layer and head, in float32."""
    return model.W_O.detach().float()


def output_bias(model, layer: int) -> Float[Tensor, " d_model"] | None:
    """The attention output projection's bias of ``layer`` (``None`` when bias-free)."""
    bias = getattr(model.blocks[layer].attn.o.original_component, "bias", None)
    return None if bias is None else bias.detach().float()


def head_writes(
    z: Float[Tensor, "*batch n_heads d_head"], w_o: Float[Tensor, "*w n_heads d_head d_model"]
) -> Float[Tensor, "*batch n_heads d_model"]:
    """Each head's write to the residual stream, ``z[h] @ W_O[h]``.

    Leading axes broadcast (``w_o`` may carry a layer axis matching ``z``'s).
    """
    return torch.einsum("...hd,...hdm->...hm", z, w_o)


def logit_soft_cap(model) -> float | None:
    """The final-logit soft-cap ``c`` (logits become ``c * tanh(logits / c)``), if any."""
    cap = getattr(model.cfg, "output_logits_soft_cap", None)
    if cap is None or cap <= 0:
        cap = getattr(model.original_model.config, "final_logit_softcapping", None)
    return float(cap) if cap is not None and cap > 0 else None


@torch.inference_mode()
def lens_logprobs(model, writes: Float[Tensor, "*batch d_model"]) -> Float[Tensor, "*batch vocab"]:
    """Logit lens: final norm, unembedding, soft-cap, then float32 log-softmax."""
    parameter = next(model.original_model.parameters())
    normed = model.ln_final(writes.to(parameter.device, parameter.dtype))
    logits = model.original_model.get_output_embeddings()(normed).float()
    cap = logit_soft_cap(model)
    if cap is not None:
        logits = cap * torch.tanh(logits / cap)
    return logits.log_softmax(-1)


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
    chunk = max(1, budget // (2 * n_response * int(model.cfg.d_vocab)))
    parts = [
        lens_jsd(model, writes[:, :, start : start + chunk])
        for start in range(0, n_components, chunk)
    ]
    return torch.cat(parts, dim=-1)


def head_lens_jsd(
    model, activations: ResponseActivations, budget: int = DEFAULT_LOGIT_BUDGET
) -> Float[Tensor, "n_layers n_heads n_response"]:
    """Per-token lens JSD of every head's write, one layer's heads per write tensor."""
    w_o = output_weight(model).to(activations.z.device)
    per_layer = [
        chunked_lens_jsd(model, head_writes(activations.z[layer], w_o[layer]), budget)
        for layer in range(model.cfg.n_layers)
    ]
    return torch.stack(per_layer).transpose(1, 2)


def layer_lens_jsd(
    model, per_layer: Float[Tensor, "n_layers 2 n_response d_model"], budget: int
) -> Float[Tensor, "n_layers n_response"]:
    """Per-token lens JSD of one ``d_model`` vector per layer (MLP outputs, residual stream)."""
    return chunked_lens_jsd(model, per_layer.permute(1, 2, 0, 3), budget).T
