"""Sources, sentence splitting and prompt rendering of subsets."""

import numpy as np
import pytest
import torch

from mechrag.engine import Engine
from mechrag.prompts import PromptBuilder, render_context
from mechrag.sources import Source, as_sources, documents_from_texts, split_sentences


def test_split_sentences_handles_abbreviations():
    text = "Dr. Smith went to Washington. He arrived at 5 p.m. on Monday! Was it fun?"
    assert split_sentences(text) == [
        "Dr. Smith went to Washington.",
        "He arrived at 5 p.m. on Monday!",
        "Was it fun?",
    ]


def test_as_sources_accepts_strings_and_sources_and_rejects_duplicates():
    assert [s.id for s in as_sources(["a.", "b."])] == ["p0s0", "p0s1"]
    custom = [Source("x", "A."), Source("y", "B.")]
    assert as_sources(custom) == custom
    with pytest.raises(ValueError, match="unique"):
        as_sources([Source("x", "A."), Source("x", "B.")])


def test_render_context_groups_paragraphs_and_titles():
    sources = [
        Source("p0s0", "One.", "T0", 0),
        Source("p0s1", "Two.", "T0", 0),
        Source("p1s0", "Three.", "T1", 1),
    ]
    assert render_context(sources) == "T0\nOne. Two.\n\nT1\nThree."
    assert render_context(sources[1:]) == "T0\nTwo.\n\nT1\nThree."


def test_documents_from_texts_checks_titles():
    assert [s.paragraph for s in documents_from_texts(["a", "b"])] == [0, 1]
    with pytest.raises(ValueError, match="titles"):
        documents_from_texts(["a", "b"], ["only one"])


def test_builder_renders_subsets_with_chat_template(tiny_llama):
    sources = as_sources(["Alpha one.", "Beta two.", "Gamma three."])
    builder = PromptBuilder(tiny_llama.tokenizer, "Which?", sources)
    text = builder.text(torch.tensor([True, False, True]))
    assert "Alpha one. Gamma three." in text and "Beta" not in text
    assert text.endswith("<|start|>assistant\n")
    assert builder.ids(builder.full_mask()) == builder.ids()
    assert "Context: \n\nQuery: Which?" in builder.text(torch.zeros(3, dtype=torch.bool))


def test_builder_plain_prompt_without_chat_template(tiny_llama):
    sources = as_sources(["Alpha one.", "Beta two."])
    builder = PromptBuilder(tiny_llama.tokenizer, "Which?", sources, use_chat_template=False)
    assert builder.text() == "Context: Alpha one. Beta two.\n\nQuery: Which?\nAnswer:"
    with pytest.raises(ValueError, match="template"):
        PromptBuilder(tiny_llama.tokenizer, "Which?", sources, template="no fields")
    with pytest.raises(ValueError, match="system_prompt needs a chat template"):
        PromptBuilder(
            tiny_llama.tokenizer,
            "Which?",
            sources,
            system_prompt="Be brief.",
            use_chat_template=False,
        )


def test_builder_and_engine_take_numpy_masks_as_torch(tiny_llama):
    """Masks may be numpy (as ``Case`` keeps them) or torch, at every entry."""
    builder = PromptBuilder(tiny_llama.tokenizer, "Which?", as_sources(["A one.", "B two."]))
    numpy_masks = np.array([[True, False], [False, True], [True, True]])
    torch_masks = torch.as_tensor(numpy_masks)
    for numpy_mask, torch_mask in zip(numpy_masks, torch_masks):
        assert builder.text(numpy_mask) == builder.text(torch_mask)
        assert builder.ids(numpy_mask) == builder.ids(torch_mask)
    assert builder.context(numpy_masks[::-1][0]) == "A one. B two."  # a reversed view
    engine = Engine(tiny_llama)
    response = builder.response_ids("Yes.")
    reference = engine.reference(builder, response)
    from_numpy = engine.score(builder, response, numpy_masks, reference)
    from_torch = engine.score(builder, response, torch_masks, reference)
    torch.testing.assert_close(from_numpy.token_logprobs, from_torch.token_logprobs)
    with pytest.raises(ValueError, match="masks must be"):
        engine.score(builder, response, np.ones((1, 3), dtype=bool), reference)
