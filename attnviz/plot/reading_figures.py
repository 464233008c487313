"""Plotly figures for reading a pretrained model (the Read the model page): a heatmap on its
own 0…max scale (value norms, entropies), one token's row as bars, and a layers × heads map.

Plain plotly (no streamlit), so they work in a notebook:

    run = attnviz.PretrainedModel.load().run("The animal didn't cross the street")
    norms_heatmap(run.value_norms[2, 5], run.tokens).show()
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from attnviz.i18n import t
from attnviz.plot.figures import FIGURE_MAX_BYTES, heatmap
from attnviz.plot.text_layout import NARROW_WIDTH, _category_axis, _esc, _labels

BAR_HEIGHT = 300
BAR_AXIS_PX = 70            # a bar chart's y labels and title: the rest of its width is bars
NORM_NAME = "‖αf(x)‖"


def scaled_heatmap(array2d, *, row_labels, col_labels, title: str, value_name: str,
                   row_title: str | None = None, col_title: str | None = None,
                   top: float | None = None, max_bytes: int = FIGURE_MAX_BYTES,
                   width: int = NARROW_WIDTH) -> go.Figure:
    """A heatmap of non-negative numbers on a sequential scale from 0 to `top` (default: the
    largest number), which the colour bar names ("‖αf(x)‖, 0–0.83"); hover shows the value.

    array2d (rows, cols); value_name: what a cell is, in the hover and on the colour bar;
    max_bytes: the figure's byte budget (as in attnviz.plot.figures.heatmap: a larger map is pooled
    into blocks, each showing its largest number). row_title, col_title: default "query" and
    "key" in the active language. width: as in heatmap (HALF_WIDTH for one of two side by
    side)."""
    a = np.asarray(array2d)
    a = a if np.issubdtype(a.dtype, np.floating) else a.astype(np.float64)
    top = float(np.nanmax(a)) if top is None else float(top)
    top = top if top > 0 else 1.0
    name = _esc(value_name)
    fig = heatmap(a, row_labels=row_labels, col_labels=col_labels, title=title,
                  kind="weights", row_title=row_title, col_title=col_title, show_values=False,
                  value_name=name, max_bytes=max_bytes, width=width)
    fig.update_traces(selector=dict(type="heatmap"), zmin=0.0, zmax=top,
                      colorbar=dict(title=dict(text=f"{name}<br>0–{top:.3g}", side="top")))
    return fig


def norms_heatmap(norms2d, tokens, *, title: str = "", max_bytes: int = FIGURE_MAX_BYTES,
                  width: int = NARROW_WIDTH) -> go.Figure:
    """‖α_ij f(x_j)‖ of one head (n, n), on its own 0…max scale (Kobayashi et al. 2020)."""
    return scaled_heatmap(norms2d, row_labels=tokens, col_labels=tokens, title=title,
                          value_name=NORM_NAME, max_bytes=max_bytes, width=width)


def token_bars(values, tokens, *, title: str, value_name: str,
               width: int = NARROW_WIDTH) -> go.Figure:
    """One row over the keys as bars (n,): e.g. where one token's information came from.
    width: as in heatmap (HALF_WIDTH for one of two side by side)."""
    v = np.asarray(values, dtype=np.float64)
    keys = _labels(tokens, len(v), "tokens")
    key = _esc(t("figure.axis.key"))
    fig = go.Figure(go.Bar(x=keys, y=v, marker_color="#2171b5", name=_esc(value_name),
                           hovertemplate=f"{key}: %{{x}}<br>{_esc(value_name)}: %{{y:.4g}}"
                                         "<extra></extra>"))
    fig.update_layout(title=dict(text=title), height=BAR_HEIGHT, showlegend=False,
                      margin=dict(l=10, r=10, t=60, b=10),
                      yaxis=dict(title=dict(text=_esc(value_name)), rangemode="tozero",
                                 automargin=True))
    # no axis title under the bars: in a narrow column, with upright labels, the browser drew
    # it over them (issue 27.5); the bars stand on their tokens and the hover says "key"
    _category_axis(fig.layout.xaxis, keys, None, plot_px=width - BAR_AXIS_PX)
    return fig


def layers_heads_map(values, *, title: str, value_name: str, kind: str = "scaled",
                     top: float | None = None) -> go.Figure:
    """A (layers, heads) map of one number per head: rows "layer 0…", columns "head 0…" (in
    the active language).

    kind: "scaled" (0…`top`, default the max, named on the colour bar), "weights" (fixed 0–1)
    or "signed" (diverging, centred on 0)."""
    v = np.asarray(values, dtype=np.float64)
    rows = [t("figure.layer", layer=i) for i in range(v.shape[0])]
    cols = [t("figure.head", head=j) for j in range(v.shape[1])]
    row_title, col_title = t("figure.axis.layer"), t("figure.axis.head")
    if kind == "scaled":
        return scaled_heatmap(v, row_labels=rows, col_labels=cols, title=title,
                              value_name=value_name, row_title=row_title, col_title=col_title,
                              top=top)
    fig = heatmap(v, row_labels=rows, col_labels=cols, title=title, kind=kind,
                  row_title=row_title, col_title=col_title, show_values=False)
    fig.update_traces(selector=dict(type="heatmap"),
                      colorbar=dict(title=dict(text=_esc(value_name), side="top")))
    return fig


__all__ = ["layers_heads_map", "norms_heatmap", "scaled_heatmap", "token_bars"]
