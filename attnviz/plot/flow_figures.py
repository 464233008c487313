"""The plotly figure of information flow routes (``attnviz.models.readers.flow``): the graph over
(row, position) nodes, each edge a line as wide as its importance.

Plain plotly (no streamlit), so it works in a notebook:

    m = attnviz.DecoderModel.load()
    f = m.information_flow("The Eiffel Tower is in the city of", threshold=0.04)
    flow_graph(f.edges, f.tokens, m.num_layers, title="information flow").show()

Rows 0 … 2L go up (row 2ℓ the stream before layer ℓ, 2ℓ + 1 after its attention, 2L after
the last layer), positions across. The edges are layout shapes (each its own width); at each
edge's midpoint a marker carries the hover and, as customdata, (layer, head, source, target,
kind): what a page's click (``st.plotly_chart(on_select=…)``) reads. One marker trace per
kind drawn, named in the legend; the nodes are one more trace.
"""

from __future__ import annotations

import plotly.colors as pc
import plotly.graph_objects as go

from attnviz.i18n import t
from attnviz.plot.text_layout import NARROW_WIDTH, _esc, _labels

MAX_EDGES = 1500            # edges drawn at most (the heaviest): a figure of ~300 KB
MIN_WIDTH, MAX_WIDTH = 0.5, 8.0     # px of an edge of importance 0 and 1
COLUMN_PX = 48              # a position
ROW_PX = 14                 # a row (two a layer)
BEND = 0.3                  # how far an MLP edge, or a head's edge to its own token, bows out
KIND_COLOURS = {"attn": "#2171b5", "attn_residual": "#969696", "mlp": "#d6604d",
                "mlp_residual": "#969696"}
HEAD_SCALE = "Blues"        # the heads: one colour family, a shade each
NODE_COLOUR = "#252525"
_KIND_ORDER = ("head", "attn", "attn_residual", "mlp", "mlp_residual")


def flow_graph(edges, tokens, num_layers: int, *, title: str, position: int | None = None,
               max_edges: int = MAX_EDGES, total: int | None = None,
               width: int | None = None) -> go.Figure:
    """The graph of `edges` — (layer, source, target, kind, head, weight) tuples, as
    ``InformationFlow.edges`` — over `tokens` (n,) and 2 · `num_layers` + 1 rows.

    position: the graph's top position, drawn as a node even without an edge (None: the
    nodes are the edges' ends). max_edges: the heaviest this many are drawn, the title says
    how many of how many. total: how many edges the graph has when `edges` are already its
    heaviest (``InformationFlow.total_edges`` of a bounded walk; None: len(edges)). width: px
    (default: from the number of tokens)."""
    labels = _labels(tokens, len(tokens), "tokens")
    edges = [tuple(e) for e in edges]
    shown = _heaviest(edges, max_edges)
    total = max(len(edges), total or 0)
    if len(shown) < total:
        cut = t("figure.flow.edges_cut", shown=len(shown), total=total)
        title = f"{title}<br><sub>{_esc(cut)}</sub>"
    num_heads = 1 + max((e[4] for e in shown), default=0)
    fig = go.Figure()
    fig.update_layout(shapes=[_shape(e, _colour(e, num_heads), num_heads) for e in shown])
    for kind in _KIND_ORDER:
        mine = [e for e in shown if e[3] == kind]
        if mine:
            fig.add_trace(_midpoints(kind, mine, labels, num_heads))
    fig.add_trace(_nodes(shown, labels, num_layers, position))
    n, rows = len(labels), 2 * num_layers + 1
    width = width or max(NARROW_WIDTH, 200 + COLUMN_PX * n)
    fig.update_layout(
        title=dict(text=title), width=width, height=max(420, 120 + ROW_PX * rows),
        margin=dict(l=10, r=10, t=70, b=10), hovermode="closest", clickmode="event+select",
        legend=dict(orientation="h", yanchor="bottom", y=1.0, x=0),
        xaxis=dict(range=[-0.6, n - 0.4], tickmode="array", tickvals=list(range(n)),
                   ticktext=labels, tickangle=90 if n > 12 else 0, showgrid=False,
                   zeroline=False, automargin=True,
                   title=dict(text=_esc(t("figure.flow.position")))),
        yaxis=dict(range=[-0.6, rows - 0.4], tickmode="array",
                   tickvals=[2 * layer + 1 for layer in range(num_layers)],
                   ticktext=[str(layer) for layer in range(num_layers)], showgrid=False,
                   zeroline=False, automargin=True,
                   title=dict(text=_esc(t("figure.flow.layer")))))
    return fig


# ---- pieces -------------------------------------------------------------------------------------

def _heaviest(edges: list[tuple], most: int) -> list[tuple]:
    """The `most` heaviest edges, in the order given."""
    if len(edges) <= most:
        return edges
    keep = set(sorted(range(len(edges)), key=lambda k: -edges[k][5])[:most])
    return [e for k, e in enumerate(edges) if k in keep]


