"""The per-source :class:`Attribution`: what every source-attribution method returns."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from jaxtyping import Float

from mechrag.results.base import Result
from mechrag.sources import Source


@dataclass(repr=False)
class Attribution(Result):
    """Per-source scores for one query, context and response.

    ``token_scores[i, t]`` is source ``i``'s contribution at response token ``t`` (for ARC-JSD
    the JSD at that token; ``scores`` is its sum over tokens).
    """

    query: str
    sources: list[Source]
    scores: Float[np.ndarray, " n_sources"]
    response: str
    response_ids: list[int]
    response_tokens: list[str]
    token_scores: Float[np.ndarray, "n_sources n_response"] | None = None

    def __post_init__(self) -> None:
        self.sources = [s if isinstance(s, Source) else Source(**s) for s in self.sources]
        self.scores = np.asarray(self.scores, dtype=np.float64)
        if self.scores.shape != (len(self.sources),):
            raise ValueError(f"scores must be [{len(self.sources)}], got {self.scores.shape}")
        if self.token_scores is not None:
            self.token_scores = np.asarray(self.token_scores, dtype=np.float64)
            expected = (len(self.sources), len(self.response_ids))
            if self.token_scores.shape != expected:
                raise ValueError(f"token_scores must be {expected}, got {self.token_scores.shape}")

    @property
    def labels(self) -> list[str]:
        return [s.id for s in self.sources]

    def _item(self, index: int) -> tuple[Source, float]:
        return self.sources[index], float(self.scores[index])

    def _key_columns(self) -> dict:
        return {"source_id": self.labels}

    def _extra_columns(self) -> dict:
        return {
            "title": [s.title for s in self.sources],
            "paragraph": [s.paragraph for s in self.sources],
            "text": [s.text for s in self.sources],
        }

    def _summary(self) -> str:
        return f"n_sources={len(self.sources)}, n_response={len(self.response_ids)}"

    def plot(self, k: int | None = 15, ax=None, highlight=()):
        """Bars of the top ``k`` sources with their text (``highlight``: e.g. gold ids)."""
        from mechrag.plots.sources import plot_source_scores

        return plot_source_scores(self, k=k, ax=ax, highlight=highlight)

    def to_html(self, source: str | None = None) -> str:
        """HTML fragment: context, ranked bars, response heat of ``source`` (default: top)."""
        from mechrag.views.attribution import attribution_html

        return attribution_html(self, source=source)

    def plot_tokens(self, k: int | None = 10, ax=None, **kwargs):
        """Heatmap of the top ``k`` sources by response token; returns the figure."""
        from mechrag.plots.sources import plot_token_scores

        return plot_token_scores(self, k=k, ax=ax, **kwargs)
