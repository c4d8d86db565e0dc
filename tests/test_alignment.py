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
