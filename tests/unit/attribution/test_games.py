"""Value functions on a case: formulas, caching, counting, and exact Shapley on them."""

from __future__ import annotations

from itertools import combinations
from math import factorial

import numpy as np
import pytest
import torch

from mechrag import Case, Engine
from mechrag.attribution.estimators import shapley_values
from mechrag.attribution.sampling import all_masks
from mechrag.divergences import jsd

DOCS = ["Ana lives in Oslo.", "Bo likes tea.", "Oslo is cold.", "Cy is tall."]


@pytest.fixture
def case(tiny_llama):
    return Case(tiny_llama, "Where does Ana live?", DOCS, response="Oslo.")


def one_at_a_time(model, query, docs, response, masks) -> tuple[np.ndarray, np.ndarray]:
    """Per-token log P(r_t) and JSD from the full context, one unpadded pass per mask."""
    reference = Case(model, query, docs, response, engine=Engine(model, reuse_prefix=False))
    targets = torch.as_tensor(reference.response_ids)[:, None]
    n = len(reference.response_ids)
    full = None
    logprobs, divergences = [], []
    for mask in [np.ones(len(docs), dtype=bool), *masks]:
        ids = reference.builder.ids(torch.as_tensor(mask)) + reference.response_ids[:-1]
        with torch.no_grad():
            row = model(torch.tensor([ids]))[0, -n:].double().log_softmax(-1)
        full = row if full is None else full
        logprobs.append(row.gather(-1, targets)[:, 0].numpy())
        divergences.append(jsd(full, row).numpy())
    return np.stack(logprobs[1:]), np.stack(divergences[1:])


def test_values_follow_independent_passes(case):
    masks = np.array([[1, 0, 1, 0], [0, 0, 0, 0], [1, 1, 1, 1]], dtype=bool)
    direct, divergence = one_at_a_time(
        case.model, case.query, DOCS, "Oslo.", masks
    )
    np.testing.assert_allclose(case.token_logprobs(masks), direct, atol=1e-5)
    np.testing.assert_allclose(case.token_divergences(masks), divergence, atol=1e-5)
    np.testing.assert_allclose(case.game("logprob")(masks), direct.sum(1), atol=1e-5)
    np.testing.assert_allclose(case.game("token_prob")(masks), np.exp(direct), rtol=1e-5)
    p = np.exp(direct)
    per_token = np.log(p / (1 - p)).sum(1)
    np.testing.assert_allclose(case.game("total_token_logit_prob")(masks), per_token, rtol=1e-4)
    response = p.prod(1)  # ContextCite's target: the log-odds of the whole response
    np.testing.assert_allclose(
        case.game("logit_prob")(masks), np.log(response / (1 - response)), rtol=1e-4
    )
    assert case.token_divergences(masks)[2].max() < 1e-7  # the full context against itself


def test_empty_subset_renders_query_alone(case):
    text = case.builder.text(torch.as_tensor(case.empty_mask()))
    assert "Where does Ana live?" in text and not any(doc in text for doc in DOCS)


def test_subsets_are_scored_once(case):
    masks = np.array([[1, 1, 0, 0], [1, 1, 0, 0], [0, 1, 1, 1]], dtype=bool)
    first = case.game("logprob")(masks)
    assert case.subsets_scored == 2
    passes = case.engine.forward_passes
    second = case.game("token_prob")(masks[::-1])
    divergences = case.token_divergences(masks, "kl")
    assert case.engine.forward_passes == passes, "cached subsets were re-run"
    assert first[0] == first[1] and second.shape == (3, len(case.response_ids))
    assert divergences.shape == (3, len(case.response_ids))


def test_interventions_get_their_own_cache(case):
    from mechrag import ablate

    masks = case.leave_one_out_masks()
    clean = case.token_logprobs(masks)
    with ablate(case.model, heads=[(0, 0), (1, 2)], mlps=[0]):
        ablated = case.token_logprobs(masks)
        fresh = Case(case.model, case.query, DOCS, "Oslo.").token_logprobs(masks)
    np.testing.assert_allclose(ablated, fresh, atol=1e-6)
    assert not np.allclose(ablated, clean)
    np.testing.assert_array_equal(case.token_logprobs(masks), clean)  # clean cache kept


def test_bad_values(case):
    with pytest.raises(ValueError, match="unknown value"):
        case.game("prob")


def brute_force_shapley(values: dict[frozenset, float], n: int) -> np.ndarray:
    """The Shapley formula written out over explicit subsets."""
    phi = np.zeros(n)
    for i in range(n):
        others = [j for j in range(n) if j != i]
        for size in range(n):
            weight = factorial(size) * factorial(n - size - 1) / factorial(n)
            for subset in combinations(others, size):
                s = frozenset(subset)
                phi[i] += weight * (values[s | {i}] - values[s])
    return phi


def test_exact_shapley_on_tiny_model_matches_brute_force(case):
    phi = shapley_values(case.game("logprob"), 4, "exact")
    masks = all_masks(4)
    logprobs, _ = one_at_a_time(case.model, case.query, DOCS, "Oslo.", masks)
    values = {frozenset(np.flatnonzero(m)): float(v) for m, v in zip(masks, logprobs.sum(1))}
    np.testing.assert_allclose(phi, brute_force_shapley(values, 4), atol=1e-4)
    assert case.subsets_scored == 16


@pytest.mark.integration
def test_exact_shapley_on_embedded_model_six_documents(smollm):
    torch.set_num_threads(1)
    docs = [
        "Mira lives in Tarn.",
        "Tarn is by the sea.",
        "Olek sells fish.",
        "Mira was born in Vell.",
        "The sea is calm.",
        "Olek lives in Vell.",
    ]
    case = Case(smollm, "Where does Mira live?", docs, response="Tarn")
    phi = shapley_values(case.game("logprob"), 6, "exact")
    masks = all_masks(6)  # one subset at a time, independently of the case's batching
    logprobs, _ = one_at_a_time(smollm, case.query, docs, "Tarn", masks)
    values = {frozenset(np.flatnonzero(m)): float(v) for m, v in zip(masks, logprobs.sum(1))}
    np.testing.assert_allclose(phi, brute_force_shapley(values, 6), atol=2e-3)
