"""Screened ARC-JSD: a cheap screen picks the sources worth scoring exactly.

Exact ARC-JSD runs one suffix pass per source. The screen estimates every source's removal
effect from one short pass with gradients, and exact ARC-JSD then runs only on the ``m`` most
promising sources.

The gate. Each source ``i`` gets a multiplicative gate ``alpha_i`` on the attention that every
position *after the context* (the rest of the prompt and the response) pays to its tokens, in
every layer and head, with the row renormalised: ``p'_qk = alpha_{s(k)} p_qk / sum_j
alpha_{s(j)} p_qj``. It is applied exactly as a bias ``log alpha_i`` on the attention scores of
source ``i``'s key columns, so ``alpha_i = 0`` hides source ``i`` from the query and the response
and ``alpha = 1`` is the unmodified model. Context positions are not gated: the context's
key-value cache (the case's full-context pass) is reused, so the pass with gradients covers only
the positions after the context. That keeps the backward's memory at ``positions after the
context x prompt length`` attention values per head and layer, whatever the context size, and
leaves out only the paths through which a removed source would change *other sources'*
representations.

The proxy. At the full context the JSD's gradient vanishes (it is minimal there), so the default
``fisher`` proxy is its second-order term: ``JSD(P, P_alpha) ~ 1/8 delta' F delta`` with ``F``
the Fisher information of the response distributions in the gates, summed over response
positions. Removing source ``i`` (``delta = -e_i``) then costs ``F_ii / 8`` nats. With
``F_ii = sum_t sum_y P_t(y) (d log P_t(y) / d alpha_i)^2``, it is estimated without bias from
``samples`` seeded probes: random signs ``e_kty`` and ``F_ii ~ mean_k (d/d alpha_i sum_ty e_kty
sqrt(P_t(y)) log P_t(y))^2`` (the cross terms have zero mean). One backward pass serves each
probe; signs over the whole vocabulary bound the relative variance, where drawing one token per
position misses rare tokens whose probability the source moves (``benchmarks/screen_probes.py``:
on two HotpotQA cases, Spearman with a 256-probe reference was .88-.89 for 4 sign probes and
.75-.81 for 4 drawn tokens, .94-.98 for 8 sign probes). The ``loglik`` proxy is the first-order
change of the response's own log-likelihood, ``|dLL/dalpha_i|``: one row instead of
``samples``, but on HotpotQA it ranks worse (``experiments/RESULTS.md``).

Precision: the gate is added in float32 and its gradient is reduced in float32; the rest of the
backward runs in the model's dtype (bf16 stays bf16).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import torch
from jaxtyping import Bool, Float, Int
from torch import Tensor

from mechrag.errors import InputError
from mechrag.models import adapter
from mechrag.prompts import PromptBuilder
from mechrag.results.base import Serializable

# Non-candidates score at most this fraction of the smallest exact score.
NON_CANDIDATE_CEILING = 0.5


def source_token_owners(builder: PromptBuilder) -> Int[np.ndarray, " n_prompt"]:
    """For each prompt token, the index of the source whose text it overlaps (``-1``: none).

    Titles, separators, template and query tokens belong to no source. Character spans come
    from the tokenizer's offsets on the full prompt text.
    """
    text, context = builder.text(), builder.context()
    cursor = text.index(context)
    spans = []
    for source in builder.sources:
        start = text.index(source.text, cursor)
        spans.append((start, start + len(source.text)))
        cursor = start + len(source.text)
    encoded = builder.tokenizer(
        text, add_special_tokens=not builder.use_chat_template, return_offsets_mapping=True
    )
    if list(encoded.input_ids) != builder.ids():
        raise ValueError("the tokenizer's offsets do not describe the prompt's tokens")
    owners = np.full(len(encoded.input_ids), -1, dtype=np.int64)
    for position, (begin, end) in enumerate(encoded.offset_mapping):
        for index, (start, stop) in enumerate(spans):
            if begin < stop and end > start and end > begin:
                owners[position] = index
                break
    return owners


def context_end(owners: Int[np.ndarray, " n_prompt"]) -> int:
    """The position just past the last source token: the first position the screen gates."""
    positions = np.flatnonzero(owners >= 0)
    if len(positions) == 0:
        raise ValueError("no prompt token belongs to a source")
    return int(positions[-1]) + 1


@contextmanager
def source_gates(
    model,
    owners: Int[np.ndarray, " n_context"],
    gates: Float[Tensor, "batch n_sources"],
    length: int,
) -> Iterator[None]:
    """Gate the attention that positions from ``len(owners)`` on pay to each source's tokens
    by ``gates`` (one row per batch row, renormalised), in every layer, in a pass whose
    sequence ends at absolute position ``length``.

    ``owners``: the source of each context position (``-1``: none). The queries and keys a hook
    sees are the last ones of the sequence (a cached pass sees fewer queries, a sliding-window
    layer fewer keys), so their absolute positions follow from the scores' shape. Hooks are
    removed on exit.
    """
    n_context = len(owners)
    owner_index = torch.as_tensor(owners, device=gates.device)

    def gate(scores: Float[Tensor, "batch head query key"], hook) -> Tensor:
        n_query, n_key = scores.shape[-2:]
        keys = torch.arange(length - n_key, length, device=gates.device)
        key_owner = torch.full((n_key,), -1, dtype=torch.long, device=gates.device)
        in_context = keys < n_context
        key_owner[in_context] = owner_index[keys[in_context]]
        # Column -1 (no source) is the appended zero: ungated.
        log_gates = torch.cat([gates.float().log(), gates.new_zeros(len(gates), 1)], 1)
        bias = log_gates[:, key_owner][:, None, None, :]
        gated_rows = torch.arange(length - n_query, length, device=gates.device) >= n_context
        gated = torch.where(gated_rows[:, None], scores.float() + bias, scores.float())
        return gated.to(scores.dtype)

    layers = range(adapter.n_layers(model))
    hooks = [(adapter.attention_scores_hook(layer), gate) for layer in layers]
    with model.hooks(fwd_hooks=hooks):
        yield


def gated_response_logprobs(
    model,
    builder: PromptBuilder,
    response_ids: list[int],
    gates: Float[Tensor, "batch n_sources"],
    owners: Int[np.ndarray, " n_prompt"] | None = None,
    past=None,
) -> Float[Tensor, "batch n_response vocab"]:
    """Float32 next-token log-probabilities at every response position, with the attention that
    the positions after the context pay to the sources gated by ``gates``.

    ``past``: a key-value cache of the context (the first ``context_end(owners)`` positions,
    ``batch`` rows), so that only the positions after it run; without it the whole sequence
    runs. Differentiable in ``gates`` (the caller decides whether gradients are tracked).
    """
    owners = source_token_owners(builder) if owners is None else owners
    n_context, n_response = context_end(owners), len(response_ids)
    sequence = builder.ids() + list(response_ids[:-1])
    first = n_context if past is not None else 0
    ids = torch.tensor([sequence[first:]] * len(gates), device=adapter.device(model))
    with source_gates(model, owners[:n_context], gates, len(sequence)):
        logits = adapter.forward(model, ids, n_logits=n_response, past=past)
    return logits[:, -n_response:].float().log_softmax(-1)


PROXIES = ("fisher", "loglik")


@dataclass
class Screen(Serializable):
    """The screen of one case: per source, the proxy's estimate and the priority it ranks by.

    ``estimates``: ``fisher``, the second-order JSD of removing each source (nats, ``F_ii /
    8``); ``loglik``, ``dLL/dalpha_i`` (the first-order change of the response log-likelihood
    on removal is its negative).
    """

    default_name = "screen"

    proxy: str
    estimates: Float[np.ndarray, " n_sources"]
    seconds: float

    def __post_init__(self) -> None:
        self.estimates = np.asarray(self.estimates, dtype=np.float64)

    @property
    def priority(self) -> Float[np.ndarray, " n_sources"]:
        """How strongly each source is expected to move the response."""
        return np.abs(self.estimates)

    def candidates(self, m: int) -> Int[np.ndarray, " m"]:
        """The ``m`` sources of highest priority, best first (ties by position)."""
        return np.argsort(-self.priority, kind="stable")[:m]


def screen_sources(case, proxy: str = "fisher", samples: int = 8, seed: int = 0) -> Screen:
    """One pass with gradients over the positions after the context (``samples`` probe rows
    for ``fisher``, one for ``loglik``), on the context's cached keys and values.

    No parameter gradient is stored (only the gates' gradient is asked for), the hooks go with
    the pass, and grad mode is restored, even inside ``torch.inference_mode``.
    """
    if proxy not in PROXIES:
        raise InputError(f"unknown proxy {proxy!r}: choose from {PROXIES}")
    if samples < 1:
        raise InputError(f"samples must be at least 1, got {samples}")
    start = time.perf_counter()
    owners = source_token_owners(case.builder)
    rows = samples if proxy == "fisher" else 1
    device = adapter.device(case.model)
    past = case.context_cache(context_end(owners), rows)
    with torch.inference_mode(False), torch.enable_grad():
        gates = torch.ones(rows, case.n_sources, device=device).requires_grad_(True)
        logprobs = gated_response_logprobs(
            case.model, case.builder, case.response_ids, gates, owners, past
        )
        if proxy == "fisher":
            objective = (logprobs * _sign_probes(case.reference_logprobs(), rows, seed)).sum()
        else:
            targets = torch.tensor([case.response_ids], device=device)
            objective = logprobs.gather(-1, targets[..., None]).sum()
        (gradient,) = torch.autograd.grad(objective, gates)
    gradient = gradient.detach().double().cpu().numpy()
    estimates = (gradient**2).mean(0) / 8 if proxy == "fisher" else gradient[0]
    return Screen(proxy, estimates, time.perf_counter() - start)


def _sign_probes(
    logprobs: Float[Tensor, "n_response vocab"], rows: int, seed: int
) -> Float[Tensor, "rows n_response vocab"]:
    """``e_kty sqrt(P_t(y))`` with seeded random signs ``e`` (drawn on the CPU, so the same
    probes on every device)."""
    generator = torch.Generator().manual_seed(seed)
    # host: a CPU generator draws the same signs on every device; moved below
    signs = torch.randint(0, 2, (rows, *logprobs.shape), generator=generator) * 2.0 - 1.0
    return signs.to(logprobs.device) * logprobs.float().mul(0.5).exp()


@dataclass(frozen=True)
class SourceScreen:
    """How screened ARC-JSD picks the sources it scores exactly: the ``candidates`` best by
    ``proxy`` (``fisher``: ``samples`` seeded sign probes; ``loglik``: one row)."""

    candidates: int
    proxy: str = "fisher"
    samples: int = 8
    seed: int = 0

    def __post_init__(self) -> None:
        if int(self.candidates) < 1:
            raise InputError(f"screen must keep at least 1 candidate, got {self.candidates}")
        if self.proxy not in PROXIES:
            raise InputError(f"unknown proxy {self.proxy!r}: choose from {PROXIES}")

    def __call__(self, case) -> Screen:
        return screen_sources(case, self.proxy, self.samples, self.seed)


def rank_below(
    scores: Float[np.ndarray, " n_sources"],
    known: Bool[np.ndarray, " n_sources"],
    priority: Float[np.ndarray, " n_sources"],
) -> Float[np.ndarray, " n_sources"]:
    """``scores`` with every unknown entry replaced by its ``priority``, rescaled so that the
    largest sits at ``NON_CANDIDATE_CEILING`` times the smallest known score: unknown sources
    still rank among themselves by priority, and below every known one. When the smallest known
    score is not positive (a divergence clamped to zero), the unknown ones are placed in
    ``[floor - 1, floor - 1 + NON_CANDIDATE_CEILING]`` below it instead."""
    scores = np.array(scores, dtype=np.float64)
    if known.all() or not known.any():
        return scores if known.all() else np.asarray(priority, dtype=np.float64).copy()
    rest = np.asarray(priority, dtype=np.float64)[~known]
    top = rest.max()
    relative = rest / top if top > 0 else np.zeros_like(rest)
    floor = scores[known].min()
    if floor > 0:
        scores[~known] = NON_CANDIDATE_CEILING * floor * relative
    else:
        scores[~known] = floor - 1.0 + NON_CANDIDATE_CEILING * relative
    return scores


def exact_on_top(
    case, priority: Float[np.ndarray, " n_sources"], m: int, divergence: str = "jsd"
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """ARC-JSD scored exactly on the ``m`` sources of highest ``priority`` (ties by position),
    the others ranked below them by priority (:func:`rank_below`). Returns the scores, the
    per-token divergences (zero for the others: not computed) and the mask of exact sources."""
    chosen = np.argsort(-np.asarray(priority), kind="stable")[: min(int(m), case.n_sources)]
    per_token = np.zeros((case.n_sources, len(case.response_ids)))
    per_token[chosen] = case.token_divergences(case.leave_one_out_masks()[chosen], divergence)
    exact = np.zeros(case.n_sources, dtype=bool)
    exact[chosen] = True
    return rank_below(per_token.sum(-1), exact, priority), per_token, exact


def screened_arc_jsd(case, screen: int | SourceScreen, divergence: str, label: str):
    """ARC-JSD scored exactly on the sources the screen ranks highest.

    ``label``: the unscreened method's name (``arc_jsd``, ``arc_kl``, ...), suffixed
    ``_screened``. ``screen``: a number of candidates (the default ``fisher`` screen) or a
    :class:`SourceScreen`. Candidates get their exact score (their leave-one-out subsets join
    the case's cache, so a later exact ARC-JSD reuses them). Every other source gets its screen
    priority rescaled so that the largest sits at ``NON_CANDIDATE_CEILING`` times the smallest
    exact score: the scores still rank every source, exact ones first. ``metadata['exact']``
    marks the exactly scored sources, ``metadata['screen_estimates']`` holds the screen's
    estimates; token scores of non-candidates are zero (not computed). A screen keeping every
    source is exact ARC-JSD.
    """
    if not isinstance(screen, SourceScreen):
        screen = SourceScreen(int(screen))
    meter = case.meter()
    estimate = screen(case)
    scores, per_token, exact = exact_on_top(case, estimate.priority, screen.candidates, divergence)
    return case.attribution(
        f"{label}_screened",
        scores,
        meter,
        token_scores=per_token,
        model_calls=int(exact.sum()) + 2,  # full context, candidates, and the screen's pass
        metadata={
            "divergence": divergence,
            "screen": int(screen.candidates),
            "exact": exact.tolist(),
            "screen_estimates": estimate.estimates.tolist(),
            "screen_seconds": estimate.seconds,
            "screen_proxy": screen.proxy,
            "screen_samples": screen.samples if screen.proxy == "fisher" else 1,
            "screen_gate": "attention-score bias log(alpha_i) on source keys, positions after "
            "the context, all layers, renormalised",
        },
    )
