"""Context echo against a hand-written two-pass computation; detector scores against references."""

from __future__ import annotations

import matplotlib
import numpy as np
import pytest
import torch

from mechrag import Case
from mechrag.divergences import jsd
from mechrag.mechanism.echo import answer_token_mask, detector_scores, echo

matplotlib.use("Agg")

QUERY = "Where does the cat sleep?"
SOURCES = ["The cat sleeps on the mat.", "Dogs bark at night.", "The mat is red."]
RESPONSE = "On the mat, 3 days."


def _response_logprobs(model, prompt, response):
    """Log-probs at the response positions of one uncached pass over prompt + response."""
    with torch.no_grad():
        logits = model(torch.tensor([prompt + response[:-1]]))[0, -len(response) :]
    return logits.float().log_softmax(-1)


@pytest.fixture(scope="module")
def case(tiny_gpt2):
    return Case(tiny_gpt2, QUERY, SOURCES, RESPONSE)


def test_echo_equals_two_pass_computation(case):
    model, builder, response = case.model, case.builder, case.response_ids
    full = _response_logprobs(model, builder.ids(), response)
    alone = _response_logprobs(model, builder.ids(torch.zeros(3, dtype=torch.bool)), response)
    result = echo(case, threshold=0.2)
    np.testing.assert_allclose(result.context, jsd(full, alone).numpy(), atol=1e-5)
    # The top source is the one whose removal moves the response most (brute force).
    removed = []
    for index in range(3):
        mask = torch.ones(3, dtype=torch.bool)
        mask[index] = False
        removed.append(jsd(full, _response_logprobs(model, builder.ids(mask), response)).numpy())
    top = int(np.argmax([r.sum() for r in removed]))
    assert result.top_source == case.sources[top].id
    np.testing.assert_allclose(result.source, removed[top], atol=1e-5)
    keep = result.answer_mask
    assert result.mean == pytest.approx(result.context[keep].mean())
    assert result.minimum == pytest.approx(result.context[keep].min())
    assert result.share_below == pytest.approx((result.context[keep] < 0.2).mean())
    assert result.to_dict()["source_summary"] == result.summary("source")
    assert result.plot() is not None


def test_answer_token_mask():
    np.testing.assert_array_equal(
        answer_token_mask(["On", " the", ",", " ", "3", "."]), [1, 1, 0, 0, 1, 0]
    )
    assert answer_token_mask([".", "!"]).all()


def test_detector_scores_match_direct_computation(case):
    model, builder, response = case.model, case.builder, case.response_ids
    result = echo(case)
    scores = detector_scores(case, result)
    full = _response_logprobs(model, builder.ids(), response)
    mask = torch.ones(3, dtype=torch.bool)
    mask[case.source_index(result.top_source)] = False
    reduced = _response_logprobs(model, builder.ids(mask), response)
    targets = torch.tensor(response)[:, None]
    token_full = full.gather(-1, targets)[:, 0].double().numpy()
    token_reduced = reduced.gather(-1, targets)[:, 0].double().numpy()
    keep = result.answer_mask
    entropy = -(full.exp() * full).sum(-1).double().numpy()
    assert scores["logprob"] == pytest.approx(-token_full[keep].mean(), abs=1e-4)
    assert scores["entropy"] == pytest.approx(entropy[keep].mean(), abs=1e-4)
    assert scores["loo_drop"] == pytest.approx(-(token_full - token_reduced).sum(), abs=1e-3)
    assert scores["echo"] == -result.mean
