"""``experiments/hierarchical_rules.py`` and its table: the expansion rules replayed on a record
of level-one document scores agree with hierarchical ARC-JSD itself."""

from __future__ import annotations

import runpy

import numpy as np
from helpers import REPO, assert_float32_equal, fresh, sources

from mechrag.attribution.hierarchical import HierarchicalARCJSD, document_masks
from mechrag.sources import Source


def test_replayed_expansion_rules_match_hierarchical_arc_jsd(tiny):
    """``make results`` replays the expansion rules on a record of level-one document scores
    (``experiments/hierarchical_rules.py``): top-1 agreement with exact ARC-JSD and model calls
    as the method's own, a one-sentence document among the others."""
    from result_tables.hierarchical import HIERARCHICAL_RULES, replayed_rule

    root = REPO
    level_one = runpy.run_path(str(root / "experiments" / "hierarchical_rules.py"))["level_one"]
    srcs = [*sources(4, 3), Source("x", "Loose fact.", title="Loose", paragraph=9)]
    exact = fresh(tiny, srcs).arc_jsd()
    record = level_one(fresh(tiny, srcs))
    top_document = HierarchicalARCJSD(documents=1)(fresh(tiny, srcs))
    assert_float32_equal(record["document_scores"], top_document.metadata["document_scores"])
    record.update(exact_scores=exact.scores.tolist(), exact_model_calls=exact.model_calls)
    documents, _ = document_masks(fresh(tiny, srcs))
    top_document = documents.index(srcs[int(np.argmax(exact.scores))].paragraph)
    calls = set()
    for documents, within in [*HIERARCHICAL_RULES, (1, 1e-9), (5, None)]:
        result = HierarchicalARCJSD(documents=documents, within=within)(fresh(tiny, srcs))
        # Agreement read from what the method expanded, not from an argmax over scores that
        # other batches round otherwise.
        agrees = float(top_document in result.metadata["expanded_documents"])
        replayed = replayed_rule(record, documents, within)
        assert replayed == (agrees, result.model_calls), (documents, within)
        calls.add(result.model_calls)
    assert len(calls) >= 4  # the rules differ in cost
