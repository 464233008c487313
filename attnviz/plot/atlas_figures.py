"""The head atlas's figures (plain plotly, so each works in a notebook):

    part = atlas.reduce(DecoderModel.load(), texts)
    heads_scatter(part.means(), "entropy", "induction", model=part.model).show()
    qk_map(atlas_map.pca(atlas_map.head_points(part, 3, 0)), len(part.sample_pos),
           tokens=part.sample_token, layer=3, head=0, method="PCA").show()

Every head is a point (layer × head) on two of the atlas's metrics, coloured by layer, its
(layer, head) in ``customdata`` for a click; one head's queries and keys share one map.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import plotly.graph_objects as go

from attnviz.i18n import t
from attnviz.plot.text_layout import NARROW_WIDTH, escape

__all__ = ["heads_scatter", "qk_map"]

HEIGHT = 480
QUERY_COLOUR, KEY_COLOUR = "#1f77b4", "#d62728"


def heads_scatter(means: Mapping[str, np.ndarray], x: str, y: str, *, model: str,
                  picked: tuple[int, int] | None = None, clusters: np.ndarray | None = None,
                  width: int = NARROW_WIDTH) -> go.Figure:
    """Every head as a point on metrics `x` and `y` (names of ``atlas.METRICS``; means[name]
    (layers, heads)), coloured by layer — or by cluster, `clusters` (layers, heads) int
    (``atlas_map.head_clusters``), its number in the hover too; hover names the head (L3H2)
    and both values. Heads whose value is NaN (no row read) are left out, not drawn at 0.
    `picked` (layer, head): a ring around that head's point (a second trace, its (layer, head)
    in customdata too)."""
    xs, ys = np.asarray(means[x], np.float64), np.asarray(means[y], np.float64)
    layers, heads = xs.shape
    layer, head = np.meshgrid(np.arange(layers), np.arange(heads), indexing="ij")
    keep = (np.isfinite(xs) & np.isfinite(ys)).ravel()
    x_name, y_name = t(f"atlas.metric.{x}"), t(f"atlas.metric.{y}")
    names = [f"L{l}H{h}" for l, h in zip(layer.ravel()[keep], head.ravel()[keep])]
    if clusters is None:
        colour, scale, top, title = layer.ravel()[keep], "Viridis", layers - 1, "figure.atlas.layer"
    else:
        colour = np.asarray(clusters).ravel()[keep]
        scale, top, title = "Turbo", int(np.max(clusters, initial=0)), "figure.atlas.cluster"
        names = [f"{n} · {escape(t('figure.atlas.cluster'))} {c}" for n, c in zip(names, colour)]
    fig = go.Figure(go.Scatter(
        x=xs.ravel()[keep], y=ys.ravel()[keep], mode="markers", text=names,
        customdata=np.stack([layer.ravel()[keep], head.ravel()[keep]], axis=1),
        marker=dict(color=colour, colorscale=scale, cmin=0, cmax=max(top, 1), size=8,
                    colorbar=dict(title=dict(text=escape(t(title))))),
        hovertemplate=(f"%{{text}}<br>{escape(x_name)}: %{{x:.4g}}<br>{escape(y_name)}: "
                       "%{y:.4g}<extra></extra>")))
    if picked is not None and np.isfinite(xs[picked]) and np.isfinite(ys[picked]):
        fig.add_trace(go.Scatter(x=[xs[picked]], y=[ys[picked]], mode="markers",
                                 customdata=[list(picked)], hoverinfo="skip", showlegend=False,
                                 marker=dict(symbol="circle-open", size=18, color="black",
                                             line=dict(width=2))))
    fig.update_layout(title=dict(text=escape(t("figure.atlas.heads.title", model=model))),
                      xaxis_title=escape(x_name), yaxis_title=escape(y_name), width=width,
                      showlegend=False,
                      height=HEIGHT, margin=dict(l=60, r=20, t=60, b=50))
    return fig


def qk_map(points2d, queries: int, *, tokens: Sequence[str], layer: int, head: int,
           method: str, positions: Sequence[int] | None = None,
           width: int = NARROW_WIDTH) -> go.Figure:
    """One head's joint map: points2d (2S, 2) — the first `queries` rows its queries, the rest
    its keys (``atlas_map.head_points`` projected by PCA or t-SNE) — in two colours; hover
    shows each point's token (tokens (S,), the sample's, for both halves). With `positions`
    (S,) (the sample's, for both halves): coloured by position instead (one colour scale),
    queries as circles and keys as diamonds, hover giving the position too."""
    p = np.asarray(points2d, np.float64)
    tokens = [str(s) for s in tokens]
    fig = go.Figure()
    halves = ((t("figure.atlas.map.queries"), slice(0, queries), QUERY_COLOUR, "circle"),
              (t("figure.atlas.map.keys"), slice(queries, None), KEY_COLOUR, "diamond"))
    for first, (name, rows, colour, symbol) in zip((True, False), halves):
        count = len(p[rows])
        if positions is None:
            marker = dict(color=colour, size=5, opacity=0.7)
            hover = f"{escape(name)}: %{{text}}<extra></extra>"
            data = None
        else:
            where = np.asarray(positions, np.int64)[:count]
            marker = dict(color=where, colorscale="Viridis", cmin=0,
                          cmax=max(int(np.max(positions, initial=0)), 1), size=6,
                          opacity=0.8, symbol=symbol, showscale=first,
                          colorbar=dict(title=dict(text=escape(t("figure.atlas.map.position")))))
            hover = (f"{escape(name)}: %{{text}}<br>{escape(t('figure.atlas.map.position'))}: "
                     "%{customdata}<extra></extra>")
            data = where
        fig.add_trace(go.Scattergl(
            x=p[rows, 0], y=p[rows, 1], mode="markers", name=escape(name),
            text=[escape(s) for s in tokens[:count]], customdata=data, marker=marker,
            hovertemplate=hover))
    axis = "figure.atlas.map.axis" if method == "PCA" else "figure.atlas.map.axis_tsne"
    fig.update_layout(
        title=dict(text=escape(t("figure.atlas.map.title", layer=layer, head=head,
                                 method=method))),
        xaxis_title=escape(t(axis, n=1)), yaxis_title=escape(t(axis, n=2)),
        legend=dict(orientation="h", y=-0.15) if positions is not None else None,
        width=width, height=HEIGHT, margin=dict(l=60, r=20, t=60, b=50))
    return fig
