"""The result base: what every result shares to serialise, show and save itself.

:class:`Serializable` gives result dataclasses ``to_dict``, ``from_dict``, ``to_json`` and
``save`` (the JSON file and the figures the result draws), and ``to_html`` (also a notebook's
``_repr_html_``) and ``save_html``. A :class:`Result` scores a flat list of items (sources, heads
and MLPs, ...): higher = the response rests on the item more. The base ranks, tabulates
(``to_frame``), serialises (``to_dict``/``from_dict``), prints its top items, plots and saves
itself; a subclass names its items through small hooks (``labels``, ``_item``,
``_key_columns``, ``_extra_columns``).

Results sit below their presentation: :mod:`mechrag.views` and :mod:`mechrag.plots` import
results, and a result reaches its view or figure only inside the method that draws it.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass, field
from pathlib import Path
from typing import ClassVar

import numpy as np
import pandas as pd

from mechrag.results.files import json_ready, write_json, write_text_atomic


class Serializable:
    """What every result dataclass shares to serialise and save itself.

    ``to_dict`` holds the dataclass fields (JSON-ready; a subclass may add derived entries, such
    as summaries), ``from_dict`` reads the fields back and ignores derived entries, and ``save``
    writes ``to_dict`` and the figures of ``plots``.
    """

    default_name: ClassVar[str] = "result"

    def to_dict(self) -> dict:
        """JSON-ready dictionary of the fields (``from_dict`` inverts it)."""
        return {f.name: json_ready(getattr(self, f.name)) for f in dataclasses.fields(self)}

    @classmethod
    def from_dict(cls, data: dict):
        """The result ``to_dict`` describes (entries that are not fields are derived: skipped)."""
        names = {f.name for f in dataclasses.fields(cls) if f.init}
        return cls(**{name: value for name, value in data.items() if name in names})

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1)

    def plots(self, name: str) -> dict[str, Callable]:
        """The figures ``save`` writes: file stem -> function drawing it (none by default)."""
        return {}

    def to_html(self) -> str:
        """This result as an HTML fragment with inline CSS (its view in :mod:`mechrag.views`)."""
        from mechrag.views.render import to_html

        return to_html(self)

    def _repr_html_(self) -> str:
        """What a notebook shows for this result: :meth:`to_html`."""
        return self.to_html()

    def show(self) -> None:
        """Show this result where it is asked for: its view in a notebook, its table (or JSON,
        for a result without one) in a terminal."""
        try:
            from IPython import get_ipython
        except ImportError:  # no IPython: a terminal
            get_ipython = None
        shell = get_ipython() if get_ipython else None
        if shell is not None and getattr(shell, "kernel", None) is not None:
            from IPython.display import HTML, display

            display(HTML(self.to_html()))
        elif hasattr(self, "to_frame"):
            print(self.to_frame().to_string(index=False))
        else:
            print(self.to_json())

    def to_html_page(self, title: str | None = None) -> str:
        """A complete self-contained page of this result: no script, nothing loaded."""
        from mechrag.views.render import to_html_page

        return to_html_page([self], title or type(self).__name__)

    def save_html(self, path: str | Path, title: str | None = None) -> Path:
        """Write :meth:`to_html_page` to ``path``, atomically."""
        return write_text_atomic(path, self.to_html_page(title))

    def save(self, directory: str | Path, name: str | None = None) -> list[Path]:
        """Write ``name``.json (default :attr:`default_name`) and each figure of ``plots`` as
        .png/.svg under ``directory``; each file appears only once fully written.

        Returns the written paths.
        """
        from mechrag.plots.results import save_figures

        directory, name = Path(directory), name or self.default_name
        record = write_json(directory / f"{name}.json", self.to_dict())
        return [record, *save_figures(self.plots(name), directory)]


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
