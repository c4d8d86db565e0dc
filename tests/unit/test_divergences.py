"""JSD, KL and TV against scipy and brute-force numpy, including exact zeros."""

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from scipy.spatial.distance import jensenshannon
from scipy.special import rel_entr

from mechrag import jsd, kl, total_variation
from mechrag.divergences import _jsd_unclamped


def random_distributions(rng, shape, zero_fraction=0.3):
    p = rng.random(shape)
    p[rng.random(shape) < zero_fraction] = 0.0
    p[..., 0] += 1e-3  # never all-zero
    return p / p.sum(-1, keepdims=True)


def log(p):
    with np.errstate(divide="ignore"):
        return np.log(p)


def test_jsd_matches_scipy_with_exact_zeros():
    rng = np.random.default_rng(0)
    p, q = random_distributions(rng, (50, 40)), random_distributions(rng, (50, 40))
    ours = jsd(torch.tensor(log(p)), torch.tensor(log(q))).numpy()
    reference = jensenshannon(p, q, axis=-1) ** 2  # natural log by default
    np.testing.assert_allclose(ours, reference, atol=1e-10)


def test_jsd_is_not_the_reversed_kl_variant():
    """The published ARC-JSD code used KL(M||P); that gives a different number."""
    p = np.array([0.9, 0.1, 0.0])
    q = np.array([0.1, 0.1, 0.8])
    m = (p + q) / 2
    reversed_variant = 0.5 * (rel_entr(m, p).sum() + rel_entr(m, q).sum())
    ours = float(jsd(log(p), log(q)))
    assert ours == pytest.approx(jensenshannon(p, q) ** 2, abs=1e-12)
    assert not math.isclose(ours, reversed_variant, rel_tol=1e-3)


def test_disjoint_supports_reach_ln2_and_identical_give_zero():
    """Checked before the clamp too: clamping alone would make both ends look right."""
    p = torch.tensor([0.0, 0.0, 1.0]).log()
    q = torch.tensor([0.5, 0.5, 0.0]).log()
    assert float(_jsd_unclamped(p, q)) == pytest.approx(math.log(2), abs=1e-6)
    assert float(_jsd_unclamped(p, p)) == pytest.approx(0.0, abs=1e-7)
    assert float(jsd(p, q)) == pytest.approx(math.log(2), abs=1e-6)
    assert float(jsd(p, p)) == 0.0


def test_neg_inf_logits_give_no_nan_in_float32():
    logits = torch.tensor([[0.0, -float("inf"), 2.0], [-float("inf"), -float("inf"), 0.0]])
    logp = logits.log_softmax(-1)
    value = jsd(logp, logp.flip(0))
    assert value.dtype == torch.float32
    assert torch.isfinite(value).all()
    expected = jensenshannon(logp[0].exp(), logp[1].exp()) ** 2
    np.testing.assert_allclose(value, [expected, expected], atol=1e-6)


def test_broadcasting_reference_against_batch():
    rng = np.random.default_rng(1)
    ref = torch.tensor(log(random_distributions(rng, (1, 7, 11))))
    batch = torch.tensor(log(random_distributions(rng, (5, 7, 11))))
    assert jsd(ref, batch).shape == (5, 7)
    np.testing.assert_allclose(jsd(ref, batch)[2], jsd(ref[0], batch[2]), atol=1e-12)


def test_kl_and_total_variation_match_brute_force():
    rng = np.random.default_rng(2)
    p, q = random_distributions(rng, (20, 9), 0.0), random_distributions(rng, (20, 9), 0.3)
    np.testing.assert_allclose(kl(log(p), log(q)), rel_entr(p, q).sum(-1), atol=1e-10)
    np.testing.assert_allclose(
        total_variation(log(p), log(q)), 0.5 * np.abs(p - q).sum(-1), atol=1e-12
    )
    assert np.isinf(kl(log(p), log(q))).any()  # q has zeros where p has mass


# No subnormals: the brute-force reference's (p + q) / 2 underflows to 0 for p = 5e-324.
probabilities = st.floats(0, 1, allow_nan=False, allow_subnormal=False)
probability_vectors = (
    arrays(np.float64, st.integers(2, 12), elements=probabilities)
    .filter(lambda a: a.sum() > 1e-6)
    .map(lambda a: a / a.sum())
)


def brute_force_jsd(p, q):
    """``KL(P || M) / 2 + KL(Q || M) / 2`` straight from the definition, in float64 (scipy's
    jensenshannon can return NaN for p ~ q)."""
    p, q = np.asarray(p, dtype=np.float64), np.asarray(q, dtype=np.float64)
    m = (p + q) / 2
    return 0.5 * (rel_entr(p, m).sum(-1) + rel_entr(q, m).sum(-1))


@pytest.mark.parametrize(("dtype", "tolerance"), [(torch.float64, 1e-12), (torch.float32, 1e-6)])
def test_clamp_into_the_range_removes_only_round_off(dtype, tolerance):
    """Before the clamp the value already matches the definition, at both ends of the range
    (identical rows: 0; disjoint supports: ln 2) and between, so the clamp hides no error."""
    rng = np.random.default_rng(3)
    p = random_distributions(rng, (60, 16))
    q = random_distributions(rng, (60, 16))
    q[:20] = p[:20]  # identical: JSD 0
    p[20:40, :8], q[20:40, 8:] = 0.0, 0.0  # disjoint supports: JSD ln 2
    p, q = p / p.sum(-1, keepdims=True), q / q.sum(-1, keepdims=True)
    logp, logq = torch.tensor(log(p), dtype=dtype), torch.tensor(log(q), dtype=dtype)
    raw, clamped = _jsd_unclamped(logp, logq), jsd(logp, logq)
    # The reference sees the distributions the function sees (rounded to dtype).
    reference = brute_force_jsd(logp.double().exp(), logq.double().exp())
    np.testing.assert_allclose(raw.double(), reference, rtol=0, atol=tolerance)
    np.testing.assert_allclose(clamped.double(), raw.double(), rtol=0, atol=tolerance)
    np.testing.assert_allclose(reference[:20], 0.0, atol=1e-15)
    np.testing.assert_allclose(reference[20:40], math.log(2), atol=1e-12)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(probability_vectors, st.data())
def test_jsd_properties(p, data):
    q = data.draw(
        arrays(np.float64, p.shape, elements=probabilities).filter(
            lambda a: a.sum() > 1e-6
        )
    )
    q = q / q.sum()
    value = float(jsd(log(p), log(q)))
    raw = float(_jsd_unclamped(log(p), log(q)))
    assert raw == pytest.approx(brute_force_jsd(p, q), abs=1e-12)
    assert value == pytest.approx(raw, abs=1e-15)  # the clamp only removes round-off
    assert value == pytest.approx(float(jsd(log(q), log(p))), abs=1e-12)
    assert value == pytest.approx(brute_force_jsd(p, q), abs=1e-9)
