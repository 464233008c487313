"""Plotly figures of an AttentionTrace: heatmaps that read like the tutorials' tables.

Plain plotly (no streamlit), so every builder works in a notebook too:

    fig = attnviz.plot.figures.step_figure(t, "weights", head=0, tokens_q=tokens, tokens_k=tokens)
    fig.show()

Heatmap conventions (SPEC.md), followed by every builder here:

- token labels on both axes, queries on rows and keys on columns; a token that occurs twice
  stays two rows ("the (1)", "the (5)"), and labels are escaped
  (:func:`attnviz.plot.text_layout.escape`: &, < and >, never quotes) because plotly renders
  some HTML in labels;
- the first row at the top, like a table (the y axis is reversed);
- the exact value on hover; numbers printed in the cells only for small matrices;
- a diverging colour scale centred on 0 for signed arrays, a fixed 0–1 scale for weights, set
  explicitly because streamlit's plotly theme overrides plotly's defaults; weights can instead
  be coloured relative to each head's or each row's largest weight (`weight_scale`), which
  shows structure at any length (with 512 keys a fixed-scale map is all ≈ 0.002, white): the
  colour bar's title names the scale and the hover still shows the true weight;
- labels are never clipped: every axis grows its margin to fit its labels and its title, which
  stands TITLE_STANDOFF px off them (`automargin`, `title.standoff`); a
  long label is cut on the axis (TICK_CHARS) and in the hover (HOVER_CHARS), so one 1 MB word
  is not sent a dozen times (attnviz.describe.labels);
- masked cells (−∞ scores, the 0 weights they become) drawn grey: NaN in the values' trace
  over a grey plot background, plus (except in large heads grids) a grey second trace whose
  hover says "masked" and, in small matrices, whose cells say "−∞" or "0".

Large matrices go to plotly as float32 numpy arrays, which plotly serialises as compact base64,
with no per-cell text: a 128 × 128 heatmap is about 0.1 MB of JSON; a relative scale's colours
go as one byte a cell (uint8 levels 1–250), beside the float32 true weights. Every builder
keeps within a byte budget (`max_bytes`, attnviz.plot.budget: a page sends at most 3 MB): a matrix
too large for it is pooled into blocks of cells, each showing one true cell (its largest
weight, or its value farthest from 0), and a subtitle says so.
"""

from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio
from plotly.subplots import make_subplots

from attnviz.plot.colour_scales import (MASKED_COLOR, check_kind, check_weight_scale, coloraxis,
                                        colour_levels, colour_props, relative_weights)
from attnviz.plot.text_layout import (AXIS_PX, HALF_WIDTH, LABEL_PX, NARROW_WIDTH, SMALL_LABEL_PX,
                                      TITLE_STANDOFF, _category_axis, _esc, _labels, escape)
from attnviz.plot.budget import (DETAIL_MAX_BYTES, FIGURE_MAX_BYTES, GRID_MAX_BYTES,  # noqa: F401
                                 MAIN_MAX_BYTES, PAGE_MAX_BYTES, Blocks, block_labels,
                                 figure_bytes, fit, pool, score_of, spans)
from attnviz.core.engine import AttentionTrace
from attnviz.i18n import t
from attnviz.describe.steps import title as step_title
from attnviz.describe.scale import scale_words
from attnviz.core.arrays import whole_number
from attnviz.core.errors import AttnvizInputError
from attnviz.describe.labels import (HOVER_CHARS, TICK_CHARS, feature_labels, step_layout,
                                     trace_tokens, unique)

BOUNDARY_COLOR = "black"
VALUES_MAX_SIDE = 20              # numbers in the cells up to 20 × 20 (show_values=None)
GRID_VALUES_MAX_SIDE = 6          # the same, for one facet of heads_grid
GRID_OVERLAY_MAX_CELLS = 64 * 64  # heads_grid facets above this skip the "masked" hover trace
GRID_MAX_SIDE = 128               # heads_grid facets with more tokens are pooled to this size
FLOAT64_MAX_CELLS = 400           # larger matrices are sent as float32
_PICK = {"weights": "largest", "signed": "farthest"}      # which cell a pooled block shows

_CELL_FORMAT = {"signed": ".3~g", "weights": ".2f"}       # d3-format of the numbers in cells


# ---- public builders ---------------------------------------------------------------------------

