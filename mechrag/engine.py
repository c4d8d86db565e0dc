"""The scoring engine: the one place mechrag runs the model to score a fixed response.

Given a prompt builder, a teacher-forced response and a batch of boolean source masks, the engine
renders each subset prompt, left-pads the batch (attention mask and mask-derived positions), runs
the model once per batch and returns log-probabilities **only at response positions**: the model
is asked for the last ``T`` logits (``logits_to_keep``), so the vocabulary projection is never
computed for prompt positions. Batches are sized to a token budget and a logits budget. Any hooks
active on the model (ablations, gating) apply, which is how component methods reuse the engine.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence

import torch
from jaxtyping import Bool, Float, Int
from tqdm.auto import tqdm

from mechrag.prompts import PromptBuilder

MaskBatch = Bool[torch.Tensor, "n_masks n_sources"]
ResponseLogprobs = Float[torch.Tensor, "batch n_response vocab"]
# ``reduce(logprobs, batch_masks)`` turns one batch of response log-probs into per-mask results.
Reducer = Callable[[ResponseLogprobs, MaskBatch], torch.Tensor]


def keep_all(logprobs: ResponseLogprobs, masks: MaskBatch) -> ResponseLogprobs:
    return logprobs


class Engine:
    """Runs ``model`` over batches of source subsets with one teacher-forced response.

    ``max_batch_tokens`` bounds padded tokens per forward pass; ``max_logit_elements`` bounds the
    ``batch * T * vocab`` response logits held at once. ``progress=None`` shows a bar only on a
    terminal and only when there is more than one batch.
    """

    def __init__(
        self,
        model,
        *,
        max_batch_tokens: int = 8192,
        max_logit_elements: int = 1 << 26,
        progress: bool | None = None,
    ) -> None:
        if max_batch_tokens < 1 or max_logit_elements < 1:
            raise ValueError("batch budgets must be positive")
        self.model = model
        self.max_batch_tokens = max_batch_tokens
        self.max_logit_elements = max_logit_elements
        self.progress = progress
        self.forward_passes = 0
        hf_forward = inspect.signature(model.original_model.forward).parameters
        self._keeps_logits = "logits_to_keep" in hf_forward

    @property
    def device(self) -> torch.device:
        return torch.device(self.model.cfg.device)

    @property
    def context_length(self) -> int | None:
        return getattr(self.model.cfg, "n_ctx", None)

    def _pad_id(self) -> int:
        tokenizer = self.model.tokenizer
        for candidate in (tokenizer.pad_token_id, tokenizer.eos_token_id):
            if candidate is not None:
                return int(candidate)
        return 0

    def sequences(
        self, builder: PromptBuilder, response_ids: Sequence[int], masks: MaskBatch
    ) -> list[list[int]]:
        """Model inputs per mask: prompt ids then the response without its last token."""
        if len(response_ids) == 0:
            raise ValueError("response is empty: nothing to attribute")
        sequences = [builder.ids(mask) + list(response_ids[:-1]) for mask in masks]
        longest = max(len(s) for s in sequences) + 1
        if self.context_length and longest > self.context_length:
            raise ValueError(
                f"prompt plus response is {longest} tokens, longer than the model's context of "
                f"{self.context_length}: use fewer or shorter sources"
            )
        return sequences

    def _batches(self, lengths: list[int], n_response: int) -> list[list[int]]:
        """Group mask indices (longest first, to limit padding) under both budgets."""
        vocab = int(self.model.cfg.d_vocab)
        per_logits = max(1, self.max_logit_elements // (n_response * vocab))
        order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
        batches, current = [], []
        for index in order:
            width = lengths[current[0]] if current else lengths[index]
            if current and (
                (len(current) + 1) * width > self.max_batch_tokens or len(current) >= per_logits
            ):
                batches.append(current)
                current = []
            current.append(index)
        if current:
            batches.append(current)
        return batches

    def batch_inputs(
        self, sequences: list[list[int]]
    ) -> tuple[Int[torch.Tensor, "batch pos"], Int[torch.Tensor, "batch pos"]]:
        """Left-padded token ids and attention mask on the model's device.

        Left padding puts every response at the same (last) positions of the batch; the bridge
        derives position ids from the mask, so each row sees the positions it would alone.
        """
        width = max(len(s) for s in sequences)
        ids = torch.full((len(sequences), width), self._pad_id(), dtype=torch.long)
        attention = torch.zeros((len(sequences), width), dtype=torch.long)
        for row, seq in enumerate(sequences):
            ids[row, width - len(seq) :] = torch.tensor(seq, dtype=torch.long)
            attention[row, width - len(seq) :] = 1
        return ids.to(self.device), attention.to(self.device)

    def _forward(self, sequences: list[list[int]], n_response: int) -> ResponseLogprobs:
        ids, attention = self.batch_inputs(sequences)
        kwargs = {"logits_to_keep": n_response} if self._keeps_logits else {}
        logits = self.model(ids, attention_mask=attention, **kwargs)
        self.forward_passes += 1
        return logits[:, -n_response:].float().log_softmax(-1)

    @torch.inference_mode()
    def run(
        self,
        builder: PromptBuilder,
        response_ids: Sequence[int],
        masks: MaskBatch,
        reduce: Reducer = keep_all,
        desc: str = "scoring subsets",
    ) -> torch.Tensor:
        """``reduce`` applied to response log-probs for every mask, in mask order (on CPU)."""
        masks = torch.as_tensor(masks, dtype=torch.bool)
        if masks.ndim != 2 or masks.shape[1] != builder.n_sources:
            raise ValueError(
                f"masks must be [n_masks, {builder.n_sources}], got {tuple(masks.shape)}"
            )
        sequences = self.sequences(builder, response_ids, masks)
        n_response = len(response_ids)
        batches = self._batches([len(s) for s in sequences], n_response)
        # tqdm's disable=None means "only on a terminal".
        disable = (not self.progress) if self.progress is not None else (len(batches) == 1 or None)
        results: list[torch.Tensor | None] = [None] * len(sequences)
        with tqdm(total=len(sequences), desc=desc, disable=disable) as bar:
            for batch in batches:
                logprobs = self._forward([sequences[i] for i in batch], n_response)
                reduced = reduce(logprobs, masks[batch].to(logprobs.device)).cpu()
                for row, index in enumerate(batch):
                    results[index] = reduced[row]
                bar.update(len(batch))
        return torch.stack(results)

    def token_logprobs(
        self, builder: PromptBuilder, response_ids: Sequence[int], masks: MaskBatch
    ) -> Float[torch.Tensor, "n_masks n_response"]:
        """``log P(r_t | prompt(mask), r_<t)`` for every mask and response token."""
        targets = torch.as_tensor(list(response_ids), dtype=torch.long)

        def gather(logprobs: ResponseLogprobs, _: MaskBatch) -> torch.Tensor:
            index = targets.to(logprobs.device).expand(logprobs.shape[0], -1)[..., None]
            return logprobs.gather(-1, index)[..., 0]

        return self.run(builder, response_ids, masks, gather, desc="scoring response tokens")
