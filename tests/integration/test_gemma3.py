"""Gemma 3 270M as a second real architecture: ARC-JSD, attribution and localisation on it,
an exact head decomposition around its post-attention norms, and prefix reuse on its
sliding-window layers (exact inside the 512-token window, off beyond it)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mechrag import Case, Engine
from mechrag.divergences import jsd
from mechrag.models import adapter

pytestmark = pytest.mark.integration

QUERY = "Where is the Eiffel Tower?"
SOURCES = ["The Eiffel Tower is in Paris.", "Bananas are yellow.", "Paris is in France."]
RESPONSE = " Paris, France."


def unbatched_uncached(model, case: Case, masks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-token log P(r_t) and JSD from the full context: one plain pass per mask, no cache."""
    n = len(case.response_ids)
    targets = torch.as_tensor(case.response_ids)[:, None]
    rows = []
    for mask in [np.ones(case.n_sources, dtype=bool), *masks]:
        ids = case.builder.ids(torch.as_tensor(mask)) + case.response_ids[:-1]
        with torch.no_grad():
            rows.append(model(torch.tensor([ids]))[0, -n:].float().log_softmax(-1))
    logprobs = np.stack([r.gather(-1, targets)[:, 0].numpy() for r in rows[1:]])
    divergences = np.stack([jsd(rows[0], r).numpy() for r in rows[1:]])
    return logprobs, divergences


def test_arc_jsd_attribute_and_localize_run_on_gemma(gemma):
    case = Case(gemma, QUERY, SOURCES, RESPONSE)
    arc = case.arc_jsd()
    assert arc.top(1)[0][0].id == "p0s0"  # the sentence that says Paris
    exact = case.attribute("exact")
    assert exact.model_calls == 8 and np.isfinite(exact.scores).all()
    components = case.localize()
    assert components.heads.shape == (18, 4) and components.heads.max() > 0
    assert np.isfinite(components.mlps).all()


def test_head_writes_decompose_the_normed_attention_output(gemma):
    from helpers import decomposition_error

    ids = gemma.tokenizer("The Eiffel Tower is in the city of", return_tensors="pt").input_ids
    names = [f"blocks.{layer}.{hook}" for layer in (0, 5, 17) for hook in
             ("attn.hook_z", "hook_attn_out")]
    with torch.no_grad():
        _, cache = gemma.run_with_cache(ids, names_filter=names)
    for layer in (0, 5, 17):  # sliding and full-attention layers
        assert adapter.post_attention_norm(gemma, layer) is not None
        assert decomposition_error(gemma, layer, cache) < 1e-4


def test_prefix_reuse_inside_the_window_is_exact(gemma):
    engine = Engine(gemma, progress=False)
    case = Case(gemma, QUERY, SOURCES, RESPONSE, engine=engine)
    assert engine.reference(case.builder, case.response_ids).cache is not None
    masks = np.array([[0, 1, 1], [1, 0, 1], [1, 1, 0], [0, 0, 0]], dtype=bool)
    logprobs, divergences = unbatched_uncached(gemma, case, masks)
    np.testing.assert_allclose(case.token_logprobs(masks), logprobs, atol=2e-3)
    np.testing.assert_allclose(case.token_divergences(masks), divergences, atol=2e-4)


def test_a_generated_case_continues_its_generation_on_windowed_and_global_layers(gemma):
    """Inside the window the full-context pass runs only the response positions on the
    generation's cache (sliding-window and global layers alike) and equals a fresh case's."""
    case = Case(gemma, QUERY, SOURCES, max_new_tokens=6)
    fresh = Case(gemma, QUERY, SOURCES, case.response_ids)
    torch.testing.assert_close(
        case.reference_logprobs(), fresh.reference_logprobs(), atol=2e-4, rtol=0
    )
    assert case.engine.tokens_processed == len(case.response_ids)


def test_prefix_reuse_is_off_beyond_the_window_and_scores_stay_exact(gemma):
    long = [f"Filler sentence number {i} says nothing much at all." for i in range(80)]
    sources = [SOURCES[0], " ".join(long[:40]), " ".join(long[40:])]
    engine = Engine(gemma, progress=False)
    case = Case(gemma, QUERY, sources, RESPONSE, engine=engine)
    assert len(case.builder.ids()) > 512
    assert engine.reference(case.builder, case.response_ids).cache is None
    masks = np.array([[0, 1, 1], [1, 1, 0]], dtype=bool)
    logprobs, divergences = unbatched_uncached(gemma, case, masks)
    np.testing.assert_allclose(case.token_logprobs(masks), logprobs, atol=2e-3)
    np.testing.assert_allclose(case.token_divergences(masks), divergences, atol=2e-4)


@pytest.mark.parametrize("beyond_window", [False, True])
def test_screen_pass_on_the_cached_context_equals_the_whole_sequence(gemma, beyond_window):
    """The screen's gated pass over the positions after the context, on the context's cache,
    equals the whole gated sequence: inside the window (the reference pass's cache) and beyond
    it (a fresh context pass, whose sliding-window layers keep only recent keys)."""
    from mechrag.attribution.screening import (
        context_end,
        gated_response_logprobs,
        source_token_owners,
    )

    filler = [f"Filler sentence number {i} says nothing much at all." for i in range(80)]
    sources = [SOURCES[0], " ".join(filler[:50]), SOURCES[2]] if beyond_window else SOURCES
    case = Case(gemma, QUERY, sources, RESPONSE)
    assert (len(case.builder.ids()) > 512) == beyond_window
    gates = torch.tensor([[1.0, 1.0, 1.0], [0.2, 1.0, 0.0]])
    n_context = context_end(source_token_owners(case.builder))
    with torch.no_grad():
        whole = gated_response_logprobs(gemma, case.builder, case.response_ids, gates)
        cached = gated_response_logprobs(
            gemma,
            case.builder,
            case.response_ids,
            gates,
            past=case.context_cache(n_context, len(gates)),
        )
    torch.testing.assert_close(cached, whole, atol=2e-3, rtol=0)
    assert not torch.allclose(whole[0], whole[1], atol=1e-2)  # the gates took effect
    screened = case.arc_jsd(screen=case.n_sources)
    assert np.all(np.array(screened.metadata["screen_estimates"]) > 0)
    np.testing.assert_allclose(screened.scores, case.arc_jsd().scores, atol=1e-12)
