"""Retrieval to generation, explained on both sides (RAG-E).

``explain(query, retriever, model, k)`` retrieves the top ``k`` documents, builds the prompt of
a condition (``c1``: the top ``k`` in rank order; ``c2``-``c4`` mix in random documents or
shuffle, in the paper's or the official code's preset, see :mod:`mechrag.retrieval.conditions`),
generates the response, and explains

- the retriever: integrated gradients of the similarity on the query's tokens (target: the summed
  similarity to the ``k`` retrieved documents) and on each prompt document's tokens;
- the generator: PMC-SHAP over the prompt documents with the ``token_prob`` game, a
  ``[document, response token]`` matrix whose row sums are the document scores;

then aligns them: WARG (tau = 1.5), Wasted Retrieval@k, Noise Distraction@k, Spearman and
Pearson, all between the generator's document scores and the retriever's scores of one kind:

- ``retriever_scores="position"`` (default): the prompt slots, ``[n − 1, ..., 0]`` (slot 0
  highest; :func:`mechrag.metrics.alignment.position_scores`), as RAG-E's code scores its
  conditions (scripts/data/plot_warg_tau.py). The score follows the slot, not the document, so
  WR@k and ND@k read prompt slots too (RAG-E's retriever ranks there are the positions). In
  ``c1`` the slots are the retrieval ranks, so positions rank the documents as similarities do
  (same flags, ranks and Spearman; WARG and Pearson differ, positions being evenly spaced).
- ``retriever_scores="similarity"``: the retriever's similarity of each prompt document; a
  random document then scores low wherever it stands, so ``c3``/``c4`` cannot show the paper's
  drop, but WARG measures agreement with the retriever's actual judgement.

The similarities are kept either way (``PipelineExplanation.similarities``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from functools import partial

import numpy as np
import pandas as pd

from mechrag.case import Case
from mechrag.defaults import MAX_NEW_TOKENS
from mechrag.engine import Engine
from mechrag.errors import InputError
from mechrag.metrics.agreement import pearson, spearman
from mechrag.metrics.alignment import (
    WARG_TAU,
    aipc,
    alignment_flags,
    generator_high_set,
    position_scores,
    ranks,
    warg,
)
from mechrag.protocols import EXPLAIN_PROTOCOL, get_protocol
from mechrag.results.attribution import Attribution
from mechrag.results.base import Serializable
from mechrag.results.files import json_ready
from mechrag.retrieval.conditions import DRAWS, PromptCondition, PromptConditions
from mechrag.retrieval.corpus import Document, Origin
from mechrag.retrieval.integrated_gradients import RetrieverIntegratedGradients, TokenAttribution
from mechrag.retrieval.options import RETRIEVER_SCORES
from mechrag.retrieval.retriever import Hit, Retriever

FLAG_KS = (1, 3, 5)


def generator_attribution(case, budget: int | None = None, seed: int = 0) -> Attribution:
    """PMC-SHAP over the case's documents with the per-token probability game (RAG-E)."""
    return case.attribute(method="pmc_shap", value="token_prob", budget=budget, seed=seed)


def generator_value(case):
    """``masks -> Σ_t P(r_t | subset)``: the scalar game whose Shapley values are the row sums
    of the ``token_prob`` matrix (served from the case's subset cache)."""
    return lambda masks: np.exp(case.token_logprobs(masks)).sum(-1)


