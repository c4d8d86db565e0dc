"""ARC-JSD's consensus statistic (Eq. 11-12) on hand-made rankings; its permutation null against
an independent simulation and the hypergeometric mean; p-value bounds; ties; serialisation."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy import stats
from scipy.stats import rankdata

from mechrag.mechanism.consensus import Consensus, consensus, paper_record
from mechrag.results.components import ComponentAttribution


def _attribution(heads, mlps, attn_gain, mlp_gain) -> ComponentAttribution:
    heads = np.asarray(heads, dtype=float)
    return ComponentAttribution(
        query="q?",
        source_id="s",
        response="r",
        response_ids=[1],
        heads=heads,
        mlps=mlps,
        resid_post=np.zeros(heads.shape[0]),
        attn_gain=attn_gain,
        mlp_gain=mlp_gain,
        gain_definition="argmax_token",
    )


@pytest.fixture
def hand_made() -> ComponentAttribution:
    """Five layers of two heads. Attention: head means J = [5, 4.5, 3, 2, 1] (head maxima would
    rank layer 1 first), G ranks [5, 1, 2, 3, 4]; MLPs: J and G both rank layer 4 first."""
    return _attribution(
        heads=[[4, 6], [0, 9], [3, 3], [2, 2], [1, 1]],
        mlps=[1.0, 2.0, 3.0, 4.0, 5.0],
        attn_gain=[0.1, 0.5, 0.4, 0.3, 0.2],
        mlp_gain=[-0.2, -0.1, 0.0, 0.1, 0.2],
    )


def test_hand_made_rankings(hand_made):
    result = consensus(hand_made, top_n=2, n_permutations=50)
    attention, mlp = result.attention, result.mlp
    np.testing.assert_array_equal(attention.jsd, [5, 4.5, 3, 2, 1])  # the mean over heads
    assert attention.jsd_rank.tolist() == [1, 2, 3, 4, 5]
    assert attention.gain_rank.tolist() == [5, 1, 2, 3, 4]
    np.testing.assert_allclose(attention.s_plus, [0.6, 0.3, 0.5, 0.7, 0.9])  # (rJ + rG) / 2L
    assert (attention.jsd_top, attention.gain_top, attention.s_top) == ([0, 1], [1, 2], [1, 2])
    assert (attention.jsd_overlap, attention.gain_overlap, attention.jsd_gain_overlap) == (1, 2, 1)
    np.testing.assert_allclose(mlp.s_plus, [1.0, 0.8, 0.6, 0.4, 0.2])
    assert (mlp.jsd_top, mlp.s_top) == ([4, 3], [4, 3])
    assert (mlp.jsd_overlap, mlp.gain_overlap, mlp.jsd_gain_overlap) == (2, 2, 2)
    reference = stats.spearmanr(attention.jsd, hand_made.attn_gain)
    assert (attention.rho, attention.rho_p) == pytest.approx(
        (reference.statistic, reference.pvalue)
    )
    assert mlp.rho == pytest.approx(1.0)
    assert (result.component_rho, result.component_p) == pytest.approx(hand_made.spearman())
    assert (result.top_n, result.gain_definition) == (2, "argmax_token")


def test_ties_rank_in_layer_order():
    # J ranks [2, 1, 3, 4], G ranks [1, 2, 4, 3]: S(+) ties between layers 0 and 1 (3/8), where
    # J prefers layer 1, and between layers 2 and 3 (7/8), where G prefers layer 3; layer order
    # settles both. Equal MLP scores rank in layer order too.
    result = consensus(
        _attribution(
            heads=[[3, 3], [4, 4], [2, 2], [1, 1]],
            mlps=[0.0, 0.0, 0.0, 0.0],
            attn_gain=[0.4, 0.3, 0.1, 0.2],
            mlp_gain=[0.0, 0.0, 0.0, 0.0],
        ),
        top_n=4,
        n_permutations=10,
    )
    attention, mlp = result.attention, result.mlp
    assert attention.jsd_rank.tolist() == [2, 1, 3, 4]
    assert attention.gain_rank.tolist() == [1, 2, 4, 3]
    np.testing.assert_allclose(attention.s_plus, [3 / 8, 3 / 8, 7 / 8, 7 / 8])
    assert attention.s_top == [0, 1, 2, 3]
    assert mlp.jsd_rank.tolist() == mlp.gain_rank.tolist() == [1, 2, 3, 4]
    assert mlp.jsd_top == [0, 1, 2, 3]


def test_top_n_capped_at_the_number_of_layers(hand_made):
    result = consensus(hand_made, top_n=10, n_permutations=20)
    assert result.top_n == 5 and result.attention.top_n == 5
    for module in (result.attention, result.mlp):
        assert module.jsd_overlap == module.gain_overlap == module.jsd_gain_overlap == 5
        assert module.jsd_overlap_p == module.gain_overlap_p == 1.0


def _simulated_null(jsd_rank, gain_rank, n, draws, seed):
    """Null overlaps written out plainly: shuffle G's ranks, S top-n by (rank sum, layer)."""
    rng = np.random.default_rng(seed)
    layers = range(len(jsd_rank))
    jsd_top = {layer for layer in layers if jsd_rank[layer] <= n}
    totals = np.zeros(3)
    for _ in range(draws):
        shuffled = rng.permutation(gain_rank)
        gain_top = {layer for layer in layers if shuffled[layer] <= n}
        by_s = sorted(layers, key=lambda layer: (jsd_rank[layer] + shuffled[layer], layer))
        s_top = set(by_s[:n])
        totals += [len(jsd_top & s_top), len(gain_top & s_top), len(jsd_top & gain_top)]
    return totals / draws


