"""Drivers for peer packages that mechrag is compared against (optional ``peers`` extra)."""

from __future__ import annotations

from collections.abc import Sequence

from mechrag.prompts import render_context
from mechrag.sources import Source


def context_cite_partitioner(sources: Sequence[Source]):
    """A ``context-cite`` partitioner over mechrag's sources, rendered exactly as mechrag renders
    them (the package's own sentence splitter needs an nltk download, unavailable offline)."""
    from context_cite.context_partitioner import BaseContextPartitioner

    class SourcePartitioner(BaseContextPartitioner):
        def __init__(self, items: Sequence[Source]):
            self.items = list(items)
            super().__init__(render_context(self.items))

        @property
        def num_sources(self) -> int:
            return len(self.items)

        def split_context(self) -> None:
            """Already split: one source per item."""

        def get_source(self, index: int) -> str:
            return self.items[index].text

        def get_context(self, mask=None) -> str:
            kept = self.items if mask is None else [s for s, k in zip(self.items, mask) if k]
            return render_context(kept)

    return SourcePartitioner(sources)