def heatmap(array2d, *, row_labels, col_labels, title: str = "", kind: str = "signed",
            masked=None, row_title: str | None = None, col_title: str | None = None,
            show_values: bool | None = None, weight_scale: str = "fixed",
            value_name: str | None = None, max_bytes: int = FIGURE_MAX_BYTES,
            width: int = NARROW_WIDTH) -> go.Figure:
    """A heatmap of one matrix that reads like a table.

    Parameters
    ----------
    array2d : array-like, shape (n_rows, n_cols)
        The numbers. −∞ cells (masked scores) are shown as masked, whatever `masked` says.
    row_labels : sequence of str, length n_rows
        One label per row, top to bottom (usually the query tokens). Duplicates are kept apart
        by their 1-based position: ``["the", "cat", "the"]`` → ``"the (1)", "cat", "the (3)"``.
    col_labels : sequence of str, length n_cols
        One label per column, left to right (key tokens, or features ``d0, d1, …``).
    title : str
        The figure title. Plotly renders some HTML in it (``<br>``, ``<b>``): escape user text
        with :func:`escape` before putting it here. Labels are escaped for you.
    kind : "signed" or "weights"
        "signed": diverging colour scale centred on 0. "weights": sequential scale fixed to
        0–1 (attention weights).
    masked : bool array-like, shape (n_rows, n_cols), optional
        True where the cell is masked: drawn grey, hover says "masked".
    row_title, col_title : str
        Axis titles, also the names in the hover text.
    show_values : bool, optional
        Print the numbers in the cells. None (default): only when both sides are at most
        VALUES_MAX_SIDE (20).
    weight_scale : "fixed", "head" or "row"
        For kind "weights": what the colours run over. "fixed" (default): 0–1. "head": the
        weights ÷ the matrix's largest (unmasked) weight. "row": each row ÷ its largest weight.
        The colour bar's title names it; hover and cell numbers show the true weights.
    value_name : str, optional
        What a cell holds, in the hover: default "weight" (kind "weights") or "value".
    max_bytes : int
        The most the figure may send (its JSON, as Streamlit sends it:
        ``attnviz.plot.budget.figure_bytes``). A matrix too large for it is pooled into blocks of
        cells, as few as fit (longer side first), each drawn as one true cell of its block:
        its largest weight, or its value farthest from 0; a subtitle says so and the hover
        names the block's positions. Default FIGURE_MAX_BYTES: two maps side by side fit a
        page (PAGE_MAX_BYTES, 3 MB).
    width : int
        The chart's width in pixels on the narrowest page (NARROW_WIDTH across the page,
        HALF_WIDTH for one of two side by side): every column label is shown while they fit
        it, else every k-th, and the axis title says so.

    Returns
    -------
    plotly.graph_objects.Figure
        ``fig.data[0]`` is the heatmap of the values (NaN where masked). Its ``z`` is what the
        colours run over: the values themselves, or for a "head" or "row" weight scale the
        colour level of each weight ÷ its head's or row's largest, c → 1 + round(249 c)
        (:func:`colour_levels`: uint8, or float32 with NaN where masked), with the true
        weights then in ``customdata``. Hover shows the value in full when it is sent as
        float64 (up to 400 cells) or came as float32; "≈" marks a float64 value sent as
        float32 (7 significant digits). ``fig.data[1]``, present when some cell is masked
        and the figure fits `max_bytes` with it, is the grey overlay named "masked" (hover
        "masked (−∞)"); without it masked cells are gaps over the grey plot background, or on
        a relative scale colour level 0, drawn grey (hover: the masked weight, 0).
    """
    row_title = _axis_title("query") if row_title is None else row_title
    col_title = _axis_title("key") if col_title is None else col_title
    return _heatmap(array2d, row_labels=row_labels, col_labels=col_labels, title=title,
                    kind=kind, masked=masked, row_title=row_title, col_title=col_title,
                    show_values=show_values, weight_scale=weight_scale, value_name=value_name,
                    max_bytes=max_bytes, width=width)[0]


