"""The one module that knows the TransformerBridge and the Hugging Face model underneath it.

Everything else in mechrag reaches model internals through these functions: model dimensions,
forward passes that ask for the last ``n`` logits only, key-value caches (cut, copied, and a shim
for one known TransformerLens/transformers mismatch), sliding-window detection, greedy
generation, hook names and the hook signature, the per-layer head output projection, and the
output transform the logit lens reuses (final norm, unembedding, logit soft-cap). The lens
always runs in float32: the final norm and the unembedding are applied as float32 copies, so bf16
models still give float32 lens distributions.
"""

from __future__ import annotations

import copy
import functools
import inspect
import warnings
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import torch
from jaxtyping import Float, Int
from torch import Tensor

if TYPE_CHECKING:
    from transformers.cache_utils import DynamicCache

# Residual-stream and component sites mechrag captures, as bridge hook names per layer.
SITES = {
    "z": "attn.hook_z",
    "resid_pre": "hook_resid_pre",
    "resid_mid": "hook_resid_mid",
    "resid_post": "hook_resid_post",
    "mlp_out": "hook_mlp_out",
}
# Every per-layer hook mechrag uses: the captured sites, the pre-softmax attention scores, the
# query states ``[batch, pos, n_heads, d_head]`` (uniform-attention ablation zeroes them) and
# the attention patterns.
# Attention patterns ``[batch, head, query, key]`` (after softmax), captured like a site.
PATTERN = "pattern"
HOOKS = {
    **SITES,
    "attn_scores": "attn.hook_attn_scores",
    "q": "attn.hook_q",
    PATTERN: "attn.hook_pattern",
}
# The axis that indexes positions, for captured hooks whose positions are not axis 1.
POSITION_AXIS = {PATTERN: 2}


def hook_name(layer: int, site: str) -> str:
    """The bridge hook name of ``site`` (a key of ``HOOKS``) in block ``layer``."""
    return f"blocks.{layer}.{HOOKS[site]}"


def hf_model(model):
    """The Hugging Face model inside the bridge."""
    return model.original_model


def device(model) -> torch.device:
    return torch.device(model.cfg.device)


def dtype(model) -> torch.dtype:
    """The dtype of the model's weights (its first parameter's)."""
    return next(hf_model(model).parameters()).dtype


def n_layers(model) -> int:
    return int(model.cfg.n_layers)


def model_name(model) -> str | None:
    """The bridge's name for the model (its Hugging Face id or path), if it has one."""
    return getattr(model.cfg, "model_name", None)


def n_heads(model) -> int:
    """Attention heads per layer (query heads, where grouped-query attention shares keys)."""
    return int(model.cfg.n_heads)


def vocab_size(model) -> int:
    return int(model.cfg.d_vocab)


