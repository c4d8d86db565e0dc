"""One response with and without gating, side by side: what ``mechrag gate`` reports and saves.

:func:`compare_gating` takes a case's response and its context echo, localises the top source's
heads and MLPs, turns them into gates with a :class:`~mechrag.mechanism.gating.rules.GatingRule`
and generates again with the gates on (``dynamic``: only at the steps whose echo is below the
threshold, see :mod:`mechrag.mechanism.gating.decoding`; ``static``: at every step). The
:class:`GatingComparison` it returns saves ``gate.json`` and the two echo strips.
"""

from __future__ import annotations

from dataclasses import dataclass

from mechrag.case import Case
from mechrag.defaults import MAX_NEW_TOKENS
from mechrag.errors import InputError
from mechrag.mechanism.echo import DEFAULT_THRESHOLD, Echo, echo
from mechrag.mechanism.gating.decoding import decode_with_gates
from mechrag.mechanism.gating.gates import Gates
from mechrag.mechanism.gating.rules import GATING_MODES, GatingRule
from mechrag.models import adapter
from mechrag.protocols import LOCALIZE_PROTOCOL
from mechrag.results.base import Serializable


@dataclass
class GatingComparison(Serializable):
    """The plain and the gated response of one query, with their echoes.

    ``fired_steps``: how many steps a dynamic gate fired at (``None`` for static gating).
    """

    default_name = "gate"

    query: str
    rule: GatingRule
    mode: str
    gates: Gates
    fired_steps: int | None
    response: str
    gated_response: str
    echo: Echo
    gated_echo: Echo

    @classmethod
    def from_dict(cls, data: dict) -> GatingComparison:
        return cls(
            **{
                **data,
                "rule": GatingRule(**data["rule"]),
                "gates": Gates.from_dict(data["gates"]),
                "echo": Echo.from_dict(data["echo"]),
                "gated_echo": Echo.from_dict(data["gated_echo"]),
            }
        )

    def plots(self, name: str) -> dict:
        """The echo strips ``echo_response`` and ``echo_gated_response``."""
        return {"echo_response": self.echo.plot, "echo_gated_response": self.gated_echo.plot}


def compare_gating(
    case: Case,
    rule: GatingRule | None = None,
    *,
    protocol: str = LOCALIZE_PROTOCOL,
    mode: str | None = None,
    threshold: float = DEFAULT_THRESHOLD,
    max_new_tokens: int = MAX_NEW_TOKENS,
) -> GatingComparison:
    """``case``'s response against the greedy response with ``rule``'s gates on the components
    that carry its top source (see the module docstring); echoes use ``threshold``. ``mode``:
    ``None`` takes the rule's (``rule.default_mode``); the components are localised with the
    gain the rule was made for (``rule.gain_definition``). ``rule=None`` takes the
    ``protocol``'s (:meth:`GatingRule.for_protocol`)."""
    rule = rule or GatingRule.for_protocol(protocol)
    mode = mode or rule.default_mode
    if mode not in GATING_MODES:
        raise InputError(f"mode must be one of {GATING_MODES}, got {mode!r}")
    model, builder = case.model, case.builder
    plain = echo(case, threshold=threshold)
    gates = rule.gates(case.localize(plain.top_source, gain_definition=rule.gain_definition))
    if mode == "dynamic":
        decoded = decode_with_gates(
            model, builder.ids(), builder.ids(case.empty_mask()), gates, threshold, max_new_tokens
        )
        gated_ids, fired = decoded.response_ids, decoded.n_fired
    else:
        with gates.apply(model):
            gated_ids, fired = adapter.greedy_generate(model, builder.ids(), max_new_tokens), None
    if not gated_ids:
        raise InputError("the gated model generated an empty response")
    gated_case = Case(
        model,
        case.query,
        case.sources,
        gated_ids,
        template=builder.template,
        system_prompt=builder.system_prompt,
        engine=case.engine,
    )
    return GatingComparison(
        query=case.query,
        rule=rule,
        mode=mode,
        gates=gates,
        fired_steps=fired,
        response=case.response_text,
        gated_response=gated_case.response_text,
        echo=plain,
        gated_echo=echo(gated_case, threshold=threshold),
    )
