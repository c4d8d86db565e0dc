"""Gating rules on a hand-made ComponentAttribution: the documented formulas, one by one."""

from __future__ import annotations

import numpy as np
import pytest

from mechrag.mechanism.gates import Gates
from mechrag.mechanism.gating_rules import GatingRule, random_gates, sigmoid
from mechrag.mechanism.result import ComponentAttribution

# 2 layers x 3 heads + 2 MLPs; flat order L0H0 L0H1 L0H2 L1H0 L1H1 L1H2 MLP0 MLP1.
SCORES = np.array([[0.9, 0.1, 0.5], [0.7, 0.05, 0.3]])
MLPS = np.array([0.8, 0.2])
HEAD_GAIN = np.array([[-0.2, 0.3, 0.1], [0.4, -0.5, -0.1]])
MLP_GAIN = np.array([-0.3, 0.2])


def _attribution(gains: bool = True) -> ComponentAttribution:
    return ComponentAttribution(
        query="q",
        source_id="s0",
        response="r",
        response_ids=[1],
        heads=SCORES,
        mlps=MLPS,
        resid_post=np.zeros(2),
        head_gain=HEAD_GAIN if gains else None,
        attn_gain=np.zeros(2) if gains else None,
        mlp_gain=MLP_GAIN if gains else None,
    )


def test_damp_gates_only_top_k_with_negative_gain():
    # Top 4 by JSD: L0H0 (0.9, gain -0.2), MLP0 (0.8, -0.3), L1H0 (0.7, +0.4), L0H2 (0.5, +0.1).
    gates = GatingRule("damp", k=4, factor=0.25).gates(_attribution())
    assert gates == Gates(heads={(0, 0): 0.25}, mlps={0: 0.25})


def test_sigmoid_rule_formula():
    rule = GatingRule("sigmoid", k=3, factor=0.2, scale=0.1)
    gates = rule.gates(_attribution())
    expected = {
        name: 0.2 + 0.8 * sigmoid(g / 0.1)
        for name, g in [("h00", -0.2), ("m0", -0.3), ("h10", 0.4)]
    }
    assert gates.heads == pytest.approx({(0, 0): expected["h00"], (1, 0): expected["h10"]})
    assert gates.mlps == pytest.approx({0: expected["m0"]})
    # Default scale: the standard deviation of all gains.
    default = GatingRule("sigmoid", k=1, factor=0.0).gates(_attribution())
    s = np.std(np.concatenate([HEAD_GAIN.ravel(), MLP_GAIN]))
    assert default.heads[(0, 0)] == pytest.approx(sigmoid(-0.2 / s))


def test_amplify_top_k_without_gains():
    gates = GatingRule("amplify", k=2, factor=2.0).gates(_attribution(gains=False))
    assert gates == Gates(heads={(0, 0): 2.0}, mlps={0: 2.0})
    with pytest.raises(ValueError, match="semantic gains"):
        GatingRule("damp").gates(_attribution(gains=False))
    with pytest.raises(ValueError, match="rule"):
        GatingRule("boost")


def test_random_gates_keep_counts_and_factors():
    gates = Gates(heads={(0, 0): 0.1, (1, 2): 0.5, (0, 1): 0.9}, mlps={1: 0.0})
    draws = [random_gates(gates, n_layers=4, n_heads=5, seed=s) for s in range(5)]
    for draw in draws:
        assert len(draw.heads) == 3 and len(draw.mlps) == 1
        assert sorted(draw.heads.values()) == [0.1, 0.5, 0.9]
        assert list(draw.mlps.values()) == [0.0]
        assert all(0 <= layer < 4 and 0 <= head < 5 for layer, head in draw.heads)
    assert random_gates(gates, 4, 5, seed=3) == draws[3]
    assert len({tuple(sorted(d.heads)) for d in draws}) > 1