def _heatmap(array2d, *, row_labels, col_labels, title: str, kind: str, masked, row_title: str,
             col_title: str, show_values: bool | None, weight_scale: str,
             value_name: str | None, max_bytes: int, row_breaks=(), col_breaks=(),
             width: int = NARROW_WIDTH):
    """:func:`heatmap`, and the (start, stop) positions each drawn row and column covers (one
    each, unless pooled), for builders that draw on the axes. Pooled blocks never straddle a
    break (a position where a new group starts)."""
    a = _as_2d(array2d, "array2d")
    kind = check_kind(kind)
    scale = check_weight_scale(weight_scale) if kind == "weights" else "fixed"
    rows = _labels(row_labels, a.shape[0], "row_labels")
    cols = _labels(col_labels, a.shape[1], "col_labels")
    marked = _marked_cells(a, masked)
    values = _plotly_floats(a)                              # what is sent
    if marked is not None:
        values = np.where(marked, np.nan, values).astype(values.dtype)
    relative = None if scale == "fixed" else relative_weights(values, scale)
    if show_values is None:
        show_values = max(a.shape) <= VALUES_MAX_SIDE
    name = value_name or t("figure.hover.weight" if kind == "weights" else "figure.hover.value")
    masked_label = _masked_label(a, marked) if marked is not None else ""
    true = None if relative is None else _plotly_floats(a)    # masked weights too (0)

    def draw(blocks: Blocks, overlay: bool = False) -> go.Figure:
        v, c, m, tv, r, k = values, relative, marked, true, rows, cols
        r_title, c_title = row_title, col_title
        if blocks.pooled:
            score = score_of(values if relative is None else relative, _PICK[kind])
            p = pool({"v": values, "c": relative, "m": marked, "t": true}, score, blocks,
                     row_breaks, col_breaks)
            v, c, m, tv = p["v"], p["c"], p["m"], p["t"]
            r = block_labels(rows, blocks.rows, row_breaks)
            k = block_labels(cols, blocks.cols, col_breaks)
            r_title = t("figure.axis.positions", axis=r_title) if blocks.rows > 1 else r_title
            c_title = t("figure.axis.positions", axis=c_title) if blocks.cols > 1 else c_title
        hover = f"{_esc(r_title)}: %{{y}}<br>{_esc(c_title)}: %{{x}}<br>"
        masked_level = c is not None and m is not None and m.any() and not overlay
        fig = go.Figure(_matrix_traces(
            v, r, k, m, kind=kind, hover=hover, show_values=show_values and not blocks.pooled,
            colour=colour_props(kind, scale, masked_level), levels=c,
            true=tv if masked_level else None,                # a grey level's hover: 0
            overlay=overlay, masked_label=masked_label, approx=_rounded(a, values),
            value_name=_pooled_name(name, kind) if blocks.pooled else name))
        # a title of several lines (wrapped by the caller: text_layout.wrap_title) gets their room
        lines = title.count("<br>") + 1 if title else 0
        fig.update_layout(height=_height(a.shape[0]) + 22 * max(0, lines - 1),
                          margin=dict(l=10, r=10, t=38 + 22 * lines if title else 30, b=10))
        if blocks.pooled:
            fig.update_layout(title=dict(text=title or " ", subtitle=dict(
                text=_pooled_subtitle(blocks, kind)), yref="container", y=1, yanchor="top",
                pad=dict(t=12)), margin=dict(t=90))
        else:
            fig.update_layout(title=dict(text=title))
        if m is not None:
            fig.update_layout(plot_bgcolor=MASKED_COLOR)
        _category_axis(fig.layout.xaxis, k, c_title, plot_px=width - AXIS_PX)
        _category_axis(fig.layout.yaxis, r, r_title, top_down=True,
                       plot_px=_height(a.shape[0]) - (90 if blocks.pooled else 60) - 80)
        return fig

    # masked cells: the grey overlay (hover "masked (−∞)") if it fits, else gaps over the grey
    # background (a relative scale: level 0, drawn grey), then pooling, as heads_grid does
    fig, blocks = draw(Blocks(), overlay=True), Blocks()
    if marked is None or figure_bytes(fig) > max_bytes:
        fig, blocks = fit(draw, a.shape, max_bytes)
    return (fig, spans(a.shape[0], blocks.rows, row_breaks),
            spans(a.shape[1], blocks.cols, col_breaks))


def html_div(fig: go.Figure, *, include_plotlyjs: bool) -> str:
    """`fig` as an HTML <div> for a page of figures (plotly.js inlined when `include_plotlyjs`:
    the first figure of a page that opens offline)."""
    return pio.to_html(fig, full_html=False, include_plotlyjs=include_plotlyjs,
                       config={"displaylogo": False})


def step_figure(trace: AttentionTrace, step_name: str, *, head: int = 0, tokens_q=None,
                tokens_k=None, query: int | None = None, weight_scale: str = "fixed",
                max_bytes: int = FIGURE_MAX_BYTES) -> go.Figure:
    """The heatmap of one step of ``trace.steps``, for one head.

    Parameters
    ----------
    trace : AttentionTrace
        The computation to show.
    step_name : str
        A name from ``[s.name for s in trace.steps]``: "x", "q", "k", "v", "scores",
        "scaled_scores", "masked_scores", "weights", "weighted_values", "z", "concat", "output".
        "concat" gives :func:`concat_figure`.
    head : int
        Which head, for per-head steps (ignored by the others).
    tokens_q : sequence of str, optional
        One label per query position; default ``q1, q2, …``.
    tokens_k : sequence of str, optional
        One label per key position; default `tokens_q` for self-attention, else ``k1, k2, …``.
    query : int, optional
        For "weighted_values" only: the 0-based query position whose weighted value vectors
        (keys × features, ``trace.weighted_values(head, query)``) are shown; default 0.
    weight_scale : "fixed", "head" or "row"
        The "weights" step's colour scale, as in :func:`heatmap` (other steps ignore it).
    max_bytes : int
        The figure's byte budget, as in :func:`heatmap` (default FIGURE_MAX_BYTES).

    Rows and columns follow the step's axes: "query" rows/columns get `tokens_q`, "key" ones
    `tokens_k`, "feature" ones ``d0, d1, …`` (Q's, K's, V's: ``q0 …``, ``k0 …``, ``v0 …``,
    as W_Q's, W_K's, W_V's columns). The "weights" step uses the fixed 0–1 scale, every
    other step the diverging one; "masked_scores" and "weights" mark the masked cells.
    """
    step = trace.step(step_name)
    if step.name == "concat":
        return concat_figure(trace, tokens_q, max_bytes=max_bytes)
    layout = step_layout(trace, step.name, head, tokens_q, tokens_k, query)
    a, axes = layout.array, (layout.row_axis, layout.col_axis)
    title = step_title(trace, step.name)
    if step.per_head:
        title = t("figure.title.head", title=title, head=head)
    if step.name == "weighted_values":
        labels_q = trace_tokens(trace, tokens_q, tokens_k)[0]
        title = t("figure.title.query", title=title,
                  token=_labels(labels_q, trace.n_q, 'tokens_q')[query or 0])
    row_labels, col_labels = layout.rows, layout.cols
    masked = _step_mask(trace, head) if step.name in ("masked_scores", "weights") else None
    return heatmap(a, row_labels=row_labels, col_labels=col_labels, title=title,
                   kind="weights" if step.name == "weights" else "signed", masked=masked,
                   row_title=_axis_title("token" if step.name == "x" else axes[0]),
                   col_title=_axis_title(axes[1]), weight_scale=weight_scale,
                   max_bytes=max_bytes)


