"""Screened ARC-JSD: the gradient screen, its gate, and the exact pass on its candidates."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from helpers import hook_count

from mechrag import Case, Engine, SourceScreen, jsd
from mechrag.attribution.screening import (
    context_end,
    gated_response_logprobs,
    screen_sources,
    source_token_owners,
)
from mechrag.models import adapter

QUERY = "Where does Ana live?"
DOCS = [
    "Ana lives in Oslo.",
    "Bo likes tea.",
    "Oslo is cold.",
    "Cy is tall.",
    "Dan swims daily.",
    "Eve reads books.",
]


@pytest.fixture(scope="module", params=["llama", "gpt2"])
def tiny(request):
    from mechrag.models.toy import tiny_model

    return tiny_model(request.param)


@pytest.fixture(scope="module")
def case(tiny):
    return Case(tiny, QUERY, DOCS, "Oslo.")


def test_token_owners_cover_each_source_text(case):
    owners = source_token_owners(case.builder)
    ids = case.builder.ids()
    assert len(owners) == len(ids)
    for index, source in enumerate(case.sources):
        text = case.model.tokenizer.decode([ids[p] for p in np.flatnonzero(owners == index)])
        assert text.strip() == source.text
    assert (owners == -1).any()  # template and query tokens belong to no source


def response_loglik(case, gates, past=None, owners=None) -> torch.Tensor:
    logprobs = gated_response_logprobs(
        case.model, case.builder, case.response_ids, gates, owners, past
    )
    targets = torch.tensor(case.response_ids)[None, :, None].expand(len(gates), -1, -1)
    return logprobs.gather(-1, targets)[..., 0].sum(-1)


def test_ungated_likelihood_is_the_case_likelihood(case):
    with torch.no_grad():
        likelihood = response_loglik(case, torch.ones(1, case.n_sources))
    expected = case.token_logprobs(case.full_mask()[None])[0].sum()
    assert float(likelihood[0]) == pytest.approx(expected, abs=1e-4)


def test_cached_gated_pass_equals_the_whole_sequence(case):
    """The screen's pass over the positions after the context, on the cached context, gives
    the log-probabilities of the whole gated sequence, row by row."""
    gates = torch.tensor([[1.0] * case.n_sources, [0.3, 1.0, 0.0, 0.7, 1.0, 0.5]])
    n_context = context_end(source_token_owners(case.builder))
    with torch.no_grad():
        whole = gated_response_logprobs(case.model, case.builder, case.response_ids, gates)
        cached = gated_response_logprobs(
            case.model,
            case.builder,
            case.response_ids,
            gates,
            past=case.context_cache(n_context, len(gates)),
        )
    torch.testing.assert_close(cached, whole, atol=1e-4, rtol=1e-4)


def test_zero_gate_hides_the_source_from_the_positions_after_the_context(case):
    """alpha_i = 0 equals masking source i's keys for every query after the context."""
    owners = source_token_owners(case.builder)
    n_context = context_end(owners)
    gates = torch.ones(1, case.n_sources)
    gates[0, 2] = 0.0
    model, n_response = case.model, len(case.response_ids)
    sequence = case.builder.ids() + case.response_ids[:-1]
    hidden = torch.zeros(len(sequence), len(sequence), dtype=torch.bool)
    hidden[n_context:, : len(owners)] = torch.as_tensor(owners == 2)

    def mask_out(scores, hook):
        return scores.masked_fill(hidden, float("-inf"))

    layers = range(adapter.n_layers(model))
    with torch.no_grad():
        gated = response_loglik(case, gates, owners=owners)
        with model.hooks(fwd_hooks=[(adapter.attention_scores_hook(i), mask_out) for i in layers]):
            logits = adapter.forward(model, torch.tensor([sequence]), n_logits=n_response)
    targets = torch.tensor(case.response_ids)[:, None]
    masked = logits[0, -n_response:].float().log_softmax(-1).gather(-1, targets).sum()
    assert float(gated[0]) == pytest.approx(float(masked), abs=1e-4)


