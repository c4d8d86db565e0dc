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

from mechrag.attribution.methods import METHODS as ATTRIBUTION_METHODS
from mechrag.errors import InputError

MethodFn = Callable[[object, object, dict], dict]

CASE_OPTIONS = ("max_new_tokens", "system_prompt")


@dataclass(frozen=True)
class SweepMethod:
    """A registered method: what it runs, which options it takes, whether it needs a model, and
    ``check(options)``: what it refuses before any model loads (a missing file)."""

    name: str
    run: MethodFn
    options: tuple[str, ...] = ()
    needs_model: bool = True
    description: str = ""
    check: Callable[[dict], None] | None = None

    def check_options(self, options: dict) -> None:
        unknown = sorted(set(options) - set(self.options))
        if unknown:
            raise InputError(
                f"method {self.name!r} takes options {list(self.options)}, not {unknown}"
            )
        if self.check is not None:
            self.check(options)


SWEEP_METHODS: dict[str, SweepMethod] = {}
METHODS = SWEEP_METHODS  # its name before 0.3 (``mechrag.METHODS`` is the attribution registry)


def register_method(
    name: str,
    run: MethodFn,
    *,
    options: tuple[str, ...] = (),
    needs_model: bool = True,
    description: str = "",
    check: Callable[[dict], None] | None = None,
    replace: bool = False,
) -> SweepMethod:
    """Make ``run(model, example, options) -> dict`` available to sweeps as ``name``."""
    if name in SWEEP_METHODS and not replace:
        raise InputError(f"sweep method {name!r} is already registered")
    SWEEP_METHODS[name] = SweepMethod(name, run, tuple(options), needs_model, description, check)
    return SWEEP_METHODS[name]


def get_method(name: str) -> SweepMethod:
    if name not in SWEEP_METHODS:
        raise InputError(f"unknown sweep method {name!r}: choose from {sorted(SWEEP_METHODS)}")
    return SWEEP_METHODS[name]


def case_for(model, example, options: dict):
    """The :class:`mechrag.Case` of ``example``, its response generated with the
    ``CASE_OPTIONS`` given."""
    from mechrag.case import Case  # the model stack loads only when a sweep runs

    chosen = {key: options[key] for key in CASE_OPTIONS if key in options}
    return Case.from_example(model, example, **chosen)


def attribution_record(attribution, example) -> dict:
    """The JSON record of a source attribution on ``example`` (scores in source order)."""
    from mechrag.metrics.accuracy import top_k_hit  # the metrics package loads scipy.stats

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


def configured_method(options: dict, method: str):
    """The attribution ``method`` of :data:`mechrag.attribution.methods.METHODS`, configured by
    the options that are its fields (``budget``, ``paired``, ``screen``, ...)."""
    method_class = ATTRIBUTION_METHODS[method]
    return method_class(
        **{name: options[name] for name in method_class.parameters() if name in options}
    )


def run_attribute(model, example, options: dict, method: str) -> dict:
    """One example's record of the configured attribution ``method``; with the option
    ``evaluate``, also its faithfulness (:func:`mechrag.metrics.faithfulness.faithfulness`)."""
    case = case_for(model, example, options)
    attribution = configured_method(options, method)(case)
    record = attribution_record(attribution, example)
    if options.get("evaluate"):
        from mechrag.metrics.faithfulness import faithfulness

        record["faithfulness"] = faithfulness(case, attribution)
    return record


def check_attribute(options: dict, method: str) -> None:
    """What the configured ``method`` refuses without a model (its ``check_inputs``)."""
    configured_method(options, method).check_inputs()


LOCALIZE_OPTIONS = ("source", "gains", "gain_definition", "protocol")


def run_localize(model, example, options: dict) -> dict:
    """Heads and MLPs carrying a source: :meth:`mechrag.Case.localize` with the
    ``LOCALIZE_OPTIONS`` given (``source``: its id, default the top ARC-JSD source; ``protocol``,
    default :data:`mechrag.protocols.LOCALIZE_PROTOCOL`, sets what ``gain_definition`` leaves
    open). When the protocol asks for it (``consensus``, as ``arc-jsd`` does) the record holds
    the paper's consensus statistic (Eq. 11-12, with its permutation null;
    :mod:`mechrag.mechanism.consensus`), its overlaps as scalar columns.
    """
    from mechrag.mechanism.consensus import consensus
    from mechrag.protocols import LOCALIZE_PROTOCOL, get_protocol

    protocol = get_protocol(options.get("protocol", LOCALIZE_PROTOCOL))
    chosen = {key: options[key] for key in LOCALIZE_OPTIONS if key in options}
    result = case_for(model, example, options).localize(**chosen)
    gains = result.gains is not None
    rho, p = result.spearman() if gains else (None, None)
    record = {
        "response": result.response,
        "source_id": result.source_id,
        "gold_ids": list(example.gold_ids),
        "top_source_is_gold": result.source_id in example.gold_ids,
        "rho": rho,
        "p": p,
        "result": result.to_dict(),
    }
    if gains and protocol.consensus:
        found = consensus(result)
        record["consensus"] = found.to_dict()
        for module in (found.attention, found.mlp):
            for statistic in ("jsd_overlap", "gain_overlap", "rho"):
                record[f"{module.module}_{statistic}"] = getattr(module, statistic)
            for statistic in ("jsd_overlap", "gain_overlap"):
                record[f"{module.module}_null_{statistic}"] = getattr(module, f"null_{statistic}")
    return record


# ``reuse_scored`` means nothing on the fresh case each example gets.
for name, method_class in ATTRIBUTION_METHODS.items():
    fields = (p for p in method_class.parameters() if p != "reuse_scored")
    register_method(
        name,
        partial(run_attribute, method=name),
        options=(*CASE_OPTIONS, "evaluate", *fields),
        description=method_class.description,
        check=partial(check_attribute, method=name),
    )
register_method(
    "localize",
    run_localize,
    options=(*CASE_OPTIONS, *LOCALIZE_OPTIONS),
    description="logit-lens JSD of heads and MLPs when a source is removed",
)
