"""Small helpers shared by the intervention tests (hooks and gates)."""

from __future__ import annotations

import torch

from mechrag.engine import Engine

SEQUENCES = [[5, 17, 42, 99, 3, 250, 7, 8], [1, 2, 3, 4, 5]]


def hook_count(model) -> int:
    """Forward hooks registered on the model's hook points right now, as torch itself counts
    them (independent of TransformerLens's handle lists; a point with several names once)."""
    points = {id(point): point for point in model.hook_points()}.values()
    return sum(len(point._forward_hooks) for point in points)


def batch_logits(model):
    """Logits of a fixed left-padded two-row batch (hooks active on the model apply)."""
    ids, attention = Engine(model).batch_inputs(SEQUENCES)
    with torch.no_grad():
        return model(ids, attention_mask=attention)
