"""RAG-E prompt conditions: the paper's and the official code's presets on a toy corpus."""

from __future__ import annotations

from collections import Counter

import pytest

from mechrag.errors import InputError
from mechrag.retrieval.conditions import (
    CONDITIONS,
    PRESETS,
    PromptConditions,
    prompt_condition,
)
from mechrag.retrieval.corpus import Corpus

CORPUS = Corpus.from_texts([f"document number {i}" for i in range(30)])
# A ranking that is not corpus order, so nothing can pass by sorting.
RANKING = [17, 3, 25, 0, 9, 11, 28, 5, 14, 21]


def _top(k: int) -> list:
    return [CORPUS[i] for i in RANKING[:k]]


def _ids(documents) -> list[str]:
    return [d.id for d in documents]


def _build(preset: str, name: str, k: int, seed: int = 3, n_random: int | None = None):
    return PromptConditions(preset=preset, n_random=n_random, seed=seed).build(
        name, _top(k), CORPUS
    )


def _check_random(condition, k: int) -> list[str]:
    """The condition's random documents: none repeated, none in the retrieved top ``k``."""
    ids = _ids(condition.documents)
    assert len(set(ids)) == len(ids)
    noise = [d.id for d, r in zip(condition.documents, condition.retrieved) if not r]
    assert not set(noise) & set(_ids(_top(k)))
    return noise


@pytest.mark.parametrize("preset", PRESETS)
def test_c1_is_the_ranked_top_k(preset):
    condition = _build(preset, "c1", 10)
    assert _ids(condition.documents) == _ids(_top(10))
    assert condition.retrieved == [True] * 10
    assert condition.ranked and condition.instruction is not None


def test_paper_preset_keeps_k_documents():
    top = _ids(_top(10))
    c2, c3, c4 = (_build("paper", name, 10) for name in ("c2", "c3", "c4"))
    # c2: top-5 in rank order, then 5 random
    assert _ids(c2.documents)[:5] == top[:5]
    assert c2.retrieved == [True] * 5 + [False] * 5
    noise = _check_random(c2, 10)
    assert len(noise) == 5 and noise == _ids(c2.documents)[5:]
    # c3: the same random documents first, then the same top-5
    assert _ids(c3.documents) == noise + top[:5]
    assert c3.retrieved == [False] * 5 + [True] * 5
    _check_random(c3, 10)
    # c4: the top-10 shuffled, no random documents
    assert sorted(_ids(c4.documents)) == sorted(top) and _ids(c4.documents) != top
    assert c4.retrieved == [True] * 10
    assert not any(c.ranked or c.instruction for c in (c2, c3, c4))


def test_code_preset_adds_k_random_documents():
    top = _ids(_top(5))
    c2, c3, c4 = (_build("code", name, 5) for name in ("c2", "c3", "c4"))
    # B1: top-5 then 5 random
    assert _ids(c2.documents)[:5] == top
    assert c2.retrieved == [True] * 5 + [False] * 5
    noise = _check_random(c2, 5)
    assert len(noise) == 5
    # B2: the same random documents, then top-5
    assert _ids(c3.documents) == noise + top
    assert c3.retrieved == [False] * 5 + [True] * 5
    # B3: B1 shuffled; the retrieved flags move with their documents
    assert sorted(_ids(c4.documents)) == sorted(_ids(c2.documents))
    assert _ids(c4.documents) != _ids(c2.documents)
    assert [d.id in top for d in c4.documents] == c4.retrieved
    assert not any(c.ranked for c in (c2, c3, c4))


@pytest.mark.parametrize(
    ("preset", "k", "expected"), [("paper", 10, 5), ("paper", 5, 2), ("code", 3, 3)]
)
def test_default_random_counts(preset, k, expected):
    assert PromptConditions(preset=preset).random_count(k) == expected
    condition = _build(preset, "c3", k)
    assert condition.retrieved.count(False) == expected
    assert condition.retrieved.count(True) == (k - expected if preset == "paper" else k)


def test_n_random_overrides_the_preset():
    condition = _build("code", "c2", 4, n_random=2)
    assert condition.retrieved == [True] * 4 + [False] * 2
    paper = _build("paper", "c2", 10, n_random=3)
    assert _ids(paper.documents)[:7] == _ids(_top(7)) and paper.retrieved.count(False) == 3


@pytest.mark.parametrize("preset", PRESETS)
@pytest.mark.parametrize("name", CONDITIONS)
def test_seeded_reproducibility(preset, name):
    first, again = _build(preset, name, 6, seed=11), _build(preset, name, 6, seed=11)
    assert first == again
    if name != "c1":
        others = {tuple(_ids(_build(preset, name, 6, seed=s).documents)) for s in range(5)}
        assert len(others) > 1  # the seed matters


@pytest.mark.parametrize("name", ["c2", "c4"])
def test_each_question_draws_its_own(name):
    """One seed, many questions (rotations of the ranking): the shuffles and noise differ from
    question to question, not one draw reused by every question."""
    draws = set()
    for shift in range(10):
        top = [CORPUS[i] for i in RANKING[shift:] + RANKING[:shift]][:6]
        condition = PromptConditions(preset="paper", seed=3).build(name, top, CORPUS)
        positions = [_ids(top).index(i) if i in _ids(top) else i for i in _ids(condition.documents)]
        draws.add(tuple(positions))
    assert len(draws) > 5


def test_random_documents_are_uniform_over_the_pool_and_unsorted():
    """Each of the 20 documents outside the top-10 is drawn about equally often, in draw order."""
    counts, unsorted = Counter(), 0
    n_seeds = 2000
    for seed in range(n_seeds):
        noise = _check_random(_build("paper", "c2", 10, seed=seed), 10)
        counts.update(noise)
        unsorted += noise != sorted(noise, key=lambda i: int(i[1:]))
    pool = set(_ids(CORPUS)) - set(_ids(_top(10)))
    assert set(counts) == pool
    expected = n_seeds * 5 / len(pool)  # 500
    assert all(abs(c - expected) < 0.15 * expected for c in counts.values())
    assert unsorted > 0.9 * n_seeds  # not put back into corpus order


def test_prompt_condition_is_the_configured_build():
    assert prompt_condition("c3", _top(5), CORPUS, preset="code", seed=4) == PromptConditions(
        "code", seed=4
    ).build("c3", _top(5), CORPUS)


def test_bad_configurations_raise():
    with pytest.raises(InputError, match="preset"):
        PromptConditions(preset="mechrag")
    with pytest.raises(InputError, match="n_random"):
        PromptConditions(n_random=0)
    with pytest.raises(InputError, match="condition"):
        _build("paper", "c5", 4)
    with pytest.raises(InputError, match="1 <= n_random < k"):
        _build("paper", "c2", 4, n_random=4)
    with pytest.raises(InputError, match="1 <= n_random < k"):
        _build("paper", "c3", 1)  # k // 2 = 0 random documents: no such condition
    with pytest.raises(InputError, match="outside the top k"):
        _build("code", "c2", 10, n_random=21)  # 20 documents outside the top 10
    assert _build("paper", "c4", 1).retrieved == [True]  # the paper's c4 needs none
