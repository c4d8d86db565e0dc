"""Views of :class:`~mechrag.mechanism.echo.Echo` (per-token echo over the response) and of
:class:`~mechrag.mechanism.gating.comparison.GatingComparison` (the answer with and without gates,
on one echo scale)."""

from __future__ import annotations

import numpy as np

from mechrag.views.blocks import Scale, facts, section, text, token_strip

LOW_ECHO = "answer token below the echo threshold"


def echo_strips(result, scale: Scale | None = None) -> str:
    """Context echo (low answer tokens outlined) and top-source echo over the response."""
    return (
        f"<h3>Context echo per token (outlined: {LOW_ECHO} {result.threshold:g})</h3>"
        + token_strip(
            result.response_tokens,
            result.context,
            scale=scale,
            what="context echo",
            marked=result.low_tokens,
            mark_meaning=LOW_ECHO,
        )
        + f"<h3>Echo of the top source {text(result.top_source)} per token</h3>"
        + token_strip(result.response_tokens, result.source, scale=scale, what="source echo")
    )


def echo_facts(result) -> str:
    context, source = result.summary("context"), result.summary("source")
    return facts(
        {
            "top source": result.top_source,
            "threshold": result.threshold,
            "mean echo": context["mean"],
            "minimum echo": context["minimum"],
            "share below": context["share_below"],
            "mean source echo": source["mean"],
        }
    )


def echo_view(result) -> str:
    """Summaries and the two per-token strips of one echo."""
    return section("Context echo", echo_facts(result) + echo_strips(result), "echo")


def gating_view(result) -> str:
    """The query, the gates, and each response with its echo, side by side on one scale."""
    echoes = [result.echo, result.gated_echo]
    scale = Scale.fit(np.concatenate([e.context for e in echoes] + [e.source for e in echoes]))
    gates = " ".join(f'<span class="badge">{text(label)}</span>' for label in result.gates.labels())
    summary = facts(
        {
            "rule": result.rule.label,
            "mode": result.mode,
            "gated components": len(result.gates),
            "gate fired at steps": result.fired_steps,
            "mean echo without": result.echo.mean,
            "mean echo with": result.gated_echo.mean,
        }
    )
    sides = "".join(
        f'<div><h3>{heading}</h3><div class="response">{text(response)}</div>'
        f"{echo_facts(echo)}{echo_strips(echo, scale)}</div>"
        for heading, response, echo in (
            ("Without gating", result.response, result.echo),
            ("With gating", result.gated_response, result.gated_echo),
        )
    )
    return section(
        f"Gating · {result.rule.label}, {result.mode}",
        summary
        + f'<p class="query"><b>Query</b> {text(result.query)}</p>'
        + f"<p><b>Gates</b> {gates or '(none)'}</p>"
        + f'<div class="columns">{sides}</div>',
        "gating",
    )
