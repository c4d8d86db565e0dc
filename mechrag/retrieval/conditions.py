"""RAG-E prompt conditions: which documents the generator sees, in which order.

Each condition is a pure function of the retriever's ranked hits (best first), the corpus and a
seed; it returns a :class:`PromptCondition`: the ordered documents and whether the prompt may
say they are ranked by relevance (only ``c1``, where they are).

- ``c1``: the retriever's top ``k`` in rank order.
- ``c2``: the top ``k`` first, then ``n_random`` random corpus documents (not in the top ``k``).
- ``c3``: the same random documents first, then the top ``k`` in rank order.
- ``c4``: the documents of ``c2`` shuffled.

``c2``-``c4`` draw the same random documents for the same seed, so they differ only in order.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from mechrag.errors import InputError
from mechrag.retrieval.corpus import Corpus, Document

CONDITIONS = ("c1", "c2", "c3", "c4")
RANKED_INSTRUCTION = "The documents are ranked by relevance to the question, most relevant first."


@dataclass(frozen=True)
class PromptCondition:
    """Ordered prompt documents; ``retrieved[i]`` says whether document ``i`` was in the top k."""

    name: str
    documents: list[Document]
    retrieved: list[bool]
    ranked: bool

    @property
    def instruction(self) -> str | None:
        """A system-prompt line claiming a ranking, only when the order is the ranking."""
        return RANKED_INSTRUCTION if self.ranked else None


def default_random_count(k: int) -> int:
    """``ceil(k / 2)`` random documents, as in RAG-E."""
    return math.ceil(k / 2)


def random_documents(
    corpus: Corpus, exclude: Sequence[Document], count: int, seed: int
) -> list[Document]:
    """``count`` corpus documents outside ``exclude``, drawn without replacement (seeded)."""
    excluded = {d.id for d in exclude}
    pool = [d for d in corpus if d.id not in excluded]
    if count > len(pool):
        raise InputError(f"the corpus has only {len(pool)} documents outside the top k")
    rng = np.random.default_rng(seed)
    return [pool[i] for i in sorted(rng.choice(len(pool), count, replace=False))]


def prompt_condition(
    name: str,
    top: Sequence[Document],
    corpus: Corpus,
    n_random: int | None = None,
    seed: int = 0,
) -> PromptCondition:
    """The documents of condition ``name`` for the ranked ``top`` documents (best first)."""
    if name not in CONDITIONS:
        raise InputError(f"unknown condition {name!r}: choose from {CONDITIONS}")
    top = list(top)
    if name == "c1":
        return PromptCondition(name, top, [True] * len(top), ranked=True)
    n_random = default_random_count(len(top)) if n_random is None else n_random
    noise = random_documents(corpus, top, n_random, seed)
    if name == "c3":
        return PromptCondition(name, noise + top, [False] * len(noise) + [True] * len(top), False)
    documents, retrieved = top + noise, [True] * len(top) + [False] * len(noise)
    if name == "c4":
        order = np.random.default_rng(seed + 1).permutation(len(documents))
        documents, retrieved = [documents[i] for i in order], [retrieved[i] for i in order]
    return PromptCondition(name, documents, retrieved, ranked=False)
