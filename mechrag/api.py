"""One-line conveniences: build a :class:`mechrag.Case` and run one method on it.

Each takes every option of ``Case(...)`` and of the case method it stands for, with their own
defaults: read from those signatures, never restated. Hold the case yourself
(``case = mechrag.Case(model, query, sources)``) to run several methods on one question: they
then share every scored subset.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Sequence

from mechrag.attribution.base import SourceMethod
from mechrag.attribution.screening import SourceScreen
from mechrag.case import Case
from mechrag.engine import Engine
from mechrag.results.attribution import Attribution
from mechrag.results.components import ComponentAttribution
from mechrag.sources import Source

Sources = str | Iterable[str] | Iterable[Source]
Response = str | Sequence[int] | None


def defaults(function: Callable) -> dict:
    """The default of every parameter of ``function`` that has one."""
    parameters = inspect.signature(function).parameters.values()
    return {p.name: p.default for p in parameters if p.default is not inspect.Parameter.empty}


CASE = defaults(Case.__init__)
ARC_JSD = defaults(Case.arc_jsd)
ATTRIBUTE = defaults(Case.attribute)
LOCALIZE = defaults(Case.localize)


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
    response: Response = CASE["response"],
    *,
    divergence: str = ARC_JSD["divergence"],
    screen: int | SourceScreen | None = ARC_JSD["screen"],
    max_new_tokens: int = CASE["max_new_tokens"],
    template: str = CASE["template"],
    system_prompt: str | None = CASE["system_prompt"],
    engine: Engine | None = CASE["engine"],
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
    method: str | SourceMethod = ATTRIBUTE["method"],
    *,
    budget: int | None = ATTRIBUTE["budget"],
    seed: int | None = ATTRIBUTE["seed"],
    value: str | None = ATTRIBUTE["value"],
    reuse_scored: bool | None = ATTRIBUTE["reuse_scored"],
    response: Response = CASE["response"],
    max_new_tokens: int = CASE["max_new_tokens"],
    template: str = CASE["template"],
    system_prompt: str | None = CASE["system_prompt"],
    engine: Engine | None = CASE["engine"],
) -> Attribution:
    """``Case(model, query, sources, response, ...).attribute(method, ...)``; ``budget``,
    ``seed``, ``value`` and ``reuse_scored`` replace the method's own when given."""
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
    source: str | None = LOCALIZE["source"],
    *,
    gains: bool = LOCALIZE["gains"],
    gain_definition: str | None = LOCALIZE["gain_definition"],
    protocol: str = LOCALIZE["protocol"],
    logit_budget: int = LOCALIZE["logit_budget"],
    response: Response = CASE["response"],
    max_new_tokens: int = CASE["max_new_tokens"],
    template: str = CASE["template"],
    system_prompt: str | None = CASE["system_prompt"],
    engine: Engine | None = CASE["engine"],
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
