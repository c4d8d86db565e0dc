"""Mechanistic localisation: which attention heads and MLPs carry a source into the response.

:meth:`mechrag.Case.localize` removes one source (by default the top ARC-JSD source), captures
the full and the reduced prompt's activations at the response positions through the engine
(prefix reuse, token budget) with the same teacher-forced response, and scores each component by
``sum_t JSD(lens(w_full[t]) || lens(w_ablated[t]))``, where ``w[t]`` is the component's write at
response position ``t`` and ``lens`` is the float32 logit lens of :mod:`mechrag.mechanism.lens`.
Semantic gains (:mod:`mechrag.mechanism.semantic_gain`) come from the full-context row of the
same capture, under ``gain_definition`` (default the paper's ``"argmax_token"``).
"""

from __future__ import annotations

import time

import numpy as np
import torch

from mechrag.mechanism.lens import ResponseActivations, head_lens_jsd, layer_lens_jsd
from mechrag.mechanism.semantic_gain import check_definition, semantic_gain
from mechrag.models import adapter
from mechrag.results.components import DEFAULT_GAIN_DEFINITION, ComponentAttribution


@torch.inference_mode()
def localize_source(
    case,
    index: int,
    *,
    gains: bool,
    logit_budget: int,
    attribution=None,
    gain_definition: str = DEFAULT_GAIN_DEFINITION,
) -> ComponentAttribution:
    """Component scores on ``case`` when source ``index`` is removed.

    ``attribution``: the ARC-JSD result that chose the source, recorded in the metadata;
    ``gain_definition``: the semantic gain's (``"argmax_token"`` or ``"residual_cosine"``),
    used when ``gains``.
    """
    check_definition(gain_definition)
    model = case.model
    passes, start = case.engine.forward_passes, time.perf_counter()
    masks = np.stack([case.full_mask(), case.leave_one_out_masks()[index]])
    acts = ResponseActivations(**case.capture(masks, sites=tuple(adapter.SITES)))
    heads = head_lens_jsd(model, acts, logit_budget).sum(-1)
    mlps = layer_lens_jsd(model, acts.mlp_out, logit_budget).sum(-1)
    resid = layer_lens_jsd(model, acts.resid_post, logit_budget).sum(-1)
    gain = (
        semantic_gain(model, acts, case.response_ids, definition=gain_definition) if gains else None
    )
    seconds = time.perf_counter() - start
    metadata = {"model": getattr(model, "mechrag_name", None), "seconds": seconds}
    if attribution is not None:
        ids = [s.id for s in case.sources]
        metadata["source_scores"] = dict(zip(ids, attribution.scores.tolist()))
    return ComponentAttribution(
        query=case.query,
        source_id=case.sources[index].id,
        response=case.response_text,
        response_ids=list(case.response_ids),
        heads=heads.cpu().numpy(),
        mlps=mlps.cpu().numpy(),
        resid_post=resid.cpu().numpy(),
        head_gain=None if gain is None or gain.heads is None else gain.heads.cpu().numpy(),
        attn_gain=None if gain is None else gain.attention.cpu().numpy(),
        mlp_gain=None if gain is None else gain.mlps.cpu().numpy(),
        gain_definition=None if gain is None else gain.definition,
        model_calls=2,
        forward_passes=case.engine.forward_passes - passes,
        metadata=metadata,
    )