def test_null_means_match_simulation_and_hypergeometric():
    rng = np.random.default_rng(7)
    n_layers, n, draws = 26, 10, 4000
    result = consensus(
        _attribution(
            heads=rng.random((n_layers, 3)),
            mlps=rng.random(n_layers),
            attn_gain=rng.normal(size=n_layers),
            mlp_gain=rng.normal(size=n_layers),
        ),
        top_n=n,
        n_permutations=draws,
        seed=3,
    )
    for module in (result.attention, result.mlp):
        simulated = _simulated_null(module.jsd_rank, module.gain_rank, n, draws, seed=11)
        means = [module.null_jsd_overlap, module.null_gain_overlap, module.null_jsd_gain_overlap]
        # Two estimates from 4000 draws each: standard error of the difference < 0.03.
        np.testing.assert_allclose(means, simulated, atol=0.1)
        # |J ∩ G| under the shuffle is hypergeometric: mean N^2 / L.
        assert module.null_jsd_gain_overlap == pytest.approx(n * n / n_layers, abs=0.06)
        # S(+) is built from both rankings: unrelated rankings already share ~6.7 of 10.
        assert 6.2 < module.null_jsd_overlap < 7.2


def brute_force_null(jsd, gain, n: int, draws: int, rng) -> np.ndarray:
    """``[draws, 3]``: ``|J ∩ S|``, ``|G ∩ S|`` and ``|J ∩ G|`` of the top ``n`` after each
    documented draw (the gain values shuffled over layers and ranked again, ordinal, largest
    first; ``S(+)``'s ties in layer order), written out one draw at a time."""
    jsd_rank = rankdata(-np.asarray(jsd), method="ordinal")
    rows = []
    for _ in range(draws):
        gain_rank = rankdata(-rng.permutation(gain), method="ordinal")
        joint = sorted(range(len(jsd)), key=lambda layer: (jsd_rank[layer] + gain_rank[layer]))
        s_top, j_top = set(joint[:n]), set(np.flatnonzero(jsd_rank <= n))
        g_top = set(np.flatnonzero(gain_rank <= n))
        rows.append([len(j_top & s_top), len(g_top & s_top), len(j_top & g_top)])
    return np.array(rows)


