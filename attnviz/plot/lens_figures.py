"""Plotly figures of the logit lens (``attnviz.models.readers.lens``): the rows × positions grid,
one cell's top tokens as bars, a token's rank across the rows as a line, and one position's rows
(top token and a token's rank) side by side (Generate's step).

Plain plotly (no streamlit), so they work in a notebook:

    m = attnviz.DecoderModel.load()
    lens = m.logit_lens("The Eiffel Tower is in the city of", k=5)
    labels = [[[token_shown(s) for s in cell] for cell in row] for row in lens.top_tokens]
    lens_grid(lens.top_probs, labels, row_labels=[str(r) for r in lens.rows],
              col_labels=lens.tokens, title="logit lens").show()
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from attnviz.core.errors import AttnvizInputError
from attnviz.i18n import t
from attnviz.plot.figures import cell_markers
from attnviz.plot.text_layout import NARROW_WIDTH, _category_axis, _esc, _labels, wrap_title

ROW_PX = 18                 # a row of the grid
COLUMN_PX = 56              # a position of the grid: room for a short token
# the characters a cell writes (10 px text): a column narrowed to ~45 px (the page's width at
# 1024 px, 9 positions) holds 6; a longer token is cut with "…" (its hover has it whole)
CELL_CHARS = 6
HOVER_TOP = 5               # the tokens each cell's hover lists
LINE_HEIGHT = 320


def lens_grid(top_probs, top_labels, *, row_labels, col_labels, title: str,
              hover_top: int = HOVER_TOP, colour=None, colour_name: str | None = None,
              positions=None) -> go.Figure:
    """Rows (layer boundaries, the first at the bottom) × positions, each cell coloured by its
    top token's probability (a fixed 0–1 scale) with that token written in it; the hover names
    the row and position and lists the `hover_top` most likely tokens with their
    probabilities.

    top_probs (R, n, k) and top_labels (R, n, k) (the tokens as the page writes them; only the
    first `hover_top` are read); row_labels (R,), col_labels (n,): the rows and the tokens.
    colour (R, n), optional: another probability to colour the cells by (a target token's),
    named `colour_name` on the colour bar and in the hover. The hovers, and the clicks, are a
    second trace's: a marker on each cell, row by row (R · n points; point r · n + i is the
    cell of row r, position i). positions (n,): the numbers written before the columns'
    tokens (default 0 … n − 1; a lens of some positions names its own)."""
    probs = np.asarray(top_probs, dtype=np.float64)                   # (R, n, k)
    rows_n, n, k = probs.shape
    rows = _labels(row_labels, rows_n, "row_labels")
    numbers = range(n) if positions is None else [int(i) for i in positions]
    cols = [f"{i}: {c}" for i, c in zip(numbers, _labels(col_labels, n, "col_labels"))]
    top = min(hover_top, k)
    text = [[_esc(_cell_text(top_labels[r][i][0])) for i in range(n)] for r in range(rows_n)]
    hover = [["<br>".join(f"{_esc(top_labels[r][i][j])}  {probs[r, i, j]:.3f}"
                          for j in range(top)) for i in range(n)] for r in range(rows_n)]
    z = probs[..., 0] if colour is None else np.asarray(colour, dtype=np.float64)   # (R, n)
    if z.shape != (rows_n, n):
        raise AttnvizInputError("error.figure.shape", name="colour", shape=str(z.shape),
                                want=str((rows_n, n)))
    name = _esc(t("figure.lens.top_probability") if colour is None else colour_name)
    if colour is not None:
        hover = [[f"{name}: {z[r, i]:.3f}<br>{hover[r][i]}" for i in range(n)]
                 for r in range(rows_n)]
    fig = go.Figure(go.Heatmap(
        z=z, x=cols, y=rows, text=text, zmin=0.0, zmax=1.0, hoverinfo="skip",
        texttemplate="%{text}", textfont=dict(size=10), colorscale="Blues", xgap=1, ygap=1,
        colorbar=dict(title=dict(text=f"{name}<br>0–1", side="top"))))
    # the hovers and clicks: an invisible marker at each cell's centre (figures.cell_markers)
    position = _esc(t("figure.lens.position"))
    fig.add_trace(cell_markers(rows, cols, hover,
                               f"%{{y}}<br>{position} %{{x}}<br>%{{customdata}}<extra></extra>"))
    width = max(NARROW_WIDTH, 160 + COLUMN_PX * n)
    fig.update_layout(title=dict(text=title), width=width,
                      height=int(max(320, 120 + ROW_PX * rows_n)),
                      margin=dict(l=10, r=10, t=60, b=10))
    _category_axis(fig.layout.xaxis, cols, t("figure.lens.position"), plot_px=width - 160)
    _category_axis(fig.layout.yaxis, rows, t("figure.lens.row"))
    return fig


def _cell_text(label: str) -> str:
    """A cell's token, cut to CELL_CHARS characters (the last an ellipsis) when longer."""
    return label if len(label) <= CELL_CHARS else label[:CELL_CHARS - 1] + "…"


