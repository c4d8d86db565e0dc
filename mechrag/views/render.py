"""One dispatch from a result to its view: :data:`VIEWS` maps a result class name to the
function that draws it; a class without one (nor a base with one) gets the generic table.

The view modules never import the result modules (they read attributes), so the results'
``to_html`` can import this module without closing an import cycle.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from mechrag.views.attribution import attribution_view
from mechrag.views.blocks import fragment, page
from mechrag.views.components import component_view
from mechrag.views.echo import echo_view, gating_view
from mechrag.views.generic import generic_view
from mechrag.views.pipeline import explanation_view, saliency_view

View = Callable[[object], str]

VIEWS: dict[str, View] = {
    "Attribution": attribution_view,
    "ComponentAttribution": component_view,
    "PipelineExplanation": explanation_view,
    "TokenAttribution": saliency_view,
    "Echo": echo_view,
    "GatingComparison": gating_view,
}


def view_of(result) -> View:
    """The view of ``result``'s class, else of its nearest base that has one, else generic."""
    for cls in type(result).__mro__:
        if cls.__name__ in VIEWS:
            return VIEWS[cls.__name__]
    return generic_view


def to_html(result) -> str:
    """``result`` as an HTML fragment with its own inline CSS (a notebook cell shows it)."""
    return fragment(view_of(result)(result))


def to_html_page(results: Sequence, title: str, intro: str = "") -> str:
    """A complete, self-contained page showing each result in turn (``intro``: HTML first)."""
    return page(title, intro + "".join(view_of(result)(result) for result in results))
