"""Gating rules on a hand-made ComponentAttribution: the documented formulas, one by one."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest

from mechrag.errors import InputError
from mechrag.mechanism.gating.gates import Gates
from mechrag.mechanism.gating.rules import GatingRule, random_gates, sigmoid
from mechrag.results.components import ComponentAttribution

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


# --- the paper's rule (ARC-JSD Table 4) ---------------------------------------------------------

# 3 layers x 4 heads + 3 MLPs. Head JSD with a tie (L0H1 = L2H0 = 0.6: layer-major order breaks
# it, L0H1 first); the top-5 heads are L1H2 0.9, L0H1 0.6, L2H0 0.6, L1H0 0.5, L2H3 0.4, and
# L0H0 (0.35) is sixth. MLP JSD is far below every head's, so a joint ranking would pick no MLP.
PAPER_HEADS = np.array([[0.35, 0.6, 0.01, 0.02], [0.5, 0.03, 0.9, 0.04], [0.6, 0.05, 0.06, 0.4]])
PAPER_MLPS = np.array([0.001, 0.003, 0.002])
ATTN_GAIN = np.array([-0.8, 0.2, -0.1])  # per layer; a head's G is its layer's
PAPER_MLP_GAIN = np.array([-0.5, 0.3, -2.0])


def _paper_attribution(head_gain=None, attn_gain=ATTN_GAIN, mlp_gain=PAPER_MLP_GAIN):
    return ComponentAttribution(
        query="q",
        source_id="s0",
        response="r",
        response_ids=[1],
        heads=PAPER_HEADS,
        mlps=PAPER_MLPS,
        resid_post=np.zeros(3),
        head_gain=head_gain,
        attn_gain=attn_gain,
        mlp_gain=mlp_gain,
    )


def paper_factor(gain: float) -> float:
    """The paper's mask, written out: 0.7 + 0.3 * sigmoid(G)."""
    return 0.7 + 0.3 / (1.0 + math.exp(-gain))


def test_paper_rule_gates_top_heads_and_mlps_with_negative_gain():
    gates = GatingRule.paper().gates(_paper_attribution())
    # Top-5 heads: layers 1 (G = +0.2: kept), 0 (-0.8), 2 (-0.1), 1 (kept), 2 (-0.1).
    # L0H0 has a negative gain too but is sixth. All three MLPs are the top 5 (only 3 exist);
    # MLP1's gain is positive.
    assert set(gates.heads) == {(0, 1), (2, 0), (2, 3)}
    assert set(gates.mlps) == {0, 2}
    for (layer, _), factor in gates.heads.items():
        assert factor == pytest.approx(paper_factor(ATTN_GAIN[layer]), rel=1e-15)
    for layer, factor in gates.mlps.items():
        assert factor == pytest.approx(paper_factor(PAPER_MLP_GAIN[layer]), rel=1e-15)
    # Negative gains give factors in (0.7, 0.85).
    assert all(0.7 < f < 0.85 for f in [*gates.heads.values(), *gates.mlps.values()])


def test_paper_rule_is_the_default_of_its_name_and_ranks_kinds_separately():
    assert GatingRule("paper").k == 5 and GatingRule("paper").k_mlps == 5
    assert GatingRule("paper").strength == 0.7
    assert GatingRule("paper").gates(_paper_attribution()) == GatingRule.paper().gates(
        _paper_attribution()
    )
    assert GatingRule(**GatingRule.paper().to_dict()) == GatingRule.paper()
    # k = 2 heads (L1H2 kept, L0H1 gated; the tie puts L0H1 before L2H0), 1 MLP (MLP1: kept).
    small = GatingRule("paper", k=2, k_mlps=1).gates(_paper_attribution())
    assert set(small.heads) == {(0, 1)} and small.mlps == {}
    # k_mlps defaults to k: top-2 MLPs are MLP1 (kept) and MLP2 (gated).
    assert set(GatingRule("paper", k=2).gates(_paper_attribution()).mlps) == {2}
    # The floor is the factor: 0.5 + 0.5 * sigmoid(G).
    floor = GatingRule("paper", factor=0.5).gates(_paper_attribution())
    assert floor.mlps[2] == pytest.approx(0.5 + 0.5 / (1 + math.exp(2.0)), rel=1e-15)


def test_paper_rule_uses_layer_gain_for_heads_never_head_gain():
    # Per-head gains opposite in sign to the layer gains change nothing.
    opposite = -np.repeat(ATTN_GAIN[:, None], 4, axis=1)
    with_heads = GatingRule.paper().gates(_paper_attribution(head_gain=opposite))
    assert with_heads == GatingRule.paper().gates(_paper_attribution())


def test_paper_rule_refuses_a_result_without_layer_gains():
    for missing in ({"attn_gain": None}, {"mlp_gain": None}):
        with pytest.raises(InputError, match="attn_gain and mlp_gain"):
            GatingRule.paper().gates(_paper_attribution(**missing))
    with pytest.raises(InputError, match="k_mlps"):
        GatingRule("damp", k_mlps=3)
    with pytest.raises(InputError, match="k_mlps must be at least 1"):
        GatingRule("paper", k_mlps=0)


def test_other_rules_keep_their_defaults():
    assert GatingRule("damp").k == 10 and GatingRule("damp").strength == 0.0
    assert GatingRule("damp").k_mlps is None
    rule = GatingRule("damp", k=4, factor=0.25)
    assert GatingRule(**rule.to_dict()) == rule


def test_paper_random_control_draws_as_many_heads_and_mlps_off_the_gated_ones():
    n_layers, n_heads = 4, 5
    gates = Gates(
        heads={(0, 1): paper_factor(-0.8), (2, 0): paper_factor(-0.1), (2, 3): paper_factor(-1.5)},
        mlps={0: paper_factor(-0.5), 2: paper_factor(-2.0)},
    )
    draws = [
        random_gates(gates, n_layers, n_heads, seed=(7, s), exclude_gated=True) for s in range(1700)
    ]
    for draw in draws:
        assert sorted(draw.heads.values()) == sorted(gates.heads.values())  # heads' factors
        assert sorted(draw.mlps.values()) == sorted(gates.mlps.values())  # MLPs' factors
        assert not set(draw.heads) & set(gates.heads)
    assert {tuple(sorted(d.mlps)) for d in draws} == {(1, 3)}  # the only 2 free MLPs
    # Uniform over the 17 free heads: 1700 draws x 3 heads = 300 per head expected
    # (binomial sd about 16); each factor lands on each MLP about half of the time.
    counts = Counter(head for d in draws for head in d.heads)
    free = {(layer, head) for layer in range(n_layers) for head in range(n_heads)} - set(
        gates.heads
    )
    assert set(counts) == free and all(220 < n < 380 for n in counts.values())
    assert 750 < sum(d.mlps[1] == gates.mlps[0] for d in draws) < 950
    # Seeded: the same seeds draw the same components; another example seed draws others.
    assert draws[:5] == [
        random_gates(gates, n_layers, n_heads, seed=(7, s), exclude_gated=True) for s in range(5)
    ]
    assert random_gates(gates, n_layers, n_heads, seed=(8, 0), exclude_gated=True) != draws[0]
    # Without exclusion the gated components can be drawn.
    plain = [random_gates(gates, n_layers, n_heads, seed=s) for s in range(200)]
    assert any(set(d.heads) & set(gates.heads) for d in plain)
    # Too few free components: refused.
    with pytest.raises(InputError, match="cannot draw 2 random MLPs from 1 free ones"):
        random_gates(gates, 3, n_heads, exclude_gated=True)