def bytes_per_token(model) -> int:
    """Bytes one token holds through a cached forward pass: its keys and values in every layer,
    plus one layer's transient activations (residual, attention and MLP widths), in the model's
    dtype. What :func:`mechrag.engine.tokens_that_fit` divides free memory by."""
    config = hf_model(model).config
    config = getattr(config, "text_config", None) or config
    d_model = int(config.hidden_size)
    heads = int(config.num_attention_heads)
    head_dim = int(getattr(config, "head_dim", None) or d_model // heads)
    kv_heads = int(getattr(config, "num_key_value_heads", None) or heads)
    d_mlp = int(getattr(config, "intermediate_size", None) or 4 * d_model)
    width = 2 * n_layers(model) * kv_heads * head_dim + 4 * d_model + 2 * d_mlp
    return width * next(hf_model(model).parameters()).element_size()


def free_memory(model) -> int | None:
    """Free bytes on the model's CUDA device, counting memory PyTorch reserved but does not use
    (``None`` elsewhere)."""
    where = device(model)
    if where.type != "cuda":
        return None
    idle = torch.cuda.memory_reserved(where) - torch.cuda.memory_allocated(where)
    return int(torch.cuda.mem_get_info(where)[0] + idle)


def context_length(model) -> int | None:
    return getattr(model.cfg, "n_ctx", None)


def pad_token_id(model) -> int:
    tokenizer = model.tokenizer
    for candidate in (tokenizer.pad_token_id, tokenizer.eos_token_id):
        if candidate is not None:
            return int(candidate)
    return 0


def patch_kv_cache_argument() -> None:
    """Forward transformers 5.2x's renamed attention ``cache`` argument to TransformerLens 4.3.

    transformers renamed the attention modules' ``past_key_values`` argument to ``cache``;
    TransformerLens 4.3's attention bridges still read the old name, so the key-value cache is
    never filled and cached decoding sees only the current token. Idempotent; a TransformerLens
    without this hook point manages its cache itself and is left alone.
    """
    from transformer_lens.model_bridge.generalized_components.attention import AttentionBridge

    original = getattr(AttentionBridge, "_update_kv_cache", None)
    if original is None or getattr(original, "_mechrag_cache_shim", False):
        return

    @functools.wraps(original)
    def update_kv_cache(self, k, v, **kwargs):
        if kwargs.get("past_key_values") is None and kwargs.get("cache") is not None:
            kwargs["past_key_values"] = kwargs["cache"]
        return original(self, k, v, **kwargs)

    update_kv_cache._mechrag_cache_shim = True
    AttentionBridge._update_kv_cache = update_kv_cache
    # The bridge itself passes the old name to the Hugging Face model; users cannot act on it.
    warnings.filterwarnings(
        "ignore", message="`past_key_values` is deprecated", category=FutureWarning
    )


def sliding_window(model) -> int | None:
    """The attention window of the model's windowed layers, ``None`` when no layer is windowed."""
    config = hf_model(model).config
    window = getattr(config, "sliding_window", None)
    layer_types = getattr(config, "layer_types", None) or ()
    windowed = any("sliding" in str(kind) for kind in layer_types) or (
        window is not None and getattr(config, "use_sliding_window", True)
    )
    return int(window) if windowed and window else None


def prefix_cache_is_exact(model, longest_sequence: int) -> bool:
    """Whether a cut-down copy of a cache equals the cache of that prefix.

    Always on full-attention models. A windowed layer keeps only its last ``window - 1``
    positions, and padding placed between a prefix and a suffix would shift the window, so
    windowed models qualify only when every sequence fits inside the window.
    """
    window = sliding_window(model)
    return window is None or longest_sequence < window


def _logits_to_keep(model, n_positions: int) -> dict:
    accepted = inspect.signature(hf_model(model).forward).parameters
    return {"logits_to_keep": n_positions} if "logits_to_keep" in accepted else {}


def forward(
    model,
    ids: Int[Tensor, "batch pos"],
    attention_mask: Int[Tensor, "batch past_and_pos"] | None = None,
    *,
    n_logits: int,
    past=None,
    return_cache: bool = False,
):
    """Run the bridge, asking the head for only the last ``n_logits`` positions' logits.

    ``past`` is a key-value cache the ids continue; ``return_cache`` also returns the cache of
    this pass. Hooks active on the model apply.
    """
    patch_kv_cache_argument()
    kwargs = _logits_to_keep(model, n_logits)
    if attention_mask is not None:
        kwargs["attention_mask"] = attention_mask
    if past is not None:
        kwargs["past_key_values"] = past
    if return_cache:
        return model(ids, return_type="logits_and_cache", **kwargs)
    return model(ids, **kwargs)


def cut_cache(cache, length: int, repeats: int, *, for_autograd: bool = False):
    """A copy of ``cache`` keeping its first ``length`` positions, repeated ``repeats`` times.

    ``for_autograd``: copy the tensors out of inference mode, so that a pass with gradients
    can read them (a cache made under ``torch.inference_mode`` cannot be saved for backward).
    """
    past = copy.deepcopy(cache)
    if length < past.get_seq_length():
        past.crop(length - past.get_seq_length())  # negative: drop that many from the end
    past.batch_repeat_interleave(repeats)
    if for_autograd:
        with torch.inference_mode(False):
            for layer in past.layers:
                layer.keys, layer.values = layer.keys.clone(), layer.values.clone()
    return past


def drop_last_position(cache) -> None:
    """Remove the last position from a key-value cache in place (undo one decoding step)."""
    cache.crop(-1)  # negative: drop that many positions from the end


def stop_token_ids(model) -> set[int]:
    """Token ids that end a response: end-of-sequence, padding and the generation config's."""
    tokenizer, config = model.tokenizer, hf_model(model).generation_config
    stops = {tokenizer.eos_token_id, tokenizer.pad_token_id}
    eos = getattr(config, "eos_token_id", None)
    stops.update(eos if isinstance(eos, (list, tuple)) else [eos])
    return {int(s) for s in stops if s is not None}


def greedy_generate(model, prompt_ids: list[int], max_new_tokens: int) -> list[int]:
    """Greedy continuation of ``prompt_ids`` up to the first stop token (not included).

    It runs through the bridge's modules, so hooks active on the model apply.
    """
    return greedy_generate_with_cache(model, prompt_ids, max_new_tokens)[0]


@torch.inference_mode()
def greedy_generate_with_cache(
    model, prompt_ids: list[int], max_new_tokens: int
) -> tuple[list[int], DynamicCache | None]:
    """:func:`greedy_generate`, and the generation's key-value cache: the prompt, then every
    generated token but the last (``None`` for a cache that cannot be cut, such as a static
    one)."""
    patch_kv_cache_argument()
    prompt = torch.tensor([prompt_ids], device=device(model))
    stops = stop_token_ids(model)
    output = hf_model(model).generate(
        prompt,
        attention_mask=torch.ones_like(prompt),
        max_new_tokens=max_new_tokens,
        do_sample=False,
        pad_token_id=min(stops) if stops else None,
        eos_token_id=sorted(stops) or None,
        return_dict_in_generate=True,
    )
    ids = []
    for token in output.sequences[0, prompt.shape[1] :].tolist():
        if token in stops:
            break
        ids.append(token)
    from transformers.cache_utils import DynamicCache

    cache = output.past_key_values
    return ids, cache if isinstance(cache, DynamicCache) else None


def active_hooks(model) -> tuple[int, ...]:
    """A signature of the forward hooks on the model's TransformerLens hook points now.

    Interventions (``mechrag.ablate``, gates, ``model.hooks(...)``, ``model.add_hook``) live on
    hook points, which keep a handle for every hook they add; each registration gets a fresh
    handle id, so results cached under one set of hooks are never served under another. Only
    forward hooks count: backward hooks cannot change a forward pass. (The bridge's own wiring
    on the Hugging Face modules is not counted.) A hook point listed under several names
    counts once. A hook registered on a hook point with torch's own ``register_forward_hook``
    bypasses TransformerLens's handles and is not seen: add interventions through
    ``model.hooks``/``model.add_hook`` or mechrag's context managers.
    """
    return tuple(
        sorted({handle.hook.id for point in model.hook_points() for handle in point.fwd_hooks})
    )


@contextmanager
def capturing(model, sites: dict[str, list[str]], n_positions: int) -> Iterator[dict]:
    """Record the last ``n_positions`` positions of each hook in ``sites`` (float32 copies, on
    the model's first device: a model spread over several GPUs keeps each layer where it runs).

    ``sites`` maps a key to the hook names of every layer; the yielded dict maps each key to a
    list (one entry per layer) filled by every forward pass inside the block, row-batched
    passes appending in order. Positions are axis 1, or ``POSITION_AXIS[key]`` (the query axis
    of attention patterns).
    """
    store: dict[str, list[list[Tensor]]] = {key: [[] for _ in sites[key]] for key in sites}
    home = device(model)

    def keeper(key: str, layer: int):
        axis = POSITION_AXIS.get(key, 1)

        def hook(activation: Tensor, hook) -> None:
            kept = activation.narrow(axis, activation.shape[axis] - n_positions, n_positions)
            store[key][layer].append(kept.detach().to(home, torch.float32).clone())

        return hook

    hooks = [
        (name, keeper(key, layer))
        for key, names in sites.items()
        for layer, name in enumerate(names)
    ]
    with model.hooks(fwd_hooks=hooks):
        yield store


# Float32 copies of output modules, kept per model while it lives.
_FLOAT32_MODULES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _float32(model, name: str, module: torch.nn.Module) -> torch.nn.Module:
    """``module`` itself when already float32, else a cached float32 copy."""
    if all(p.dtype == torch.float32 for p in module.parameters()):
        return module
    copies = _FLOAT32_MODULES.setdefault(model, {})
    if name not in copies:
        # Made outside inference mode, so the copy also serves passes that track gradients.
        with torch.inference_mode(False), torch.no_grad():
            copies[name] = copy.deepcopy(module).float().requires_grad_(False)
    return copies[name]


def logit_soft_cap(model) -> float | None:
    """The final-logit soft-cap ``c`` (logits become ``c * tanh(logits / c)``), if any."""
    cap = getattr(model.cfg, "output_logits_soft_cap", None)
    if cap is None or cap <= 0:
        cap = getattr(hf_model(model).config, "final_logit_softcapping", None)
    return float(cap) if cap is not None and cap > 0 else None


def final_norm(model, x: Float[Tensor, "*batch d_model"]) -> Float[Tensor, "*batch d_model"]:
    """The model's own final norm, applied in float32."""
    norm = _float32(model, "final_norm", model.ln_final.original_component)
    weight = next(norm.parameters(), None)
    return norm(x.to(weight.device if weight is not None else x.device, torch.float32))


def unembed(model, x: Float[Tensor, "*batch d_model"]) -> Float[Tensor, "*batch vocab"]:
    """Float32 logits of normed residual vectors: unembedding, then the soft-cap if any."""
    head = hf_model(model).get_output_embeddings()
    head = getattr(head, "original_component", head)
    float_head = _float32(model, "unembed", head)
    logits = float_head(x.to(float_head.weight.device, torch.float32))
    cap = logit_soft_cap(model)
    return cap * torch.tanh(logits / cap) if cap is not None else logits


def unembedding_directions(
    model, token_ids: Int[Tensor, " n"]
) -> Float[Tensor, "n d_model"]:
    """The float32 unembedding row of each token (the direction that raises its logit)."""
    head = hf_model(model).get_output_embeddings()
    weight = getattr(head, "original_component", head).weight
    return weight.detach()[token_ids.to(weight.device)].float()


def output_weight(model, layer: int) -> Float[Tensor, "n_heads d_head d_model"]:
    """``W_O`` of one layer in float32, split by head: head ``h`` writes ``z[h] @ W_O[h]``."""
    return model.blocks[layer].attn.W_O.detach().float()


def output_bias(model, layer: int) -> Float[Tensor, " d_model"] | None:
    """The attention output projection's bias of ``layer`` (``None`` when bias-free)."""
    bias = getattr(model.blocks[layer].attn.o.original_component, "bias", None)
    return None if bias is None else bias.detach().float()


def post_attention_norm(model, layer: int) -> torch.nn.Module | None:
    """The norm between the attention output and the residual stream (Gemma 2/3), if any."""
    norm = getattr(model.blocks[layer], "ln1_post", None)
    return None if norm is None else _float32(model, f"ln1_post.{layer}", norm.original_component)


def _rms_gain(norm: torch.nn.Module, x: Float[Tensor, "*batch d_model"]) -> Tensor:
    """``g / rms(x)`` of an RMSNorm, so that ``norm(x) = x * _rms_gain(norm, x)``.

    The gain ``g`` is read off the module itself (``norm(1) * sqrt(1 + eps)``), which covers
    both the ``w`` and the ``1 + w`` conventions.
    """
    eps = float(getattr(norm, "eps", getattr(norm, "variance_epsilon", 0.0)))
    weight = next(norm.parameters(), None)
    ones = torch.ones(x.shape[-1], device=x.device if weight is None else weight.device)
    gain = norm(ones).detach().to(x.device) * (1.0 + eps) ** 0.5
    return gain * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)


