"""Hierarchical ARC-JSD: documents first, then the sentences of the top ones, exactly; the
screen inside it; its settings."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import assert_float32_equal, fresh, sources
from scipy.stats import spearmanr

from mechrag.attribution.hierarchical import (
    HierarchicalARCJSD,
    document_masks,
    expanded_documents,
)
from mechrag.errors import InputError
from mechrag.sources import Source


def test_document_masks_group_by_paragraph(tiny):
    case = fresh(tiny, [*sources(2, 2), Source("x", "Loose fact.")])
    documents, removed = document_masks(case)
    assert documents == [0, 1, ("source", 4)]
    np.testing.assert_array_equal(~removed, [[1, 1, 0, 0, 0], [0, 0, 1, 1, 0], [0, 0, 0, 0, 1]])


def test_hierarchical_with_every_document_equals_exact(tiny):
    exact = fresh(tiny).arc_jsd()
    case = fresh(tiny)
    result = HierarchicalARCJSD(documents=4)(case)
    assert_float32_equal(result.scores, exact.scores)
    assert_float32_equal(result.token_scores, exact.token_scores)
    assert result.model_calls == exact.model_calls == 13
    assert all(result.metadata["exact"])


def test_hierarchical_scores_expanded_sentences_exactly_and_ranks_the_rest_below(tiny):
    exact = fresh(tiny).arc_jsd()
    case = fresh(tiny)
    result = HierarchicalARCJSD(documents=1)(case)
    documents, removed = document_masks(case)
    document_scores = case.token_divergences(removed).sum(-1)
    np.testing.assert_allclose(result.metadata["document_scores"], document_scores)
    top = int(np.argmax(document_scores))
    inside = np.flatnonzero(~removed[top])
    assert_float32_equal(result.scores[inside], exact.scores[inside])
    outside = np.setdiff1d(np.arange(case.n_sources), inside)
    assert result.scores[outside].max() < result.scores[inside].min()
    # Unexpanded sentences rank by their document's score per sentence.
    share = document_scores[[case.sources[i].paragraph for i in outside]] / 3
    assert spearmanr(result.scores[outside], share).statistic == pytest.approx(1.0)
    # Cost: the full context, four documents, three sentences.
    assert result.model_calls == 1 + 4 + 3
    assert result.forward_passes <= result.model_calls


def test_hierarchical_subsets_join_the_cache(tiny):
    case = fresh(tiny)
    HierarchicalARCJSD(documents=1)(case)
    assert case.subsets_scored == 4 + 3  # the documents and the top document's sentences
    case.arc_jsd()
    assert case.subsets_scored == 4 + 12  # exact ARC-JSD scored only the nine others


def test_hierarchical_composes_with_the_screen(tiny):
    case = fresh(tiny)
    result = HierarchicalARCJSD(documents=2, screen=2)(case)
    exact_flags = np.asarray(result.metadata["exact"])
    assert exact_flags.sum() == 2
    expanded_ids = result.metadata["expanded_documents"]
    expanded = np.isin([s.paragraph for s in case.sources], expanded_ids)
    assert expanded[exact_flags].all()
    reference = fresh(tiny).arc_jsd()
    assert_float32_equal(result.scores[exact_flags], reference.scores[exact_flags])
    # Exact first, then the other expanded sentences, then the rest.
    tiers = [exact_flags, expanded & ~exact_flags, ~expanded]
    for upper, lower in zip(tiers, tiers[1:]):
        assert result.scores[upper].min() > result.scores[lower].max()


def test_expanded_documents_take_the_top_ones_those_within_reach_and_single_sentences():
    scores = np.array([0.3, 1.0, 0.6, 0.05, 0.2])
    sizes = np.array([3, 3, 3, 1, 3])
    np.testing.assert_array_equal(expanded_documents(scores, sizes, 1), [0, 1, 0, 1, 0])
    np.testing.assert_array_equal(expanded_documents(scores, sizes, 2), [0, 1, 1, 1, 0])
    np.testing.assert_array_equal(expanded_documents(scores, sizes, 1, 0.5), [0, 1, 1, 1, 0])
    np.testing.assert_array_equal(expanded_documents(scores, sizes, 1, 0.25), [1, 1, 1, 1, 0])
    # No document moves the response: only the top ones by order.
    np.testing.assert_array_equal(expanded_documents(np.zeros(5), sizes, 1, 0.5), [1, 0, 0, 1, 0])


def test_hierarchical_within_expands_every_document_near_the_top(tiny):
    case = fresh(tiny)
    result = HierarchicalARCJSD(documents=1, within=1e-9)(case)
    assert result.metadata["expanded_documents"] == [0, 1, 2, 3]
    assert_float32_equal(result.scores, fresh(tiny).arc_jsd().scores)
    assert result.model_calls == 1 + 4 + 12


def test_hierarchical_refuses_bad_settings(tiny):
    with pytest.raises(InputError, match="documents"):
        HierarchicalARCJSD(documents=0)
    with pytest.raises(InputError, match="within"):
        HierarchicalARCJSD(within=1.5)
    with pytest.raises(InputError, match="budget"):
        fresh(tiny).attribute("hierarchical", budget=3)


def test_one_sentence_documents_stay_exact_under_the_screen(tiny):
    srcs = [Source("p9s0", "Ana lives in Oslo, a cold city.", "Solo", 9), *sources(3, 3)]
    exact = fresh(tiny, srcs).arc_jsd()
    result = HierarchicalARCJSD(documents=2, screen=1)(fresh(tiny, srcs))
    flags = np.asarray(result.metadata["exact"])
    assert flags[0] and flags.sum() == 2  # the one-sentence document, and the screen's pick
    assert_float32_equal(result.scores[flags], exact.scores[flags])
    assert result.scores[flags].min() > result.scores[~flags].max()