def _ends(edge: tuple, num_heads: int = 1) -> tuple[float, float, float, float, float, float]:
    """x0, y0, x1, y1 of an edge's ends and the (x, y) of its marker: on a head's edge
    between two tokens, at a point along it that is the head's own (the heads of a layer
    reading the same token share the line, not the marker); elsewhere the midpoint, bowed
    out for an MLP edge and a head's edge from its own token (which would lie on the
    residual's), the bow the head's own too."""
    layer, source, target, kind, head = edge[:5]
    row = 2 * layer + (1 if kind.startswith("mlp") else 0)
    along = 0.5 if kind != "head" or num_heads < 2 else 0.2 + 0.6 * head / (num_heads - 1)
    if kind == "mlp":                             # right of the MLP's residual
        bow = BEND
    elif kind in ("head", "attn") and source == target:     # left of the attention's
        bow = -BEND * (1.0 if kind == "attn" else 0.5 + along)
        along = 0.5
    else:
        bow = 0.0
    return (source, row, target, row + 1, source + along * (target - source) + bow / 2,
            row + along)


def _bowed(edge: tuple) -> bool:
    """Whether the edge is drawn as a curve (see ``_ends``)."""
    return edge[3] == "mlp" or (edge[3] in ("head", "attn") and edge[1] == edge[2])


def _shape(edge: tuple, colour: str, num_heads: int = 1) -> dict:
    x0, y0, x1, y1, mx, my = _ends(edge, num_heads)
    line = dict(color=colour, width=MIN_WIDTH + (MAX_WIDTH - MIN_WIDTH) * float(edge[5]))
    if _bowed(edge):                              # a quadratic curve through the midpoint
        cx = 2 * mx - (x0 + x1) / 2
        return dict(type="path", path=f"M {x0},{y0} Q {cx},{my} {x1},{y1}", line=line,
                    layer="below", opacity=0.75)
    return dict(type="line", x0=x0, y0=y0, x1=x1, y1=y1, line=line, layer="below",
                opacity=0.75)


def _colour(edge: tuple, num_heads: int) -> str:
    if edge[3] != "head":
        return KIND_COLOURS[edge[3]]
    shade = 0.45 + 0.5 * (edge[4] / max(1, num_heads - 1))
    return pc.sample_colorscale(HEAD_SCALE, [shade])[0]


def _midpoints(kind: str, edges: list[tuple], labels: list[str], num_heads: int) -> go.Scatter:
    """One marker per edge at its midpoint: the hover, and customdata (layer, head, source,
    target, kind)."""
    points = [_ends(e, num_heads)[4:] for e in edges]
    return go.Scatter(
        x=[p[0] for p in points], y=[p[1] for p in points], mode="markers",
        name=_esc(t(f"figure.flow.kind.{kind}")), meta=kind,
        marker=dict(size=7, color=[_colour(e, num_heads) for e in edges], opacity=0.6,
                    line=dict(width=0)),
        customdata=[[e[0], e[4], e[1], e[2], e[3]] for e in edges],
        hovertext=[_hover(e, labels) for e in edges],
        hovertemplate="%{hovertext}<extra></extra>")


def _hover(edge: tuple, labels: list[str]) -> str:
    layer, source, target, kind, head, weight = edge
    if kind == "head":
        first = t("figure.flow.hover.head", layer=layer, head=head)
    else:
        first = t("figure.flow.hover.kind", layer=layer, kind=t(f"figure.flow.kind.{kind}"))
    move = f"{labels[source]} ({source}) → {labels[target]} ({target})"
    return f"{_esc(first)}<br>{move}<br>" \
           f"{_esc(t('figure.flow.hover.importance', weight=f'{float(weight):.3f}'))}"


def _nodes(edges: list[tuple], labels: list[str], num_layers: int,
           position: int | None) -> go.Scatter:
    """The nodes: every kept edge's two ends (and the top one)."""
    nodes = set() if position is None else {(2 * num_layers, position)}
    for e in edges:
        x0, y0, x1, y1, _, _ = _ends(e)
        nodes |= {(y0, x0), (y1, x1)}
    nodes = sorted(nodes)
    return go.Scatter(
        x=[p for _, p in nodes], y=[r for r, _ in nodes], mode="markers",
        name=_esc(t("figure.flow.nodes")), meta="nodes",
        marker=dict(size=6, color=NODE_COLOUR), customdata=[[r, p] for r, p in nodes],
        hovertext=[f"{labels[p]} ({p})<br>{_esc(_row_name(r, num_layers))}" for r, p in nodes],
        hovertemplate="%{hovertext}<extra></extra>")


def _row_name(row: int, num_layers: int) -> str:
    if row == 2 * num_layers:
        return t("figure.flow.row.out")
    if row % 2:
        return t("figure.flow.row.mid", layer=row // 2)
    return t("figure.flow.row.pre", layer=row // 2)


__all__ = ["flow_graph"]
