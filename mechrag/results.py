"""Results: one base every method's result shares, and the per-source :class:`Attribution`.

A :class:`Result` scores a flat list of items (sources, heads and MLPs, ...): higher = the
response rests on the item more. The base ranks, tabulates (``to_frame``), serialises
(``to_dict``/``from_dict``), prints its top items, plots and saves itself; a subclass names its
items through small hooks (``labels``, ``_item``, ``_key_columns``, ``_extra_columns``).
"""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from jaxtyping import Float

from mechrag.outputs import Serializable, write_json, write_text_atomic
from mechrag.sources import Source


@dataclass
class Result(Serializable):
    """Scores from one method over a flat list of items.

    Subclasses provide ``scores`` (a field or a property: float64, one entry per item).
    ``model_calls`` counts the distinct source subsets scored (the budget spent);
    ``forward_passes`` the model forward passes actually run (batching and caching make it
    differ).
    """

    method: str
    _: KW_ONLY
    model_calls: int | None = None
    forward_passes: int | None = None
    metadata: dict = field(default_factory=dict)

    @property
    def labels(self) -> list[str]:
        """A short label per item, in item order (used by ``repr``, plots and highlights)."""
        raise NotImplementedError

    def _item(self, index: int):
        """What ``top`` returns for item ``index``."""
        raise NotImplementedError

    def _key_columns(self) -> dict:
        """Table columns that name each item (before score and rank)."""
        raise NotImplementedError

    def _extra_columns(self) -> dict:
        """Table columns after score and rank."""
        return {}

    @property
    def ranking(self) -> np.ndarray:
        """Item indices, highest score first (ties keep item order)."""
        return np.argsort(-self.scores, kind="stable")

    def top(self, k: int = 1) -> list:
        """The ``k`` highest-scoring items."""
        return [self._item(int(i)) for i in self.ranking[:k]]

    def to_frame(self) -> pd.DataFrame:
        """One row per item in item order: key columns, score, rank (1 = top), extras."""
        ranks = np.empty(self.scores.size, dtype=int)
        ranks[self.ranking] = np.arange(1, self.scores.size + 1)
        columns = {**self._key_columns(), "score": self.scores, "rank": ranks}
        return pd.DataFrame({**columns, **self._extra_columns()})

    @classmethod
    def from_dict(cls, data: dict):
        """Inverse of ``to_dict``; also reads records written before ``forward_passes``
        was a field (it was ``metadata['forward_passes']``)."""
        fields = dict(data)
        fields.setdefault("forward_passes", fields.get("metadata", {}).get("forward_passes"))
        return cls(**fields)

    def plot(self, k: int | None = 15, ax=None, highlight=()):
        """Horizontal bars of the top ``k`` items (``highlight``: labels to mark)."""
        from mechrag.plots.results import plot_scores

        return plot_scores(self, k=k, ax=ax, highlight=highlight)

    def plots(self, name: str) -> dict:
        return {f"{name}_scores": self.plot}

    def save(self, directory: str | Path, name: str | None = None, figure=None) -> list[Path]:
        """Write ``name``.csv (``to_frame``), ``name``.json (``to_dict``) and ``figure``
        (default: ``plot()``, closed after) as ``name``_scores.png/.svg under ``directory``.

        Each file appears only once fully written. Returns the written paths.
        """
        from mechrag.plots.results import save_figure

        directory, name = Path(directory), name or self.default_name
        table = write_text_atomic(directory / f"{name}.csv", self.to_frame().to_csv(index=False))
        if figure is None:
            return [table, *super().save(directory, name)]
        record = write_json(directory / f"{name}.json", self.to_dict())
        return [table, record, *save_figure(figure, directory / f"{name}_scores")]

    def __repr__(self) -> str:
        labels, scores = self.labels, self.scores
        best = ", ".join(f"{labels[i]}={scores[i]:.4g}" for i in self.ranking[:3])
        return f"{type(self).__name__}(method={self.method!r}, {self._summary()}, top=[{best}])"

    def _summary(self) -> str:
        return f"n_items={self.scores.size}"


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