@dataclass
class PipelineExplanation(Serializable):
    """Both sides of one RAG answer and their alignment.

    ``documents`` are the prompt's documents in prompt order; ``similarities`` (the retriever's),
    ``retriever_scores`` (what the alignment reads: the positions or the similarities, by
    ``retriever_score_kind``, see the module docstring) and ``generator.scores`` hold one score
    per prompt document. ``hits`` are the retriever's top ``k`` (rank 1 = best); the paper's
    ``c2``/``c3`` show only the first ``k − n_random`` of them.
    """

    default_name = "explanation"

    query: str
    condition: PromptCondition
    hits: list[Hit]
    similarities: np.ndarray
    retriever_score_kind: str
    generator: Attribution
    query_saliency: TokenAttribution | None
    document_saliency: list[TokenAttribution] | None
    tau: float = WARG_TAU
    generator_aipc: float | None = None
    metadata: dict = field(default_factory=dict)

    @property
    def documents(self) -> list[Document]:
        return self.condition.documents

    @property
    def response(self) -> str:
        return self.generator.response

    @property
    def retriever_scores(self) -> np.ndarray:
        """The retriever's side of the alignment: prompt positions or similarities."""
        if self.retriever_score_kind == "position":
            return position_scores(len(self.documents))
        return self.similarities

    @property
    def warg(self) -> float:
        return warg(self.retriever_scores, self.generator.scores, self.tau)

    @property
    def flags(self) -> dict[str, bool]:
        """``wr@k`` and ``nd@k`` for k = 1, 3, 5 (k counts ranks from 1)."""
        ks = tuple(k for k in FLAG_KS if k <= len(self.documents))
        return alignment_flags(self.retriever_scores, self.generator.scores, ks)

    @property
    def completeness(self) -> dict[str, float]:
        """IG completeness ratio per explanation (``query`` and each document id)."""
        ratios = {}
        if self.query_saliency is not None:
            ratios["query"] = self.query_saliency.completeness
        for document, saliency in zip(self.documents, self.document_saliency or []):
            ratios[document.id] = saliency.completeness
        return ratios

    def to_frame(self) -> pd.DataFrame:
        """One row per prompt document: position, ranks (1 = top) and scores on both sides
        (``retriever_score``: the kind the alignment reads; ``similarity``: the retriever's)."""
        retriever_rank, generator_rank = ranks(self.retriever_scores), ranks(self.generator.scores)
        high = generator_high_set(self.generator.scores, self.tau)
        completeness = self.completeness
        return pd.DataFrame(
            {
                "position": np.arange(1, len(self.documents) + 1),
                "document_id": [d.id for d in self.documents],
                "title": [d.title for d in self.documents],
                "retrieved": self.condition.retrieved,
                "retriever_rank": retriever_rank,
                "retriever_score": self.retriever_scores,
                "similarity": self.similarities,
                "generator_rank": generator_rank,
                "generator_score": self.generator.scores,
                "generator_relies": high,
                "ig_completeness": [completeness.get(d.id, np.nan) for d in self.documents],
            }
        )

    def summary(self) -> dict:
        """Scalar results: WARG, flags, correlations, completeness."""
        return {
            "query": self.query,
            "response": self.response,
            "condition": self.condition.name,
            "retriever_score_kind": self.retriever_score_kind,
            "warg": self.warg,
            "tau": self.tau,
            **self.flags,
            "spearman": spearman(self.retriever_scores, self.generator.scores)
            if len(self.documents) > 1
            else 0.0,
            "pearson": pearson(self.retriever_scores, self.generator.scores)
            if len(self.documents) > 1
            else 0.0,
            "generator_aipc": self.generator_aipc,
            "completeness": self.completeness,
        }

    def to_dict(self) -> dict:
        """``summary()``, the ``to_frame`` rows, the texts, hits, the prompt condition and both
        sides' attributions (``from_dict`` inverts it). A hit the prompt does not show (the
        paper's ``c2``/``c3``) carries its document."""
        shown = {d.id for d in self.documents}
        return json_ready(
            {
                **self.summary(),
                "documents": self.to_frame().to_dict(orient="records"),
                "texts": {d.id: d.text for d in self.documents},
                "hits": [
                    {"rank": h.rank, "score": h.score, "id": h.document.id}
                    | ({} if h.document.id in shown else {"document": h.document})
                    for h in self.hits
                ],
                "prompt_condition": self.condition,
                "generator": self.generator,
                "query_saliency": self.query_saliency,
                "document_saliency": self.document_saliency or [],
                "metadata": self.metadata,
            }
        )

    @classmethod
    def from_dict(cls, data: dict) -> PipelineExplanation:
        """Also reads files written before ``retriever_score_kind`` (their scores: similarities)."""
        condition = _prompt_condition_from_dict(data["prompt_condition"])
        by_id = {d.id: d for d in condition.documents}
        rows = data["documents"]
        query_saliency = data["query_saliency"]
        document_saliency = [TokenAttribution.from_dict(s) for s in data["document_saliency"]]
        return cls(
            query=data["query"],
            condition=condition,
            hits=[
                Hit(rank=h["rank"], score=h["score"], document=_hit_document(h, by_id))
                for h in data["hits"]
            ],
            similarities=np.array([row.get("similarity", row["retriever_score"]) for row in rows]),
            retriever_score_kind=data.get("retriever_score_kind", "similarity"),
            generator=Attribution.from_dict(data["generator"]),
            query_saliency=TokenAttribution.from_dict(query_saliency) if query_saliency else None,
            document_saliency=document_saliency or None,  # to_dict writes None as []
            tau=data["tau"],
            generator_aipc=data["generator_aipc"],
            metadata=data["metadata"],
        )

    def plots(self, name: str) -> dict:
        """``query_saliency``, ``tokens``, ``ranks`` and ``document_{i}_{id}_saliency`` for each
        prompt document (position ``i`` from 1); saliency only where explained."""
        saliency = self.query_saliency is not None
        drawers = {"query_saliency": self.plot_query_saliency} if saliency else {}
        drawers |= {"tokens": self.plot_tokens, "ranks": self.plot_ranks}
        for index, document in enumerate(self.documents if self.document_saliency else []):
            stem = f"document_{index + 1}_{document.id}_saliency"
            drawers[stem] = partial(self.plot_document_saliency, index)
        return drawers

    def plot_query_saliency(self, ax=None):
        if self.query_saliency is None:
            raise InputError("explained without query saliency")
        return self.query_saliency.plot(ax=ax)

    def plot_document_saliency(self, index: int = 0, ax=None):
        if not self.document_saliency:
            raise InputError("explained without document saliency")
        return self.document_saliency[index].plot(ax=ax)

    def plot_tokens(self, ax=None):
        """Document x response-token heatmap of the generator's attribution."""
        return self.generator.plot_tokens(k=None, ax=ax)

    def plot_ranks(self, ax=None):
        from mechrag.plots.saliency import plot_rank_agreement

        return plot_rank_agreement(
            self.retriever_scores,
            self.generator.scores,
            labels=[d.id for d in self.documents],
            ax=ax,
            title=f"WARG = {self.warg:.2f} ({self.condition.name})",
            retriever_score_kind=self.retriever_score_kind,
        )


