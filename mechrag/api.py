"""One-line conveniences: build a :class:`mechrag.Case` and run one method on it.

Each takes every option of ``Case(...)`` and of the case method it stands for. Hold the case
yourself (``case = mechrag.Case(model, query, sources)``) to run several methods on one question:
they then share every scored subset.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from mechrag.attribution.base import SourceMethod
from mechrag.attribution.screening import SourceScreen
from mechrag.case import Case
from mechrag.engine import Engine
from mechrag.mechanism.lens import DEFAULT_LOGIT_BUDGET
from mechrag.prompts import DEFAULT_TEMPLATE
from mechrag.results.attribution import Attribution
from mechrag.results.components import ComponentAttribution
from mechrag.sources import Source

Sources = str | Iterable[str] | Iterable[Source]
Response = str | Sequence[int] | None


def _case(model, query, sources, response, max_new_tokens, template, system_prompt, engine):
    return Case(
        model,
        query,
        sources,
        response,
        max_new_tokens=max_new_tokens,
        template=template,
        system_prompt=system_prompt,
        engine=engine,
    )


def arc_jsd(
    model,
    query: str,
    sources: Sources,
    response: Response = None,
    *,
    divergence: str = "jsd",
    screen: int | SourceScreen | None = None,
    max_new_tokens: int = 64,
    template: str = DEFAULT_TEMPLATE,
    system_prompt: str | None = None,
    engine: Engine | None = None,
) -> Attribution:
    """``Case(model, query, sources, response, ...).arc_jsd(divergence, screen=screen)``."""
    case = _case(
        model, query, sources, response, max_new_tokens, template, system_prompt, engine
    )
    return case.arc_jsd(divergence, screen=screen)


def attribute(
    model,
    query: str,
    sources: Sources,
    method: str | SourceMethod = "arc_jsd",
    *,
    budget: int | None = None,
    seed: int | None = None,
    value: str | None = None,
    reuse_scored: bool | None = None,
    response: Response = None,
    max_new_tokens: int = 64,
    template: str = DEFAULT_TEMPLATE,
    system_prompt: str | None = None,
    engine: Engine | None = None,
) -> Attribution:
    """``Case(model, query, sources, response, ...).attribute(method, ...)``."""
    case = _case(
        model, query, sources, response, max_new_tokens, template, system_prompt, engine
    )
    return case.attribute(
        method, budget=budget, seed=seed, value=value, reuse_scored=reuse_scored
    )


def localize(
    model,
    query: str,
    sources: Sources,
    source: str | None = None,
    *,
    gains: bool = True,
    gain_definition: str | None = None,
    protocol: str = "arc-jsd",
    logit_budget: int = DEFAULT_LOGIT_BUDGET,
    response: Response = None,
    max_new_tokens: int = 64,
    template: str = DEFAULT_TEMPLATE,
    system_prompt: str | None = None,
    engine: Engine | None = None,
) -> ComponentAttribution:
    """``Case(model, query, sources, response, ...).localize(source, ...)``."""
    case = _case(
        model, query, sources, response, max_new_tokens, template, system_prompt, engine
    )
    return case.localize(
        source,
        gains=gains,
        gain_definition=gain_definition,
        protocol=protocol,
        logit_budget=logit_budget,
    )
