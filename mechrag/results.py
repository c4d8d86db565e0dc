"""Attribution results: one type returned by every source-attribution method.

An :class:`Attribution` holds a score per source (higher = the response rests on it more), an
optional ``[n_sources, n_response_tokens]`` matrix, and the response it explains. It ranks,
tabulates (``to_frame``), serialises (``to_dict``/``from_dict``) and plots itself.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np
import pandas as pd
from jaxtyping import Float

from mechrag.sources import Source


@dataclass
class Attribution:
    """Per-source scores for one query, context and response.

    ``token_scores[i, t]`` is source ``i``'s contribution at response token ``t`` (for ARC-JSD
    the JSD at that token; ``scores`` is its sum over tokens). ``model_calls`` is the number of
    subsets the model was run on (the budget actually spent).
    """

    method: str
    query: str
    sources: list[Source]
    scores: Float[np.ndarray, " n_sources"]
    response: str
    response_ids: list[int]
    response_tokens: list[str]
    token_scores: Float[np.ndarray, "n_sources n_response"] | None = None
    model_calls: int | None = None
    metadata: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.scores = np.asarray(self.scores, dtype=np.float64)
        if self.scores.shape != (len(self.sources),):
            raise ValueError(f"scores must be [{len(self.sources)}], got {self.scores.shape}")
        if self.token_scores is not None:
            self.token_scores = np.asarray(self.token_scores, dtype=np.float64)
            expected = (len(self.sources), len(self.response_ids))
            if self.token_scores.shape != expected:
                raise ValueError(f"token_scores must be {expected}, got {self.token_scores.shape}")

    @property
    def ranking(self) -> np.ndarray:
        """Source indices, highest score first (ties keep source order)."""
        return np.argsort(-self.scores, kind="stable")

    def top(self, k: int = 1) -> list[tuple[Source, float]]:
        """The ``k`` highest-scoring sources with their scores."""
        return [(self.sources[i], float(self.scores[i])) for i in self.ranking[:k]]

    def to_frame(self) -> pd.DataFrame:
        """One row per source: id, rank (1 = top), score, title, paragraph, text."""
        ranks = np.empty(len(self.sources), dtype=int)
        ranks[self.ranking] = np.arange(1, len(self.sources) + 1)
        return pd.DataFrame(
            {
                "source_id": [s.id for s in self.sources],
                "rank": ranks,
                "score": self.scores,
                "title": [s.title for s in self.sources],
                "paragraph": [s.paragraph for s in self.sources],
                "text": [s.text for s in self.sources],
            }
        )

    def plot(self, k: int | None = 15, ax=None, **kwargs):
        """Horizontal bar chart of the top ``k`` sources; returns the figure."""
        from mechrag.plots.sources import plot_source_scores

        return plot_source_scores(self, k=k, ax=ax, **kwargs)

    def plot_tokens(self, k: int | None = 10, ax=None, **kwargs):
        """Heatmap of the top ``k`` sources by response token; returns the figure."""
        from mechrag.plots.sources import plot_token_scores

        return plot_token_scores(self, k=k, ax=ax, **kwargs)

    def to_dict(self) -> dict:
        """JSON-ready dictionary (``from_dict`` inverts it)."""
        data = asdict(self)
        data["scores"] = self.scores.tolist()
        data["token_scores"] = None if self.token_scores is None else self.token_scores.tolist()
        return data

    @classmethod
    def from_dict(cls, data: dict) -> Attribution:
        fields = dict(data)
        fields["sources"] = [Source(**s) for s in fields["sources"]]
        if fields.get("token_scores") is not None:
            fields["token_scores"] = np.asarray(fields["token_scores"])
        return cls(**fields)

    def __repr__(self) -> str:
        best = ", ".join(f"{s.id}={v:.4g}" for s, v in self.top(3))
        return (
            f"Attribution(method={self.method!r}, n_sources={len(self.sources)}, "
            f"n_response={len(self.response_ids)}, top=[{best}])"
        )
