"""Accuracy of a source ranking against gold source ids."""

from __future__ import annotations

from collections.abc import Sequence

from mechrag.errors import InputError


def top_k_hit(ranked_ids: Sequence[str], gold_ids: Sequence[str], k: int = 1) -> bool:
    """Whether any of the first ``k`` ranked sources is gold."""
    if k < 1:
        raise InputError("k must be at least 1")
    return bool(set(ranked_ids[:k]) & set(gold_ids))
