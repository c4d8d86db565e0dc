"""The methods a sweep can run: one registry entry per method.

An entry is a function ``run(model, example, options) -> dict`` that analyses one
:class:`mechrag.data.RAGExample` with an already loaded model and returns a JSON-ready result,
plus the option names it accepts. Adding a method (gating, explain, ...) is one
:func:`register_method` call.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields
from functools import partial

import mechrag
from mechrag.attribution.estimators import ESTIMATORS
from mechrag.metrics.accuracy import top_k_hit

MethodFn = Callable[[object, object, dict], dict]

CASE_OPTIONS = ("max_new_tokens", "system_prompt")
ATTRIBUTE_OPTIONS = ("budget", "seed", "value")


@dataclass(frozen=True)
class SweepMethod:
    """A registered method: what it runs, which options it takes, whether it needs a model."""

    name: str
    run: MethodFn
    options: tuple[str, ...] = ()
    needs_model: bool = True
    description: str = ""

    def check_options(self, options: dict) -> None:
        unknown = sorted(set(options) - set(self.options))
        if unknown:
            raise ValueError(
                f"method {self.name!r} takes options {list(self.options)}, not {unknown}"
            )


METHODS: dict[str, SweepMethod] = {}


def register_method(
    name: str,
    run: MethodFn,
    *,
    options: tuple[str, ...] = (),
    needs_model: bool = True,
    description: str = "",
    replace: bool = False,
) -> SweepMethod:
    """Make ``run(model, example, options) -> dict`` available to sweeps as ``name``."""
    if name in METHODS and not replace:
        raise ValueError(f"sweep method {name!r} is already registered")
    METHODS[name] = SweepMethod(name, run, tuple(options), needs_model, description)
    return METHODS[name]


def get_method(name: str) -> SweepMethod:
    if name not in METHODS:
        raise ValueError(f"unknown sweep method {name!r}: choose from {sorted(METHODS)}")
    return METHODS[name]


def case_for(model, example, options: dict) -> mechrag.Case:
    """The case of ``example``, its response generated with the ``CASE_OPTIONS`` given."""
    chosen = {key: options[key] for key in CASE_OPTIONS if key in options}
    return mechrag.Case.from_example(model, example, **chosen)


def attribution_record(attribution, example) -> dict:
    """The JSON record of a source attribution on ``example`` (scores in source order)."""
    ranked = [attribution.sources[i].id for i in attribution.ranking]
    return {
        "response": attribution.response,
        "n_sources": len(attribution.sources),
        "n_response_tokens": len(attribution.response_ids),
        "source_ids": [source.id for source in attribution.sources],
        "scores": attribution.scores.tolist(),
        "ranked_ids": ranked,
        "gold_ids": list(example.gold_ids),
        "top1_gold": top_k_hit(ranked, example.gold_ids, 1),
        "model_calls": attribution.model_calls,
    }


def run_arc_jsd(model, example, options: dict) -> dict:
    """Sentence-level ARC-JSD (options: ``max_new_tokens``, ``system_prompt``)."""
    return attribution_record(case_for(model, example, options).arc_jsd(), example)


def run_attribute(model, example, options: dict, method: str) -> dict:
    """A Shapley-family ``method`` configured by its estimator's fields (``paired``, ...)."""
    estimator_class = ESTIMATORS[method]
    estimator = estimator_class(
        **{f.name: options[f.name] for f in fields(estimator_class) if f.name in options}
    )
    attribution = case_for(model, example, options).attribute(
        estimator, **{key: options[key] for key in ATTRIBUTE_OPTIONS if key in options}
    )
    return attribution_record(attribution, example)


def run_localize(model, example, options: dict) -> dict:
    """Heads and MLPs carrying a source (``source``: its id; default the top ARC-JSD source)."""
    gains = options.get("gains", True)
    result = case_for(model, example, options).localize(options.get("source"), gains=gains)
    rho, p = result.spearman() if gains else (None, None)
    return {
        "response": result.response,
        "source_id": result.source_id,
        "gold_ids": list(example.gold_ids),
        "top_source_is_gold": result.source_id in example.gold_ids,
        "rho": rho,
        "p": p,
        "result": result.to_dict(),
    }


register_method(
    "arc_jsd", run_arc_jsd, options=CASE_OPTIONS, description="ARC-JSD source attribution"
)
for name, estimator_class in ESTIMATORS.items():
    register_method(
        name,
        partial(run_attribute, method=name),
        options=(*CASE_OPTIONS, *ATTRIBUTE_OPTIONS, *(f.name for f in fields(estimator_class))),
        description=f"case.attribute({estimator_class.__name__}(...))",
    )
register_method(
    "localize",
    run_localize,
    options=(*CASE_OPTIONS, "source", "gains"),
    description="logit-lens JSD of heads and MLPs when a source is removed",
)
