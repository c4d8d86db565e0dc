"""Building blocks of the HTML views: escaped text, colour scales, token strips, SVG charts.

Everything here returns HTML (or SVG) as a string, built with :func:`html.escape` around every
piece of text that comes from a result, so a source holding ``<script>`` shows as text. The
pages carry no JavaScript and load nothing: the CSS is inline and the charts are SVG text.

Colour never carries a value alone: every shaded token and cell has its value as a visible
label or a ``title`` tooltip. Scales stay readable in greyscale: non-negative scores use one
hue whose lightness falls monotonically with the score; signed scores use blue (positive) and
orange (negative), and negative cells also get a dashed border, so the sign survives greyscale.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

import numpy as np
from jaxtyping import Float

POSITIVE_HUE, NEGATIVE_HUE = 212, 24
LIGHTEST, DARKEST = 97.0, 30.0
DARK_TEXT_BELOW = 58.0  # lightness under which labels turn white
BAR_WIDTH = 260
ROW_HEIGHT = 20
TOKEN_VALUE_DIGITS = 2
LABEL_CHARS = 16  # longest heatmap column label

CSS = """
.mechrag-view{font-family:system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;
 color:#1b1f24;font-size:14px;line-height:1.45;max-width:1120px}
.mechrag-view h2{font-size:20px;margin:0 0 6px 0;border-bottom:2px solid #1f4e8c;padding-bottom:4px}
.mechrag-view h3{font-size:15px;margin:18px 0 6px 0;color:#1f4e8c}
.mechrag-view section.result{margin:0 0 32px 0}
.mechrag-view .meta{display:flex;flex-wrap:wrap;gap:6px 18px;margin:6px 0 10px 0;padding:0}
.mechrag-view .meta div{background:#f1f3f6;border-radius:4px;padding:2px 8px}
.mechrag-view .meta dt{display:inline;font-weight:600;margin-right:4px}
.mechrag-view .meta dd{display:inline;margin:0;font-variant-numeric:tabular-nums}
.mechrag-view .query{font-size:15px;margin:4px 0 8px 0}
.mechrag-view .columns{display:flex;gap:28px;align-items:flex-start;flex-wrap:wrap}
.mechrag-view .columns>div{flex:1 1 420px;min-width:320px}
.mechrag-view .paragraph{margin:0 0 10px 0}
.mechrag-view .paragraph .title{font-weight:600;display:block}
.mechrag-view .source{padding:1px 3px;border-radius:3px;box-decoration-break:clone;
 -webkit-box-decoration-break:clone}
.mechrag-view .badge{font-size:10px;font-weight:600;vertical-align:super;margin:0 2px;
 padding:0 3px;border:1px solid #8a94a3;border-radius:3px;background:#fff;color:#1b1f24;
 font-variant-numeric:tabular-nums;white-space:nowrap}
.mechrag-view .tokens{display:flex;flex-wrap:wrap;gap:3px 2px;margin:4px 0 8px 0}
.mechrag-view .tok{display:inline-flex;flex-direction:column;align-items:center;
 border-radius:3px;padding:1px 3px;border:1px solid #d5dae1;min-width:14px}
.mechrag-view .tok .t{white-space:pre;font-family:"DejaVu Sans Mono",Menlo,Consolas,monospace;
 font-size:13px}
.mechrag-view .tok .v{font-size:9px;font-variant-numeric:tabular-nums;opacity:.9}
.mechrag-view .neg{border:1px dashed #1b1f24;background-image:repeating-linear-gradient(135deg,
 rgba(255,255,255,.2) 0 2px,transparent 2px 7px)}
.mechrag-view .low{outline:2px solid #b00020;outline-offset:1px}
.mechrag-view .chosen{outline:2px solid #1b1f24;outline-offset:1px}
.mechrag-view .muted{color:#5b6470}
.mechrag-view table.values{border-collapse:collapse;margin:4px 0 10px 0;
 font-variant-numeric:tabular-nums}
.mechrag-view table.values th,.mechrag-view table.values td{border:1px solid #d5dae1;
 padding:2px 8px;text-align:left;vertical-align:top}
.mechrag-view table.values th{background:#f1f3f6}
.mechrag-view table.values td.num{text-align:right}
.mechrag-view .legend{font-size:12px;color:#5b6470;margin:2px 0 6px 0}
.mechrag-view .swatch{display:inline-block;width:28px;height:10px;border:1px solid #8a94a3;
 vertical-align:middle;margin:0 4px}
.mechrag-view svg text{font-family:system-ui,-apple-system,"DejaVu Sans",sans-serif}
.mechrag-view .response{white-space:pre-wrap;background:#f7f8fa;border-left:3px solid #1f4e8c;
 padding:4px 8px;margin:4px 0 8px 0}
"""


def text(value) -> str:
    """``value`` as escaped HTML text; control characters shown as visible symbols."""
    return escape(visible(str(value)), quote=True)


def visible(value: str) -> str:
    """Newlines as ``↵``, tabs as ``⇥``, other control characters as ``\\xNN`` and a
    whitespace-only token as ``␣``, so that no token renders as nothing."""
    if value and value.isspace() and "\n" not in value:
        return "␣" * len(value)
    pictures = {"\n": "↵", "\t": "⇥"}
    return "".join(
        pictures.get(ch, f"\\x{ord(ch):02x}" if ord(ch) < 32 or ord(ch) == 127 else ch)
        for ch in value
    )


def number(value, digits: int = 3) -> str:
    """A score for a label: ``digits`` significant digits; ``–`` for a missing value."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if isinstance(value, (bool, np.bool_)):
        return str(bool(value))
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    return f"{float(value):.{digits}g}"


@dataclass(frozen=True)
class Scale:
    """Colours for scores: sequential from 0 to ``top`` (``signed`` False), or diverging over
    ``[-top, top]``. ``top`` is the largest magnitude shown at full strength."""

    top: float
    signed: bool

    @classmethod
    def fit(cls, values) -> Scale:
        """The scale of ``values``: diverging when any is negative; NaNs ignored."""
        finite = np.asarray(values, dtype=np.float64)
        finite = finite[np.isfinite(finite)]
        top = float(np.abs(finite).max()) if finite.size else 0.0
        return cls(top=top or 1.0, signed=bool((finite < 0).any()))

    def lightness(self, value: float) -> float:
        strength = min(abs(value) / self.top, 1.0) if np.isfinite(value) else 0.0
        return LIGHTEST - (LIGHTEST - DARKEST) * strength

    def fill(self, value: float) -> str:
        """The background colour of ``value`` (HSL)."""
        hue = NEGATIVE_HUE if self.signed and value < 0 else POSITIVE_HUE
        saturation = 85 if hue == NEGATIVE_HUE else 65
        return f"hsl({hue},{saturation}%,{self.lightness(value):.1f}%)"

    def ink(self, value: float) -> str:
        """A text colour readable on ``fill(value)``."""
        return "#ffffff" if self.lightness(value) < DARK_TEXT_BELOW else "#1b1f24"

    def style(self, value: float) -> str:
        """Inline CSS of a shaded box (``background-color``: the ``neg`` class adds stripes)."""
        return f"background-color:{self.fill(value)};color:{self.ink(value)}"

    def is_negative(self, value: float) -> bool:
        return self.signed and value < 0

    def legend(self, what: str) -> str:
        """A one-line key: the colours at the ends of the scale and what they mean."""
        ends = [(-self.top, f"{number(-self.top)} (striped, dashed)")] if self.signed else []
        ends += [(0.0, "0"), (self.top, number(self.top))]
        swatches = "".join(
            f'<span class="swatch{" neg" if v < 0 else ""}" style="{self.style(v)}"></span>'
            f"{text(label)}"
            for v, label in ends
        )
        return f'<div class="legend">{text(what)}: {swatches}</div>'


def token_strip(
    tokens: Sequence[str],
    values: Float[np.ndarray, " n_tokens"],
    *,
    scale: Scale | None = None,
    what: str = "score",
    marked: Sequence[bool] | None = None,
    mark_meaning: str = "",
) -> str:
    """Tokens as shaded boxes with their value printed under each and in the tooltip;
    ``marked`` tokens get a red outline (``mark_meaning`` goes in their tooltip)."""
    values = np.asarray(values, dtype=np.float64)
    scale = scale or Scale.fit(values)
    marked = marked if marked is not None else [False] * len(tokens)
    boxes = []
    for token, value, mark in zip(tokens, values, marked):
        classes = (
            ["tok"] + (["neg"] if scale.is_negative(value) else []) + (["low"] if mark else [])
        )
        tip = f"{visible(token)!r}: {what} {number(value, 4)}" + (
            f" ({mark_meaning})" if mark else ""
        )
        boxes.append(
            f'<span class="{" ".join(classes)}" style="{scale.style(value)}" title="{text(tip)}">'
            f'<span class="t">{text(token)}</span>'
            f'<span class="v">{number(value, TOKEN_VALUE_DIGITS)}</span></span>'
        )
    return f'<div class="tokens">{"".join(boxes)}</div>{scale.legend(what)}'


def bars(
    labels: Sequence[str],
    values: Float[np.ndarray, " n_items"],
    *,
    highlight: Sequence[str] = (),
    label_width: int = 90,
) -> str:
    """Horizontal SVG bars in the given order, each with its value printed beside it and in a
    tooltip; signed values grow both ways from a zero line; ``highlight`` labels in bold."""
    values = np.asarray(values, dtype=np.float64)
    scale = Scale.fit(values)
    zero = label_width + (BAR_WIDTH / 2 if scale.signed else 0)
    reach = BAR_WIDTH / 2 if scale.signed else BAR_WIDTH
    width, height = label_width + BAR_WIDTH + 70, ROW_HEIGHT * len(labels) + 4
    value_x = label_width + BAR_WIDTH + 8
    rows = []
    for row, (label, value) in enumerate(zip(labels, values)):
        y = 2 + row * ROW_HEIGHT
        length = reach * min(abs(value) / scale.top, 1.0) if np.isfinite(value) else 0.0
        x = zero - length if value < 0 else zero
        weight = ' font-weight="700"' if label in highlight else ""
        dash = ' stroke-dasharray="3 2" stroke-width="1.5"' if scale.is_negative(value) else ""
        rows.append(
            f"<g><title>{text(label)}: {number(value, 4)}</title>"
            f'<text x="{label_width - 6}" y="{y + 14}" text-anchor="end" font-size="12"{weight}>'
            f"{text(label)}</text>"
            f'<rect x="{x:.1f}" y="{y + 3}" width="{max(length, 0.5):.1f}" '
            f'height="{ROW_HEIGHT - 6}" fill="{scale.fill(value)}" stroke="#1b1f24"{dash}/>'
            f'<text x="{value_x}" y="{y + 14}" font-size="11"{weight}>{number(value)}</text></g>'
        )
    axis = f'<line x1="{zero}" y1="0" x2="{zero}" y2="{height}" stroke="#33475b"/>'
    return (
        f'<svg role="img" class="bars" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}">{"".join(rows)}{axis}</svg>'
    )


def heatmap(
    matrix: Float[np.ndarray, "n_rows n_columns"],
    row_labels: Sequence[str],
    column_labels: Sequence[str],
    *,
    what: str = "score",
    cell: int = 34,
    max_width: int = 1000,
) -> str:
    """An SVG grid, one shaded cell per entry with its value in a tooltip and, when the cell is
    wide enough, printed in it; negative cells have a dashed border."""
    matrix = np.asarray(matrix, dtype=np.float64)
    n_rows, n_columns = matrix.shape
    scale = Scale.fit(matrix)
    label_width = 8 + 7 * max((len(label) for label in row_labels), default=1)
    cell = max(8, min(cell, (max_width - label_width) // max(n_columns, 1)))
    show_values = cell >= 30
    shown = [visible(label)[:LABEL_CHARS] for label in column_labels]
    rotated = max((len(label) for label in shown), default=0) * 7 > cell
    top = 10 + 6 * max((len(label) for label in shown), default=1) if rotated else 20
    width, height = label_width + cell * n_columns + 4, top + cell * n_rows + 4
    parts = []
    step = max(1, math.ceil(14 / cell))  # column labels no closer than 14 px
    for column, label in enumerate(shown):
        if column % step == 0:
            x, y = label_width + column * cell + cell / 2, top - 6
            turn = f' transform="rotate(-60 {x:.1f} {y})"' if rotated else ""
            anchor = "start" if rotated else "middle"
            parts.append(
                f'<text x="{x:.1f}" y="{y}" text-anchor="{anchor}" font-size="11"{turn}>'
                f"{escape(label)}</text>"
            )
    for row, label in enumerate(row_labels):
        y = top + row * cell
        parts.append(
            f'<text x="{label_width - 6}" y="{y + cell / 2 + 4:.1f}" text-anchor="end" '
            f'font-size="11">{text(label)}</text>'
        )
        for column in range(n_columns):
            value = matrix[row, column]
            x = label_width + column * cell
            dash = (
                ' stroke-dasharray="3 2" stroke="#1b1f24" stroke-width="1.5"'
                if scale.is_negative(value)
                else ' stroke="#ffffff" stroke-width="1"'
            )
            tip = f"{row_labels[row]} × {column_labels[column]}: {what} {number(value, 4)}"
            label_text = (
                f'<text x="{x + cell / 2:.1f}" y="{y + cell / 2 + 4:.1f}" text-anchor="middle" '
                f'font-size="{10 if cell < 40 else 11}" fill="{scale.ink(value)}">'
                f"{number(value, 2)}</text>"
                if show_values
                else ""
            )
            parts.append(
                f"<g><title>{text(tip)}</title>"
                f'<rect x="{x}" y="{y}" width="{cell}" height="{cell}" fill="{scale.fill(value)}"'
                f"{dash}/>{label_text}</g>"
            )
    svg = (
        f'<svg role="img" class="heatmap" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}">{"".join(parts)}</svg>'
    )
    return svg + scale.legend(f"{what} (hover a cell for its value)")


def table(header: Sequence[str], rows: Sequence[Sequence]) -> str:
    """An HTML table; numbers right-aligned and formatted, everything else escaped text."""
    head = "".join(f"<th>{text(name)}</th>" for name in header)
    body = "".join(
        "<tr>"
        + "".join(
            f'<td class="num">{number(value)}</td>'
            if isinstance(value, (int, float, np.number)) and not isinstance(value, bool)
            else f"<td>{'–' if value is None else text(value)}</td>"
            for value in row
        )
        + "</tr>"
        for row in rows
    )
    return f'<table class="values"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def facts(entries: dict) -> str:
    """Labelled scalars in a row (``None`` entries left out)."""
    items = "".join(
        f"<div><dt>{text(name)}</dt><dd>{text(value) if isinstance(value, str) else number(value)}"
        "</dd></div>"
        for name, value in entries.items()
        if value is not None
    )
    return f'<dl class="meta">{items}</dl>'


def section(title: str, body: str, kind: str) -> str:
    """One result: a heading and its body (``kind`` names the view, for styling and tests)."""
    return (
        f'<section class="result" data-view="{text(kind)}"><h2>{text(title)}</h2>{body}</section>'
    )


def fragment(body: str) -> str:
    """A self-contained fragment for a notebook cell: the body with its own inline CSS."""
    return f'<div class="mechrag-view"><style>{CSS}</style>{body}</div>'


def page(title: str, body: str) -> str:
    """A complete page: inline CSS, no script, and a policy that forbids loading anything."""
    policy = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{policy}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{text(title)}</title><style>body{{margin:24px}}{CSS}</style></head>"
        f'<body><div class="mechrag-view">{body}</div></body></html>\n'
    )
