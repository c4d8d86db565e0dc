"""The engine: any batch size, the logit budget and prefix reuse (also under a sliding window)
give the scores of a plain per-ablation loop, in fewer tokens; an engine serves one model."""

import numpy as np
import pytest
from helpers import naive_arc_jsd

from mechrag import Case, Engine, arc_jsd

QUERY = "Where did Alice go?"
SENTENCES = [
    "Alice went to the market.",
    "Bob stayed home all day.",
    "The market sells fresh fish.",
    "Carol painted the fence.",
]
RESPONSE = "To the market."


@pytest.mark.parametrize("reuse_prefix", [True, False])
@pytest.mark.parametrize("family", ["llama", "gpt2"])
def test_batched_equals_naive_loop_for_several_batch_sizes(
    family, reuse_prefix, tiny_llama, tiny_gpt2
):
    model = tiny_llama if family == "llama" else tiny_gpt2
    expected = naive_arc_jsd(model, QUERY, SENTENCES, RESPONSE)
    assert expected.shape[1] > 1 and expected.sum() > 0.1  # a real signal to compare
    for max_batch_tokens, overhead in ((1, 0), (300, 10_000), (10_000, 10_000)):
        engine = Engine(
            model,
            max_batch_tokens=max_batch_tokens,
            reuse_prefix=reuse_prefix,
            batch_overhead_tokens=overhead,
            progress=False,
        )
        result = arc_jsd(model, QUERY, SENTENCES, response=RESPONSE, engine=engine)
        np.testing.assert_allclose(result.token_scores, expected, atol=1e-5)
        np.testing.assert_allclose(result.scores, expected.sum(1), atol=1e-5)
        assert result.model_calls == len(SENTENCES) + 1


def test_logits_budget_splits_batches_without_changing_scores(tiny_llama):
    small = Engine(tiny_llama, max_logit_elements=1, reuse_prefix=False, progress=False)
    large = Engine(tiny_llama, reuse_prefix=False, batch_overhead_tokens=10**6, progress=False)
    a = arc_jsd(tiny_llama, QUERY, SENTENCES, response=RESPONSE, engine=small)
    b = arc_jsd(tiny_llama, QUERY, SENTENCES, response=RESPONSE, engine=large)
    np.testing.assert_allclose(a.token_scores, b.token_scores, atol=1e-5)
    assert small.forward_passes == len(SENTENCES) + 1
    assert large.forward_passes == 2


def test_prefix_reuse_processes_fewer_tokens_for_the_same_scores(tiny_llama):
    sentences = [f"Sentence number {i} says something." for i in range(8)]
    plain = Engine(tiny_llama, reuse_prefix=False, progress=False)
    reuse = Engine(tiny_llama, reuse_prefix=True, progress=False)
    a = arc_jsd(tiny_llama, QUERY, sentences, response=RESPONSE, engine=plain)
    b = arc_jsd(tiny_llama, QUERY, sentences, response=RESPONSE, engine=reuse)
    np.testing.assert_allclose(a.token_scores, b.token_scores, atol=1e-5)
    assert reuse.tokens_processed < 0.75 * plain.tokens_processed


@pytest.mark.integration
def test_prefix_reuse_matches_plain_passes_on_the_embedded_model(smollm):
    context = (
        "The Eiffel Tower is in Paris. It was completed in 1889. Bananas are yellow. "
        "The tower is 330 metres tall."
    )
    query = "When was the Eiffel Tower completed?"
    plain = arc_jsd(smollm, query, context, engine=Engine(smollm, reuse_prefix=False))
    assert "1889" in plain.response
    reuse = arc_jsd(smollm, query, context, plain.response_ids, engine=Engine(smollm))
    np.testing.assert_allclose(reuse.token_scores, plain.token_scores, atol=2e-4)
    assert plain.top(1)[0][0].text == "It was completed in 1889."


@pytest.mark.parametrize("window", [32, 4096])
def test_sliding_window_reuses_prefixes_only_inside_the_window(window, monkeypatch):
    """Windowed caches are cut only when every sequence fits the window; both paths are exact."""
    from mechrag.models.toy import tiny_model

    model = tiny_model("mistral")
    monkeypatch.setattr(model.original_model.config, "sliding_window", window)
    engine = Engine(model, progress=False)
    case = Case(model, QUERY, SENTENCES, RESPONSE, engine=engine)
    fits = len(case.builder.ids()) + len(case.response_ids) < window
    assert (engine.reference(case.builder, case.response_ids).cache is None) != fits
    expected = naive_arc_jsd(model, QUERY, SENTENCES, RESPONSE)
    np.testing.assert_allclose(case.arc_jsd().token_scores, expected, atol=1e-5)
    assert fits == (window == 4096)


def test_engine_for_another_model_is_rejected(tiny_llama, tiny_gpt2):
    with pytest.raises(ValueError, match="different model"):
        arc_jsd(tiny_llama, QUERY, SENTENCES, response=RESPONSE, engine=Engine(tiny_gpt2))
