"""The head atlas's figures (plain plotly, so each works in a notebook):

    part = atlas.reduce(DecoderModel.load(), texts)
    heads_scatter(part.means(), "entropy", "induction", model=part.model).show()
    qk_map(atlas_map.pca(atlas_map.head_points(part, 3, 0)), len(part.sample_pos),
           tokens=part.sample_token, layer=3, head=0, method="PCA").show()

Every head is a point (layer × head) on two of the atlas's metrics, coloured by layer, its
(layer, head) in ``customdata`` for a click; one head's queries and keys share one map,
coloured by query / key, by position or by token (``token_groups``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

import numpy as np
import plotly.graph_objects as go

from attnviz.describe.labels import token_shown
from attnviz.i18n import t
from attnviz.plot.text_layout import NARROW_WIDTH, escape

__all__ = ["GRID_POINTS", "GRID_RADIUS", "TOKEN_COLOURS", "grid_rows", "heads_scatter",
           "pca_grid", "qk_map", "token_groups"]

HEIGHT = 480
QUERY_COLOUR, KEY_COLOUR = "#1f77b4", "#d62728"
# the map by token: its most frequent tokens' colours (plotly's qualitative "Plotly", no grey),
# the other tokens grey
TOKEN_COLOURS = ("#636EFA", "#EF553B", "#00CC96", "#AB63FA", "#FFA15A", "#19D3F3", "#FF6692",
                 "#B6E880", "#FF97FF", "#FECB52")
OTHER_TOKENS_COLOUR = "#BDBDBD"
SYMBOLS = ("circle", "diamond")         # queries, keys
# every head's PCA map at once: at most GRID_POINTS points a head (half queries, half keys),
# each head's drawn within GRID_RADIUS of its cell's centre (cells 1 apart), CELL_PX a cell
GRID_POINTS = 60
GRID_RADIUS = 0.42
CELL_PX = 32


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


def token_groups(tokens: Sequence[str], groups: int = len(TOKEN_COLOURS)
                 ) -> tuple[list[str], np.ndarray]:
    """(the `groups` most frequent tokens of `tokens` as every page writes them
    (``token_shown``: ␣ for a space, ↵ for a line break), most frequent first, ties in
    code-point order; (n,) int: each token's place among them, −1 for any other token)."""
    shown = [token_shown(str(s)) for s in tokens]
    top = [s for s, _ in sorted(Counter(shown).items(), key=lambda c: (-c[1], c[0]))[:groups]]
    place = {s: i for i, s in enumerate(top)}
    return top, np.array([place.get(s, -1) for s in shown], np.int64)


def qk_map(points2d, queries: int, *, tokens: Sequence[str], layer: int, head: int,
           method: str, positions: Sequence[int] | None = None, by_token: bool = False,
           texts: Sequence[str] | None = None, width: int = NARROW_WIDTH) -> go.Figure:
    """One head's joint map: points2d (2S, 2) — the first `queries` rows its queries, the rest
    its keys (``atlas_map.head_points`` projected by PCA or t-SNE) — in two colours; hover
    shows each point's token (tokens (S,), the sample's, for both halves). With `positions`
    (S,) (the sample's, for both halves): coloured by position instead (one colour scale),
    queries as circles and keys as diamonds, hover giving the position too. With `by_token`:
    coloured by token (``token_groups``), one trace a token in the legend, the other tokens
    grey in one trace last, queries as circles and keys as diamonds. With `texts` (S,) (each
    sampled position's text as the hover shows it: an excerpt, for both halves): hover names
    each point's text too (its ``hovertext``)."""
    p = np.asarray(points2d, np.float64)
    tokens = [str(s) for s in tokens]
    texts = None if texts is None else [escape(s) for s in texts]
    if by_token:
        fig = _by_token(p, queries, tokens, texts)
    else:
        fig = _by_kind_or_position(p, queries, tokens, positions, texts)
    axis = "figure.atlas.map.axis" if method == "PCA" else "figure.atlas.map.axis_tsne"
    fig.update_layout(
        title=dict(text=escape(t("figure.atlas.map.title", layer=layer, head=head,
                                 method=method))),
        xaxis_title=escape(t(axis, n=1)), yaxis_title=escape(t(axis, n=2)),
        width=width, height=HEIGHT, margin=dict(l=60, r=20, t=60, b=50))
    if positions is not None and not by_token:
        fig.update_layout(legend=dict(orientation="h", y=-0.15))
    return fig


def _text_line(texts: list[str] | None) -> str:
    """The hover's line naming the point's text (its hovertext), or nothing."""
    return "" if texts is None else f"<br>{escape(t('figure.atlas.map.text'))}: %{{hovertext}}"


def _by_kind_or_position(p: np.ndarray, queries: int, tokens: list[str],
                         positions: Sequence[int] | None,
                         texts: list[str] | None = None) -> go.Figure:
    fig = go.Figure()
    halves = ((t("figure.atlas.map.queries"), slice(0, queries), QUERY_COLOUR, SYMBOLS[0]),
              (t("figure.atlas.map.keys"), slice(queries, None), KEY_COLOUR, SYMBOLS[1]))
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
            hovertext=None if texts is None else texts[:count],
            hovertemplate=hover.replace("<extra>", _text_line(texts) + "<extra>")))
    return fig


