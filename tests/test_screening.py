"""Screened ARC-JSD: the gradient screen, its gate, and the exact pass on its candidates."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from mechrag import Case, adapter
from mechrag.attribution.screening import (
    gated_log_likelihood,
    screen_sources,
    source_token_owners,
)

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
    from mechrag.toy import tiny_model

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


def test_ungated_likelihood_is_the_case_likelihood(case):
    gates = torch.ones(case.n_sources)
    with torch.no_grad():
        likelihood = gated_log_likelihood(case.model, case.builder, case.response_ids, gates)
    expected = case.token_logprobs(case.full_mask()[None])[0].sum()
    assert float(likelihood) == pytest.approx(expected, abs=1e-4)


def test_zero_gate_masks_the_source_out_of_attention(case):
    """alpha_i = 0 equals attending to everything but source i's tokens (a hand-made mask)."""
    owners = source_token_owners(case.builder)
    gates = torch.ones(case.n_sources)
    gates[2] = 0.0
    model, n_response = case.model, len(case.response_ids)
    sequence = case.builder.ids() + case.response_ids[:-1]
    hidden = torch.ones(len(sequence), dtype=torch.bool)
    hidden[: len(owners)] = torch.as_tensor(owners != 2)

    def mask_out(scores, hook):
        return scores.masked_fill(~hidden, float("-inf"))

    layers = range(adapter.n_layers(model))
    with torch.no_grad():
        gated = gated_log_likelihood(model, case.builder, case.response_ids, gates, owners)
        with model.hooks(fwd_hooks=[(adapter.attention_scores_hook(i), mask_out) for i in layers]):
            logits = adapter.forward(model, torch.tensor([sequence]), n_logits=n_response)
    targets = torch.tensor(case.response_ids)[:, None]
    masked = logits[0, -n_response:].float().log_softmax(-1).gather(-1, targets).sum()
    assert float(gated) == pytest.approx(float(masked), abs=1e-4)


def test_screen_gradient_matches_central_differences(case):
    screen = screen_sources(case)
    owners = source_token_owners(case.builder)
    step = 1e-3
    for index in range(case.n_sources):
        values = []
        for sign in (1.0, -1.0):
            gates = torch.ones(case.n_sources, dtype=torch.float64)
            gates[index] += sign * step
            with torch.no_grad():
                values.append(
                    float(
                        gated_log_likelihood(
                            case.model, case.builder, case.response_ids, gates.float(), owners
                        )
                    )
                )
        finite = (values[0] - values[1]) / (2 * step)
        assert screen.gradients[index] == pytest.approx(finite, rel=2e-2, abs=2e-3)


def test_screen_leaves_no_hooks_and_no_gradients(case):
    model = case.model
    before = adapter.active_hooks(model)
    grad_mode = torch.is_grad_enabled()
    with torch.inference_mode():
        screen_sources(case)
    assert adapter.active_hooks(model) == before
    assert all(not point._forward_hooks for point in model.hook_dict.values())
    assert all(p.grad is None for p in model.parameters())
    assert torch.is_grad_enabled() == grad_mode


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
    priority = np.abs(screened.metadata["screen_gradients"])
    assert set(np.flatnonzero(flags)) == set(np.argsort(-priority)[:2])
    assert screened.model_calls == 4


def test_screen_rejects_nonpositive_m(case):
    with pytest.raises(ValueError, match="at least 1"):
        case.arc_jsd(screen=0)


def test_bf16_screen_is_finite_and_follows_fp32():
    from mechrag.toy import tiny_model

    cases = [
        Case(tiny_model("llama", dtype=dtype), QUERY, DOCS, "Oslo.")
        for dtype in (torch.float32, torch.bfloat16)
    ]
    full, half = (screen_sources(c).gradients for c in cases)
    assert np.isfinite(half).all()
    assert np.corrcoef(full, half)[0, 1] > 0.9


def test_gpu_check_exits_cleanly_without_cuda():
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present: the script would run the real check")
    script = Path(__file__).resolve().parents[1] / "benchmarks" / "gpu_check.py"
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "no CUDA device" in done.stdout


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
