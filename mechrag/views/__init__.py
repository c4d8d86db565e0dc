"""HTML views of every result: a notebook shows a result by itself, a folder becomes one page.

``result.to_html()`` (and ``_repr_html_``, which Jupyter calls) returns a fragment with inline
CSS; ``result.to_html_page()`` / ``result.save_html(path)`` a complete page;
:func:`write_report` one page of every result JSON a command wrote to a folder
(``mechrag report DIR``, or ``--html``). Pages are pure HTML, CSS and SVG: no JavaScript, no
network, and all text from results escaped. :data:`~mechrag.views.render.VIEWS` maps a result
class name to its view.
"""

from __future__ import annotations

from mechrag.views.attribution import attribution_html
from mechrag.views.render import VIEWS, to_html, to_html_page, view_of
from mechrag.views.report import read_results, report_page, write_report

__all__ = [
    "VIEWS",
    "attribution_html",
    "read_results",
    "report_page",
    "to_html",
    "to_html_page",
    "view_of",
    "write_report",
]
