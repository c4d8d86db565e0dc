"""The scoring engine: the one place mechrag runs the model to score a fixed response.

Given a prompt builder, a teacher-forced response and a batch of boolean source masks, the engine
renders each subset prompt, runs the model over batches and returns log-probabilities **only at
response positions**: the model is asked for the last ``T`` logits (``logits_to_keep``), so the
vocabulary projection never touches prompt positions.

Prefix reuse: every subset prompt starts with the tokens of the full prompt up to its first
removed source (system prompt, template, earlier sources). The engine runs the full-context
sequence once with a key-value cache (which also gives the full-context distributions that
ARC-JSD compares against), and each batch computes only its rows' suffixes on top of a copy of
that cache cut to the batch's shared prefix. Rows are grouped so that little is recomputed, and the
padding sits between the shared prefix and each suffix (masked, with mask-derived positions), so
every row sees exactly the positions it would alone. Batches respect a token budget and a logits
budget. Hooks active on the model (ablations, gating) apply to every pass, prefix included.
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from jaxtyping import Bool, Float, Int
from tqdm.auto import tqdm

from mechrag.compat import patch_kv_cache_argument
from mechrag.prompts import PromptBuilder

MaskBatch = Bool[torch.Tensor, "n_masks n_sources"]
ResponseLogprobs = Float[torch.Tensor, "batch n_response vocab"]
# ``reduce(logprobs, batch_masks)`` turns one batch of response log-probs into per-mask results.
Reducer = Callable[[ResponseLogprobs, MaskBatch], torch.Tensor]


def keep_all(logprobs: ResponseLogprobs, masks: MaskBatch) -> ResponseLogprobs:
    return logprobs


def logits_to_keep(model, n_positions: int) -> dict:
    """Forward kwargs asking the Hugging Face head for only the last ``n_positions`` logits."""
    accepted = inspect.signature(model.original_model.forward).parameters
    return {"logits_to_keep": n_positions} if "logits_to_keep" in accepted else {}


def has_sliding_window(model) -> bool:
    """Whether some attention layers only see a window (their caches cannot be cropped)."""
    config = model.original_model.config
    layer_types = getattr(config, "layer_types", None) or ()
    windowed = getattr(config, "sliding_window", None) and getattr(
        config, "use_sliding_window", True
    )
    return bool(windowed) or any("sliding" in str(kind) for kind in layer_types)


def common_prefix_length(a: Sequence[int], b: Sequence[int]) -> int:
    length = 0
    for x, y in zip(a, b):
        if x != y:
            break
        length += 1
    return length


@dataclass
class Batch:
    """Rows run in one forward pass on top of the first ``prefix`` tokens of the full prompt."""

    prefix: int
    rows: list[int]
    width: int  # longest suffix in the batch


class Engine:
    """Runs ``model`` over batches of source subsets with one teacher-forced response.

    ``max_batch_tokens`` bounds ``rows * (prefix + suffix)`` tokens per forward pass (default:
    2048 on CPU, 32768 on GPU);
    ``max_logit_elements`` bounds the ``rows * T * vocab`` response logits held at once.
    ``reuse_prefix`` shares the full prompt's key-value cache (see the module docstring).
    ``batch_overhead_tokens`` is what one more forward pass costs, in tokens: a row joins a batch
    when the tokens it makes the batch recompute are fewer (default: 32 on CPU, 1024 on GPU).
    ``progress=None`` shows a bar only on a terminal and only when there is more than one batch.
    """

    def __init__(
        self,
        model,
        *,
        max_batch_tokens: int | None = None,
        max_logit_elements: int = 1 << 26,
        reuse_prefix: bool = True,
        batch_overhead_tokens: int | None = None,
        progress: bool | None = None,
    ) -> None:
        patch_kv_cache_argument()
        self.model = model
        on_cpu = self.device.type == "cpu"
        # Big batches buy nothing on CPU cores (and lose cache locality); GPUs need them.
        default_tokens, default_overhead = (2048, 32) if on_cpu else (32768, 1024)
        self.max_batch_tokens = default_tokens if max_batch_tokens is None else max_batch_tokens
        if self.max_batch_tokens < 1 or max_logit_elements < 1:
            raise ValueError("batch budgets must be positive")
        self.max_logit_elements = max_logit_elements
        # Sliding-window caches drop old positions, so a cut-down copy of the full prompt's
        # cache is not the prefix's cache: run whole sequences there.
        self.reuse_prefix = reuse_prefix and not has_sliding_window(model)
        self.batch_overhead_tokens = (
            default_overhead if batch_overhead_tokens is None else batch_overhead_tokens
        )
        self.progress = progress
        self.forward_passes = 0
        self.tokens_processed = 0  # padded input tokens over all passes (cached ones excluded)

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

    def plan(self, sequences: list[list[int]], prefixes: list[int], n_response: int) -> list[Batch]:
        """Group rows into batches, in order of increasing shared prefix.

        Rows are visited from the longest prefix down; a row joins the current batch when the
        extra tokens this costs (existing rows recomputing down to its prefix, and padding) are
        at most ``batch_overhead_tokens``, and both budgets still hold.
        """
        vocab = int(self.model.cfg.d_vocab)
        max_rows = max(1, self.max_logit_elements // (n_response * vocab))
        order = sorted(range(len(sequences)), key=lambda i: (-prefixes[i], -len(sequences[i])))
        batches: list[Batch] = []
        for row in order:
            prefix, suffix = prefixes[row], len(sequences[row]) - prefixes[row]
            current = batches[-1] if batches else None
            if current is not None:
                width = max(current.width + current.prefix - prefix, suffix)
                rows = len(current.rows) + 1
                extra = rows * width - len(current.rows) * current.width - suffix
                fits = rows * (prefix + width) <= self.max_batch_tokens and rows <= max_rows
                if fits and extra <= self.batch_overhead_tokens:
                    current.prefix, current.width = prefix, width
                    current.rows.append(row)
                    continue
            batches.append(Batch(prefix, [row], suffix))
        return sorted(batches, key=lambda b: b.prefix)

    def batch_inputs(
        self, sequences: list[list[int]], prefix: int = 0
    ) -> tuple[Int[torch.Tensor, "batch pos"], Int[torch.Tensor, "batch prefix_and_pos"]]:
        """Left-padded token ids and their attention mask, on the model's device.

        The mask also covers ``prefix`` cached tokens before the ids. Left padding puts every
        response at the same (last) positions; the bridge derives position ids from the mask,
        so each row sees the positions it would alone.
        """
        width = max(len(s) for s in sequences)
        ids = torch.full((len(sequences), width), self._pad_id(), dtype=torch.long)
        attention = torch.zeros((len(sequences), prefix + width), dtype=torch.long)
        attention[:, :prefix] = 1
        for row, seq in enumerate(sequences):
            ids[row, width - len(seq) :] = torch.tensor(seq, dtype=torch.long)
            attention[row, prefix + width - len(seq) :] = 1
        return ids.to(self.device), attention.to(self.device)

    def _reference(self, sequence: list[int], n_response: int, keep_cache: bool):
        """Run the full-context sequence once: its response log-probs and (optionally) its cache."""
        ids = torch.tensor([sequence], device=self.device)
        kwargs = logits_to_keep(self.model, n_response)
        if keep_cache:
            logits, cache = self.model(ids, return_type="logits_and_cache", **kwargs)
        else:
            logits, cache = self.model(ids, **kwargs), None
        self.forward_passes += 1
        self.tokens_processed += ids.numel()
        return logits[:, -n_response:].float().log_softmax(-1), cache

    def _forward(self, suffixes: list[list[int]], n_response: int, prefix: int, cache):
        ids, attention = self.batch_inputs(suffixes, prefix)
        kwargs = logits_to_keep(self.model, n_response)
        if prefix:
            past = copy.deepcopy(cache)
            past.crop(prefix - past.get_seq_length())  # negative: drop that many from the end
            past.batch_repeat_interleave(len(suffixes))
            kwargs["past_key_values"] = past
        logits = self.model(ids, attention_mask=attention, **kwargs)
        self.forward_passes += 1
        self.tokens_processed += ids.numel()
        return logits[:, -n_response:].float().log_softmax(-1)

    def run(
        self,
        builder: PromptBuilder,
        response_ids: Sequence[int],
        masks: MaskBatch,
        reduce: Reducer = keep_all,
        desc: str = "scoring subsets",
    ) -> torch.Tensor:
        """``reduce(logprobs, masks)`` for every mask's response log-probs, in mask order (CPU)."""
        return self._run(builder, response_ids, masks, lambda lp, m, _: reduce(lp, m), desc)

    def compare_to_full(
        self,
        builder: PromptBuilder,
        response_ids: Sequence[int],
        masks: MaskBatch,
        divergence: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
        desc: str = "ablations",
    ) -> Float[torch.Tensor, "n_masks n_response"]:
        """``divergence(full, subset)`` per response token, full = all sources kept.

        The full context runs once, and its cache serves as every row's prefix.
        """

        def against_full(logprobs, _masks, reference):
            return divergence(reference, logprobs)

        return self._run(builder, response_ids, masks, against_full, desc, needs_reference=True)

    @torch.inference_mode()
    def _run(self, builder, response_ids, masks, reduce, desc, needs_reference=False):
        masks = torch.as_tensor(masks, dtype=torch.bool)
        if masks.ndim != 2 or masks.shape[1] != builder.n_sources or len(masks) == 0:
            raise ValueError(
                f"masks must be [n_masks >= 1, {builder.n_sources}], got {tuple(masks.shape)}"
            )
        sequences = self.sequences(builder, response_ids, masks)
        n_response = len(response_ids)
        full = self.sequences(builder, response_ids, builder.full_mask()[None])[0]
        # A row keeps at least its response positions (and one token before) out of the cache.
        prefixes = [min(common_prefix_length(s, full), len(s) - n_response) for s in sequences]
        # The cache costs one pass over the full sequence: worth it only when rows share more.
        reuse = self.reuse_prefix and sum(prefixes) > len(full)
        prefixes = prefixes if reuse else [0] * len(sequences)
        reference, cache = None, None
        if reuse or needs_reference:
            reference, cache = self._reference(full, n_response, keep_cache=reuse)
        # Rows identical to the full sequence are answered by the reference pass itself.
        pending = [i for i, s in enumerate(sequences) if reference is None or s != full]
        batches = self.plan(
            [sequences[i] for i in pending], [prefixes[i] for i in pending], n_response
        )
        # tqdm's disable=None means "only on a terminal".
        disable = (not self.progress) if self.progress is not None else (len(batches) <= 1 or None)
        results: list[torch.Tensor | None] = [None] * len(sequences)
        for index in set(range(len(sequences))) - set(pending):
            results[index] = reduce(reference, masks[index : index + 1], reference).cpu()[0]
        with tqdm(total=len(pending), desc=desc, disable=disable) as bar:
            for batch in batches:
                rows = [pending[i] for i in batch.rows]
                suffixes = [sequences[i][batch.prefix :] for i in rows]
                logprobs = self._forward(suffixes, n_response, batch.prefix, cache)
                reduced = reduce(logprobs, masks[rows].to(logprobs.device), reference).cpu()
                for row, index in enumerate(rows):
                    results[index] = reduced[row]
                bar.update(len(rows))
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
