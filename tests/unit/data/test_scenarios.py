"""Dependency scenarios: seeded, well-formed, swappable; position bias on synthetic scorers."""

from __future__ import annotations

import numpy as np
import pytest

from mechrag.data.scenarios import KINDS, make_scenario, make_scenarios, position_bias


def test_seeded_and_well_formed():
    cases = make_scenarios(2, seed=5)
    again = make_scenarios(2, seed=5)
    assert [c.sources for c in cases] == [c.sources for c in again]
    assert make_scenarios(2, seed=6)[0].sources != cases[0].sources
    assert sorted({c.kind for c in cases}) == sorted(KINDS) and len(cases) == 6
    for case in cases:
        assert len(case.sources) == 10
        assert len({s.text for s in case.sources}) == 10
        first, second = case.key_positions
        assert case.key_ids == (f"p{first}", f"p{second}")
        assert case.swapped().key_ids == (f"p{second}", f"p{first}")  # ids follow content
        key_texts = (case.sources[first].text, case.sources[second].text)
        if case.kind == "complementary":  # "The X and the Y": each key document names one
            halves = case.response.removeprefix("The ").split(" and the ")
            named_by = sorted(tuple(half in text for text in key_texts) for half in halves)
            assert named_by == [(False, True), (True, False)]
        else:
            assert case.response in "".join(key_texts)


def test_synergy_needs_both_documents():
    case = make_scenario("synergy", seed=1)
    first, second = case.key_positions
    founder, birthplace = case.sources[first].text, case.sources[second].text
    company = case.query.split("founder of ")[1].split(" born")[0]
    assert company in founder and case.response not in founder
    assert case.response in birthplace and company not in birthplace


def test_swap_exchanges_only_the_keys():
    case = make_scenario("redundancy", seed=2, n_documents=6)
    swapped = case.swapped()
    first, second = case.key_positions
    assert swapped.sources[first] == case.sources[second]
    assert swapped.sources[second] == case.sources[first]
    others = [i for i in range(6) if i not in (first, second)]
    assert [swapped.sources[i] for i in others] == [case.sources[i] for i in others]


def test_position_bias_detects_position_and_content_scorers():
    cases = make_scenarios(2, seed=0)

    def by_position(case):  # earlier documents score higher, whatever they say
        return -np.arange(len(case.sources), dtype=float)

    first_key = {case.id: case.key_ids[0] for case in cases}

    def by_content(case):  # the first key document always wins, wherever it stands
        winner = first_key[case.id.removesuffix("-swapped")]
        scores = [2.0 if s.id == winner else float(s.id in case.key_ids) for s in case.sources]
        return np.array(scores)

    position = position_bias(by_position, cases)
    content = position_bias(by_content, cases)
    assert position["follows_position"].all() and position["earlier_wins_both"].all()
    assert content["follows_content"].all() and content["keys_top2"].all()


def test_bad_inputs():
    with pytest.raises(ValueError, match="unknown scenario kind"):
        make_scenario("conflict")
    with pytest.raises(ValueError, match="n_documents"):
        make_scenario("synergy", n_documents=20)
