"""The view of a :class:`~mechrag.results.components.ComponentAttribution`: the layer x head
heatmap, the MLP and residual-stream profiles over layers, and the top components."""

from __future__ import annotations

import math

from mechrag.views.blocks import bars, facts, heatmap, section, table, text

TOP_COMPONENTS = 10


def component_view(result, *, k: int = TOP_COMPONENTS) -> str:
    """Heads heatmap, per-layer bars and the top ``k`` components with their semantic gains."""
    layers = [f"L{layer}" for layer in range(result.n_layers)]
    gains = result.gains
    rho = result.spearman()[0] if gains is not None and result.scores.size > 2 else None
    summary = facts(
        {
            "method": result.method,
            "removed source": result.source_id or None,
            "layers": result.n_layers,
            "heads": result.n_heads,
            "model calls": result.model_calls,
            "forward passes": result.forward_passes,
            "Spearman rho (JSD vs gain)": None if rho is None or math.isnan(rho) else rho,
        }
    )
    rows = []
    for rank, index in enumerate(result.ranking[:k].tolist(), start=1):
        component = result.component(index)
        gain = float(gains[index]) if gains is not None else None
        head = "" if component.head is None else component.head
        rows.append(
            [rank, component.label, component.kind, component.layer, head, component.score, gain]
        )
    header = ["rank", "component", "kind", "layer", "head", "score", "semantic gain"]
    mlps = [f"MLP{layer}" for layer in range(result.n_layers)]
    profiles = (
        '<div class="columns">'
        f"<div><h3>MLP per layer</h3>{bars(mlps, result.mlps)}</div>"
        f"<div><h3>Residual stream after each layer</h3>{bars(layers, result.resid_post)}</div>"
        "</div>"
    )
    response = (
        f'<h3>Response</h3><div class="response">{text(result.response)}</div>'
        if result.response
        else ""
    )
    return section(
        "Components · " + (f"removing {result.source_id}" if result.source_id else result.query),
        summary
        + (f'<p class="query"><b>Query</b> {text(result.query)}</p>' if result.source_id else "")
        + response
        + "<h3>Attention heads: summed logit-lens JSD (layer × head)</h3>"
        + heatmap(result.heads, layers, [f"H{h}" for h in range(result.n_heads)], what="JSD")
        + profiles
        + f"<h3>Top {min(k, result.scores.size)} components</h3>"
        + table(header, rows),
        "components",
    )
