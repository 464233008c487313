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

__all__ = ["TOKEN_COLOURS", "heads_scatter", "qk_map", "token_groups"]

HEIGHT = 480
QUERY_COLOUR, KEY_COLOUR = "#1f77b4", "#d62728"
# the map by token: its most frequent tokens' colours (plotly's qualitative "Plotly", no grey),
# the other tokens grey
TOKEN_COLOURS = ("#636EFA", "#EF553B", "#00CC96", "#AB63FA", "#FFA15A", "#19D3F3", "#FF6692",
                 "#B6E880", "#FF97FF", "#FECB52")
OTHER_TOKENS_COLOUR = "#BDBDBD"
SYMBOLS = ("circle", "diamond")         # queries, keys


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
