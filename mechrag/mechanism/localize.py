"""Mechanistic localisation: which attention heads and MLPs carry a source into the response.

``localize`` removes one source (by default the top ARC-JSD source), runs the full and the
reduced prompt in one batch with the same teacher-forced response, and scores each component by
``sum_t JSD(lens(w_full[t]) || lens(w_ablated[t]))``, where ``w[t]`` is the component's write at
response position ``t`` and ``lens`` is the logit lens of :mod:`mechrag.mechanism.lens`.
"""

from __future__ import annotations

import torch

from mechrag.attribution.arc_jsd import arc_jsd_for_task
from mechrag.attribution.context import AttributionTask
from mechrag.mechanism.lens import (
    DEFAULT_LOGIT_BUDGET,
    capture_response_activations,
    head_lens_jsd,
    layer_lens_jsd,
)
from mechrag.mechanism.result import ComponentAttribution
from mechrag.mechanism.semantic_gain import semantic_gain
from mechrag.results import Attribution


def localize(
    model,
    query: str,
    sources,
    source: str | None = None,
    response=None,
    *,
    gains: bool = True,
    logit_budget: int = DEFAULT_LOGIT_BUDGET,
    **options,
) -> ComponentAttribution:
    """Per-head, per-MLP and per-layer logit-lens JSD when ``source`` is removed.

    ``sources``/``response``/``options`` are as for :func:`mechrag.arc_jsd` (``max_new_tokens``,
    ``template``, ...). ``source``: id of the source to remove; ``None`` picks the top ARC-JSD
    source. ``gains`` also computes semantic gains. ``logit_budget`` bounds the number of
    vocabulary-sized float32 elements held at once.
    """
    task = AttributionTask.prepare(model, query, sources, response, **options)
    return localize_task(task, source, gains=gains, logit_budget=logit_budget)


def resolve_source(
    task: AttributionTask, source: str | None, attribution: Attribution | None = None
) -> tuple[int, Attribution | None]:
    """Index of ``source`` in the task, running ARC-JSD to pick the top one when ``None``."""
    ids = [s.id for s in task.sources]
    if source is None:
        attribution = attribution or arc_jsd_for_task(task)
        return int(attribution.ranking[0]), attribution
    if source not in ids:
        raise ValueError(f"unknown source id {source!r}: choose from {ids}")
    return ids.index(source), attribution


@torch.inference_mode()
def localize_task(
    task: AttributionTask,
    source: str | None = None,
    attribution: Attribution | None = None,
    *,
    gains: bool = True,
    logit_budget: int = DEFAULT_LOGIT_BUDGET,
) -> ComponentAttribution:
    """``localize`` on a prepared task; ``attribution`` reuses an ARC-JSD result."""
    model, builder = task.model, task.builder
    index, attribution = resolve_source(task, source, attribution)
    masks = torch.stack([builder.full_mask(), builder.full_mask()])
    masks[1, index] = False
    ids, attention = task.engine.batch_inputs(
        task.engine.sequences(builder, task.response_ids, masks)
    )
    acts = capture_response_activations(model, ids, attention, len(task.response_ids))
    heads = head_lens_jsd(model, acts, logit_budget).sum(-1)
    mlps = layer_lens_jsd(model, acts.mlp_out, logit_budget).sum(-1)
    resid = layer_lens_jsd(model, acts.resid_post, logit_budget).sum(-1)
    gain = semantic_gain(model, acts, task.response_ids) if gains else None
    metadata = {"model": getattr(model, "mechrag_name", None)}
    if attribution is not None:
        metadata["source_scores"] = dict(
            zip([s.id for s in task.sources], attribution.scores.tolist())
        )
    return ComponentAttribution(
        query=builder.query,
        source_id=task.sources[index].id,
        response=task.response_text,
        response_ids=list(task.response_ids),
        heads=heads.numpy(),
        mlps=mlps.numpy(),
        resid_post=resid.numpy(),
        head_gain=None if gain is None else gain.heads.numpy(),
        attn_gain=None if gain is None else gain.attention.numpy(),
        mlp_gain=None if gain is None else gain.mlps.numpy(),
        metadata=metadata,
    )
