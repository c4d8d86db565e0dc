"""WARG, Wasted Retrieval / Noise Distraction, perturbation curves and AIPC on hand-made cases."""

from __future__ import annotations

import numpy as np
import pytest

from mechrag.metrics.alignment import (
    aipc,
    alignment_flags,
    bootstrap_ci,
    generator_high_set,
    noise_distraction,
    perturbation_curves,
    position_scores,
    ranks,
    removal_masks,
    warg,
    wasted_retrieval,
)

RETRIEVER = np.array([0.9, 0.8, 0.5, 0.3, 0.1])


def test_high_set_threshold_is_tau_over_n_of_positive_mass():
    # positive mass 4: normalised [0.5, 0.25, 0.25, 0, -0.25]; threshold 1.5 / 5 = 0.3
    generator = np.array([2.0, 1.0, 1.0, 0.0, -1.0])
    assert generator_high_set(generator).tolist() == [True, False, False, False, False]
    assert generator_high_set(generator, tau=1.0).tolist() == [True, True, True, False, False]


def test_warg_hand_computed_cases():
    assert warg(RETRIEVER, [1, 0, 0, 0, 0]) == pytest.approx(1.0)
    # H = {1}: gap 0.8 - mean(0.9, 0.5, 0.3, 0.1) = 0.35; oracle 0.9 - 0.45... = 0.475
    assert warg(RETRIEVER, [0, 1, 0, 0, 0]) == pytest.approx(0.35 / 0.475)
    # H = {0, 2}: gap 0.7 - 0.4 = 0.3; oracle top-2 0.85 - 0.3 = 0.55
    assert warg(RETRIEVER, [1, 0, 1, 0, 0]) == pytest.approx(0.3 / 0.55)
    # H = {3}: gap 0.3 - 0.575 = -0.275; oracle 0.475
    assert warg(RETRIEVER, [0, 0, 0, 1, 0]) == pytest.approx(-0.275 / 0.475)
    # H = {4}: gap -0.525 is larger than the oracle 0.475: clipped
    assert warg(RETRIEVER, [0, 0, 0, 0, 1]) == -1.0


def test_warg_ignores_document_order_and_score_scale():
    order = np.array([3, 0, 4, 2, 1])
    generator = np.array([0.1, 3.0, 0.2, 2.0, 0.0])
    expected = warg(RETRIEVER, generator)
    assert warg(RETRIEVER[order], generator[order]) == pytest.approx(expected)
    assert warg(2 * RETRIEVER + 1, 10 * generator) == pytest.approx(expected)


def test_warg_degenerate_cases_are_zero_not_nan():
    assert warg(RETRIEVER, np.zeros(5)) == 0.0  # h = 0: no positive attribution
    assert warg(RETRIEVER, -np.ones(5)) == 0.0  # h = 0
    assert warg(RETRIEVER, np.full(5, 0.2)) == 0.0  # uniform: nobody above 1.5 / 5
    assert warg(RETRIEVER, np.ones(5), tau=0.5) == 0.0  # h = |D|
    assert warg(np.full(5, 0.4), [1, 0, 0, 0, 0]) == 0.0  # tied retriever: no oracle gap
    assert warg([0.7], [1.0]) == 0.0  # one document: h = |D|


POSITIONS = position_scores(5)  # [4, 3, 2, 1, 0]: prompt slot 0 highest


def _rag_e_code_warg(retriever, generator, tau=1.5) -> float:
    """RAG-E's official ``RAGExplanation.warg`` (k-randl/Interpretable_RAG, rag.py), as written:
    the oracle takes the first ``h`` scores in list order."""
    retriever, generator = np.asarray(retriever, float), np.asarray(generator, float)
    n = len(generator)
    generator = generator / np.sum([1e-9] + generator[generator > 0].tolist())
    w = generator > tau / n
    h = int(w.sum())
    high = np.mean(retriever[w]) if w.any() else 0.0
    low = np.mean(retriever[~w]) if (~w).any() else 0.0
    base_high = np.mean(retriever[:h]) if h > 0 else retriever[0]
    base_low = np.mean(retriever[h:]) if h < n else retriever[-1]
    denominator = base_high - base_low
    return float(np.clip((high - low) / denominator if denominator != 0 else np.nan, -1, 1))


