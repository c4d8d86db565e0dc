"""The methods a sweep can run: one registry entry per method.

An entry is a function ``run(model, example, options) -> dict`` that analyses one
:class:`mechrag.data.RAGExample` with an already loaded model and returns a JSON-ready result,
plus the option names it accepts. Adding a method (gating, explain, ...) is one
:func:`register_method` call.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import mechrag
from mechrag.metrics.accuracy import top_k_hit

MethodFn = Callable[[object, object, dict], dict]

CASE_OPTIONS = ("max_new_tokens", "system_prompt")
ESTIMATOR_OPTIONS = (
    "budget",
    "seed",
    "value",
    "paired",
    "refits",
    "fraction",
    "tolerance",
    "alpha",
    "beta",
    "keep_prob",
    "l1",
)
SHAPLEY_METHODS = ("exact", "loo", "kernel_shap", "pmc_shap", "tmc", "beta", "contextcite")


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


def _case_options(options: dict) -> dict:
    return {k: options[k] for k in CASE_OPTIONS if k in options}


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
    """Sentence-level ARC-JSD (``max_new_tokens``, ``system_prompt``)."""
    attribution = mechrag.arc_jsd(
        model, example.query, example.sources, progress=False, **_case_options(options)
    )
    return attribution_record(attribution, example)


def run_attribute(model, example, options: dict, method: str) -> dict:
    """``mechrag.attribute`` with a Shapley-family ``method`` and its estimator options."""
    estimator = {k: v for k, v in options.items() if k not in CASE_OPTIONS}
    attribution = mechrag.attribute(
        model,
        example.query,
        example.sources,
        method=method,
        progress=False,
        **_case_options(options),
        **estimator,
    )
    return attribution_record(attribution, example)


def run_localize(model, example, options: dict) -> dict:
    """Heads and MLPs carrying a source (``source``: its id; default the top ARC-JSD source)."""
    gains = options.get("gains", True)
    result = mechrag.localize(
        model,
        example.query,
        example.sources,
        source=options.get("source"),
        gains=gains,
        progress=False,
        **_case_options(options),
    )
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
for _method in SHAPLEY_METHODS:
    register_method(
        _method,
        partial(run_attribute, method=_method),
        options=CASE_OPTIONS + ESTIMATOR_OPTIONS,
        description=f"mechrag.attribute(method={_method!r})",
    )
register_method(
    "localize",
    run_localize,
    options=(*CASE_OPTIONS, "source", "gains"),
    description="logit-lens JSD of heads and MLPs when a source is removed",
)
