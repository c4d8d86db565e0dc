"""ARC-JSD equals a plain per-ablation loop, a generated response is greedy decoding, bad input
fails clearly (batch sizes, budgets and prefix reuse of the engine: test_engine.py)."""

import numpy as np
import pytest
import torch
from helpers import naive_arc_jsd

from mechrag import Case, arc_jsd

QUERY = "Where did Alice go?"
SENTENCES = [
    "Alice went to the market.",
    "Bob stayed home all day.",
    "The market sells fresh fish.",
    "Carol painted the fence.",
]
RESPONSE = "To the market."


def test_context_string_is_split_into_sentences(tiny_llama):
    result = arc_jsd(tiny_llama, QUERY, " ".join(SENTENCES), response=RESPONSE)
    assert [s.text for s in result.sources] == SENTENCES
    expected = naive_arc_jsd(tiny_llama, QUERY, SENTENCES, RESPONSE)
    np.testing.assert_allclose(result.token_scores, expected, atol=1e-5)


def test_generated_response_matches_uncached_greedy_decoding(tiny_llama):
    case = Case(tiny_llama, QUERY, SENTENCES, max_new_tokens=6)
    generated = case.response_ids
    ids = case.builder.ids()
    expected = []
    with torch.no_grad():
        for _ in range(len(generated)):
            token = int(tiny_llama(torch.tensor([ids + expected]))[0, -1].argmax())
            expected.append(token)
    assert generated == expected


@pytest.mark.parametrize(
    ("query", "sources", "response", "error", "message"),
    [
        (QUERY, "", RESPONSE, ValueError, "context is empty"),
        (QUERY, "   \n ", RESPONSE, ValueError, "context is empty"),
        (QUERY, ["Only one sentence."], RESPONSE, ValueError, "at least 2"),
        ("  ", SENTENCES, RESPONSE, ValueError, "query is empty"),
        (42, SENTENCES, RESPONSE, TypeError, "query must be a string"),
        (QUERY, [1, 2], RESPONSE, TypeError, "sources must all be strings"),
        (QUERY, 7, RESPONSE, TypeError, "sources must be"),
        (QUERY, ["A.", " "], RESPONSE, ValueError, "empty text"),
        (QUERY, SENTENCES, "", ValueError, "response is empty"),
        (QUERY, SENTENCES, [], ValueError, "response is empty"),
        (QUERY, SENTENCES, [5, 10**6], ValueError, "token ids must lie"),
        (QUERY, ["word " * 300, "more " * 200], RESPONSE, ValueError, "longer than the model"),
    ],
)
def test_bad_input_is_rejected_clearly(tiny_llama, query, sources, response, error, message):
    with pytest.raises(error, match=message):
        arc_jsd(tiny_llama, query, sources, response=response)