def test_position_scores_count_down_from_the_first_slot():
    assert POSITIONS.tolist() == [4.0, 3.0, 2.0, 1.0, 0.0]
    assert position_scores(1).tolist() == [0.0]
    assert ranks(POSITIONS).tolist() == [1, 2, 3, 4, 5]
    with pytest.raises(ValueError):
        position_scores(0)


def test_warg_with_position_scores_hand_computed():
    # H = {1}: gap 3 - (4 + 2 + 1 + 0) / 4 = 1.25; oracle 4 - (3 + 2 + 1 + 0) / 4 = 2.5
    assert warg(POSITIONS, [0, 1, 0, 0, 0]) == pytest.approx(0.5)
    # H = {0, 2}: gap 3 - 4 / 3 = 5 / 3; oracle 3.5 - 1 = 2.5
    assert warg(POSITIONS, [1, 0, 1, 0, 0]) == pytest.approx(2 / 3)
    # H = {3}: gap 1 - 9 / 4 = -1.25
    assert warg(POSITIONS, [0, 0, 0, 1, 0]) == pytest.approx(-0.5)
    # H = {4}: gap 0 - 10 / 4 = -2.5, exactly minus the oracle (no clipping needed)
    assert warg(POSITIONS, [0, 0, 0, 0, 1]) == pytest.approx(-1.0)
    assert warg(POSITIONS, [5, 4, 0, 0, 0]) == pytest.approx(1.0)  # H = the first two slots


def test_position_scores_follow_the_slot_not_the_document():
    """c3-like prompt: two random documents first, then the two retrieved. A generator that reads
    the retrieved documents agrees with the similarities and disagrees with the positions."""
    similarities = np.array([0.1, 0.2, 0.9, 0.8])
    generator = np.array([0.0, 0.0, 1.0, 1.0])  # H = {2, 3}
    assert warg(similarities, generator) == pytest.approx(1.0)  # gap 0.85 - 0.15 = oracle
    # positions [3, 2, 1, 0]: gap 0.5 - 2.5 = -2, oracle 2.5 - 0.5 = 2
    assert warg(position_scores(4), generator) == pytest.approx(-1.0)
    assert not wasted_retrieval(similarities, generator, 2)  # the best document (2) is read
    assert wasted_retrieval(position_scores(4), generator, 2)  # slot 0 (random) is not


def test_warg_with_position_scores_degenerate_cases_are_zero():
    # h = 0 (RAG-E's code: (0 - 2) / (4 - 2) = -1) and h = n (code: (2 - 0) / (2 - 0) = 1)
    assert warg(POSITIONS, np.zeros(5)) == 0.0 and _rag_e_code_warg(POSITIONS, np.zeros(5)) == -1
    assert warg(POSITIONS, np.ones(5), tau=0.5) == 0.0
    assert _rag_e_code_warg(POSITIONS, np.ones(5), tau=0.5) == 1.0
    # one document: the only split is h = 0 or h = n, the oracle gap is 0 (code: NaN)
    assert warg(position_scores(1), [1.0]) == 0.0
    assert np.isnan(_rag_e_code_warg(position_scores(1), [1.0]))


def test_warg_with_position_scores_equals_rag_e_code_where_defined():
    """With descending scores the code's unsorted oracle is the sorted one: same values."""
    rng = np.random.default_rng(0)
    checked = 0
    for _ in range(500):
        n = int(rng.integers(2, 11))
        generator = rng.normal(size=n) * (rng.random(n) < 0.6)
        h = int(generator_high_set(generator).sum())
        if 0 < h < n:
            positions = position_scores(n)
            assert warg(positions, generator) == pytest.approx(
                _rag_e_code_warg(positions, generator)
            )
            checked += 1
    assert checked > 300
    # ... while for unordered similarities the code's oracle is not the top h
    similarities = np.array([0.1, 0.9, 0.5])
    assert warg(similarities, [0, 1, 0]) == pytest.approx(1.0)
    assert _rag_e_code_warg(similarities, [0, 1, 0]) == -1.0  # (0.9 - 0.3) / (0.1 - 0.7), clipped


