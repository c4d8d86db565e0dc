"""Greedy decoding with gates applied only at low-echo steps (dynamic gating).

At step ``t`` the decoder has two key-value-cached streams: the full prompt (query and context)
and the query-alone prompt, both followed by ``r_<t``. It feeds the last token to both, gets
``P_t = P(. | q, C, r_<t)`` and ``Q_t = P(. | q, r_<t)`` and the step's echo
``e_t = JSD(P_t || Q_t)``. When ``e_t < threshold`` the gate fires: the context stream's step is
undone (its cache cut by one position) and re-run with the gates active, so both the next token
and that position's keys and values come from the gated model. The token is ``argmax`` of the
(possibly gated) context distribution. With no gate firing the result equals plain greedy
decoding token for token (a test checks this against
:func:`mechrag.models.adapter.greedy_generate`).

:func:`prefill` and :func:`extend` run through :func:`mechrag.models.adapter.forward`; undoing a
step cuts the cache through :func:`mechrag.models.adapter.drop_last_position`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
from jaxtyping import Float

from mechrag.defaults import MAX_NEW_TOKENS
from mechrag.divergences import jsd
from mechrag.errors import InputError
from mechrag.mechanism.gating.gates import Gates
from mechrag.models import adapter
from mechrag.results.base import Serializable

NextLogprobs = Float[torch.Tensor, " vocab"]


def prefill(model, ids: Sequence[int]):
    """Run ``ids`` once and return the key-value cache (a Hugging Face ``Cache``)."""
    tokens = torch.tensor([list(ids)], device=adapter.device(model))
    _, cache = adapter.forward(model, tokens, n_logits=1, return_cache=True)
    return cache


def extend(model, token: int, cache) -> NextLogprobs:
    """Feed one token on top of ``cache`` (updated in place); next-token log-probs (float32)."""
    tokens = torch.tensor([[int(token)]], device=adapter.device(model))
    logits = adapter.forward(model, tokens, n_logits=1, past=cache)
    return logits[0, -1].float().log_softmax(-1)


@dataclass
class GatedDecoding(Serializable):
    """A greedy response with its per-step echo and where the gate fired."""

    default_name = "gated_decoding"

    response_ids: list[int]
    echo: list[float] = field(default_factory=list)
    fired: list[bool] = field(default_factory=list)

    @property
    def n_fired(self) -> int:
        return int(np.sum(self.fired))


@torch.inference_mode()
def decode_with_gates(
    model,
    prompt_ids: Sequence[int],
    query_only_ids: Sequence[int],
    gates: Gates,
    threshold: float,
    max_new_tokens: int = MAX_NEW_TOKENS,
) -> GatedDecoding:
    """Greedy decoding from ``prompt_ids``, gating the steps whose echo is below ``threshold``.

    ``query_only_ids``: the same prompt without context, e.g. ``builder.ids(empty)`` with
    ``empty = torch.zeros(builder.n_sources, dtype=torch.bool)`` for a
    :class:`~mechrag.prompts.PromptBuilder` ``builder``.
    The end-of-turn token ends the response and is not included.
    """
    if max_new_tokens < 1:
        raise InputError("max_new_tokens must be at least 1")
    if len(prompt_ids) < 2 or len(query_only_ids) < 2:
        raise InputError("prompts must have at least two tokens")
    stops = adapter.stop_token_ids(model)
    context_cache = prefill(model, prompt_ids[:-1])
    query_cache = prefill(model, query_only_ids[:-1])
    context_token, query_token = prompt_ids[-1], query_only_ids[-1]
    result = GatedDecoding(response_ids=[])
    for _ in range(max_new_tokens):
        full = extend(model, context_token, context_cache)
        alone = extend(model, query_token, query_cache)
        echo = float(jsd(full, alone))
        fired = echo < threshold and len(gates) > 0
        if fired:
            adapter.drop_last_position(context_cache)
            with gates.apply(model):
                full = extend(model, context_token, context_cache)
        token = int(full.argmax())
        if token in stops:
            break
        result.response_ids.append(token)
        result.echo.append(echo)
        result.fired.append(fired)
        context_token = query_token = token
    return result
