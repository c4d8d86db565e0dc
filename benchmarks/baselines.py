"""What the benchmarks measure mechrag against: the naive one-forward-per-ablation ARC-JSD loop,
and drivers for peer packages (the optional ``peers`` extra). Benchmarks import this module as
their sibling (Python puts a script's folder first on its path)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from mechrag import PromptBuilder, jsd
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


@dataclass
class Work:
    """Tokens run through the model body and positions projected to the vocabulary."""

    tokens: int = 0
    projected: int = 0

    def flops(self, body_parameters: int, head_parameters: int) -> float:
        return 2.0 * (self.tokens * body_parameters + self.projected * head_parameters)


@torch.no_grad()
def naive_arc_jsd(
    model, builder: PromptBuilder, response_ids: list[int], work: Work | None = None
) -> np.ndarray:
    """Per-source summed JSD, one unbatched full-logits forward pass per prompt."""
    n_response = len(response_ids)
    work = Work() if work is None else work

    def distributions(mask):
        ids = torch.tensor([builder.ids(mask) + response_ids[:-1]], device=model.cfg.device)
        work.tokens += ids.shape[1]
        work.projected += ids.shape[1]
        logits = model(ids)  # [1, pos, vocab]: every position projected to the vocabulary
        return logits[0].float().log_softmax(-1)[-n_response:]

    full = distributions(builder.full_mask())
    masks = ~torch.eye(builder.n_sources, dtype=torch.bool)
    return np.array([float(jsd(full, distributions(mask)).sum()) for mask in masks])