def test_c1_positions_rank_like_similarities():
    """In c1 the prompt is the ranking: positions and similarities give the same ranks, flags
    and Spearman (WARG differs: positions are evenly spaced)."""
    similarities = RETRIEVER  # descending, as the top k in rank order
    rng = np.random.default_rng(1)
    assert ranks(POSITIONS).tolist() == ranks(similarities).tolist()
    for _ in range(50):
        generator = rng.normal(size=5)
        assert alignment_flags(POSITIONS, generator) == alignment_flags(similarities, generator)
    assert warg(POSITIONS, [0, 1, 0, 0, 0]) != pytest.approx(warg(similarities, [0, 1, 0, 0, 0]))


def test_wasted_retrieval_and_noise_distraction():
    generator = np.array([0.0, 0.1, 0.9, 0.3, 0.2])  # generator ranks: 2, 3, 4, 1, 0
    assert wasted_retrieval(RETRIEVER, generator, 1)  # retriever's top (0) is generator rank 5
    assert wasted_retrieval(RETRIEVER, generator, 3)
    assert not wasted_retrieval(RETRIEVER, generator, 5)
    assert noise_distraction(RETRIEVER, generator, 1)  # generator's top (2) is retriever rank 3
    assert not noise_distraction(RETRIEVER, generator, 3)
    flags = alignment_flags(RETRIEVER, RETRIEVER)
    assert not any(flags.values()) and sorted(flags) == sorted(
        f"{m}@{k}" for m in ("wr", "nd") for k in (1, 3, 5)
    )


def test_removal_masks_remove_in_order():
    masks = removal_masks([2, 0, 1], 3)
    assert masks.tolist() == [
        [True, True, True],
        [True, True, False],
        [False, True, False],
        [False, False, False],
    ]


def test_aipc_on_additive_function_with_known_ordering():
    weights = np.array([5.0, 1.0, 3.0, 0.0, 2.0])

    def value(masks):
        return masks @ weights

    curves = perturbation_curves(value, weights)
    # MoRF removes 5, 3, 2, 1, 0; LeRF removes 0, 1, 2, 3, 5 (drops normalised by 11)
    np.testing.assert_allclose(curves["morf"], np.cumsum([0, 5, 3, 2, 1, 0]) / 11)
    np.testing.assert_allclose(curves["lerf"], np.cumsum([0, 0, 1, 2, 3, 5]) / 11)
    expected = np.trapezoid(curves["morf"] - curves["lerf"], curves["fractions"])
    assert aipc(value, weights) == pytest.approx(expected)
    assert aipc(value, weights) > 0.3
    assert aipc(value, -weights) == pytest.approx(-aipc(value, weights))  # inverted ordering
    rng = np.random.default_rng(0)
    shuffled = [aipc(value, rng.permutation(weights)) for _ in range(200)]
    assert abs(np.mean(shuffled)) < 0.05  # random orderings average to ~0


def test_aipc_flat_value_is_zero():
    assert aipc(lambda masks: np.zeros(len(masks)), np.arange(4.0)) == 0.0


def test_bootstrap_ci_is_seeded_and_brackets_the_mean():
    values = np.random.default_rng(1).normal(0.3, 1.0, 200)
    mean, low, high = bootstrap_ci(values, seed=7)
    assert low < mean < high and mean == pytest.approx(values.mean())
    assert bootstrap_ci(values, seed=7) == (mean, low, high)


def test_ranks_count_from_one_and_keep_ties_in_order():
    assert ranks(np.array([0.2, 0.9, 0.2, 0.5])).tolist() == [3, 1, 4, 2]