def top_bars(labels, probs, *, title: str, width: int = NARROW_WIDTH) -> go.Figure:
    """One cell's most likely tokens (k,) as horizontal bars, the most likely at the top."""
    p = np.asarray(probs, dtype=np.float64)
    names = [f"{i + 1}. {s}" for i, s in enumerate(_labels(labels, len(p), "labels"))]
    value = _esc(t("figure.lens.probability"))
    fig = go.Figure(go.Bar(x=p, y=names, orientation="h", marker_color="#2171b5",
                           hovertemplate=f"%{{y}}<br>{value}: %{{x:.4f}}<extra></extra>"))
    fig.update_layout(title=dict(text=wrap_title(title, width)), width=width,
                      height=max(260, 90 + 24 * len(p)),
                      showlegend=False, margin=dict(l=10, r=10, t=_title_margin(title, width),
                                                    b=10),
                      xaxis=dict(title=dict(text=value), range=[0, 1], automargin=True))
    _category_axis(fig.layout.yaxis, names, None, top_down=True)
    return fig


def rank_line(ranks, *, row_labels, title: str, width: int = NARROW_WIDTH) -> go.Figure:
    """A token's rank (1 = the most likely) at each row (R,), on a log axis: where it rises
    to the top."""
    r = np.asarray(ranks, dtype=np.float64)
    rows = _labels(row_labels, len(r), "row_labels")
    rank = _esc(t("figure.lens.rank"))
    fig = go.Figure(go.Scatter(x=rows, y=r, mode="lines+markers", line=dict(color="#d6604d"),
                               hovertemplate=f"%{{x}}<br>{rank}: %{{y:.0f}}<extra></extra>"))
    fig.update_layout(title=dict(text=wrap_title(title, width)), width=width,
                      height=LINE_HEIGHT, showlegend=False,
                      margin=dict(l=10, r=10, t=_title_margin(title, width), b=10),
                      yaxis=dict(type="log", autorange="reversed", automargin=True,
                                 title=dict(text=rank)))
    _category_axis(fig.layout.xaxis, rows, t("figure.lens.row"), plot_px=width - 80)
    return fig


LENS_COLOURS = {"logit": "#d6604d", "tuned": "#2171b5"}      # a line per lens: kl_lines


def _title_margin(title: str, width: int) -> int:
    """The top margin a title of its lines (``wrap_title``) needs."""
    return 38 + 22 * (wrap_title(title, width).count("<br>") + 1)


def kl_lines(kls, names, *, row_labels, title: str, width: int = NARROW_WIDTH) -> go.Figure:
    """KL(output ‖ row) in nats at each row, one line per lens: kls {lens: (R,)} ("logit",
    "tuned"), names {lens: its legend name}. The last row is the output itself (0)."""
    fig = go.Figure()
    nats = _esc(t("figure.lens.kl"))
    rows: list[str] = []                          # escaped, as the lines' x and the ticks
    for lens, values in kls.items():
        v = np.asarray(values, dtype=np.float64)
        rows = _labels(row_labels, len(v), "row_labels")
        fig.add_trace(go.Scatter(
            x=rows, y=v, mode="lines+markers", name=_esc(names[lens]),
            line=dict(color=LENS_COLOURS.get(lens)),
            hovertemplate=f"{_esc(names[lens])}<br>%{{x}}<br>{nats}: %{{y:.3f}}<extra></extra>"))
    fig.update_layout(title=dict(text=wrap_title(title, width)), width=width,
                      height=LINE_HEIGHT + 40,
                      margin=dict(l=10, r=10, t=_title_margin(title, width) + 20, b=10),
                      legend=dict(orientation="h", yanchor="bottom", y=1.0, x=0),
                      yaxis=dict(rangemode="tozero", automargin=True,
                                 title=dict(text=nats)))
    _category_axis(fig.layout.xaxis, rows, t("figure.lens.row"), plot_px=width - 80)
    return fig