def _by_token(p: np.ndarray, queries: int, tokens: list[str],
              texts: list[str] | None = None) -> go.Figure:
    """One trace per frequent token (its queries, then its keys), the rest grey last; the
    legend names each token as shown, hover says query or key and the token."""
    top, group = token_groups(tokens)
    shown = [token_shown(s) for s in tokens]
    keys_ = len(p) - queries
    kinds = [escape(t("figure.atlas.map.queries")), escape(t("figure.atlas.map.keys"))]
    fig = go.Figure()
    for g, name, colour in [*((g, name, TOKEN_COLOURS[g]) for g, name in enumerate(top)),
                            (-1, t("figure.atlas.map.other_tokens"), OTHER_TOKENS_COLOUR)]:
        q = np.flatnonzero(group[:queries] == g)
        k = np.flatnonzero(group[:keys_] == g)
        if not len(q) + len(k):
            continue
        rows = np.concatenate([q, queries + k])
        kind = [0] * len(q) + [1] * len(k)
        fig.add_trace(go.Scattergl(
            x=p[rows, 0], y=p[rows, 1], mode="markers", name=escape(name),
            text=[escape(shown[i]) for i in (*q, *k)], customdata=[kinds[i] for i in kind],
            marker=dict(color=colour, size=6, opacity=0.8,
                        symbol=[SYMBOLS[i] for i in kind]),
            hovertext=None if texts is None else [texts[i] for i in (*q, *k)],
            hovertemplate=f"%{{customdata}}: %{{text}}{_text_line(texts)}<extra></extra>"))
    fig.update_layout(legend=dict(title=dict(text=escape(t("figure.atlas.map.token")))))
    return fig


def grid_rows(queries: int, per_head: int = GRID_POINTS) -> np.ndarray:
    """The sampled rows each head's small map draws: at most per_head // 2 of the `queries`
    sampled positions, evenly spaced, each as its query (row r of a map) and its key (row
    queries + r)."""
    take = min(queries, per_head // 2)
    return np.unique(np.linspace(0, queries - 1, take).round().astype(np.int64)) if take \
        else np.zeros(0, np.int64)


def pca_grid(maps, queries: int, *, model: str, picked: tuple[int, int] | None = None,
             per_head: int = GRID_POINTS) -> go.Figure:
    """Every head's joint PCA map at once, small: maps (L, H, 2S, 2) (``atlas_map.pca_all``:
    each head's queries, then its keys), head h of layer l in the cell centred at (h, −l), its
    points ``grid_rows`` (the same sampled positions for every head) scaled so that its
    farthest drawn point is GRID_RADIUS from the centre. Two Scattergl traces in all —
    queries, keys — not a subplot a head (plotly is slow with hundreds); each point's
    customdata (layer, head, its row of the map), so a click opens its head; no axes in a cell,
    the layers and heads named at the edges; `picked` (layer, head) framed. Points that are not
    finite are left out."""
    maps = np.asarray(maps, np.float64)
    layers, heads = maps.shape[:2]
    rows = grid_rows(queries, per_head)
    layer, head = np.meshgrid(np.arange(layers), np.arange(heads), indexing="ij")
    fig = go.Figure()
    halves = ((t("figure.atlas.map.queries"), rows, QUERY_COLOUR),
              (t("figure.atlas.map.keys"), queries + rows, KEY_COLOUR))
    chosen = maps[:, :, np.concatenate([rows, queries + rows])]          # (L, H, 2r, 2)
    with np.errstate(invalid="ignore"):
        radius = np.nanmax(np.abs(np.where(np.isfinite(chosen), chosen, np.nan)), axis=(2, 3),
                           initial=0.0)
    scale = GRID_RADIUS / np.where(radius > 0, radius, 1.0)             # (L, H)
    for name, where, colour in halves:
        xy = maps[:, :, where] * scale[:, :, None, None]                 # (L, H, r, 2)
        x = xy[..., 0] + head[:, :, None]
        y = xy[..., 1] - layer[:, :, None]
        data = np.stack(np.broadcast_arrays(layer[:, :, None], head[:, :, None],
                                            where[None, None, :]), axis=-1).reshape(-1, 3)
        keep = np.isfinite(x).ravel() & np.isfinite(y).ravel()
        fig.add_trace(go.Scattergl(
            x=x.ravel()[keep].astype(np.float32), y=y.ravel()[keep].astype(np.float32),
            mode="markers", name=escape(name), customdata=data[keep].astype(np.int16),
            marker=dict(color=colour, size=3, opacity=0.7),
            hovertemplate=f"L%{{customdata[0]}}H%{{customdata[1]}} · {escape(name)}"
                          "<extra></extra>"))
    lines = [dict(type="line", x0=h - 0.5, x1=h - 0.5, y0=0.5, y1=0.5 - layers)
             for h in range(heads + 1)]
    lines += [dict(type="line", x0=-0.5, x1=heads - 0.5, y0=0.5 - l, y1=0.5 - l)
              for l in range(layers + 1)]
    shapes = [dict(line=dict(color="#E0E0E0", width=1), layer="below", **line) for line in lines]
    if picked is not None:
        l, h = picked
        shapes.append(dict(type="rect", x0=h - 0.5, x1=h + 0.5, y0=0.5 - l, y1=-0.5 - l,
                           line=dict(color="black", width=2)))
    axis = dict(showgrid=False, zeroline=False, showline=False, ticks="")
    fig.update_layout(
        title=dict(text=escape(t("figure.atlas.grid.title", model=model))),
        xaxis=dict(axis, range=[-0.5, heads - 0.5], side="top", tickvals=list(range(heads)),
                   ticktext=[f"H{h}" for h in range(heads)]),
        yaxis=dict(axis, range=[0.5 - layers, 0.5], tickvals=[-l for l in range(layers)],
                   ticktext=[f"L{l}" for l in range(layers)]),
        shapes=shapes, width=heads * CELL_PX + 110, height=layers * CELL_PX + 140,
        margin=dict(l=50, r=20, t=100, b=20), legend=dict(orientation="h", y=-0.02),
        plot_bgcolor="white")
    return fig
