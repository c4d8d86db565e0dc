"""Dense retrieval: a corpus, its embeddings in a FAISS index and the encoders that made them.

``Retriever.build(corpus)`` embeds every document (``"title: text"``) with the document encoder;
``search(query, k)`` embeds the query with the query encoder (the same one unless given, as for
all-MiniLM-L6-v2; a separate one for DRAGON-style retrievers) and returns the ``k`` documents
with the highest inner product (cosine similarity for normalised encoders), best first.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from jaxtyping import Float

from mechrag.errors import InputError
from mechrag.results.files import write_json
from mechrag.retrieval.corpus import Corpus, Document
from mechrag.retrieval.encoder import DenseEncoder, load_encoder
from mechrag.retrieval.index import FlatIndex


@dataclass(frozen=True)
class Hit:
    """One retrieved document: ``rank`` counts from 1 (the best match)."""

    rank: int
    score: float
    document: Document


class Retriever:
    """A corpus searchable by dense similarity."""

    def __init__(
        self,
        corpus: Corpus,
        index: FlatIndex,
        query_encoder: DenseEncoder,
        document_encoder: DenseEncoder | None = None,
    ) -> None:
        if len(index) != len(corpus):
            raise InputError(f"index holds {len(index)} vectors for {len(corpus)} documents")
        self.corpus = corpus
        self.index = index
        self.query_encoder = query_encoder
        self.document_encoder = document_encoder or query_encoder

    @classmethod
    def build(
        cls,
        corpus: Corpus,
        query_encoder: DenseEncoder | None = None,
        document_encoder: DenseEncoder | None = None,
        batch_size: int = 32,
    ) -> Retriever:
        """Embed every document of ``corpus`` (default encoder: the embedded MiniLM)."""
        query_encoder = query_encoder or load_encoder()
        document_encoder = document_encoder or query_encoder
        vectors = document_encoder.encode([d.embedding_text for d in corpus], batch_size)
        index = FlatIndex.from_vectors(vectors.cpu().numpy())
        return cls(corpus, index, query_encoder, document_encoder)

    def embed_query(self, query: str) -> Float[torch.Tensor, " d"]:
        return self.query_encoder.encode([query])[0]

    def embed_documents(self, documents: Sequence[Document]) -> Float[torch.Tensor, "n d"]:
        return self.document_encoder.encode([d.embedding_text for d in documents])

    def search(self, query: str, k: int = 5) -> list[Hit]:
        """The ``k`` best documents for ``query`` with their similarity scores, best first."""
        if not query.strip():
            raise InputError("query is empty")
        scores, rows = self.index.search(self.embed_query(query).cpu().numpy()[None], k)
        return [
            Hit(rank + 1, float(score), self.corpus[int(row)])
            for rank, (score, row) in enumerate(zip(scores[0], rows[0]))
        ]

    def scores(self, query: str, documents: Sequence[Document]) -> Float[np.ndarray, " n"]:
        """Similarity of ``query`` to each of ``documents`` (stored vectors where indexed)."""
        rows = [
            self.corpus.position(d.id) if d.id in self.corpus.by_id else None for d in documents
        ]
        vectors = np.empty((len(documents), self.index.dimension), dtype=np.float32)
        stored = [i for i, row in enumerate(rows) if row is not None]
        if stored:
            vectors[stored] = np.stack([self.index.index.reconstruct(rows[i]) for i in stored])
        fresh = [i for i, row in enumerate(rows) if row is None]
        if fresh:
            vectors[fresh] = self.embed_documents([documents[i] for i in fresh]).cpu().numpy()
        return vectors @ self.embed_query(query).cpu().numpy()

    def save(self, folder: str | Path) -> Path:
        """Write ``corpus.jsonl``, ``index.faiss`` and ``retriever.json`` into ``folder``."""
        folder = Path(folder)
        self.corpus.save(folder / "corpus.jsonl")
        self.index.save(folder / "index.faiss")
        names = {"query_encoder": self.query_encoder.name}
        if self.document_encoder is not self.query_encoder:
            names["document_encoder"] = self.document_encoder.name
        write_json(folder / "retriever.json", names)
        return folder

    @classmethod
    def load(
        cls,
        folder: str | Path,
        query_encoder: DenseEncoder | None = None,
        document_encoder: DenseEncoder | None = None,
    ) -> Retriever:
        """A saved retriever; pass the encoders it was built with (default: embedded MiniLM)."""
        folder = Path(folder)
        query_encoder = query_encoder or load_encoder()
        return cls(
            Corpus.load(folder / "corpus.jsonl"),
            FlatIndex.load(folder / "index.faiss"),
            query_encoder,
            document_encoder,
        )
