"""Plotly figures of generation, one token at a time (the Generate page): the next-token
probabilities, one new token's attention row in every head of a layer, the weight every head
puts on the first token (the attention sink) and the KV cache growing step by step.

Plain plotly (no streamlit); titles and axis titles through :func:`attnviz.i18n.t`, so a figure
is in the language it was built in. Each builder takes a ``max_bytes`` share of the page's
figure budget (:mod:`attnviz.plot.budget`); the defaults are the shares the page uses.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from attnviz.describe.labels import token_shown
from attnviz.i18n import t
from attnviz.plot import budget, figures, text_layout

ROW_MAX_BYTES = budget.MAIN_MAX_BYTES          # the page's main map: one step's heads × keys
SINK_MAX_BYTES = budget.DETAIL_MAX_BYTES       # layers × heads, small
BARS_COLOUR = "#4c78a8"
CHOSEN_COLOUR = "#e45756"
KEPT_COLOUR = "#b0b0b0"
LABEL_CHARS = 16


def token_label(token: str) -> str:
    """A token as an axis label: the one notation of every page (``labels.token_shown``: a
    space at either end as ␣, a line break as ↵, a tab as ⇥), at most 16 characters."""
    return token_shown(token, LABEL_CHARS)


def next_token_bars(top: list[tuple[str, float]], *, chosen: int | None = None,
                    title: str = "") -> go.Figure:
    """Horizontal bars of the most likely next tokens, most likely on top; `chosen` (an index
    into `top`) drawn in another colour."""
    labels = _distinct([text_layout.escape(token_label(tok)) for tok, _ in top])
    probs = np.array([p for _, p in top], dtype=np.float64)
    colours = [CHOSEN_COLOUR if i == chosen else BARS_COLOUR for i in range(len(top))]
    fig = go.Figure(go.Bar(
        x=probs, y=labels, orientation="h", marker_color=colours,
        text=[f"{p:.3f}" for p in probs], textposition="outside", cliponaxis=False,
        hovertemplate="%{y}: %{x:.6f}<extra></extra>"))
    fig.update_layout(
        title=dict(text=title, yref="container", y=1, yanchor="top", pad=dict(t=10), x=0,
                   xanchor="left"),
        height=70 + 26 * len(top), margin=dict(l=10, r=40, t=50, b=10), showlegend=False,
        plot_bgcolor="white")
    fig.update_xaxes(range=[0, 1.0], title=t("figure.generate.probability"), automargin=True,
                     gridcolor="#eee")
    fig.update_yaxes(autorange="reversed", automargin=True, type="category")
    return fig


def row_title(number: int, token: str, layer: int) -> str:
    """The attention row map's title: new token `number` (`token`, as a label) in `layer`."""
    return t("figure.generate.row.title", number=number,
             token=text_layout.escape(token_label(token)), layer=layer)


def attention_row_map(row: np.ndarray, key_tokens: list[str], *, title: str = "",
                      max_bytes: int = ROW_MAX_BYTES) -> go.Figure:
    """One new token's attention row in every head of one layer: (heads, keys), a row per head,
    a column per key (the prompt, the tokens generated before, the query itself)."""
    row = np.asarray(row)
    return _title_left(figures.heatmap(
        row, row_labels=[str(h) for h in range(row.shape[0])],
        col_labels=[token_label(k) for k in key_tokens], title=title, kind="weights",
        row_title=t("figure.generate.axis.head"), col_title=t("figure.axis.key"),
        show_values=False, max_bytes=max_bytes))


def sink_map(first_weights: np.ndarray, *, title: str = "",
             max_bytes: int = SINK_MAX_BYTES, width: int = figures.NARROW_WIDTH) -> go.Figure:
    """(layers, heads): the weight each head's query puts on the first token (its title
    wrapped for a chart `width` px wide)."""
    w = np.asarray(first_weights)
    return _title_left(figures.heatmap(
        w, row_labels=[str(l) for l in range(w.shape[0])],
        col_labels=[str(h) for h in range(w.shape[1])], title=title,
        kind="weights", row_title=t("figure.generate.axis.layer"),
        col_title=t("figure.generate.axis.head"), show_values=False, max_bytes=max_bytes,
        width=width))


def cache_bars(cache_tokens: list[int], cache_bytes: list[int], *, selected: int | None = None,
               title: str = "") -> go.Figure:
    """The KV cache at each step (the positions whose keys and values every layer holds when
    that step's row is computed): the positions kept from before in grey, the one appended at
    this step in colour (the prompt, all appended at once, at step 1). `selected`: the 0-based
    step drawn with an outline."""
    n = len(cache_tokens)
    steps = np.arange(1, n + 1)
    tokens = np.array(cache_tokens, dtype=np.int64)
    kept = np.concatenate([[0], tokens[:-1]]) if n else tokens
    new = tokens - kept
    mib = np.array(cache_bytes, dtype=np.float64) / 2**20
    hover = "%{customdata[0]}: %{customdata[1]:.3f} MiB<extra>%{fullData.name}</extra>"
    custom = np.stack([tokens, mib], axis=1) if n else None
    line = [2 if i == selected else 0 for i in range(n)]
    fig = go.Figure([
        go.Bar(x=steps, y=kept, name=t("figure.generate.cache.kept"), marker_color=KEPT_COLOUR,
               customdata=custom, hovertemplate=hover),
        go.Bar(x=steps, y=new, name=t("figure.generate.cache.appended"),
               marker_color=CHOSEN_COLOUR, marker_line_width=line, marker_line_color="black",
               customdata=custom, hovertemplate=hover)])
    fig.update_layout(
        barmode="stack", height=300, plot_bgcolor="white",
        title=dict(text=title, yref="container", y=1, yanchor="top", pad=dict(t=10), x=0,
                   xanchor="left"),
        legend=dict(orientation="h", x=0, xanchor="left", y=1.02, yanchor="bottom",
                    traceorder="normal"),
        margin=dict(l=10, r=10, t=80, b=10))
    fig.update_xaxes(title=t("figure.generate.axis.step"), automargin=True, dtick=1 if n <= 40
                     else None)
    fig.update_yaxes(title=t("figure.generate.axis.positions"), automargin=True,
                     gridcolor="#eee", rangemode="tozero")
    return fig


def _title_left(fig: go.Figure) -> go.Figure:
    """The title at the left: the chart's tool buttons sit at the top right, over a centred
    title in a narrow window."""
    fig.update_layout(title_x=0, title_xanchor="left")
    return fig


def _distinct(labels: list[str]) -> list[str]:
    """Category labels kept apart: a repeat gets a prime (two tokens can read alike)."""
    out, seen = [], set()
    for s in labels:
        while s in seen:
            s += "′"
        seen.add(s)
        out.append(s)
    return out
