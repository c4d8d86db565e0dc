"""Screened ARC-JSD: a one-pass gradient screen picks the sources worth scoring exactly.

Exact ARC-JSD runs one suffix pass per source. The screen estimates every source's removal
effect from a single forward and backward pass on the full context, and exact ARC-JSD then
runs only on the ``m`` most promising sources.

The gate. Each source ``i`` gets a multiplicative gate ``alpha_i`` on the attention every
query position pays to its tokens, in every layer and head, with the row renormalised:
``p'_qk = alpha_{s(k)} p_qk / sum_j alpha_{s(j)} p_qj``. It is applied exactly as a bias
``log alpha_i`` on the attention scores of source ``i``'s key columns before the softmax, so
``alpha_i = 0`` is the attention-masked removal of source ``i`` (the tokens stay in place, so
later positions keep their position ids; the re-tokenised removal ARC-JSD scores differs only
there), and ``alpha = 1`` is the unmodified model.

The proxy. At the full context the JSD's first-order term vanishes (it is minimal there), so the
screen uses the response log-likelihood ``LL = sum_t log P(r_t)`` instead. Its first-order
Taylor expansion from ``alpha_i = 1`` to ``0`` estimates the change of ``LL`` when source ``i``
is removed as ``-dLL/dalpha_i``; sources are ranked by ``|dLL/dalpha_i|`` (a removal that raises
the likelihood also moves the distribution). One backward pass gives every gradient.

Precision: the gate is added in float32 and its gradient is reduced over batch, heads and query
positions in float32; the rest of the backward runs in the model's dtype (bf16 stays bf16).

Memory: the backward keeps every layer's attention pattern, about ``n_layers * n_heads * L**2``
values for an ``L``-token prompt (SmolLM2-135M at 1,600 tokens: ~2.8 GB in float32), against
the exact engine's key-value cache; on long CPU contexts that, not time, is the limit.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import torch
from jaxtyping import Float, Int
from torch import Tensor

from mechrag import adapter
from mechrag.prompts import PromptBuilder

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


@contextmanager
def source_gates(
    model, owners: Int[np.ndarray, " n_prompt"], gates: Float[Tensor, " n_sources"]
) -> Iterator[None]:
    """Gate the attention paid to each source's tokens by ``gates`` (renormalised), all layers.

    Positions past ``owners`` (the response) are ungated. Hooks are removed on exit.
    """
    # Index -1 (no source) picks the appended zero: ungated.
    owner_index = torch.as_tensor(owners, device=gates.device)

    def gate(scores: Tensor, hook) -> Tensor:
        log_gates = torch.cat([gates.float().log(), gates.new_zeros(1, dtype=torch.float32)])
        bias = log_gates[owner_index]  # [n_prompt]: log alpha of each key's source
        bias = torch.nn.functional.pad(bias, (0, scores.shape[-1] - len(owners)))
        return (scores.float() + bias).to(scores.dtype)

    layers = range(adapter.n_layers(model))
    hooks = [(adapter.attention_scores_hook(layer), gate) for layer in layers]
    with model.hooks(fwd_hooks=hooks):
        yield


def gated_log_likelihood(
    model,
    builder: PromptBuilder,
    response_ids: list[int],
    gates: Float[Tensor, " n_sources"],
    owners: Int[np.ndarray, " n_prompt"] | None = None,
) -> Tensor:
    """``sum_t log P(r_t | full prompt, r_<t)`` with the attention to sources gated.

    Differentiable in ``gates`` (the caller decides whether gradients are tracked).
    """
    owners = source_token_owners(builder) if owners is None else owners
    n_response = len(response_ids)
    sequence = builder.ids() + list(response_ids[:-1])
    ids = torch.tensor([sequence], device=adapter.device(model))
    targets = torch.tensor(response_ids, device=adapter.device(model))
    with source_gates(model, owners, gates):
        logits = adapter.forward(model, ids, n_logits=n_response)
    logprobs = logits[0, -n_response:].float().log_softmax(-1)
    return logprobs.gather(-1, targets[:, None]).sum()


@dataclass
class Screen:
    """The screen of one case: ``dLL/dalpha_i`` at the full context, per source."""

    gradients: Float[np.ndarray, " n_sources"]
    seconds: float

    @property
    def removal_effect(self) -> Float[np.ndarray, " n_sources"]:
        """First-order change of the response log-likelihood when each source is removed."""
        return -self.gradients

    @property
    def priority(self) -> Float[np.ndarray, " n_sources"]:
        """How strongly each source is expected to move the response (``|dLL/dalpha_i|``)."""
        return np.abs(self.gradients)

    def candidates(self, m: int) -> Int[np.ndarray, " m"]:
        """The ``m`` sources of highest priority, best first (ties by position)."""
        return np.argsort(-self.priority, kind="stable")[:m]


def screen_sources(case) -> Screen:
    """One forward and one backward pass: ``dLL/dalpha_i`` for every source of ``case``.

    No parameter gradient is stored (only the gates' gradient is asked for), the hooks go with
    the pass, and grad mode is restored, even inside ``torch.inference_mode``.
    """
    start = time.perf_counter()
    owners = source_token_owners(case.builder)
    with torch.inference_mode(False), torch.enable_grad():
        gates = torch.ones(
            case.n_sources, dtype=torch.float32, device=adapter.device(case.model)
        ).requires_grad_(True)
        likelihood = gated_log_likelihood(
            case.model, case.builder, case.response_ids, gates, owners
        )
        (gradient,) = torch.autograd.grad(likelihood, gates)
    return Screen(gradient.detach().double().cpu().numpy(), time.perf_counter() - start)


def screened_arc_jsd(case, screen: int, divergence: str = "jsd"):
    """ARC-JSD scored exactly on the ``screen`` sources the gradient screen ranks highest.

    Candidates get their exact score (their leave-one-out subsets join the case's cache, so a
    later exact ARC-JSD reuses them). Every other source gets its screen priority rescaled so
    that the largest sits at ``NON_CANDIDATE_CEILING`` times the smallest exact score: the
    scores still rank every source, exact ones first. ``metadata['exact']`` marks the exactly
    scored sources, ``metadata['screen_gradients']`` holds ``dLL/dalpha_i``; token scores of
    non-candidates are zero (not computed). ``screen >= n`` scores every source exactly.
    """
    if int(screen) < 1:
        raise ValueError(f"screen must be at least 1, got {screen}")
    start = case._start()
    result = _screened_scores(case, min(int(screen), case.n_sources), divergence)
    scores, per_token, exact, estimate = result
    method = "arc_jsd" if divergence == "jsd" else f"arc_{divergence}"
    return case._attribution(
        f"{method}_screened",
        scores,
        per_token,
        int(exact.sum()) + 2,  # full context, candidates, and the screen's forward-backward
        start,
        divergence=divergence,
        screen=int(screen),
        exact=exact.tolist(),
        screen_gradients=estimate.gradients.tolist(),
        screen_seconds=estimate.seconds,
        screen_gate="attention-score bias log(alpha_i) on source keys, all layers, renormalised",
        screen_proxy="first-order response log-likelihood, |dLL/dalpha_i|",
    )


def _screened_scores(case, m: int, divergence: str):
    estimate = screen_sources(case)
    candidates = estimate.candidates(m)
    masks = case.leave_one_out_masks()[candidates]
    per_token = np.zeros((case.n_sources, len(case.response_ids)))
    per_token[candidates] = case.token_divergences(masks, divergence)
    scores = per_token.sum(-1)
    exact = np.zeros(case.n_sources, dtype=bool)
    exact[candidates] = True
    rest = ~exact
    if rest.any():
        priority = estimate.priority[rest]
        top = priority.max()
        scale = NON_CANDIDATE_CEILING * scores[exact].min() / top if top > 0 else 0.0
        scores[rest] = priority * scale
    return scores, per_token, exact, estimate
