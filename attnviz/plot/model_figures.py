"""Plotly figures of a whole pretrained model's attention: every layer and head at a glance
(the model view) and one layer's heads as lines between tokens (the head view, after BertViz).

Plain plotly (no streamlit), so both work in a notebook:

    run = attnviz.PretrainedModel.load().run("The animal didn't cross the street")
    weights = np.stack([t.weights for t in run.traces])       # (L, H, n, n)
    model_view(weights).show()
    head_view(weights[2], run.tokens).show()

The model view sends each of its L × H maps as a small PNG (a palette image whose pixel
(query i, key j) is the 0–1 weights colour of weights[l, h, i, j]), so 72 maps of 128 × 128
tokens are a few hundred kB rather than 72 heatmaps of numbers. The head view draws only the
lines of weights ≥ `min_weight`, bucketed into a few opacity levels (plotly has one opacity per
trace, not per segment).
"""

from __future__ import annotations

import base64
import io

import numpy as np
import plotly.colors as pc
import plotly.graph_objects as go
from PIL import Image

from attnviz.plot.budget import Blocks, pick_cells, take
from attnviz.core.arrays import whole_number
from attnviz.core.errors import AttnvizInputError
from attnviz.plot.colour_scales import WEIGHTS_COLORSCALE, check_weight_scale, relative_weights
from attnviz.plot.text_layout import escape
from attnviz.i18n import t

MODEL_VIEW_MAX_SIDE = 128          # larger maps are max-pooled down to at most this many pixels
MODEL_VIEW_ROW_HEIGHT = 80        # pixels per layer: about square maps in the wide layout
HEAD_VIEW_MIN_WEIGHT = 0.05        # weaker lines are not drawn
HEAD_VIEW_LEVELS = (0.2, 0.4, 0.6, 0.8)   # upper edges of the opacity levels below 1
HEAD_VIEW_ROW_HEIGHT = 18          # pixels per token row
# how far (pixels) from a label's anchor (its end beside the lines) a hover or click still
# finds that token: the labels are text, and plotly finds a point by its anchor alone
HEAD_VIEW_CLICK_DISTANCE = 80
HEAD_COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b",
               "#e377c2", "#7f7f7f", "#bcbd22", "#17becf", "#393b79", "#ad494a")
FRAME_COLOR = "#d0d0d0"
TEXT_COLOR = "#262730"            # streamlit's text colour
FADED_TEXT_COLOR = "#b0b0b0"


# ---- weights → pixels --------------------------------------------------------------------------

def weights_palette(colorscale=WEIGHTS_COLORSCALE) -> np.ndarray:
    """(256, 3) uint8: the colour of weight k / 255 on `colorscale`, for k = 0 … 255 (the same
    fixed 0–1 scale as the weights heatmaps)."""
    colours = pc.sample_colorscale(colorscale, np.linspace(0.0, 1.0, 256).tolist(),
                                   colortype="rgb")
    return np.array([[round(float(c)) for c in pc.unlabel_rgb(s)] for s in colours],
                    dtype=np.uint8)


def weights_to_indices(weights2d) -> np.ndarray:
    """(rows, cols) uint8 palette indices: round(weight × 255), weights clipped to 0–1."""
    w = np.asarray(weights2d, dtype=np.float64)
    if w.ndim != 2 or w.size == 0:
        raise AttnvizInputError("error.figure.not_2d", name="weights", shape=w.shape)
    return np.rint(np.clip(np.nan_to_num(w, nan=0.0), 0.0, 1.0) * 255).astype(np.uint8)


def png_palette_image(indices: np.ndarray, palette: np.ndarray) -> bytes:
    """An 8-bit palette PNG (colour type 3) of `indices` (rows, cols) uint8 with `palette`
    (256, 3) uint8, encoded by Pillow (zlib level 9: the model view sends 72 of them)."""
    indices = np.ascontiguousarray(indices, dtype=np.uint8)
    image = Image.frombytes("P", indices.shape[::-1], indices.tobytes())   # size is (w, h)
    image.putpalette(np.ascontiguousarray(palette, dtype=np.uint8).tobytes())
    out = io.BytesIO()
    image.save(out, format="PNG", compress_level=9)
    return out.getvalue()


def weights_png(weights2d, palette: np.ndarray | None = None) -> bytes:
    """One attention map (n_q, n_k) as a PNG: pixel (i, j) has the colour of weight [i, j]."""
    return png_palette_image(weights_to_indices(weights2d),
                             weights_palette() if palette is None else palette)


