"""One entry point for source attribution: ARC-JSD or any Shapley-family estimator."""

from __future__ import annotations

import time

from mechrag.attribution.arc_jsd import arc_jsd_for_task
from mechrag.attribution.context import AttributionTask
from mechrag.attribution.games import SubsetScorer
from mechrag.attribution.shapley import METHODS, shapley_values
from mechrag.results import Attribution

ATTRIBUTION_METHODS = ("arc_jsd", *METHODS)
TASK_OPTIONS = ("max_new_tokens", "template", "system_prompt", "engine", "progress")


def attribute(
    model,
    query: str,
    sources,
    method: str = "arc_jsd",
    budget: int | None = None,
    response=None,
    seed: int = 0,
    **options,
) -> Attribution:
    """Attribute ``response`` (generated greedily when ``None``) to ``sources`` with ``method``.

    ``method``: ``arc_jsd`` or one of ``exact``, ``loo``, ``kernel_shap``, ``pmc_shap``, ``tmc``,
    ``beta``, ``contextcite``. ``budget``: distinct subsets the estimator may score. Options
    ``max_new_tokens``, ``template``, ``system_prompt``, ``engine``, ``progress`` set up the task;
    ``value`` picks the game (``logprob``; ``token_prob`` for per-token scores; ``contextcite``
    defaults to ``logit_prob``); the rest go to the estimator.
    """
    if method not in ATTRIBUTION_METHODS:
        raise ValueError(f"unknown method {method!r}: choose from {ATTRIBUTION_METHODS}")
    task_options = {k: options.pop(k) for k in TASK_OPTIONS if k in options}
    task = AttributionTask.prepare(model, query, sources, response, **task_options)
    return attribute_task(task, method, budget, seed, **options)


def attribute_task(
    task: AttributionTask,
    method: str,
    budget: int | None = None,
    seed: int = 0,
    value: str | None = None,
    scorer: SubsetScorer | None = None,
    **options,
) -> Attribution:
    """Attribution for a prepared task; pass a shared ``scorer`` to reuse scored subsets.

    ``model_calls`` counts the distinct subsets this call asked for (cache hits included), i.e.
    what it would cost alone.
    """
    if method == "arc_jsd":
        if budget is not None or value is not None or options:
            raise ValueError("arc_jsd scores the n + 1 leave-one-out subsets: no budget or options")
        return arc_jsd_for_task(task)
    scorer = scorer or SubsetScorer(task)
    value = value or ("logit_prob" if method == "contextcite" else "logprob")
    game, asked = scorer.game(value), set()

    def recorded(masks):
        asked.update(row.tobytes() for row in masks)
        return game(masks)

    passes, start = task.engine.forward_passes, time.perf_counter()
    phi = shapley_values(recorded, scorer.n_sources, method, budget, seed, **options)
    return Attribution(
        method=method,
        query=task.builder.query,
        sources=task.sources,
        scores=phi.sum(-1) if phi.ndim == 2 else phi,
        response=task.response_text,
        response_ids=task.response_ids,
        response_tokens=task.response_tokens,
        token_scores=phi if phi.ndim == 2 else None,
        model_calls=len(asked),
        metadata={
            "value": value,
            "budget": budget,
            "seed": seed,
            "options": options,
            "forward_passes": task.engine.forward_passes - passes,
            "seconds": time.perf_counter() - start,
        },
    )