def _hit_document(hit: dict, shown: dict[str, Document]) -> Document:
    """A hit's document: its own entry if the prompt did not show it, else the prompt's."""
    return _document_from_dict(hit["document"]) if "document" in hit else shown[hit["id"]]


def _document_from_dict(data: dict) -> Document:
    """The :class:`Document` of its ``json_ready`` form (with provenance)."""
    return Document(**{**data, "provenance": [Origin(**o) for o in data["provenance"]]})


def _prompt_condition_from_dict(data: dict) -> PromptCondition:
    """The :class:`PromptCondition` of its ``json_ready`` form."""
    documents = [_document_from_dict(d) for d in data["documents"]]
    return PromptCondition(**{**data, "documents": documents})


def documents_retrieved(protocol: str = EXPLAIN_PROTOCOL, k: int | None = None) -> int:
    """``k``, or where it is ``None`` the ``protocol``'s count of retrieved documents (what
    :func:`explain` retrieves; the command line checks it against the corpus before any model
    loads)."""
    return get_protocol(protocol).setting("k") if k is None else k


def explain(
    query: str,
    retriever: Retriever,
    model,
    k: int | None = None,
    *,
    condition: str = "c1",
    protocol: str = EXPLAIN_PROTOCOL,
    conditions: PromptConditions | None = None,
    retriever_scores: str | None = None,
    seed: int = 0,
    response: str | None = None,
    max_new_tokens: int = MAX_NEW_TOKENS,
    budget: int | None = None,
    baseline: str = "unk",
    n_steps: int = 100,
    explain_query: bool = True,
    explain_documents: bool = True,
    generator_aipc: bool = False,
    tau: float = WARG_TAU,
    engine: Engine | None = None,
) -> PipelineExplanation:
    """Retrieve, generate and explain both sides of one query (see the module docstring).

    ``protocol`` (:mod:`mechrag.protocols`; ``rag-e``: ``k = 10``, the ``paper`` conditions,
    position scores) gives what ``k``, ``conditions`` and ``retriever_scores`` leave ``None``.
    ``condition`` picks the prompt (``c1``-``c4``) that ``conditions`` builds (default
    ``PromptConditions(preset=<the protocol's>, seed=seed)``; a given ``conditions`` keeps its own
    seed); ``retriever_scores`` (``"position"`` or ``"similarity"``) is the retriever's side of
    the alignment; ``seed`` also seeds PMC-SHAP;
    ``budget`` bounds the subsets PMC-SHAP scores; ``baseline`` and ``n_steps`` configure IG;
    ``generator_aipc`` also measures the generator attribution's AIPC over document removals
    (``2n`` subsets). ``engine``: the generator's engine (default: ``Engine(model)``).
    """
    k = documents_retrieved(protocol, k)
    retriever_scores = retriever_scores or get_protocol(protocol).setting("retriever_scores")
    if retriever_scores not in RETRIEVER_SCORES:
        raise InputError(
            f"retriever_scores must be one of {RETRIEVER_SCORES}, got {retriever_scores!r}"
        )
    conditions = conditions or PromptConditions.for_protocol(protocol, seed=seed)
    hits = retriever.search(query, k)
    top = [hit.document for hit in hits]
    chosen = conditions.build(condition, top, retriever.corpus)
    sources = [d.to_source(paragraph=i) for i, d in enumerate(chosen.documents)]
    case = Case(
        model,
        query,
        sources,
        response,
        max_new_tokens=max_new_tokens,
        system_prompt=chosen.instruction,
        engine=engine,
    )
    generator = generator_attribution(case, budget, seed)
    ig = RetrieverIntegratedGradients.from_retriever(retriever, baseline=baseline, n_steps=n_steps)
    query_saliency = document_saliency = None
    if explain_query:
        query_saliency = ig.explain_query(query, retriever.embed_documents(top))
    if explain_documents:
        query_embedding = retriever.embed_query(query)
        document_saliency = [
            ig.explain_document(d.embedding_text, query_embedding) for d in chosen.documents
        ]
    return PipelineExplanation(
        query=query,
        condition=chosen,
        hits=hits,
        similarities=retriever.scores(query, chosen.documents).astype(float),
        retriever_score_kind=retriever_scores,
        generator=generator,
        query_saliency=query_saliency,
        document_saliency=document_saliency,
        tau=tau,
        generator_aipc=aipc(generator_value(case), generator.scores) if generator_aipc else None,
        metadata={
            "k": k,
            "seed": seed,
            "conditions": asdict(conditions),
            "draws": DRAWS,  # how c2-c4 were seeded: per question since December 2026
            "budget": budget,
            "baseline": baseline,
            "n_steps": n_steps,
            "model_calls": generator.model_calls,
        },
    )
