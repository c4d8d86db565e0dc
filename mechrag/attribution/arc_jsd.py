"""Sentence-level ARC-JSD (Li et al., 2025): attribution by leave-one-out JSD.

For each source ``i`` and response token ``t`` (teacher forcing on the same response):
``JSD_t(i) = JSD(P(. | query, C, r_<t) || P(. | query, C without i, r_<t))``, and the source's
score is ``sum_t JSD_t(i)``. Standard JSD with natural log, so each token term is in ``[0, ln 2]``.
"""

from __future__ import annotations

import torch

from mechrag.attribution.context import AttributionTask
from mechrag.divergences import jsd
from mechrag.results import Attribution


def leave_one_out_masks(n_sources: int) -> torch.Tensor:
    """Row ``i`` keeps every source except ``i``."""
    return ~torch.eye(n_sources, dtype=torch.bool)


def arc_jsd(model, query, sources, response=None, **options) -> Attribution:
    """Score each source by the summed per-token JSD when it is removed.

    ``sources``: a context string (split into sentences), a list of strings or of ``Source``.
    ``response``: text or token ids to teacher-force; generated greedily from the full prompt
    when ``None`` (``max_new_tokens``). Other options: ``template``, ``system_prompt``,
    ``engine``, ``progress``.
    """
    task = AttributionTask.prepare(model, query, sources, response, **options)
    return arc_jsd_for_task(task)


def arc_jsd_for_task(task: AttributionTask) -> Attribution:
    builder, engine = task.builder, task.engine
    calls_before = engine.forward_passes
    per_token = engine.compare_to_full(
        builder,
        task.response_ids,
        leave_one_out_masks(builder.n_sources),
        jsd,
        desc="ARC-JSD ablations",
    )
    return Attribution(
        method="arc_jsd",
        query=builder.query,
        sources=task.sources,
        scores=per_token.sum(-1).double().numpy(),
        response=task.response_text,
        response_ids=task.response_ids,
        response_tokens=task.response_tokens,
        token_scores=per_token.double().numpy(),
        model_calls=builder.n_sources + 1,
        metadata={"forward_passes": engine.forward_passes - calls_before},
    )
