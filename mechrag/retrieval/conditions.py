"""RAG-E prompt conditions (arXiv 2601.21803): which documents the generator sees, in which order.

A configured :class:`PromptConditions` builds each condition from the retriever's ranked top
``k`` (best first) and the corpus; the result is a :class:`PromptCondition`: the ordered
documents, which of them were retrieved, and whether the prompt may say they are ranked by
relevance (only ``c1``, where they are). Two presets:

``preset="paper"``, the conditions as the paper's text gives them (``k = 10`` there): the prompt
always holds ``k`` documents.

- ``c1``: the top ``k`` in rank order.
- ``c2``: the top ``k − n_random`` in rank order, then ``n_random`` random documents
  (``n_random = k // 2``: top-5 then 5 random).
- ``c3``: the same random documents first, then the same top ``k − n_random``.
- ``c4``: the top ``k`` shuffled (no random documents).

``preset="code"``, the official code's variant (``PromptPerturbationModule.generate_setup_b`` in
src/experiments/perturbations.py of k-randl/Interpretable_RAG, ``k = 5`` in
scripts/data/perturb_popqa.py; its plots label B1/B2 as c2/c3): the prompt holds ``k +
n_random`` documents, ``n_random = k``.

- ``c1``: the top ``k`` in rank order.
- ``c2`` (B1): the top ``k``, then ``n_random`` random documents.
- ``c3`` (B2): the same random documents, then the top ``k``.
- ``c4`` (B3): the documents of ``c2`` shuffled.

Random documents are drawn uniformly without replacement from the corpus documents outside the
retrieved top ``k`` (all ``k``, also under ``"paper"``, whose ``c2``/``c3`` show only part of
them) and placed in the order drawn. Seeds: every condition starts a fresh generator seeded by
``seed`` and the question's top ``k`` (their ids, :func:`question_key`), draws its random
documents first and then, for ``c4``, one permutation. So draws differ from question to
question (a run of many questions sees many shuffles and noise sets, not one), yet for one
question and seed ``c2``, ``c3`` and the code's ``c4`` hold the same random documents, and a
rerun draws the same. (The official code seeds Python's ``random`` once with 42 for a whole run
and calls ``random.sample`` and ``random.shuffle`` for each question: the same design, not the
same draws.) Until December 2026 the generator was seeded by ``seed`` alone, so every question
got the same ``c4`` permutation and the same draw indices.

mechrag before issue 18 built the code's layout with ``ceil(k / 2)`` random documents, sorted
into corpus order, and shuffled ``c4`` with ``seed + 1``; ``PromptConditions(preset="code",
n_random=ceil(k / 2))`` is that design with unsorted draws.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from mechrag.errors import InputError
from mechrag.protocols import EXPLAIN_PROTOCOL, get_protocol
from mechrag.retrieval.corpus import Corpus, Document

CONDITIONS = ("c1", "c2", "c3", "c4")
PRESETS = ("paper", "code")
DRAWS = "per-question"  # how c2-c4 are seeded (see the module docstring), as records name it
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


def random_documents(
    corpus: Corpus, exclude: Sequence[Document], count: int, rng: np.random.Generator
) -> list[Document]:
    """``count`` corpus documents outside ``exclude``, uniformly without replacement, in the
    order drawn."""
    excluded = {d.id for d in exclude}
    pool = [d for d in corpus if d.id not in excluded]
    if count > len(pool):
        raise InputError(f"the corpus has only {len(pool)} documents outside the top k")
    return [pool[i] for i in rng.choice(len(pool), count, replace=False)]


@dataclass(frozen=True)
class PromptConditions:
    """The RAG-E prompt conditions of one preset (see the module docstring).

    ``preset``: ``"paper"`` (default) or ``"code"``; ``n_random``: how many random documents
    ``c2``-``c4`` mix in (default ``k // 2`` for ``"paper"``, ``k`` for ``"code"``; unused by
    the paper's ``c4``); ``seed`` seeds the draw and the shuffle.
    """

    preset: str = "paper"
    n_random: int | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        if self.preset not in PRESETS:
            raise InputError(f"unknown preset {self.preset!r}: choose from {PRESETS}")
        if self.n_random is not None and self.n_random < 1:
            raise InputError(f"n_random must be at least 1, got {self.n_random}")

    @classmethod
    def for_protocol(
        cls,
        protocol: str = EXPLAIN_PROTOCOL,
        preset: str | None = None,
        *,
        n_random: int | None = None,
        seed: int = 0,
    ) -> PromptConditions:
        """The conditions of ``preset``, or where it is ``None`` the ``protocol``'s
        (:mod:`mechrag.protocols`)."""
        preset = preset or get_protocol(protocol).setting("conditions_preset")
        return cls(preset=preset, n_random=n_random, seed=seed)

    def random_count(self, k: int) -> int:
        """The number of random documents ``c2``/``c3`` mix into a top ``k``."""
        if self.n_random is not None:
            return self.n_random
        return k // 2 if self.preset == "paper" else k

    def build(self, name: str, top: Sequence[Document], corpus: Corpus) -> PromptCondition:
        """The documents of condition ``name`` for the ranked ``top`` documents (best first)."""
        if name not in CONDITIONS:
            raise InputError(f"unknown condition {name!r}: choose from {CONDITIONS}")
        top = list(top)
        if name == "c1":
            return PromptCondition(name, top, [True] * len(top), ranked=True)
        rng = np.random.default_rng([self.seed, question_key(top)])
        if self.preset == "paper" and name == "c4":
            return _shuffled(name, top, [True] * len(top), rng)
        count = self.random_count(len(top))
        if self.preset == "paper" and not 1 <= count < len(top):
            raise InputError(
                f"the paper's {name} shows the top k - n_random and n_random random documents: "
                f"needs 1 <= n_random < k, got n_random = {count}, k = {len(top)}"
            )
        noise = random_documents(corpus, top, count, rng)
        shown = top[: len(top) - count] if self.preset == "paper" else top
        if name == "c3":
            return PromptCondition(
                name, noise + shown, [False] * len(noise) + [True] * len(shown), ranked=False
            )
        documents, retrieved = shown + noise, [True] * len(shown) + [False] * len(noise)
        if name == "c4":
            return _shuffled(name, documents, retrieved, rng)
        return PromptCondition(name, documents, retrieved, ranked=False)


def question_key(top: Sequence[Document]) -> int:
    """A stable 32-bit key of a question's ranked top documents (their ids), which seeds its
    draws together with the configured seed: the same question always draws the same."""
    return zlib.crc32("\n".join(d.id for d in top).encode("utf-8"))


def _shuffled(
    name: str, documents: list[Document], retrieved: list[bool], rng: np.random.Generator
) -> PromptCondition:
    order = rng.permutation(len(documents))
    return PromptCondition(
        name, [documents[i] for i in order], [retrieved[i] for i in order], ranked=False
    )


def prompt_condition(
    name: str,
    top: Sequence[Document],
    corpus: Corpus,
    *,
    preset: str = "paper",
    n_random: int | None = None,
    seed: int = 0,
) -> PromptCondition:
    """``PromptConditions(preset, n_random, seed).build(name, top, corpus)`` in one call."""
    return PromptConditions(preset, n_random, seed).build(name, top, corpus)
