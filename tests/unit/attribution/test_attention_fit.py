"""The fit of the attention method's head weights: the simplex, the losses, seeds, bad input and
the provenance of weights fitted from records."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy.stats import rankdata

from mechrag.attribution.attention_fit import (
    LOSSES,
    fit_head_weights,
    fit_objective,
    fit_quality,
    project_to_simplex,
    weights_from_records,
)
from mechrag.errors import InputError


def test_simplex_projection_matches_a_brute_force_minimiser():
    rng = np.random.default_rng(1)
    for _ in range(20):
        v = torch.as_tensor(rng.normal(size=4))
        w = project_to_simplex(v)
        assert float(w.sum()) == pytest.approx(1.0) and (w >= 0).all()
        # The projection is the closest simplex point: no random simplex point is closer.
        others = torch.as_tensor(rng.dirichlet(np.ones(4), size=2000))
        assert float((w - v).norm()) <= float((others - v).norm(dim=1).min()) + 1e-12


def test_fit_recovers_known_weights_on_a_synthetic_problem():
    rng = np.random.default_rng(0)
    truth = np.zeros(12)
    truth[[1, 5, 9]] = [0.5, 0.3, 0.2]
    designs = [rng.random((int(rng.integers(6, 20)), 12)) for _ in range(60)]
    targets = [d @ truth for d in designs]
    fitted = fit_head_weights(designs, targets, l2=0.0, steps=3000, learning_rate=0.01, seed=3)
    np.testing.assert_allclose(fitted, truth, atol=0.02)
    assert fitted.min() >= 0 and fitted.sum() == pytest.approx(1.0)
    quality = fit_quality(fitted, designs, targets)
    assert quality["top1"] == 1.0 and quality["spearman"] > 0.99
    uniform = fit_quality(np.full(12, 1 / 12), designs, targets)
    assert uniform["spearman"] < 0.9


def test_fit_objective_matches_a_per_case_reference():
    from scipy.special import softmax

    rng = np.random.default_rng(7)
    designs = [rng.random((size, 5)) for size in (3, 8, 5)]
    targets = [rng.random(len(d)) for d in designs]
    designs.append(rng.random((4, 5)))
    targets.append(np.full(4, 0.2))  # constant: dropped from the objective
    weights = rng.dirichlet(np.ones(5))

    def z(values):
        return (values - values.mean()) / values.std()

    varying = list(zip(designs[:3], targets))
    pearson = np.mean([1 - np.corrcoef(d @ weights, y)[0, 1] for d, y in varying])
    assert fit_objective(weights, designs, targets) == pytest.approx(pearson, rel=1e-12)
    kl = []
    for d, y in varying:
        p, q = softmax(z(y) / 0.3), softmax(z(d @ weights) / 0.3)
        kl.append(np.sum(p * np.log(p / q)))
    listwise = fit_objective(weights, designs, targets, loss="listwise", temperature=0.3)
    assert listwise == pytest.approx(np.mean(kl), rel=1e-10)
    ranks = fit_objective(weights, designs, targets, target="ranks")
    reference = [1 - np.corrcoef(d @ weights, rankdata(y))[0, 1] for d, y in varying]
    assert ranks == pytest.approx(np.mean(reference), rel=1e-12)


def test_listwise_fit_recovers_known_weights():
    rng = np.random.default_rng(0)
    truth = np.zeros(12)
    truth[[1, 5, 9]] = [0.5, 0.3, 0.2]
    designs = [rng.random((int(rng.integers(6, 20)), 12)) for _ in range(30)]
    targets = [d @ truth for d in designs]
    fitted = fit_head_weights(
        designs, targets, l2=0.0, loss="listwise", steps=400, learning_rate=0.02, seed=3
    )
    np.testing.assert_allclose(fitted, truth, atol=1e-3)


def test_listwise_fit_favours_the_head_that_finds_the_top_source():
    # Two heads that no mix makes perfect: one ranks the other sources but puts the top source
    # last, one finds the top source but reverses the rest. A correlation weighs every source
    # alike; the low-temperature listwise loss weighs the top of the ranking.
    rng = np.random.default_rng(0)
    designs, targets = [], []
    for _ in range(20):
        y = rng.normal(size=10)
        top = int(np.argmax(y))
        bulk = y - y.min()
        bulk[top] = 0.0
        pointer = (y.max() - y) / 10
        pointer[top] = 1.0
        designs.append(np.stack([bulk, pointer], 1))
        targets.append(y)
    settings = {"l2": 0.0, "temperature": 0.1, "steps": 300, "learning_rate": 0.02}
    fitted = {loss: fit_head_weights(designs, targets, loss=loss, **settings) for loss in LOSSES}
    top1 = {loss: fit_quality(w, designs, targets)["top1"] for loss, w in fitted.items()}
    assert top1["listwise"] >= 0.85 > top1["pearson"]
    assert fitted["listwise"][1] > fitted["pearson"][1]  # more weight on the top-finding head


def test_fit_is_seeded_and_regularised():
    rng = np.random.default_rng(2)
    designs = [rng.random((8, 6)) for _ in range(10)]
    targets = [rng.random(8) for _ in range(10)]
    a = fit_head_weights(designs, targets, seed=4, steps=50)
    np.testing.assert_array_equal(a, fit_head_weights(designs, targets, seed=4, steps=50))
    spread = fit_head_weights(designs, targets, l2=10.0, steps=300)
    np.testing.assert_allclose(spread, np.full(6, 1 / 6), atol=0.02)
    with pytest.raises(InputError, match="target"):
        fit_head_weights(designs, targets, target="logits")
    with pytest.raises(InputError, match="loss"):
        fit_head_weights(designs, targets, loss="hinge")
    with pytest.raises(InputError, match="temperature"):
        fit_head_weights(designs, targets, loss="listwise", temperature=0.0)
    with pytest.raises(InputError, match="finite"):
        fit_head_weights(designs, [*targets[:-1], np.full(8, np.nan)])
    for bad in (rng.random((8, 5)), rng.random((7, 6)), np.full((8, 6), np.inf)):
        with pytest.raises(InputError, match="each design"):
            fit_head_weights([*designs[:-1], bad], targets)


@pytest.mark.parametrize("loss", LOSSES)
def test_fit_survives_a_case_no_head_tells_apart(loss):
    # Every head pays each source the same attention in the first case: its prediction is
    # zero for any weights, which must leave the gradient finite.
    rng = np.random.default_rng(3)
    designs = [np.ones((4, 3)), rng.random((5, 3))]
    targets = [rng.random(4), rng.random(5)]
    fitted = fit_head_weights(designs, targets, loss=loss, steps=20)
    assert np.all(np.isfinite(fitted)) and fitted.sum() == pytest.approx(1.0)


def test_weights_from_records_hold_their_provenance(tiny):
    rng = np.random.default_rng(5)
    n_heads = tiny.cfg.n_layers * tiny.cfg.n_heads
    truth = rng.dirichlet(np.ones(n_heads))
    records = []
    for _ in range(8):
        design = rng.random((6, n_heads))
        records.append(
            {
                "design": design.tolist(),
                "scores": (design @ truth).tolist(),
                "heads": rng.random((tiny.cfg.n_layers, tiny.cfg.n_heads)).tolist(),
            }
        )
    weights = weights_from_records(records, tiny, l2=0.0, provenance={"data": "synthetic"})
    assert weights.provenance["data"] == "synthetic"
    quality = weights.provenance["quality"]
    assert quality["validation"]["n"] == 2 and quality["train"]["n"] == 8
    assert quality["train"]["spearman"] > 0.9
    designs = [np.asarray(r["design"]) for r in records]
    targets = [np.asarray(r["scores"]) for r in records]
    expected = fit_objective(weights.fitted.reshape(-1), designs, targets)
    assert quality["train"]["objective"] == pytest.approx(expected)
    assert "temperature" not in weights.provenance["fit"]  # a Pearson fit has none
    assert weights.fitted.shape == (tiny.cfg.n_layers, tiny.cfg.n_heads)
    weights.check(tiny)


def test_a_two_case_fit_still_holds_one_out():
    from mechrag.attribution.attention_fit import _split

    train, held_out = _split(2, 0.25, seed=0)
    assert len(train) == 1 and len(held_out) == 1
    with pytest.raises(InputError, match="validation"):
        _split(4, 1.0, seed=0)