def heads_grid(trace: AttentionTrace, tokens_q=None, tokens_k=None, *, max_cols: int = 4,
               step_name: str = "weights", show_values: bool | None = None,
               weight_scale: str = "fixed", max_bytes: int = GRID_MAX_BYTES) -> go.Figure:
    """One figure with a facet per head, all on one shared colour scale.

    Parameters
    ----------
    trace : AttentionTrace
        The computation to show.
    tokens_q, tokens_k : sequence of str, optional
        Query and key labels, as in :func:`step_figure`.
    max_cols : int
        At most this many facets side by side; the heads fill rows left to right, top to
        bottom, balanced (6 heads with max_cols=4 make 2 rows of 3).
    step_name : str
        A per-head step with a 2-D slice per head: "weights" (default, fixed 0–1 scale),
        "scores", "scaled_scores", "masked_scores", "q", "k", "v" or "z" (diverging scale
        centred on 0, shared by all heads).
    show_values : bool, optional
        Print the numbers in the cells; None (default): only when every side of a facet is at
        most GRID_VALUES_MAX_SIDE (6).
    weight_scale : "fixed", "head" or "row"
        The "weights" step's colour scale, as in :func:`heatmap`: "head" divides each facet by
        its own largest weight (other steps ignore it).
    max_bytes : int
        The figure's byte budget, as in :func:`heatmap`; default GRID_MAX_BYTES, which leaves
        room on a page for one more heatmap.

    Facets of more than GRID_MAX_SIDE (128) tokens, or whose figure would pass `max_bytes`,
    are pooled into blocks of tokens (the same for every head), each cell one true cell
    of its block (the largest weight, or the value farthest from 0), named in a subtitle. The
    traces are, for each head h in order, the heatmap named "head h" (NaN where masked)
    followed, when that head has masked cells and a facet has at most GRID_OVERLAY_MAX_CELLS
    (64 × 64) cells, by its grey overlay named "head h masked". Larger facets keep the JSON
    small (128 tokens × 12 heads with a causal mask ≈ 1.3 MB) by leaving masked cells as gaps
    over the grey plot background, without a "masked" hover (on a relative scale: colour
    level 0, drawn grey, whose hover shows the masked weight, 0). The colour scale lives in
    ``fig.layout.coloraxis``.
    """
    step = trace.step(step_name)
    if not step.per_head or step.on_demand:
        raise AttnvizInputError("error.figure.grid_step", name=repr(step_name))
    max_cols = whole_number(max_cols, "max_cols")
    tokens_q, tokens_k = trace_tokens(trace, tokens_q, tokens_k)
    kind = "weights" if step.name == "weights" else "signed"
    scale = check_weight_scale(weight_scale) if kind == "weights" else "fixed"
    masks = _step_mask_all(trace) if step.name in ("masked_scores", "weights") else None
    sent = _plotly_floats(step.array[0]).dtype              # float64 for small facets
    values = step.array.astype(sent)                        # (H, rows, cols), as sent
    if masks is not None:
        values = np.where(masks, np.nan, values).astype(sent)
    relative = None if scale == "fixed" else relative_weights(values, scale)
    true = None if relative is None else step.array.astype(sent)   # masked weights: 0
    approx = _rounded(step.array, values)
    _, n_rows, n_cols = values.shape
    names = {"query": tokens_q, "key": tokens_k}
    axes = step.axes[1:]
    # short labels: a facet per head repeats them (16 heads × 128 tokens × 4 copies)
    rows = _labels(names.get(axes[0]) or feature_labels(n_rows), n_rows, axes[0], TICK_CHARS)
    cols = _labels(names.get(axes[1]) or feature_labels(n_cols), n_cols, axes[1], TICK_CHARS)
    labels = [_masked_label(step.array[i], masks[i]) if masks is not None and masks[i].any()
              else "" for i in range(trace.num_heads)]
    unit = "tokens" if set(axes) <= {"query", "key"} else "positions"
    title = t("figure.title.every_head", title=step_title(trace, step.name))

    def draw(blocks: Blocks) -> go.Figure:
        v, c, m, tv, r, k = values, relative, masks, true, rows, cols
        ax = tuple(_axis_title(a) for a in axes)
        subtitle = None
        if blocks.pooled:
            score = score_of(values if relative is None else relative, _PICK[kind])
            p = pool({"v": values, "c": relative, "m": masks, "t": true}, score, blocks)
            v, c, m, tv = p["v"], p["c"], p["m"], p["t"]
            r, k = block_labels(rows, blocks.rows), block_labels(cols, blocks.cols)
            ax = tuple(t("figure.axis.positions", axis=a) for a in ax)
            subtitle = t(f"figure.pooled.grid.{unit}.{_PICK[kind]}", rows=blocks.rows,
                         cols=blocks.cols)
        return _grid_figure(trace.num_heads, max_cols, v, c, tv, m, r, k, ax, kind=kind,
                            scale=scale, labels=labels, show_values=show_values,
                            approx=approx, title=title, subtitle=subtitle)

    side = max(n_rows, n_cols)
    first = Blocks(-(-side // GRID_MAX_SIDE), -(-side // GRID_MAX_SIDE))
    return fit(draw, (n_rows, n_cols), max_bytes, first)[0]


def _grid_figure(h: int, max_cols: int, values, levels, true, masks, rows, cols, axes, *,
                 kind: str, scale: str, labels: list[str], show_values: bool | None,
                 approx: bool, title: str, subtitle: str | None) -> go.Figure:
    """heads_grid's figure of `values` (H, rows, cols) as sent (NaN where masked), with the
    relative scale's `levels` and `true` weights (or None) and each head's masked label."""
    _, n_rows, n_cols = values.shape
    overlay = n_rows * n_cols <= GRID_OVERLAY_MAX_CELLS
    masked_level = levels is not None and masks is not None and masks.any() and not overlay
    if show_values is None:
        show_values = max(n_rows, n_cols) <= GRID_VALUES_MAX_SIDE
    # no more facets side by side than leave every column label room (LABEL_PX each) on the
    # narrowest page: 15 tokens make 2 columns, not 4 facets with every other label
    fit_cols = max(1, int((NARROW_WIDTH - AXIS_PX + 10) // (SMALL_LABEL_PX * n_cols + 10)))
    grid_rows = -(-h // min(max_cols, fit_cols))
    grid_cols = -(-h // grid_rows)
    facet_px = (NARROW_WIDTH - AXIS_PX) / grid_cols - 10
    fig = make_subplots(rows=grid_rows, cols=grid_cols,
                        subplot_titles=[t("figure.head", head=i) for i in range(h)],
                        horizontal_spacing=min(0.04, 1 / max(grid_cols - 1, 1) - 1e-6),
                        vertical_spacing=min(0.3 / grid_rows, 1 / max(grid_rows - 1, 1) - 1e-6))
    name = t("figure.hover.weight" if kind == "weights" else "figure.hover.value")
    for i in range(h):
        r, c = divmod(i, grid_cols)
        hover = f"{t('figure.head', head=i)}<br>{axes[0]}: %{{y}}<br>{axes[1]}: %{{x}}<br>"
        traces = _matrix_traces(values[i], rows, cols, None if masks is None else masks[i],
                                kind=kind, hover=hover, show_values=show_values,
                                colour=dict(coloraxis="coloraxis"), overlay=overlay,
                                levels=None if levels is None else levels[i],
                                true=true[i] if masked_level else None,   # grey: 0
                                masked_label=labels[i], approx=approx,
                                value_name=_pooled_name(name, kind) if subtitle else name)
        traces[0].name = t("figure.head", head=i)
        for tr in traces[1:]:
            tr.name = t("figure.head_masked", head=i)
        for tr in traces:
            fig.add_trace(tr, row=r + 1, col=c + 1)
        last_in_column = i + grid_cols >= h
        _category_axis(fig.get_subplot(r + 1, c + 1).xaxis, cols,
                       axes[1] if last_in_column else None, ticklabels=last_in_column,
                       plot_px=facet_px)
        _category_axis(fig.get_subplot(r + 1, c + 1).yaxis, rows,
                       axes[0] if c == 0 else None, top_down=True, ticklabels=c == 0,
                       plot_px=_facet_height(n_rows) - 40)
    # the title (and subtitle) at the top of the figure, the facets' "head h" titles below it
    top = 70 if subtitle is None else 95
    fig.update_layout(coloraxis=coloraxis(kind, scale, masked_level),
                      title=dict(text=title, subtitle=dict(text=subtitle), yref="container",
                                 y=1, yanchor="top", pad=dict(t=12)),
                      height=top + grid_rows * _facet_height(n_rows),
                      margin=dict(l=10, r=10, t=top, b=10))
    if masks is not None and masks.any():
        fig.update_layout(plot_bgcolor=MASKED_COLOR)
    return fig


def concat_figure(trace: AttentionTrace, tokens_q=None, *,
                  max_bytes: int = FIGURE_MAX_BYTES) -> go.Figure:
    """The concatenation Concat(Z_1 … Z_H), (n_q, H·d_v), with the heads' blocks marked.

    Parameters
    ----------
    trace : AttentionTrace
        The computation to show.
    tokens_q : sequence of str, optional
        One label per query position (the rows); default ``q1, q2, …``.
    max_bytes : int
        The figure's byte budget, as in :func:`heatmap` (a pooled block never mixes heads).

    Columns are labelled ``h0·d0, h0·d1, …, h1·d0, …``; a vertical line (a layout shape)
    separates consecutive heads and a "head h" annotation sits above each block.
    """
    layout = step_layout(trace, "concat", tokens_q=tokens_q)
    h, d_v = trace.num_heads, trace.d_v
    starts = [i * d_v for i in range(h)]                    # each head's first column
    fig, _, columns = _heatmap(trace.concat, row_labels=layout.rows, col_labels=layout.cols,
                               title=step_title(trace, "concat"), kind="signed", masked=None,
                               row_title=_axis_title("query"),
                               col_title=t("figure.axis.concat_feature"),
                               show_values=None, weight_scale="fixed", value_name=None,
                               max_bytes=max_bytes, col_breaks=starts[1:])
    first = [next(j for j, (s, _) in enumerate(columns) if s == start) for start in starts]
    ends = first[1:] + [len(columns)]
    for i in range(1, h):                                    # between block i-1 and block i
        fig.add_shape(type="line", x0=first[i] - 0.5, x1=first[i] - 0.5, y0=0, y1=1,
                      xref="x", yref="paper", line=dict(color=BOUNDARY_COLOR, width=2))
    for i in range(h):
        fig.add_annotation(x=(first[i] + ends[i] - 1) / 2, y=1, xref="x", yref="paper",
                           yanchor="bottom", text=t("figure.head", head=i), showarrow=False)
    fig.update_layout(margin=dict(t=90 if len(columns) == trace.concat.shape[1] else 110),
                      title=dict(y=0.98, yanchor="top"))
    return fig


def query_vector_figure(trace: AttentionTrace, query: int, *, head: int = 0, tokens_q=None,
                        tokens_k=None) -> go.Figure:
    """One query's row through the steps, as bars over the keys (tutorials 000 and 003).

    Parameters
    ----------
    trace : AttentionTrace
        The computation to show.
    query : int
        The 0-based query position.
    head : int
        Which head.
    tokens_q, tokens_k : sequence of str, optional
        Query and key labels, as in :func:`step_figure`.

    Three stacked bar charts sharing the key axis: the scores q·k_j, the scaled (and masked)
    scores, and the softmax weights (y fixed to 0–1). Masked keys get a grey bar of height 0
    labelled "−∞ (masked)" or "0 (masked)".
    """
    tokens_q, tokens_k = trace_tokens(trace, tokens_q, tokens_k)
    head = trace._check_head(head)
    query = _check_index(query, trace.n_q, "query")
    keys = _labels(tokens_k, trace.n_k, "tokens_k")
    query_label = _labels(tokens_q, trace.n_q, "tokens_q")[query]
    masked = _step_mask(trace, head)[query]                   # (n_k,)
    scale = scale_words(trace.scale, trace.d_k)
    rows = [(trace.scores[head, query], t("figure.vector.score"), "signed"),
            (trace.masked_scores[head, query], t("figure.vector.scaled", scale=scale), "signed"),
            (trace.weights[head, query], t("figure.vector.weight"), "weights")]
    fig = make_subplots(rows=3, cols=1, shared_xaxes=True, vertical_spacing=0.08,
                        subplot_titles=[name for _, name, _ in rows])
    show = trace.n_k <= VALUES_MAX_SIDE
    for r, (values, name, kind) in enumerate(rows, start=1):
        marked = masked if r > 1 else np.zeros_like(masked)
        fig.add_trace(_bars(values, keys, marked, name=name, kind=kind, show_values=show),
                      row=r, col=1)
        if kind == "signed":                  # room above and below for the bars' numbers
            fig.update_yaxes(range=_bars_range(values[~marked], show), row=r, col=1)
        _category_axis(fig.get_subplot(r, 1).xaxis, keys,
                       t("figure.axis.key") if r == 3 else None, ticklabels=r == 3,
                       plot_px=NARROW_WIDTH - 70)
    fig.update_yaxes(range=[0, 1], row=3, col=1)
    fig.update_yaxes(automargin=True, zeroline=True)         # "10" and "−2" are never cut
    fig.update_layout(showlegend=False, height=540, margin=dict(l=10, r=10, t=80, b=10),
                      title=dict(text=t("figure.vector.title", query=query_label, head=head)))
    return fig


SUM_LABEL = "Σ sum = z"      # the sum row's label in English; sum_label() in the active language


def sum_label() -> str:
    """The label of the weighted-sum figure's last row ("Σ sum = z"), in the active language."""
    return t("figure.weighted_sum.sum")


def weighted_sum_figure(trace: AttentionTrace, query: int, *, head: int = 0, tokens_q=None,
                        tokens_k=None, max_bytes: int = DETAIL_MAX_BYTES) -> go.Figure:
    """One query's value vectors, each times its weight, and their sum: that query's row of Z
    (tutorials 000 and 003 write it out so).

    Parameters
    ----------
    trace, query, head, tokens_q, tokens_k
        As in :func:`query_vector_figure`.
    max_bytes : int
        The figure's byte budget, as in :func:`heatmap`; default DETAIL_MAX_BYTES, as it sits
        below the page's main map. The sum row is never pooled with the keys.

    Returns
    -------
    plotly.graph_objects.Figure
        One heatmap of (n_k + 1, d_v): rows ``weights[head, query, j] · v[head, j]`` for each
        key j, then a last row labelled SUM_LABEL holding ``z[head, query]``, set off by a
        line (a layout shape) and named in the title.
    """
    tokens_q, tokens_k = trace_tokens(trace, tokens_q, tokens_k)
    head = trace._check_head(head)
    query = _check_index(query, trace.n_q, "query")
    weighted = trace.weighted_values(head, query)                            # (n_k, d_v)
    rows = [*(str(k) for k in tokens_k), sum_label()]
    query_label = _esc(unique([str(q) for q in tokens_q])[query])
    fig, shown, _ = _heatmap(
        np.vstack([weighted, trace.z[head, query]]), row_labels=rows,
        col_labels=feature_labels(trace.d_v), row_title=t("figure.axis.key"),
        col_title=t("figure.axis.feature"),
        title=t("figure.weighted_sum.title", query=query_label), kind="signed",
        masked=None, show_values=None, weight_scale="fixed", value_name=None,
        max_bytes=max_bytes, row_breaks=[trace.n_k])
    line = len(shown) - 1.5                                  # above the sum, the last row
    fig.add_shape(type="line", x0=0, x1=1, xref="paper", y0=line, y1=line, yref="y",
                  line=dict(color=BOUNDARY_COLOR, width=3))
    return fig


# ---- traces ------------------------------------------------------------------------------------

def _matrix_traces(z: np.ndarray, rows: list[str], cols: list[str], marked, *, kind: str,
                   hover: str, show_values: bool, colour: dict, value_name: str,
                   approx: bool, overlay: bool = True, levels=None, true=None,
                   masked_label: str = "") -> list[go.Heatmap]:
    """The heatmap of `z` (the values as sent, NaN where marked) and, if any cell is marked
    and `overlay`, its grey overlay (hover "masked (`masked_label`)"). Without the overlay the
    marked cells are gaps showing the plot background, which the caller makes MASKED_COLOR.
    With `levels` (a relative weight scale's colours, 0–1, NaN where marked) the heatmap's z
    is their colour level (:func:`colour_levels`; without the overlay a marked cell is level
    0, which the caller's colour scale draws grey) and customdata the true values (`true`,
    default `z`), which the hover and the cells' numbers show. `approx`: the values were
    rounded to be sent (hover says "≈")."""
    shown = f"{value_name}{' ≈ ' if approx else ': '}"
    if levels is not None:
        text = (np.vectorize(lambda v: "" if math.isnan(v) else format(v, ".2f"))(z).tolist()
                if show_values else None)                    # true weights; ≤ 400 cells
        base = go.Heatmap(z=colour_levels(levels, masked_zero=not overlay),
                          customdata=z if true is None else true, x=cols, y=rows,
                          hoverongaps=False, **colour,
                          hovertemplate=f"{hover}{shown}%{{customdata:{_hover_format(z)}}}"
                                        "<extra></extra>",
                          text=text, texttemplate="%{text}" if show_values else None)
    else:
        base = go.Heatmap(z=z, x=cols, y=rows, hoverongaps=False, **colour,
                          hovertemplate=f"{hover}{shown}%{{z:{_hover_format(z)}}}"
                                        "<extra></extra>",
                          texttemplate=f"%{{z:{_CELL_FORMAT[kind]}}}" if show_values else None)
    if marked is None or not marked.any() or not overlay:
        return [base]
    text = np.where(marked, masked_label, "").tolist() if show_values else None   # ≤ 400 cells
    grey = go.Heatmap(z=np.where(marked, np.float32(1), np.float32(np.nan)), x=cols, y=rows,
                      name="masked", colorscale=[[0, MASKED_COLOR], [1, MASKED_COLOR]],
                      zmin=0, zmax=1, showscale=False, hoverongaps=False,
                      hovertemplate=f"{hover}{t('figure.hover.masked', value=masked_label)}"
                                    "<extra></extra>",
                      text=text, texttemplate="%{text}" if show_values else None)
    return [base, grey]


def _bars(values: np.ndarray, keys: list[str], marked: np.ndarray, *, name: str, kind: str,
          show_values: bool) -> go.Bar:
    """Bars of one row of values over the keys; masked keys grey with height 0."""
    y = np.where(marked, 0.0, values).astype(np.float64)
    if kind == "weights":
        colours = np.where(marked, MASKED_COLOR, "#2171b5")
    else:
        colours = np.where(marked, MASKED_COLOR, np.where(y < 0, "#2166ac", "#b2182b"))
    label = _masked_label(values, marked) if marked.any() else ""
    note = [t("figure.bars.masked_note", label=label) if m else "" for m in marked] \
        if marked.any() else None
    cell = ".2f" if kind == "weights" else ".3g"             # _CELL_FORMAT, in Python's words
    text = [t("figure.bars.masked_value", label=label) if m else format(float(v), cell)
            for v, m in zip(values, marked)] if show_values else None
    # numbers above the bars, except weights near the fixed top 1, whose number would reach
    # the next chart's title: those go inside the bar
    position = (np.where((kind == "weights") & (y > 0.8), "inside", "outside").tolist()
                if show_values else None)
    return go.Bar(x=keys, y=y, name=name, marker_color=colours.tolist(), customdata=note,
                  hovertemplate=f"{t('figure.axis.key')}: %{{x}}<br>{name}: %{{y:.15~g}}"
                                + (" %{customdata}" if note else "") + "<extra></extra>",
                  text=text, texttemplate="%{text}" if show_values else None,
                  textposition=position, cliponaxis=False)


def _bars_range(values: np.ndarray, show_values: bool) -> list[float]:
    """A y range holding 0, every bar and, when the numbers are printed, a line of text above
    the highest bar and below the lowest (plotly's autorange leaves none, so "3.37" would sit
    on the next chart's title)."""
    v = values[np.isfinite(values)]
    lo, hi = min(0.0, float(v.min(initial=0.0))), max(0.0, float(v.max(initial=0.0)))
    pad = (hi - lo or 1.0) * (0.25 if show_values else 0.08)
    return [lo - pad if lo < 0 else lo, hi + pad]


# ---- helpers -----------------------------------------------------------------------------------

def _as_2d(array, name: str) -> np.ndarray:
    try:
        a = np.asarray(array)
    except (TypeError, ValueError) as exc:
        raise AttnvizInputError("error.array.not_numbers", name=name, problem=str(exc)) \
            from None
    if a.ndim != 2 or a.size == 0:
        raise AttnvizInputError("error.figure.not_2d", name=name, shape=str(a.shape))
    if a.dtype == bool or not np.issubdtype(a.dtype, np.number) \
            or np.issubdtype(a.dtype, np.complexfloating):
        raise AttnvizInputError("error.figure.not_real", name=name, dtype=str(a.dtype))
    return a if np.issubdtype(a.dtype, np.floating) else a.astype(np.float64)


def _check_index(i, n: int, name: str) -> int:
    return whole_number(i, name, low=0, high=n - 1)


def _step_mask_all(trace: AttentionTrace) -> np.ndarray:
    """(H, n_q, n_k) True where a key is masked: the bool mask or a −∞ from a float mask."""
    marked = np.isneginf(trace.masked_scores)
    if trace.mask is not None:
        marked |= np.broadcast_to(trace.mask, marked.shape)
    return marked


def _step_mask(trace: AttentionTrace, head: int) -> np.ndarray:
    """(n_q, n_k) masked cells of one head."""
    marked = np.isneginf(trace.masked_scores[head])
    if trace.mask is not None:
        marked |= np.broadcast_to(trace.mask, trace.masked_scores.shape)[head]
    return marked


def _marked_cells(a: np.ndarray, masked) -> np.ndarray | None:
    """The cells drawn as masked: `masked` plus every non-finite value (−∞ scores)."""
    marked = ~np.isfinite(a)
    if masked is not None:
        m = np.asarray(masked)
        if m.dtype != bool or m.shape != a.shape:
            raise AttnvizInputError("error.figure.masked", want=str(a.shape),
                                    dtype=str(m.dtype), shape=str(m.shape))
        marked |= m
    return marked if marked.any() else None


def _masked_label(a: np.ndarray, marked: np.ndarray) -> str:
    """What the masked cells hold, if they all hold the same: "−∞" (scores), "0" (weights)."""
    values = np.unique(np.asarray(a)[marked])
    if len(values) != 1:
        return "various"
    v = float(values[0])
    return "−∞" if v == -math.inf else "+∞" if v == math.inf else "NaN" if math.isnan(v) \
        else f"{v:.6g}"


def _plotly_floats(a: np.ndarray) -> np.ndarray:
    """What plotly gets: float32 for large matrices (half the JSON), the float64 values of
    small ones untouched (exact hover)."""
    if a.dtype == np.float32 or a.size > FLOAT64_MAX_CELLS:
        return np.ascontiguousarray(a, dtype=np.float32)
    return np.ascontiguousarray(a, dtype=np.float64)


def _hover_format(z: np.ndarray) -> str:
    """Every significant digit the sent dtype holds, trailing zeros trimmed."""
    return ".7~g" if z.dtype == np.float32 else ".15~g"


def _rounded(source: np.ndarray, sent: np.ndarray) -> bool:
    """True when the values sent hold fewer digits than the source's (float64 as float32)."""
    return np.finfo(sent.dtype).precision < np.finfo(source.dtype).precision


def _pooled_name(name: str, kind: str) -> str:
    """The hover's name of a pooled cell's value: "largest weight", "value farthest from 0"."""
    return t(f"figure.pooled.name.{_PICK[kind]}", name=name)


def _pooled_subtitle(blocks: Blocks, kind: str) -> str:
    """Short enough for a half-width map on a 1024-pixel screen."""
    return t(f"figure.pooled.map.{_PICK[kind]}", rows=blocks.rows, cols=blocks.cols)


def cell_markers(rows: list[str], cols: list[str], hover: list[list[str]],
                 hovertemplate: str) -> go.Scatter:
    """An invisible marker at the centre of each cell of a heatmap with these category rows
    and columns, row by row (point r · len(cols) + c is cell (r, c)), carrying the hover
    (customdata): a heatmap's cells answer no click (plotly selects no heatmap points, so
    Streamlit's on_select never hears of them), a marker does (the nearest within 20 px). The
    heatmap's own hover is then switched off (``hoverinfo="skip"``)."""
    return go.Scatter(x=[c for _ in rows for c in cols], y=[r for r in rows for _ in cols],
                      mode="markers", marker=dict(size=10, opacity=0),
                      customdata=[h for row in hover for h in row], showlegend=False,
                      hovertemplate=hovertemplate)


def _height(n_rows: int) -> int:
    return int(min(820, max(280, 140 + 24 * n_rows)))


def _facet_height(n_rows: int) -> int:
    return int(min(420, max(240, 120 + 14 * n_rows)))


def _axis_title(axis: str) -> str:
    """A step's axis ("query", "key", "feature"; "token" for X's rows: the input is not yet
    queries) as an axis title in the active language."""
    return t(f"figure.axis.{axis}")
