"""Context echo against a hand-written two-pass computation; detector scores against references."""

from __future__ import annotations

import json

import matplotlib
import numpy as np
import pytest
import torch

from mechrag import Case
from mechrag.divergences import jsd
from mechrag.mechanism.echo import Echo, answer_token_mask, detector_scores, echo

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
    assert_echo_strip(result)


def assert_echo_strip(result) -> list[int]:
    """One cell per response token holding its context echo, the low answer tokens outlined;
    returns the outlined token positions."""
    import matplotlib.pyplot as plt

    axis = result.plot().axes[0]
    np.testing.assert_array_equal(axis.images[0].get_array(), result.context[None])
    assert [t.get_text() for t in axis.get_xticklabels()] == result.response_tokens
    outlined = [patch.get_x() + 0.5 for patch in axis.patches]
    assert outlined == np.flatnonzero(result.low_tokens).tolist()
    assert f"below {result.threshold:g}" in axis.get_title()
    plt.close("all")
    return outlined


def test_echo_strip_outlines_only_low_answer_tokens():
    tokens = ["On", " the", ",", " mat"]
    result = Echo(
        response_tokens=tokens,
        context=np.array([0.05, 0.3, 0.01, 0.02]),
        source=np.zeros(4),
        top_source="p0s0",
        answer_mask=answer_token_mask(tokens),
        threshold=0.1,
    )
    assert assert_echo_strip(result) == [0, 3]  # "," is low too but no answer token


def test_echo_round_trips_through_json_and_saves(case, tmp_path):
    import matplotlib.pyplot as plt

    result = echo(case, threshold=0.2)
    data = json.loads(result.to_json())
    assert data["context_summary"] == pytest.approx(result.summary("context"))
    restored = Echo.from_dict(data)  # the derived summaries: skipped
    for name in ("context", "source", "answer_mask"):
        np.testing.assert_array_equal(getattr(restored, name), getattr(result, name))
    assert restored.answer_mask.dtype == bool
    assert (restored.response_tokens, restored.top_source, restored.threshold) == (
        result.response_tokens,
        result.top_source,
        0.2,
    )
    assert restored.summary("source") == pytest.approx(result.summary("source"))
    figures = plt.get_fignums()
    written = result.save(tmp_path)
    assert [p.name for p in written] == ["echo.json", "echo_strip.png", "echo_strip.svg"]
    assert plt.get_fignums() == figures  # the strip it drew is closed
    assert json.loads(written[0].read_text()) == data


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