def head_writes(
    model, layer: int, z: Float[Tensor, "*batch n_heads d_head"]
) -> Float[Tensor, "*batch n_heads d_model"]:
    """Each head's write to the residual stream; with the output bias (where the model has
    one) they sum to ``hook_attn_out``.

    Head ``h`` writes ``z[h] @ W_O[h]`` (never ``W_O^T``). Where a post-attention RMSNorm sits
    between the attention output and the residual stream (Gemma 2/3), its scale is computed
    from the heads' summed output and applied to every head: the normed output is linear in the
    heads once that scale is fixed, so the writes still decompose it exactly.
    """
    w_o = output_weight(model, layer).to(z.device)
    writes = torch.einsum("...hd,hdm->...hm", z.float(), w_o)
    norm = post_attention_norm(model, layer)
    if norm is None:
        return writes
    total = writes.sum(-2)
    bias = output_bias(model, layer)
    if bias is not None:
        total = total + bias.to(total.device)
    return writes * _rms_gain(norm, total)[..., None, :]


def attention_scores_hook(layer: int) -> str:
    """The bridge hook on ``layer``'s pre-softmax attention scores ``[batch, head, q, k]``.

    Adding ``log alpha`` to a key's column there scales the attention it receives by ``alpha``
    with the row renormalised (``alpha = 0`` masks the key out).
    """
    return hook_name(layer, "attn_scores")