def test_p_values_are_the_share_of_draws_at_or_above_the_observed():
    """Every p-value of both modules against a draw-by-draw recomputation of the null (the
    attention module draws first from ``default_rng(seed)``, the MLP continues the stream)."""
    n_layers, n, draws = 26, 10, 200
    ranks = np.arange(n_layers, dtype=float)
    gains = {"attention": ranks, "mlp": -ranks}  # the same order as J; the reverse of it
    result = consensus(
        _attribution(
            heads=np.stack([ranks, ranks], 1),
            mlps=ranks,
            attn_gain=gains["attention"],
            mlp_gain=gains["mlp"],
        ),
        top_n=n,
        n_permutations=draws,
        seed=3,
    )
    rng = np.random.default_rng(3)
    for module in (result.attention, result.mlp):
        null = brute_force_null(ranks, gains[module.module], n, draws, rng)
        observed = [module.jsd_overlap, module.gain_overlap, module.jsd_gain_overlap]
        expected = (1 + (null >= np.array(observed)).sum(0)) / (1 + draws)
        found = [module.jsd_overlap_p, module.gain_overlap_p, module.jsd_gain_overlap_p]
        np.testing.assert_allclose(found, expected)
    # The extremes: J and G agree fully for attention (no draw reaches 10 of 10), not at all
    # for the MLP (every draw reaches 0).
    assert result.attention.jsd_gain_overlap == n and result.mlp.jsd_gain_overlap == 0
    assert result.attention.jsd_gain_overlap_p == 1 / (1 + draws)
    assert result.mlp.jsd_gain_overlap_p == 1.0


def test_p_value_counts_the_null_at_or_above_the_observed():
    rng = np.random.default_rng(1)
    n_layers, n, draws = 12, 4, 300
    attribution = _attribution(
        heads=rng.random((n_layers, 2)),
        mlps=rng.random(n_layers),
        attn_gain=rng.normal(size=n_layers),
        mlp_gain=rng.normal(size=n_layers),
    )
    result = consensus(attribution, top_n=n, n_permutations=draws, seed=5)
    attention = result.attention
    # The documented draws: default_rng(seed), the gain ranking shuffled, attention first.
    null_rng = np.random.default_rng(5)
    jsd_top = attention.jsd_rank <= n
    null = np.array(
        [(jsd_top & (null_rng.permutation(attention.gain_rank) <= n)).sum() for _ in range(draws)]
    )
    observed = attention.jsd_gain_overlap
    assert attention.jsd_gain_overlap_p == (1 + (null >= observed).sum()) / (1 + draws)
    assert attention.null_jsd_gain_overlap == pytest.approx(null.mean())


def test_round_trip_and_paper_record(hand_made):
    result = consensus(hand_made, top_n=3, n_permutations=30)
    data = json.loads(json.dumps(result.to_dict()))
    restored = Consensus.from_dict(data)
    assert restored.to_dict() == result.to_dict()
    assert restored.attention.s_top == result.attention.s_top
    record = json.loads(json.dumps(paper_record(hand_made, result)))
    assert record["protocol"] == "arc-jsd"
    assert record["attention_jsd"] == hand_made.heads.mean(1).tolist()
    assert record["attn_gain"] == hand_made.attn_gain.tolist()
    assert record["mlp_gain"] == hand_made.mlp_gain.tolist()
    assert [c["label"] for c in record["top_heads"]][:2] == ["L1H1", "L0H1"]
    assert [c["label"] for c in record["top_mlps"]][:2] == ["MLP4", "MLP3"]
    assert Consensus.from_dict(record["consensus"]).to_dict() == result.to_dict()
    again = ComponentAttribution.from_dict(record)
    np.testing.assert_array_equal(again.heads, hand_made.heads)


def test_bad_input(hand_made):
    without_gains = _attribution(hand_made.heads, hand_made.mlps, None, None)
    with pytest.raises(ValueError, match="semantic gains"):
        consensus(without_gains)
    with pytest.raises(ValueError, match="top_n"):
        consensus(hand_made, top_n=0)
    with pytest.raises(ValueError, match="n_permutations"):
        consensus(hand_made, n_permutations=0)


def test_tied_gains_do_not_pass_for_agreement():
    """Gains tied at 0 rank in layer order, as does a JSD that falls with depth: the observed
    overlap is then complete, but the null ranks its shuffled values by the same rule, so the
    agreement is not significant (shuffling the ranks instead gave p ~ 0)."""
    n_layers = 12
    jsd = np.linspace(2.0, 1.0, n_layers)  # layer 0 largest
    result = _attribution(
        np.repeat(jsd[:, None], 2, 1), jsd, np.zeros(n_layers), np.zeros(n_layers)
    )
    found = consensus(result, top_n=5, n_permutations=200)
    for module in (found.attention, found.mlp):
        assert module.tied_layers == n_layers
        assert module.jsd_gain_overlap == 5
        assert module.jsd_gain_overlap_p == 1.0 and module.null_jsd_gain_overlap == 5.0