STEP_ROW_PX = 17            # a row of one position's lens (Generate)
STEP_TOP_COLOUR, STEP_RANK_COLOUR, STEP_FIRST_COLOUR = "#2171b5", "#d6604d", "#238b45"


def step_lens(top_probs, top_labels, ranks, probs, *, row_labels, token: str, title: str,
              width: int = NARROW_WIDTH) -> go.Figure:
    """One position's lens, its rows (the first at the bottom) beside each other in two
    panels: on the left a column of cells, each writing its row's top token and that token's
    probability (coloured by it, 0–1; the hover lists the top tokens), on the right the rank
    of `token` — the token that followed — at each row, on a log axis with 1 on the right
    (the rows where it is the top token marked in green).

    top_probs (R, k), top_labels (R, k) (the tokens as the page writes them), ranks (R,) and
    probs (R,): `token`'s rank and probability at each row; row_labels (R,)."""
    from plotly.subplots import make_subplots

    p = np.asarray(top_probs, dtype=np.float64)                       # (R, k)
    rows_n, k = p.shape
    rows = _labels(row_labels, rows_n, "row_labels")
    rank = np.asarray(ranks, dtype=np.float64)
    chance = np.asarray(probs, dtype=np.float64)
    for values, what in ((rank, "ranks"), (chance, "probs")):
        if values.shape != (rows_n,):
            raise AttnvizInputError("error.figure.shape", name=what, shape=str(values.shape),
                                    want=str((rows_n,)))
    name = _esc(token)
    rank_name, prob_name = _esc(t("figure.lens.rank")), _esc(t("figure.lens.probability"))
    top_name = _esc(t("figure.lens.top_token"))
    rank_of = _esc(t("figure.lens.rank_of", token=token))
    text = [[f"{_esc(top_labels[r][0])}  {p[r, 0]:.2f}"] for r in range(rows_n)]
    hover = [["<br>".join(f"{_esc(top_labels[r][j])}  {p[r, j]:.3f}"
                          for j in range(min(HOVER_TOP, k)))] for r in range(rows_n)]
    # each panel's title wrapped to its panel, the figure's to the figure (a narrow column)
    fig = make_subplots(rows=1, cols=2, shared_yaxes=True, column_widths=[0.45, 0.55],
                        horizontal_spacing=0.03,
                        subplot_titles=(wrap_title(top_name, int(0.45 * width)),
                                        wrap_title(rank_of, int(0.55 * width))))
    fig.add_trace(go.Heatmap(
        z=p[:, :1], x=[top_name], y=rows, text=text, customdata=hover, zmin=0.0, zmax=1.0,
        texttemplate="%{text}", textfont=dict(size=11), colorscale="Blues", showscale=False,
        ygap=1, hovertemplate="%{y}<br>%{customdata}<extra></extra>"), row=1, col=1)
    first = rank == 1
    fig.add_trace(go.Scatter(
        x=rank, y=rows, mode="lines+markers", line=dict(color=STEP_RANK_COLOUR),
        marker=dict(size=7, color=[STEP_FIRST_COLOUR if f else STEP_RANK_COLOUR
                                   for f in first]),
        customdata=chance,
        hovertemplate=f"%{{y}}<br>{name}: {rank_name} %{{x:.0f}}, {prob_name} "
                      "%{customdata:.4f}<extra></extra>"), row=1, col=2)
    title = wrap_title(title, width)
    fig.update_layout(title=dict(text=title), width=width, showlegend=False,
                      height=int(max(320, 150 + STEP_ROW_PX * rows_n)),
                      margin=dict(l=10, r=10, t=30 + _title_margin(title, width), b=10),
                      plot_bgcolor="white")
    fig.update_annotations(font=dict(size=13))                         # the panels' titles
    _category_axis(fig.layout.yaxis, rows, None)
    fig.update_xaxes(showticklabels=False, ticks="", showgrid=False, row=1, col=1)
    # a tick at each power of ten, 1 (the most likely) on the right
    fig.update_xaxes(type="log", autorange="reversed", dtick=1, gridcolor="#eee",
                     automargin=True, row=1, col=2)
    return fig


__all__ = ["lens_grid", "rank_line", "step_lens", "top_bars"]
