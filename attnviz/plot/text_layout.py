"""Where a figure's words go: labels escaped as plotly shows them (``escape``) and cut, tick
labels of category axes thinned to fit the chart's width (the widths the app's pages give a
chart), titles wrapped to their chart. Shared by attnviz.plot's builders."""

from __future__ import annotations

import html

from attnviz.core.errors import AttnvizInputError
from attnviz.describe.labels import HOVER_CHARS, TICK_CHARS, unique
from attnviz.i18n import t

# Every tick label is shown while the labels fit the chart at the narrowest page the app is
# made for, a 1024-px window with the sidebar open: there a chart across the page is 564 px
# wide, one of two side by side 274 px (measured in Chromium); the y labels and the colour bar
# take about 160 px of it. A label stood upright needs LABEL_PX (a CJK character at plotly's
# 12 px), SMALL_LABEL_PX at SMALL_FONT; more labels than fit even small are thinned to every
# k-th, which the axis title says (the hover still names each cell).
NARROW_WIDTH = 564
HALF_WIDTH = 274
AXIS_PX = 160
LABEL_PX = 14
SMALL_LABEL_PX = 11
SMALL_FONT = 10
CHAR_PX = 7                       # a character of a label written across, on average
# px between an axis title and its tick labels: plotly's default gap let a rotated title ("层",
# a CJK character turned on its side) touch the labels beside it (issue 27.13)
TITLE_STANDOFF = 10
TITLE_PX = 17                     # plotly's title font: a CJK character; a Latin one ~0.55 of it


def wrap_title(title: str, width: int) -> str:
    """A figure title (already escaped: ``escape``) broken with <br> at its spaces and commas
    into lines that fit a chart `width` px wide: plotly draws a title on one line, and one
    longer than its chart is cut at both ends (a 274-px chart holds ~15 CJK characters)."""
    room = width - 40
    lines, line, used = [], "", 0.0
    for piece in _title_pieces(title):
        size = sum(TITLE_PX if _wide(c) else 0.55 * TITLE_PX for c in html.unescape(piece))
        if line and used + size > room:
            lines.append(line.rstrip())
            line, used = "", 0.0
            piece = piece.lstrip()
        line += piece
        used += size
    return "<br>".join(lines + [line.rstrip()])


def _title_pieces(title: str) -> list[str]:
    """`title` cut after each space, comma or full-width comma (each piece keeps its end)."""
    pieces, start = [], 0
    for i, c in enumerate(title):
        if c in " ,，、：:":
            pieces.append(title[start:i + 1])
            start = i + 1
    return pieces + ([title[start:]] if start < len(title) else [])


def _wide(c: str) -> bool:
    import unicodedata

    return unicodedata.east_asian_width(c) in ("W", "F")


def escape(text) -> str:
    """`text` as a plotly string shows it, as written: ``&``, ``<`` and ``>`` escaped, once.

    plotly.js draws every text of a figure — titles, axis and tick labels, bar and cell
    texts, legend names, hover labels and what a hovertemplate puts in them — as its
    pseudo-HTML (``svg_text_utils.convertToTspans``): tags b, i, em, s, u, sup, sub, span, a,
    br are drawn, any other text is shown after decoding the entities &amp; &lt; &gt; &nbsp;
    &mu; &times; &plusmn; &deg; and numeric ones (&#39;). It escapes nothing itself, and it does
    not know &quot;: ``html.escape``'s default (quote=True) shows a " as "&quot;". So quotes
    stay as they are."""
    return html.escape(str(text), quote=False)


_esc = escape


def _labels(labels, n: int, name: str, max_chars: int = HOVER_CHARS) -> list[str]:
    """`labels` as n distinct escaped strings: duplicates (and blanks) get their position,
    invisible characters their code, and a long label is cut to `max_chars` characters."""
    if labels is None or isinstance(labels, str):
        raise AttnvizInputError("error.figure.labels_not_list", name=name, n=n,
                                value=repr(labels)[:60])
    labels = [str(s) for s in labels]
    if len(labels) != n:
        raise AttnvizInputError("error.figure.labels_count", name=name, count=len(labels), n=n)
    return [_esc(s) for s in unique(labels, max_chars)]


def _category_axis(axis, labels: list[str], title: str | None, *, top_down: bool = False,
                   ticklabels: bool = True, plot_px: float | None = None) -> None:
    """Labels as categories in the given order (never parsed as numbers or dates); for rows,
    the first at the top. Every label is a tick (plotly would leave some out to avoid overlaps)
    while they fit `plot_px` pixels at LABEL_PX each, or at SMALL_LABEL_PX in a smaller font;
    beyond, every k-th, said in the title. Column labels that would not fit written across
    are stood upright (left to plotly, they turned only after the title was placed)."""
    ticks = [_esc(s) for s in unique([html.unescape(s) for s in labels], TICK_CHARS)]
    step, small = labels_step(len(labels), plot_px) if ticklabels else (1, False)
    if title and step > 1:
        title = t("figure.axis.thinned", axis=title, step=step)
    axis.update(type="category", categoryorder="array", categoryarray=labels,
                showticklabels=ticklabels, showgrid=False, zeroline=False, automargin=True,
                title=dict(text=_esc(title) if title else None, standoff=TITLE_STANDOFF))
    if ticklabels:                  # long labels: cut on the axis, longer in hover
        axis.update(tickmode="array", tickvals=labels[::step], ticktext=ticks[::step])
        if small:
            axis.update(tickfont=dict(size=SMALL_FONT))
        across = sum(CHAR_PX * len(html.unescape(s)) + 6 for s in ticks[::step])
        if not top_down and plot_px is not None and across > plot_px:
            axis.update(tickangle=90)
    if top_down:
        axis.update(autorange="reversed")


def labels_step(n: int, plot_px: float | None) -> tuple[int, bool]:
    """(every how many labels one is shown on an axis `plot_px` long, whether in the small
    font): (1, False) while all n fit at LABEL_PX, (1, True) at SMALL_LABEL_PX, else (k, True)."""
    if plot_px is None or n <= plot_px // LABEL_PX:
        return 1, False
    fit = max(1, int(plot_px // SMALL_LABEL_PX))
    return -(-n // fit), True
