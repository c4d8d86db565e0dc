"""``attribute``: every method through one entry point, on the tiny model."""

from __future__ import annotations

import numpy as np
import pytest

from mechrag.attribution.api import ATTRIBUTION_METHODS, attribute
from mechrag.attribution.arc_jsd import arc_jsd
from mechrag.attribution.context import AttributionTask
from mechrag.attribution.games import SubsetScorer
from mechrag.attribution.shapley import exact_shapley

QUERY = "Where does Ana live?"
DOCS = ["Ana lives in Oslo.", "Bo likes tea.", "Oslo is cold.", "Cy is tall."]


def test_arc_jsd_matches_direct_call(tiny_llama):
    ours = attribute(tiny_llama, QUERY, DOCS, "arc_jsd", response="Oslo.")
    direct = arc_jsd(tiny_llama, QUERY, DOCS, response="Oslo.")
    np.testing.assert_allclose(ours.scores, direct.scores)
    np.testing.assert_allclose(ours.token_scores, direct.token_scores)


def test_exact_matches_game_and_counts_calls(tiny_llama):
    result = attribute(tiny_llama, QUERY, DOCS, "exact", response="Oslo.")
    task = AttributionTask.prepare(tiny_llama, QUERY, DOCS, "Oslo.")
    np.testing.assert_allclose(result.scores, exact_shapley(SubsetScorer(task).game(), 4))
    assert result.model_calls == 16 and result.token_scores is None
    assert result.metadata["value"] == "logprob"


@pytest.mark.parametrize("method", [m for m in ATTRIBUTION_METHODS if m != "arc_jsd"])
def test_budgets_and_per_token_scores(tiny_llama, method):
    result = attribute(
        tiny_llama,
        QUERY,
        DOCS,
        method,
        budget=None if method in ("exact", "loo") else 10,
        response="Oslo.",
        value="token_prob",
        seed=1,
    )
    assert result.token_scores.shape == (4, len(result.response_ids))
    np.testing.assert_allclose(result.scores, result.token_scores.sum(1))
    assert result.model_calls <= {"exact": 16, "loo": 5}.get(method, 10)


def test_bad_inputs(tiny_llama):
    with pytest.raises(ValueError, match="unknown method"):
        attribute(tiny_llama, QUERY, DOCS, "shap", response="Oslo.")
    with pytest.raises(ValueError, match="arc_jsd scores"):
        attribute(tiny_llama, QUERY, DOCS, "arc_jsd", budget=10, response="Oslo.")