def test_loglik_screen_matches_central_differences(case):
    screen = screen_sources(case, proxy="loglik")
    step = 1e-3
    for index in range(case.n_sources):
        gates = torch.ones(2, case.n_sources, dtype=torch.float64)
        gates[0, index] += step
        gates[1, index] -= step
        with torch.no_grad():
            plus, minus = response_loglik(case, gates.float()).tolist()
        finite = (plus - minus) / (2 * step)
        assert screen.estimates[index] == pytest.approx(finite, rel=2e-2, abs=2e-3)


def exact_fisher_diagonal(case, step: float = 1e-2) -> np.ndarray:
    """``sum_t sum_y P_t(y) (d log P_t(y) / d alpha_i)^2`` over the whole vocabulary, with the
    derivatives taken by central differences (brute force, no sampling)."""
    shifts = step * torch.eye(case.n_sources)
    gates = torch.cat([torch.ones(1, case.n_sources), 1 + shifts, 1 - shifts])
    with torch.no_grad():
        logprobs = gated_response_logprobs(case.model, case.builder, case.response_ids, gates)
    plus, minus = logprobs[1 : case.n_sources + 1], logprobs[case.n_sources + 1 :]
    derivative = (plus - minus).double() / (2 * step)  # [n, T, vocab]
    return (logprobs[0].double().exp() * derivative**2).sum((1, 2)).numpy()


def test_fisher_screen_is_the_second_order_jsd(case):
    """The sampled Fisher diagonal matches the brute-force one, and ``F_ii / 8`` is the JSD of
    a small gate change divided by its squared size (averaged over a step down and a step up,
    which cancels the third-order term, so the check does not hang on the model's curvature)."""
    fisher = exact_fisher_diagonal(case)
    screen = screen_sources(case, proxy="fisher", samples=2000, seed=1)
    np.testing.assert_allclose(screen.estimates, fisher / 8, rtol=0.15)
    step = 3e-2  # not smaller: a float32 JSD of order step**2 / 100 loses digits
    shifts = step * torch.eye(case.n_sources)
    gates = torch.cat([1 - shifts, 1 + shifts, torch.ones(1, case.n_sources)])
    with torch.no_grad():
        logprobs = gated_response_logprobs(case.model, case.builder, case.response_ids, gates)
    divergence = jsd(logprobs[-1:], logprobs[:-1]).sum(-1).double().numpy()
    down, up = divergence[: case.n_sources], divergence[case.n_sources :]
    np.testing.assert_allclose((down + up) / 2 / step**2, fisher / 8, rtol=0.02)


def test_screen_reuses_the_context_cache(case):
    case.arc_jsd()  # the full-context pass exists
    passes = case.engine.forward_passes
    screen_sources(case)
    assert case.engine.forward_passes == passes


def test_screen_without_a_kept_cache_computes_the_context(tiny):
    kept = screen_sources(Case(tiny, QUERY, DOCS, "Oslo."))
    engine = Engine(tiny, reuse_prefix=False)
    fresh = screen_sources(Case(tiny, QUERY, DOCS, "Oslo.", engine=engine))
    np.testing.assert_allclose(fresh.estimates, kept.estimates, rtol=1e-3, atol=1e-8)


def test_screen_leaves_no_hooks_and_no_gradients(case):
    model = case.model
    before = adapter.active_hooks(model)
    grad_mode = torch.is_grad_enabled()
    with torch.inference_mode():
        screen_sources(case)
    assert adapter.active_hooks(model) == before
    assert hook_count(model) == 0
    assert all(p.grad is None for p in model.parameters())
    assert torch.is_grad_enabled() == grad_mode


