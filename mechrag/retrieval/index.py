"""An exact inner-product index over document embeddings (FAISS ``IndexFlatIP``), with save/load.

With normalised embeddings the inner product is the cosine similarity. Search is exhaustive, so
results equal a brute-force dot product (a test checks this).
"""

from __future__ import annotations

from pathlib import Path

import faiss
import numpy as np
from jaxtyping import Float, Int

from mechrag.errors import InputError


class FlatIndex:
    """Exhaustive inner-product search over ``[n, d]`` float32 vectors."""

    def __init__(self, dimension: int) -> None:
        self.index = faiss.IndexFlatIP(dimension)

    @classmethod
    def from_vectors(cls, vectors: Float[np.ndarray, "n d"]) -> FlatIndex:
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        index = cls(vectors.shape[1])
        index.index.add(vectors)
        return index

    def __len__(self) -> int:
        return self.index.ntotal

    @property
    def dimension(self) -> int:
        return self.index.d

    def search(
        self, queries: Float[np.ndarray, "m d"], k: int
    ) -> tuple[Float[np.ndarray, "m k"], Int[np.ndarray, "m k"]]:
        """Top-``k`` inner products and row indices per query, best first."""
        if not 1 <= k <= len(self):
            raise InputError(f"k must be in [1, {len(self)}], got {k}")
        queries = np.ascontiguousarray(np.atleast_2d(queries), dtype=np.float32)
        if queries.shape[1] != self.dimension:
            raise InputError(f"queries must have {self.dimension} columns, got {queries.shape[1]}")
        return self.index.search(queries, k)

    def vectors(self) -> Float[np.ndarray, "n d"]:
        """The stored vectors (a copy)."""
        return self.index.reconstruct_n(0, len(self))

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        faiss.write_index(self.index, str(path))
        return path

    @classmethod
    def load(cls, path: str | Path) -> FlatIndex:
        loaded = faiss.read_index(str(path))
        index = cls(loaded.d)
        index.index = loaded
        return index
