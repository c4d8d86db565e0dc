"""Hierarchical ARC-JSD: documents first, then the sentences of the top documents.

AttriBoT's hierarchical trick (Liu, Kandpal and Raffel, ICLR 2025) applied to ARC-JSD. Sentence
sources are grouped into documents by their ``paragraph``. Level one removes each document whole
and scores it by the summed per-token JSD from the full context, as ARC-JSD scores a source.
Level two scores, exactly as ARC-JSD does, every sentence of the ``documents`` documents that
rank highest (with ``within``, also of every document scoring at least that fraction of the
top one's score). Cost: the full context, the documents and the expanded sentences (one-sentence
documents counted once; the screen's pass besides when ``screen`` is set), instead of ``1 +
n_sentences`` subsets; every subset joins the case's cache, so a later exact ARC-JSD reuses them.

Sentences that are not expanded. A sentence of a document that was not expanded gets its
document's score shared equally among its sentences, rescaled below every exactly scored
sentence (:func:`~mechrag.attribution.screening.rank_below`): the scores rank every sentence,
expanded ones first, then the others by their document's share. A document of one sentence is
that sentence: its level-one score is the sentence's exact score, so it counts as expanded.

With ``screen=m`` only the ``m`` sentences of the expanded documents that a one-pass gradient
screen ranks highest (besides one-sentence documents, exact already) are scored exactly; the
other sentences of those documents rank below them by their screen priority, and unexpanded
documents' sentences below all of those.
``documents >= n_documents`` scores every sentence: exact ARC-JSD, with the same scores.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import numpy as np
from jaxtyping import Bool, Float, Int

from mechrag.attribution.base import SourceMethod
from mechrag.errors import InputError

if TYPE_CHECKING:
    from mechrag.attribution.screening import SourceScreen


def document_masks(case) -> tuple[list[object], Bool[np.ndarray, "n_documents n_sources"]]:
    """The case's documents (the distinct ``paragraph`` values, in order; a source without one
    is its own document) and, per document, the mask that removes all of its sentences."""
    keys = [
        source.paragraph if source.paragraph is not None else ("source", index)
        for index, source in enumerate(case.sources)
    ]
    documents = list(dict.fromkeys(keys))
    members = np.array([[key == document for key in keys] for document in documents])
    return documents, ~members


def expanded_documents(
    document_scores: Float[np.ndarray, " n_documents"],
    sizes: Int[np.ndarray, " n_documents"],
    documents: int,
    within: float | None = None,
) -> Bool[np.ndarray, " n_documents"]:
    """The documents whose sentences are scored exactly: the ``documents`` that score highest
    (ties by order), with ``within`` also every document scoring at least ``within`` times the
    top one, and every one-sentence document (its level-one score is its sentence's exact
    score). Shared by :class:`HierarchicalARCJSD` and ``make results``' replay of expansion
    rules on recorded document scores (``experiments/result_tables/hierarchical.py``:
    ``replayed_rule``)."""
    scores = np.asarray(document_scores, dtype=np.float64)
    expanded = np.zeros(len(scores), dtype=bool)
    expanded[np.argsort(-scores, kind="stable")[:documents]] = True
    top = scores.max(initial=0.0)
    if within is not None and top > 0:
        expanded |= scores >= within * top
    return expanded | (np.asarray(sizes) == 1)


@dataclass(frozen=True)
class HierarchicalARCJSD(SourceMethod):
    """``documents``: how many of the top-scoring documents have their sentences scored
    exactly; ``within``: also expand every document scoring at least this fraction of the top
    document's score (an adaptive rule; ``None``: the top ``documents`` only); ``divergence``:
    as in :class:`~mechrag.attribution.arc_jsd.ARCJSD`; ``screen``: a number of candidates (or a
    :class:`~mechrag.attribution.screening.SourceScreen`) that bounds the sentences scored
    exactly inside the expanded documents."""

    name: ClassVar[str] = "hierarchical"
    description: ClassVar[str] = (
        "ARC-JSD on documents, then on the sentences of the top documents (AttriBoT)"
    )
    refusal: ClassVar[str] = "hierarchical scores fixed document and sentence subsets"
    ignored: ClassVar[tuple[str, ...]] = ("seed", "reuse_scored")
    documents: int = 2
    within: float | None = None
    divergence: str = "jsd"
    screen: int | SourceScreen | None = None

    def __post_init__(self) -> None:
        if int(self.documents) < 1:
            raise InputError(f"documents must be at least 1, got {self.documents}")
        if self.within is not None and not 0 < self.within <= 1:
            raise InputError(f"within must be in (0, 1], got {self.within}")

    def __call__(self, case):
        from mechrag.attribution.screening import SourceScreen, rank_below

        meter = case.meter()
        documents, removed = document_masks(case)
        members = ~removed
        sizes = members.sum(1)
        # A one-sentence document's level-one subset is that sentence's: exact for free.
        free = np.zeros(case.n_sources, dtype=bool)
        if len(documents) > self.documents:
            document_tokens = case.token_divergences(removed, self.divergence)
            document_scores = document_tokens.sum(-1)
            chosen_documents = expanded_documents(
                document_scores, sizes, documents=int(self.documents), within=self.within
            )
            free = members[sizes == 1].any(0)
        else:
            document_scores = None
            chosen_documents = np.ones(len(documents), dtype=bool)
        expanded = members[chosen_documents].any(0)

        candidates = expanded.copy()
        screen = estimate = None
        if self.screen is not None:
            screen = (
                self.screen
                if isinstance(self.screen, SourceScreen)
                else SourceScreen(int(self.screen))
            )
            estimate = screen(case)
            inside = np.flatnonzero(expanded & ~free)
            keep = inside[np.argsort(-estimate.priority[inside], kind="stable")]
            candidates = free.copy()
            candidates[keep[: int(screen.candidates)]] = True

        per_token = np.zeros((case.n_sources, len(case.response_ids)))
        chosen = np.flatnonzero(candidates)
        per_token[chosen] = case.token_divergences(
            case.leave_one_out_masks()[chosen], self.divergence
        )
        scores = per_token.sum(-1)
        if estimate is not None:
            scores = rank_below(scores, candidates, np.where(expanded, estimate.priority, 0.0))
        if document_scores is not None:
            owner = members.argmax(0)
            share = document_scores[owner] / sizes[owner]
            scores = rank_below(scores, expanded, share)

        subsets = {row.tobytes() for row in case.leave_one_out_masks()[chosen]}
        if document_scores is not None:
            subsets |= {row.tobytes() for row in removed}
        metadata = {
            "divergence": self.divergence,
            "documents": int(self.documents),
            "within": self.within,
            "n_documents": len(documents),
            "expanded_documents": np.flatnonzero(chosen_documents).tolist(),
            "document_scores": None if document_scores is None else document_scores.tolist(),
            "exact": candidates.tolist(),
        }
        if estimate is not None:
            metadata.update(
                screen=int(screen.candidates),
                screen_proxy=screen.proxy,
                screen_estimates=estimate.estimates.tolist(),
                screen_seconds=estimate.seconds,
            )
        label = "hierarchical" if self.divergence == "jsd" else f"hierarchical_{self.divergence}"
        return case.attribution(
            label,
            scores,
            meter,
            token_scores=per_token,
            model_calls=len(subsets) + 1 + (estimate is not None),
            metadata=metadata,
        )
