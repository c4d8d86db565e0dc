"""Seeded dependency scenarios for source attribution, and a position-bias check.

Each case is a small RAG example about invented entities (templates, no model, no download):
one-sentence documents, two of them *key* documents, the rest topical distractors.

- ``redundancy``: two paraphrases of the answer; either one alone suffices;
- ``complementary``: each key document gives one half of a two-part answer;
- ``synergy``: one names the entity (a founder), the other gives its property (birthplace);
  neither alone answers.

The response is fixed (the answer), so every method explains the same tokens.
:func:`position_bias` scores each case in both orders of its two key documents and reports
whether the ranking of the two follows their content or their position.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from mechrag.errors import InputError
from mechrag.sources import Source, source_id

KINDS = ("redundancy", "complementary", "synergy")
SYLLABLES = (
    "ka vel dor mir ren tas or une bra qua len sar thi mo zan pel ri gos wyn fe lum "
    "dra ost ib nev cor hal tru ve sil"
).split()
GOODS = ("copper", "saffron", "glass", "timber", "wool", "salt", "amber", "tea")
DISTRACTORS = (
    "The capital of {country2} is {city2}.",
    "The {river2} River flows through {country2}.",
    "{company2} was founded by {person2}.",
    "{person2} was born in {town2}.",
    "{country} is known for its {goods} exports.",
    "{company} sells {goods} across {country2}.",
    "{country} has a population of about {millions} million people.",
    "{city2} is famous for its {goods} market.",
    "{person} once lived near the {river2} River.",
    "The {river2} River freezes every winter.",
)
CASES = {
    "redundancy": (
        "What is the capital of {country}?",
        "The capital of {country} is {city}.",
        "{city} serves as the seat of government of {country}.",
        "{city}",
    ),
    "complementary": (
        "Which two rivers flow through {country}?",
        "The {river} River flows through {country}.",
        "The {river3} River also flows through {country}.",
        "The {river} and the {river3}",
    ),
    "synergy": (
        "In which town was the founder of {company} born?",
        "{company} was founded by {person}.",
        "{person} was born in {town}.",
        "{town}",
    ),
}


@dataclass(frozen=True)
class Scenario:
    """One case: query, documents, the two key document positions and the fixed response."""

    id: str
    kind: str
    query: str
    sources: list[Source]
    key_positions: tuple[int, int]
    response: str

    @property
    def key_ids(self) -> tuple[str, str]:
        """Ids of the two key documents (in position order)."""
        return tuple(self.sources[i].id for i in self.key_positions)

    def swapped(self) -> Scenario:
        """The same case with the two key documents' positions exchanged (ids follow content)."""
        first, second = self.key_positions
        sources = list(self.sources)
        sources[first], sources[second] = self.sources[second], self.sources[first]
        return replace(self, id=f"{self.id}-swapped", sources=sources)


def _name(rng: np.random.Generator, used: set[str], syllables: int) -> str:
    while True:
        name = "".join(rng.choice(SYLLABLES, size=syllables)).capitalize()
        if name not in used:
            used.add(name)
            return name


def _fillers(rng: np.random.Generator) -> dict[str, str]:
    used: set[str] = set()
    fields = {key: _name(rng, used, 3) for key in ("country", "country2", "company", "company2")}
    fields.update({key: _name(rng, used, 2) for key in ("city", "city2", "town", "town2")})
    fields.update({key: _name(rng, used, 2) for key in ("river", "river2", "river3")})
    fields.update({key: _name(rng, used, 2) + " " + _name(rng, used, 2) for key in ("person",)})
    fields["person2"] = _name(rng, used, 2) + " " + _name(rng, used, 2)
    fields["goods"] = str(rng.choice(GOODS))
    fields["millions"] = str(int(rng.integers(2, 90)))
    return fields


def make_scenario(kind: str, seed: int = 0, n_documents: int = 10) -> Scenario:
    """One seeded case of ``kind`` with ``n_documents`` one-sentence documents (2 key ones)."""
    if kind not in CASES:
        raise InputError(f"unknown scenario kind {kind!r}: choose from {KINDS}")
    if not 2 <= n_documents <= 2 + len(DISTRACTORS):
        raise InputError(f"n_documents must be in [2, {2 + len(DISTRACTORS)}], got {n_documents}")
    rng = np.random.default_rng([seed, KINDS.index(kind)])
    fields = _fillers(rng)
    query, key_a, key_b, answer = (text.format(**fields) for text in CASES[kind])
    chosen = rng.choice(len(DISTRACTORS), size=n_documents - 2, replace=False)
    texts = [DISTRACTORS[i].format(**fields) for i in chosen]
    first, second = sorted(rng.choice(n_documents, size=2, replace=False).tolist())
    texts.insert(first, key_a)
    texts.insert(second, key_b)
    sources = [Source(source_id(i), text, None, i) for i, text in enumerate(texts)]
    return Scenario(f"{kind}-{seed}", kind, query, sources, (first, second), answer)


def make_scenarios(n_per_kind: int = 4, seed: int = 0, n_documents: int = 10) -> list[Scenario]:
    """``n_per_kind`` seeded cases of each kind, interleaved."""
    return [
        make_scenario(kind, seed * 1000 + index, n_documents)
        for index in range(n_per_kind)
        for kind in KINDS
    ]


def key_order_outcome(
    key_positions: tuple[int, int], original: np.ndarray, swapped: np.ndarray
) -> dict:
    """How the two key documents rank in the original and the swapped order.

    ``follows_position``: the same *position* outranks the other in both orders (so the content
    ranking flipped with the swap); ``follows_content``: the same *document* wins both times.
    Ties count as neither. ``keys_top2``: both key documents rank in the top two, both orders.
    """
    first, second = key_positions
    earlier_wins = [s[first] > s[second] for s in (original, swapped)]
    tie = any(s[first] == s[second] for s in (original, swapped))
    return {
        "follows_position": not tie and earlier_wins[0] == earlier_wins[1],
        "follows_content": not tie and earlier_wins[0] != earlier_wins[1],
        "earlier_wins_both": not tie and all(earlier_wins),
        "keys_top2": all(
            set(np.argsort(-s, kind="stable")[:2].tolist()) == {first, second}
            for s in (original, swapped)
        ),
        "gap_original": float(original[first] - original[second]),
        "gap_swapped": float(swapped[first] - swapped[second]),
    }


def position_bias(
    score: Callable[[Scenario], np.ndarray], scenarios: Iterable[Scenario]
) -> pd.DataFrame:
    """Score each case in both key orders; one row per case (see :func:`key_order_outcome`)."""
    rows = []
    for case in scenarios:
        outcome = key_order_outcome(case.key_positions, score(case), score(case.swapped()))
        rows.append({"case": case.id, "kind": case.kind, **outcome})
    return pd.DataFrame(rows)