def pool_max(weights2d: np.ndarray, max_side: int) -> tuple[np.ndarray, int]:
    """`weights2d` shrunk so neither side exceeds `max_side`: each pixel is the largest weight
    of a block × block square (strong links stay visible). Returns (pixels, block)."""
    block = max(1, -(-max(weights2d.shape) // max_side))
    if block == 1:
        return weights2d, 1
    rows, cols = pick_cells(weights2d, Blocks(block, block))   # attnviz.plot.budget's one pooling
    return take(weights2d, rows, cols), block


def keep_tokens(weights, tokens, keep) -> tuple[np.ndarray, list[str]]:
    """The rows and columns of `keep` (positions, in order) of `weights` (…, n, n), and their
    tokens. The weights are not renormalised: a row keeps the model's own numbers."""
    keep = np.asarray(keep, dtype=np.intp)
    w = np.asarray(weights)
    return w[..., keep, :][..., keep], [tokens[i] for i in keep]


# ---- the model view ----------------------------------------------------------------------------

def model_view(weights, *, max_side: int = MODEL_VIEW_MAX_SIDE, start: int = 0,
               weight_scale: str = "fixed") -> go.Figure:
    """Every layer × head attention map of a model, one small picture each.

    Parameters
    ----------
    weights : array-like, shape (L, H, n_q, n_k)
        Attention weights, layer by layer (e.g. ``np.stack([t.weights for t in traces])``).
    max_side : int
        Maps with more than this many tokens are max-pooled down to at most this many pixels
        a side (each pixel the strongest weight of its block), bounding the figure's size.
    start : int
        The position in the text of the first token shown (1 when [CLS] is hidden): the hover
        names query and key positions as the token list numbers them.
    weight_scale : "fixed", "head" or "row"
        What the colours run over, as in :func:`attnviz.plot.figures.heatmap`: "fixed" (default)
        0–1; "head" each map ÷ its largest weight; "row" each row ÷ its largest weight (the
        pattern of a long text, whose weights are all ≈ 1/n, shows). ``layout.meta``
        names it: {"weight_scale": …}.

    Returns
    -------
    plotly.graph_objects.Figure
        An L-row × H-column grid of ``go.Image`` traces, in order layer 0 head 0, layer 0
        head 1, …; trace ``l * H + h`` is named "layer l, head h" and its ``source`` is a PNG
        data URI of ``weights_png(relative_weights(weights[l, h], weight_scale))`` (pooled if
        needed), on axes x{k}, y{k} with
        k = l * H + h + 1 (plotly names the first pair x, y). Rows are queries (first at the
        top), columns keys, coloured on the weights scale (`weight_scale`). Annotations number
        the heads (above) and name the layers (left).
    """
    w = np.asarray(weights)
    if w.ndim != 4 or w.size == 0:
        raise AttnvizInputError("error.figure.not_4d", shape=w.shape)
    max_side = whole_number(max_side, "max_side", low=1)
    check_weight_scale(weight_scale)
    start = int(start)
    n_layers, n_heads = w.shape[:2]
    palette = weights_palette()
    col_domains = _domains(n_heads, gap=0.004)
    row_domains = _domains(n_layers, gap=0.012)[::-1]          # layer 0 at the top
    traces, layout = [], dict(annotations=_grid_titles(col_domains, row_domains))
    for layer in range(n_layers):
        for h in range(n_heads):
            k = layer * n_heads + h + 1
            ax = "" if k == 1 else str(k)                        # plotly's names: x, x2, …
            colours = relative_weights(w[layer, h], weight_scale)    # (n_q, n_k)
            traces.append(_panel(colours, t("figure.model.panel", layer=layer, head=h), ax,
                                 palette,
                                 max_side, start))
            layout[f"xaxis{ax}"], layout[f"yaxis{ax}"] = _panel_axes(
                w.shape[2:], ax, col_domains[h], row_domains[layer], start)
    layout.update(height=60 + MODEL_VIEW_ROW_HEIGHT * n_layers,
                  margin=dict(l=60, r=10, t=50, b=10), plot_bgcolor="white", showlegend=False,
                  meta=dict(weight_scale=weight_scale))
    return go.Figure(data=traces, layout=layout)


def _panel(weights2d: np.ndarray, name: str, ax: str, palette: np.ndarray,
           max_side: int, start: int) -> go.Image:
    """One head's map as a PNG on axes x{ax}, y{ax}, pixel centres at the token positions
    (from `start`); a pooled pixel spans `block` tokens."""
    pixels, block = pool_max(weights2d, max_side)
    uri = "data:image/png;base64," + base64.b64encode(
        weights_png(pixels, palette)).decode("ascii")
    position = t("figure.model.hover", query="%{y}", key="%{x}") if block == 1 else \
        t("figure.model.hover_pooled", query="%{y}", key="%{x}", half=block // 2)
    return go.Image(source=uri, name=name, xaxis=f"x{ax}", yaxis=f"y{ax}",
                    x0=start + (block - 1) / 2, dx=block, y0=start + (block - 1) / 2, dy=block,
                    hovertemplate=f"{name}<br>{position}<extra></extra>")


def _panel_axes(shape: tuple[int, int], ax: str, x_domain, y_domain,
                start: int) -> tuple[dict, dict]:
    """A panel's x and y axes: one token per unit, the first query at the top, square cells,
    framed."""
    n_q, n_k = shape
    frame = dict(showticklabels=False, showgrid=False, zeroline=False, ticks="",
                 showline=True, mirror=True, linecolor=FRAME_COLOR, constrain="domain")
    return (dict(domain=x_domain, range=[start - 0.5, start + n_k - 0.5], anchor=f"y{ax}",
                 **frame),
            dict(domain=y_domain, range=[start + n_q - 0.5, start - 0.5], anchor=f"x{ax}",
                 scaleanchor=f"x{ax}", **frame))


def _grid_titles(col_domains, row_domains) -> list[dict]:
    """Head numbers above the columns (after "head"), "layer l" left of each row."""
    def note(text, x, y, **kw):
        return dict(text=text, x=x, y=y, xref="paper", yref="paper", showarrow=False,
                    font=dict(size=11), **kw)

    return ([note(str(h), (lo + hi) / 2, 1.0, yanchor="bottom")
             for h, (lo, hi) in enumerate(col_domains)]
            + [note(t("figure.model.heads_axis"), 0, 1.0, xanchor="right", yanchor="bottom")]
            + [note(t("figure.model.layer", layer=layer), 0, (lo + hi) / 2, xanchor="right")
               for layer, (lo, hi) in enumerate(row_domains)])


# ---- the head view -----------------------------------------------------------------------------

def opacity_levels(min_weight: float = HEAD_VIEW_MIN_WEIGHT) -> list[tuple[float, float, float]]:
    """The head view's levels as (low, high, opacity): a line of weight w in [low, high) is
    drawn with that opacity, the middle of its level (the last level includes 1)."""
    edges = [min_weight] + [e for e in HEAD_VIEW_LEVELS if e > min_weight] + [1.0]
    return [(lo, hi, round((lo + hi) / 2, 4)) for lo, hi in zip(edges[:-1], edges[1:])]


def head_view(weights, tokens, *, heads=None, highlight: int | None = None,
              min_weight: float = HEAD_VIEW_MIN_WEIGHT) -> go.Figure:
    """One layer's attention as lines from each query token (left) to the keys it attends to
    (right): one colour per head, opacity = weight (in a few levels), as BertViz draws it.

    Parameters
    ----------
    weights : array-like, shape (H, n, n)
        One layer's attention weights (self-attention: the same tokens on both sides).
    tokens : sequence of str, length n
        The token labels, top to bottom on both sides; HTML-escaped here.
    heads : iterable of int, optional
        Which heads to draw (default all). Each drawn head is one legend entry: clicking it
        hides or shows that head's lines.
    highlight : int, optional
        A query position: only its lines are drawn, and its label is bold. The labels are
        the figure's only points that answer a hover or click (the app highlights the token
        clicked).
    min_weight : float
        Weights below this are not drawn (the levels are :func:`opacity_levels`).

    Returns
    -------
    plotly.graph_objects.Figure
        For each drawn head, its legend entry (a one-point trace, nothing drawn) and one
        scatter trace per opacity level that has lines (from (0, i) to (1, j), None between
        segments, ``meta`` {"head": h, "low": …, "high": …}), all with ``legendgroup``
        "head h"; then two text traces named "queries" and "keys".
    """
    w = np.asarray(weights, dtype=np.float64)
    heads = _check_head_view(w, tokens, heads, highlight, min_weight)
    fig = go.Figure()
    for h in heads:
        colour = HEAD_COLORS[h % len(HEAD_COLORS)]
        # the legend entry: opaque, and there even when the head draws no line (one point
        # draws no line)
        fig.add_trace(go.Scatter(x=[0], y=[0], mode="lines", line=dict(color=colour, width=3),
                                 name=t("figure.head", head=h), legendgroup=f"head {h}",
                                 showlegend=True,
                                 hoverinfo="skip"))
        fig.add_traces(_head_lines(w[h], h, colour, highlight, min_weight))
    fig.add_traces(_token_labels(tokens, highlight))
    n = w.shape[1]
    axis = dict(showticklabels=False, showgrid=False, zeroline=False, ticks="", fixedrange=True)
    fig.update_xaxes(range=[-0.7, 1.7], **axis)
    fig.update_yaxes(range=[n - 0.5, -0.5], **axis)
    fig.update_layout(height=max(60 + HEAD_VIEW_ROW_HEIGHT * n, 320), plot_bgcolor="white",
                      margin=dict(l=10, r=10, t=20, b=10), hovermode="closest",
                      hoverdistance=HEAD_VIEW_CLICK_DISTANCE,
                      legend=dict(orientation="v", x=1.0, xanchor="left", y=1.0,
                                  yanchor="top", tracegroupgap=0, groupclick="togglegroup",
                                  itemclick="toggle", itemdoubleclick="toggleothers"))
    return fig


def _check_head_view(w: np.ndarray, tokens, heads, highlight, min_weight) -> list[int]:
    """The heads to draw, after checking every argument of head_view."""
    if w.ndim != 3 or w.shape[1] != w.shape[2] or w.shape[1] == 0:
        raise AttnvizInputError("error.figure.not_heads_n_n", shape=w.shape)
    n_heads, n, _ = w.shape
    if isinstance(tokens, str) or len(tokens) != n:
        raise AttnvizInputError("error.labels.not_a_list", name="tokens", n=n)
    heads = list(range(n_heads)) if heads is None else [int(h) for h in heads]
    if any(not 0 <= h < n_heads for h in heads):
        raise AttnvizInputError("error.figure.heads_range", high=n_heads - 1, heads=heads)
    if highlight is not None and not 0 <= highlight < n:
        raise AttnvizInputError("error.figure.highlight", high=n - 1)
    if not 0 < min_weight <= 1:
        raise AttnvizInputError("error.figure.min_weight", value=repr(min_weight))
    return heads


def _head_lines(w: np.ndarray, h: int, colour: str, highlight: int | None,
                min_weight: float) -> list[go.Scatter]:
    """One head's lines (n, n) → a trace per opacity level that has any."""
    first = 0 if highlight is None else highlight
    a = w if highlight is None else w[highlight:highlight + 1]     # (queries drawn, n)
    traces = []
    for lo, hi, opacity in opacity_levels(min_weight):
        q, key = np.nonzero((a >= lo) & ((a <= hi) if hi >= 1.0 else (a < hi)))  # (segments,)
        if len(q):
            traces.append(go.Scatter(
                x=_segments(np.zeros(len(q)), np.ones(len(q))), y=_segments(q + first, key),
                mode="lines", line=dict(color=colour, width=2), opacity=opacity,
                name=t("figure.head", head=h), legendgroup=f"head {h}", showlegend=False,
                meta=dict(head=h, low=lo, high=hi), hoverinfo="skip"))
    return traces


def _token_labels(tokens, highlight: int | None) -> list[go.Scatter]:
    """The queries (left, the highlighted one bold, the others faded) and the keys (right)."""
    n = len(tokens)
    labels = [escape(t) for t in tokens]
    colours = [FADED_TEXT_COLOR if highlight is not None and i != highlight else TEXT_COLOR
               for i in range(n)]
    bold = [f"<b>{s}</b>" if i == highlight else s for i, s in enumerate(labels)]
    common = dict(y=list(range(n)), mode="text", showlegend=False, hovertext=labels,
                  hoverinfo="text")
    return [go.Scatter(x=[0] * n, text=bold, textposition="middle left", name="queries",
                       textfont=dict(color=colours, size=13), **common),
            go.Scatter(x=[1] * n, text=labels, textposition="middle right", name="keys",
                       textfont=dict(color=TEXT_COLOR, size=13), **common)]


def _domains(n: int, gap: float) -> list[tuple[float, float]]:
    """n equal (start, end) paper intervals side by side, `gap` apart, filling 0–1."""
    width = (1 - gap * (n - 1)) / n
    return [(i * (width + gap), i * (width + gap) + width) for i in range(n)]


def _segments(start: np.ndarray, end: np.ndarray) -> list:
    """Line segments start[i] → end[i] as one list with None between them (plotly's gaps)."""
    out = np.empty((len(start), 3), dtype=object)
    out[:, 0], out[:, 1], out[:, 2] = start.astype(int).tolist(), end.astype(int).tolist(), None
    return out.ravel().tolist()