def test_screen_result_round_trips_through_json(case):
    import json

    from mechrag.attribution.screening import Screen

    screen = screen_sources(case, samples=2)
    again = Screen.from_dict(json.loads(screen.to_json()))
    assert again.proxy == screen.proxy and again.seconds == screen.seconds
    assert again.estimates.dtype == np.float64
    np.testing.assert_array_equal(again.estimates, screen.estimates)


def test_screen_with_every_source_equals_exact(case):
    exact = case.arc_jsd()
    screened = case.arc_jsd(screen=case.n_sources)
    np.testing.assert_allclose(screened.scores, exact.scores, rtol=0, atol=1e-12)
    np.testing.assert_allclose(screened.token_scores, exact.token_scores, atol=1e-12)
    assert all(screened.metadata["exact"])


@pytest.mark.parametrize("divergence", ["jsd", "kl"])
def test_screened_candidates_are_exact_and_rank_first(tiny, divergence):
    case = Case(tiny, QUERY, DOCS, "Oslo.")
    screened = case.arc_jsd(divergence, screen=2)
    calls_before = case.subsets_scored
    exact = case.arc_jsd(divergence)
    assert case.subsets_scored == calls_before + case.n_sources - 2  # candidates were reused
    flags = np.array(screened.metadata["exact"])
    assert flags.sum() == 2
    np.testing.assert_allclose(screened.scores[flags], exact.scores[flags], atol=1e-12)
    assert screened.scores[flags].min() > screened.scores[~flags].max()
    priority = np.abs(screened.metadata["screen_estimates"])
    assert set(np.flatnonzero(flags)) == set(np.argsort(-priority)[:2])
    assert screened.model_calls == 4


def test_screen_rejects_bad_settings(case):
    with pytest.raises(ValueError, match="at least 1"):
        case.arc_jsd(screen=0)
    with pytest.raises(ValueError, match="unknown proxy"):
        SourceScreen(3, proxy="gradient")


def test_configured_screen_is_used(case):
    screened = case.arc_jsd(screen=SourceScreen(2, proxy="loglik"))
    assert screened.metadata["screen_proxy"] == "loglik"
    expected = screen_sources(case, proxy="loglik").candidates(2)
    assert set(np.flatnonzero(screened.metadata["exact"])) == set(expected)


def test_bf16_screen_is_finite_and_follows_fp32():
    from mechrag.models.toy import tiny_model

    cases = [
        Case(tiny_model("llama", dtype=dtype), QUERY, DOCS, "Oslo.")
        for dtype in (torch.float32, torch.bfloat16)
    ]
    for proxy in ("loglik", "fisher"):
        full, half = (screen_sources(c, proxy=proxy, samples=200).estimates for c in cases)
        assert np.isfinite(half).all()
        assert np.corrcoef(full, half)[0, 1] > 0.9


@pytest.mark.integration
def test_screen_with_every_source_equals_exact_on_the_embedded_model(smollm):
    from mechrag.data import load_hotpotqa

    example = load_hotpotqa(n=1, distractors=1)[0]
    case = Case.from_example(smollm, example, max_new_tokens=8)
    exact = case.arc_jsd()
    screened = case.arc_jsd(screen=case.n_sources)
    np.testing.assert_allclose(screened.scores, exact.scores, atol=1e-12)
    partial = case.arc_jsd(screen=3)
    assert np.array(partial.metadata["exact"]).sum() == 3


def test_rank_below_keeps_the_order_when_the_smallest_known_score_is_zero():
    from mechrag.attribution.screening import rank_below

    known = np.array([True, True, False, False])
    placed = rank_below(np.array([0.0, 0.5, 0, 0]), known, np.array([9, 9, 2.0, 1.0]))
    assert placed[1] > placed[0] > placed[2] > placed[3]
    placed = rank_below(np.array([0.2, 0.5, 0, 0]), known, np.array([9, 9, 2.0, 1.0]))
    np.testing.assert_allclose(placed[2:], [0.1, 0.05])
