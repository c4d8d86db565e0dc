"""One-line conveniences: build a :class:`mechrag.Case` and run one method on it.

Hold the case yourself (``case = mechrag.Case(model, query, sources)``) to run several methods
on one question (they then share every scored subset) or to set the prompt template and system
prompt.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from mechrag.attribution.estimators import Estimator
from mechrag.case import Case
from mechrag.engine import Engine
from mechrag.mechanism.lens import DEFAULT_LOGIT_BUDGET
from mechrag.mechanism.result import ComponentAttribution
from mechrag.results import Attribution
from mechrag.sources import Source

Sources = str | Iterable[str] | Iterable[Source]
Response = str | Sequence[int] | None


def arc_jsd(
    model,
    query: str,
    sources: Sources,
    response: Response = None,
    *,
    max_new_tokens: int = 64,
    engine: Engine | None = None,
) -> Attribution:
    """``Case(model, query, sources, response, ...).arc_jsd()``."""
    case = Case(model, query, sources, response, max_new_tokens=max_new_tokens, engine=engine)
    return case.arc_jsd()


def attribute(
    model,
    query: str,
    sources: Sources,
    method: str | Estimator = "arc_jsd",
    *,
    budget: int | None = None,
    seed: int = 0,
    value: str | None = None,
    response: Response = None,
    max_new_tokens: int = 64,
    engine: Engine | None = None,
) -> Attribution:
    """``Case(model, query, sources, response, ...).attribute(method, ...)``."""
    case = Case(model, query, sources, response, max_new_tokens=max_new_tokens, engine=engine)
    return case.attribute(method, budget=budget, seed=seed, value=value)


def localize(
    model,
    query: str,
    sources: Sources,
    source: str | None = None,
    *,
    gains: bool = True,
    logit_budget: int = DEFAULT_LOGIT_BUDGET,
    response: Response = None,
    max_new_tokens: int = 64,
    engine: Engine | None = None,
) -> ComponentAttribution:
    """``Case(model, query, sources, response, ...).localize(source, ...)``."""
    case = Case(model, query, sources, response, max_new_tokens=max_new_tokens, engine=engine)
    return case.localize(source, gains=gains, logit_budget=logit_budget)
