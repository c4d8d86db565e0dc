"""Faithfulness of retriever token attributions: AIPC by masking tokens.

A token "removed" is replaced by ``[MASK]`` (default) or another replacement token; only
non-special tokens are features, so ``[CLS]`` and ``[SEP]`` always stay. The value of a mask
is the explained similarity (``Σ_j E(text') · fixed_j``), so MoRF/LeRF curves and AIPC come
from :func:`mechrag.metrics.alignment.aipc`.
"""

from __future__ import annotations

import numpy as np
import torch
from jaxtyping import Bool, Float

from mechrag.metrics.alignment import ValueFunction, aipc
from mechrag.retrieval.encoder import DenseEncoder
from mechrag.retrieval.integrated_gradients import TokenAttribution, special_token_mask


def token_removal_value(
    encoder: DenseEncoder,
    text: str,
    fixed: Float[torch.Tensor, "m d"],
    replacement: str = "mask",
    batch_size: int = 32,
) -> tuple[ValueFunction, np.ndarray]:
    """``(value_fn, feature positions)``: similarity with the unkept features replaced."""
    batch = encoder.tokenize([text])
    input_ids, attention_mask = batch["input_ids"], batch["attention_mask"]
    positions = np.flatnonzero(~special_token_mask(encoder, input_ids)[0].cpu().numpy())
    replacement_id = getattr(encoder.tokenizer, f"{replacement}_token_id")
    fixed = fixed.detach().to(device=input_ids.device, dtype=torch.float32)

    def value(masks: Bool[np.ndarray, "m n"]) -> np.ndarray:
        masks = np.asarray(masks, dtype=bool)
        ids = input_ids.repeat(len(masks), 1)
        removed = torch.zeros_like(ids, dtype=torch.bool)
        columns = torch.as_tensor(positions, device=ids.device)
        removed[:, columns] = torch.as_tensor(~masks, device=ids.device)
        ids[removed] = replacement_id
        scores = []
        for start in range(0, len(ids), batch_size):
            chunk = ids[start : start + batch_size]
            embedded = encoder.embed_ids(chunk, attention_mask.expand(len(chunk), -1))
            scores.append((embedded @ fixed.T).sum(-1))
        return torch.cat(scores).double().cpu().numpy()

    return value, positions


def token_aipc(
    attribution: TokenAttribution,
    encoder: DenseEncoder,
    fixed: Float[torch.Tensor, "m d"],
    replacement: str = "mask",
) -> float:
    """AIPC of one token attribution (its non-special tokens), masking with ``replacement``."""
    value, positions = token_removal_value(encoder, attribution.text, fixed, replacement)
    return aipc(value, attribution.scores[positions])
