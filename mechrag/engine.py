"""The scoring engine: the one place mechrag runs the model over source subsets.

Given a prompt builder, a teacher-forced response and a batch of boolean source masks, the engine
renders each subset prompt, runs the model over batches and reads **only response positions**:
the head is asked for the last ``T`` logits, so the vocabulary projection never touches prompt
positions. For every mask it returns, per response token, the log-probability of the response
token and the divergences (JSD, KL, total variation) from the full-context distribution, all in
float32; one pass per subset serves every value function.

Prefix reuse: every subset prompt starts with the tokens of the full prompt up to its first
removed source. The full-context sequence runs once (:meth:`Engine.reference`), giving the
reference distributions and, when exact, its key-value cache; each batch computes only its rows'
suffixes on top of a copy of that cache cut to the batch's shared prefix. Rows are grouped so that
little is recomputed, and the padding sits between the shared prefix and each suffix (masked,
with mask-derived positions), so every row sees exactly the positions it would alone. Batches
respect a token budget and a logits budget. Hooks active on the model (ablations, gates) apply to
every pass, prefix included.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from jaxtyping import Bool, Float, Int
from torch import Tensor
from tqdm.auto import tqdm

from mechrag.divergences import DIVERGENCES
from mechrag.errors import InputError
from mechrag.models import adapter
from mechrag.prompts import PromptBuilder, as_masks

# One boolean row per subset; torch or numpy (converted once, by ``as_masks``).
MaskBatch = Bool[Tensor, "n_masks n_sources"] | Bool[np.ndarray, "n_masks n_sources"]


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


@dataclass
class Reference:
    """The full-context pass: its sequence, response-position log-probs and (maybe) its cache."""

    sequence: list[int]
    logprobs: Float[Tensor, "n_response vocab"]
    cache: object | None


@dataclass
class SubsetScores:
    """Per mask and response token: ``log P(r_t)`` and each divergence from the full context."""

    token_logprobs: Float[Tensor, "n_masks n_response"]
    divergences: dict[str, Float[Tensor, "n_masks n_response"]]


CPU_BATCH_TOKENS = 2048  # big batches buy nothing on CPU cores (and lose cache locality)
ACCELERATOR_BATCH_TOKENS = 32768  # where the accelerator's free memory cannot be read
MEMORY_FRACTION = 0.5  # of the accelerator's free memory that a batch may fill
# 2x the fixed GPU default before 0.3, until gpu_check measures many-row batches at 7B: the
# estimate leaves out eager attention's [heads, query, key] scores, which grow with the context.
MIN_BATCH_TOKENS, MAX_BATCH_TOKENS = 2048, 65536


@dataclass(frozen=True)
class BatchBudget:
    """What an engine made without ``max_batch_tokens`` takes in a :func:`batch_budget` scope."""

    max_batch_tokens: int | None = None
    memory_share: float = 1.0


_BUDGET: contextvars.ContextVar[BatchBudget | None] = contextvars.ContextVar(
    "batch_budget", default=None
)


@contextlib.contextmanager
def batch_budget(
    max_batch_tokens: int | None = None, *, memory_share: float = 1.0
) -> Iterator[None]:
    """Within it, engines made without ``max_batch_tokens`` take this one, or (``None``) fill
    ``memory_share`` of their usual share of free GPU memory: how a sweep gives every case's
    engine its ``--max-batch-tokens``, and a worker holding a fraction of a GPU its fraction."""
    if max_batch_tokens is not None and max_batch_tokens < 1:
        raise InputError(f"max_batch_tokens must be positive, got {max_batch_tokens}")
    if not 0 < memory_share <= 1:
        raise InputError(f"memory_share must lie in (0, 1], got {memory_share}")
    token = _BUDGET.set(BatchBudget(max_batch_tokens, memory_share))
    try:
        yield
    finally:
        _BUDGET.reset(token)


def tokens_that_fit(free_bytes: int, token_bytes: int, fraction: float = MEMORY_FRACTION) -> int:
    """The token budget whose batches fill ``fraction`` of ``free_bytes`` at ``token_bytes``
    per token (:func:`mechrag.models.adapter.bytes_per_token`), within
    ``[MIN_BATCH_TOKENS, MAX_BATCH_TOKENS]``."""
    fitted = int(free_bytes * fraction // max(token_bytes, 1))
    return min(max(fitted, MIN_BATCH_TOKENS), MAX_BATCH_TOKENS)


class Engine:
    """Runs ``model`` over batches of source subsets with one teacher-forced response.

    ``max_batch_tokens`` bounds ``rows * (prefix + suffix)`` tokens per forward pass (default:
    2048 on CPU; on a CUDA GPU what fills half its free memory when the engine is made,
    :func:`tokens_that_fit`; both as a :func:`batch_budget` scope sets them; a CUDA
    out-of-memory error in a command names this budget);
    ``max_logit_elements`` bounds the ``rows * T * vocab`` response
    logits held at once. ``reuse_prefix`` shares the full prompt's key-value cache (see the
    module docstring; used only where it is exact). ``batch_overhead_tokens`` is what one more
    forward pass costs, in tokens: a row joins a batch when the tokens it makes the batch
    recompute are fewer (default: 32 on CPU, 1024 on GPU). ``progress=None`` shows a bar only on
    a terminal and only when there is more than one batch.

    Counters: ``forward_passes`` (model calls), ``rows_scored`` (subset rows run) and
    ``tokens_processed`` (padded input tokens, cached ones excluded).
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
        self.model = model
        on_cpu = adapter.device(model).type == "cpu"
        default_overhead = 32 if on_cpu else 1024
        scope = _BUDGET.get() or BatchBudget()
        if max_batch_tokens is None:
            max_batch_tokens = scope.max_batch_tokens
        if max_batch_tokens is None:
            free = adapter.free_memory(model)
            if free is not None:
                fraction = MEMORY_FRACTION * scope.memory_share
                max_batch_tokens = tokens_that_fit(free, adapter.bytes_per_token(model), fraction)
            else:
                max_batch_tokens = CPU_BATCH_TOKENS if on_cpu else ACCELERATOR_BATCH_TOKENS
        self.max_batch_tokens = max_batch_tokens
        if self.max_batch_tokens < 1 or max_logit_elements < 1:
            raise InputError("batch budgets must be positive")
        self.max_logit_elements = max_logit_elements
        self.reuse_prefix = reuse_prefix
        self.batch_overhead_tokens = (
            default_overhead if batch_overhead_tokens is None else batch_overhead_tokens
        )
        self.progress = progress
        self.forward_passes = 0
        self.rows_scored = 0
        self.tokens_processed = 0

    def sequences(
        self, builder: PromptBuilder, response_ids: Sequence[int], masks: MaskBatch
    ) -> list[list[int]]:
        """Model inputs per mask: prompt ids then the response without its last token."""
        if len(response_ids) == 0:
            raise ValueError("response is empty: nothing to attribute")
        sequences = [builder.ids(mask) + list(response_ids[:-1]) for mask in masks]
        longest = max(len(s) for s in sequences) + 1
        limit = adapter.context_length(self.model)
        if limit and longest > limit:
            raise InputError(
                f"prompt plus response is {longest} tokens, longer than the model's context of "
                f"{limit}: use fewer or shorter sources"
            )
        return sequences

    def plan(self, sequences: list[list[int]], prefixes: list[int], n_response: int) -> list[Batch]:
        """Group rows into batches, in order of increasing shared prefix.

        Rows are visited from the longest prefix down; a row joins the current batch when the
        extra tokens this costs (existing rows recomputing down to its prefix, and padding) are
        at most ``batch_overhead_tokens``, and both budgets still hold.
        """
        max_rows = max(1, self.max_logit_elements // (n_response * adapter.vocab_size(self.model)))
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
    ) -> tuple[Int[Tensor, "batch pos"], Int[Tensor, "batch prefix_and_pos"]]:
        """Left-padded token ids and their attention mask, on the model's device.

        The mask also covers ``prefix`` cached tokens before the ids. Left padding puts every
        response at the same (last) positions; the bridge derives position ids from the mask,
        so each row sees the positions it would alone.
        """
        width = max(len(s) for s in sequences)
        pad = adapter.pad_token_id(self.model)
        # host: the batch is assembled on the host, then moved to the model's device at once
        ids = torch.full((len(sequences), width), pad, dtype=torch.long)
        attention = torch.zeros((len(sequences), prefix + width), dtype=torch.long)  # host
        attention[:, :prefix] = 1
        for row, seq in enumerate(sequences):
            ids[row, width - len(seq) :] = torch.tensor(seq, dtype=torch.long)  # host
            attention[row, prefix + width - len(seq) :] = 1
        device = adapter.device(self.model)
        return ids.to(device), attention.to(device)

    def _count(self, ids: Tensor) -> None:
        self.forward_passes += 1
        self.tokens_processed += ids.numel()

    def keeps_cache(self, builder: PromptBuilder, response_ids: Sequence[int]) -> bool:
        """Whether the full-context pass keeps its cache for prefix reuse (on, and exact for
        this prompt and response)."""
        longest = len(builder.ids()) + len(response_ids)
        return self.reuse_prefix and adapter.prefix_cache_is_exact(self.model, longest)

    @torch.inference_mode()
    def reference(
        self,
        builder: PromptBuilder,
        response_ids: Sequence[int],
        *,
        prompt_cache: object | None = None,
    ) -> Reference:
        """Run the full-context sequence once; keep its cache when prefix reuse is exact.

        ``prompt_cache``: a key-value cache that starts with the full prompt's positions, such
        as the cache of the generation that wrote the response (made under the hooks active
        now). Where the cache is kept (:meth:`keeps_cache`), the pass then runs only the
        response positions on top of it; elsewhere it is ignored.
        """
        sequence = self.sequences(builder, response_ids, builder.full_mask()[None])[0]
        n_response = len(response_ids)
        keep_cache = self.keeps_cache(builder, response_ids)
        start = len(sequence) - n_response if keep_cache and prompt_cache is not None else 0
        ids = torch.tensor([sequence[start:]], device=adapter.device(self.model))
        past, attention = None, None
        if start:
            past = adapter.cut_cache(prompt_cache, start, 1)
            attention = torch.ones((1, len(sequence)), dtype=torch.long, device=ids.device)
        output = adapter.forward(
            self.model, ids, attention, n_logits=n_response, past=past, return_cache=keep_cache
        )
        logits, cache = output if keep_cache else (output, None)
        self._count(ids)
        return Reference(sequence, logits[0, -n_response:].float().log_softmax(-1), cache)

    def context_cache(self, reference: Reference, length: int, repeats: int):
        """The key-value cache of the full sequence's first ``length`` positions, ``repeats``
        times, readable by a pass with gradients: cut from the reference pass's cache when it
        kept one, else computed by one pass without gradients."""
        if reference.cache is not None:
            return adapter.cut_cache(reference.cache, length, repeats, for_autograd=True)
        ids = torch.tensor([reference.sequence[:length]], device=adapter.device(self.model))
        with torch.no_grad():
            _, cache = adapter.forward(self.model, ids, n_logits=1, return_cache=True)
        self._count(ids)
        return adapter.cut_cache(cache, length, repeats, for_autograd=True)

    def _batches(
        self, sequences: list[list[int]], n_response: int, reference: Reference | None
    ):
        """Yield ``(batch, ids, attention, past)`` for rows of ``sequences`` (prefix reuse when
        ``reference`` kept a cache; whole sequences otherwise)."""
        if reference is not None and reference.cache is not None:
            full = reference.sequence
            # A row keeps at least its response positions (and one token before) out of the cache.
            prefixes = [min(common_prefix_length(s, full), len(s) - n_response) for s in sequences]
        else:
            prefixes = [0] * len(sequences)
        for batch in self.plan(sequences, prefixes, n_response):
            suffixes = [sequences[i][batch.prefix :] for i in batch.rows]
            ids, attention = self.batch_inputs(suffixes, batch.prefix)
            past = (
                adapter.cut_cache(reference.cache, batch.prefix, len(suffixes))
                if batch.prefix
                else None
            )
            yield batch, ids, attention, past

    def _progress(self, total: int, desc: str):
        # tqdm's disable=None means "only on a terminal".
        disable = (not self.progress) if self.progress is not None else (total <= 1 or None)
        return tqdm(total=total, desc=desc, disable=disable)

    @torch.inference_mode()
    def score(
        self,
        builder: PromptBuilder,
        response_ids: Sequence[int],
        masks: MaskBatch,
        reference: Reference,
        desc: str = "scoring subsets",
    ) -> SubsetScores:
        """Per-token ``log P(r_t)`` and divergences from ``reference`` for every mask (CPU).

        Rows equal to the full sequence are answered by the reference pass itself.
        """
        masks = self._check_masks(builder, masks)
        sequences = self.sequences(builder, response_ids, masks)
        n_response = len(response_ids)
        targets = torch.as_tensor(list(response_ids), device=reference.logprobs.device)
        # host: scores are kept on the host (the case's cache); each batch's are moved there
        logprobs_out = torch.empty((len(masks), n_response))
        divergences_out = {
            name: torch.empty((len(masks), n_response)) for name in DIVERGENCES  # host
        }

        def record(rows: list[int], logprobs: Float[Tensor, "b n_response vocab"]) -> None:
            picked = logprobs.gather(-1, targets.expand(len(rows), -1)[..., None])[..., 0]
            logprobs_out[rows] = picked.cpu()
            for name, divergence in DIVERGENCES.items():
                divergences_out[name][rows] = divergence(reference.logprobs, logprobs).cpu()

        pending = [i for i, s in enumerate(sequences) if s != reference.sequence]
        done = sorted(set(range(len(sequences))) - set(pending))
        if done:
            record(done, reference.logprobs.expand(len(done), -1, -1))
        with self._progress(len(pending), desc) as bar:
            rows_of = [sequences[i] for i in pending]
            for batch, ids, attention, past in self._batches(rows_of, n_response, reference):
                logits = adapter.forward(
                    self.model, ids, attention, n_logits=n_response, past=past
                )
                self._count(ids)
                self.rows_scored += len(batch.rows)
                record(
                    [pending[i] for i in batch.rows],
                    logits[:, -n_response:].float().log_softmax(-1),
                )
                bar.update(len(batch.rows))
        return SubsetScores(logprobs_out, divergences_out)

    @torch.inference_mode()
    def capture(
        self,
        builder: PromptBuilder,
        response_ids: Sequence[int],
        masks: MaskBatch,
        reference: Reference | None,
        sites: dict[str, list[str]],
    ) -> dict[str, Float[Tensor, "n_layers n_masks ..."]]:
        """Activations at the response positions for every mask, one pass per batch of rows.

        ``sites`` maps a key to one hook name per layer; each result is stacked
        ``[n_layers, n_masks, T, ...]`` in mask order (float32); attention patterns (key
        ``pattern``) are ``[n_layers, n_masks, n_heads, T, n_keys]``, the response positions'
        rows over every key the pass sees. Prefix reuse (on ``reference``'s cache; ``None``
        runs whole sequences) and the token budget apply as in :meth:`score`; no row is
        answered from the reference here.
        """
        masks = self._check_masks(builder, masks)
        sequences = self.sequences(builder, response_ids, masks)
        n_response = len(response_ids)
        order: list[int] = []
        with adapter.capturing(self.model, sites, n_response) as store:
            for batch, ids, attention, past in self._batches(sequences, n_response, reference):
                adapter.forward(self.model, ids, attention, n_logits=1, past=past)
                self._count(ids)
                order.extend(batch.rows)
        inverse = torch.as_tensor(order).argsort()  # host: moved to each capture's device
        return {
            key: torch.stack([torch.cat(parts)[inverse.to(parts[0].device)] for parts in per_layer])
            for key, per_layer in store.items()
        }

    @staticmethod
    def _check_masks(builder: PromptBuilder, masks: MaskBatch) -> Bool[Tensor, "n_masks n_sources"]:
        masks = as_masks(masks)
        if masks.ndim != 2 or masks.shape[1] != builder.n_sources or len(masks) == 0:
            raise ValueError(
                f"masks must be [n_masks >= 1, {builder.n_sources}], got {tuple(masks.shape)}"
            )
        return masks

