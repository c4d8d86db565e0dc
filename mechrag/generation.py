"""The response to attribute: generated greedily from the full prompt, or given by the caller."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from mechrag.compat import patch_kv_cache_argument
from mechrag.prompts import PromptBuilder


def _stop_ids(model) -> set[int]:
    tokenizer, config = model.tokenizer, model.original_model.generation_config
    stops = {tokenizer.eos_token_id, tokenizer.pad_token_id}
    eos = getattr(config, "eos_token_id", None)
    stops.update(eos if isinstance(eos, (list, tuple)) else [eos])
    return {int(s) for s in stops if s is not None}


@torch.inference_mode()
def generate_response(model, builder: PromptBuilder, max_new_tokens: int = 64) -> list[int]:
    """Greedy continuation of the full prompt, without the end-of-turn token."""
    if max_new_tokens < 1:
        raise ValueError("max_new_tokens must be at least 1")
    prompt = torch.tensor([builder.ids()], device=model.cfg.device)
    stops = _stop_ids(model)
    patch_kv_cache_argument()  # cached decoding through the bridge needs it
    # Through the bridge's modules, so hooks active on the model (ablations) apply.
    output = model.original_model.generate(
        prompt,
        attention_mask=torch.ones_like(prompt),
        max_new_tokens=max_new_tokens,
        do_sample=False,
        pad_token_id=min(stops) if stops else None,
        eos_token_id=sorted(stops) or None,
    )
    ids = []
    for token in output[0, prompt.shape[1] :].tolist():
        if token in stops:
            break
        ids.append(token)
    if not ids:
        raise ValueError("the model generated an empty response: pass response=... explicitly")
    return ids


def resolve_response(
    model, builder: PromptBuilder, response: str | Sequence[int] | None, max_new_tokens: int = 64
) -> list[int]:
    """Token ids of ``response``: generated when ``None``, tokenised when a string."""
    if response is None:
        return generate_response(model, builder, max_new_tokens)
    if isinstance(response, str):
        return builder.response_ids(response)
    ids = [int(t) for t in response]
    if not ids:
        raise ValueError("response is empty: nothing to attribute")
    vocab = int(model.cfg.d_vocab)
    if not all(0 <= t < vocab for t in ids):
        raise ValueError(f"response token ids must lie in [0, {vocab}) for this model")
    return ids
