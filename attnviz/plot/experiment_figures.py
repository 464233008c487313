"""Plotly figures of the Experiments page that are not heatmaps (no streamlit)."""

from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go

from attnviz.describe.labels import token_shown
from attnviz.i18n import t
from attnviz.plot.text_layout import escape
from attnviz.tutorials.designs import SOFTCAP, CacheSize, ScoreRange, SlidingWindow
from attnviz.tutorials.experiments import AttentionSink, RopeShift, Scaling

# one colour, one meaning, on the whole √d_k experiment: red = without scaling, blue = with
UNSCALED_COLOUR = "#d62728"
SCALED_COLOUR = "#1f77b4"


def dot_product_histogram(result: Scaling) -> go.Figure:
    """Histograms of q·k and q·k/√d_k over the samples, with the theoretical ±√d_k marked.

    Parameters
    ----------
    result : Scaling
        From ``attnviz.tutorials.experiments.scaling(d_k)``.
    """
    root = math.sqrt(result.d_k)
    fig = go.Figure([_binned(result.dots, "q · k", UNSCALED_COLOUR),
                     _binned(result.dots / root, "q · k / √d_k", SCALED_COLOUR)])
    for sign in (-1, 1):                           # the unscaled spread: its colour
        fig.add_vline(x=sign * root, line_dash="dot", line_color=UNSCALED_COLOUR)
    fig.update_layout(barmode="overlay", height=340, xaxis_title=t("figure.experiment.value"),
                      yaxis_title=t("figure.experiment.count"))
    _title_legend_and_margins(fig, t("figure.experiment.histogram.title",
                                     samples=f"{len(result.dots):,}", d_k=result.d_k,
                                     root=f"{root:.3g}"))
    return fig


def _binned(values: np.ndarray, name: str, colour: str, bins: int = 80) -> go.Bar:
    """A histogram binned here (80 bars), not by plotly in the browser: the page sends 80
    counts instead of every sample."""
    counts, edges = np.histogram(values, bins=bins)
    return go.Bar(x=(edges[:-1] + edges[1:]) / 2, y=counts, width=np.diff(edges), name=name,
                  opacity=0.6, marker_color=colour, marker_line_width=0,
                  hovertemplate="%{x:.3g}: %{y} " + t("figure.experiment.histogram.hover")
                  + "<extra>" + name + "</extra>")


def weight_bars(rows: dict[str, np.ndarray], keys: list[str], *, title: str,
                colours: dict[str, str] | None = None) -> go.Figure:
    """Grouped bars: one group per key, one bar per named row of weights (fixed 0–1 axis).

    Parameters
    ----------
    rows : dict of name → (n_keys,) array
        E.g. {"without scaling": w1, "with scaling": w2}.
    keys : list of str
        One label per key (HTML-escaped here).
    title : str
        Figure title (not escaped: pass no user text).
    colours : dict of name → colour, optional
        A row's bar colour (e.g. UNSCALED_COLOUR, SCALED_COLOUR, so that a colour means the
        same in every figure of a page); rows not named get plotly's.
    """
    labels = [escape(k) for k in keys]
    colours = colours or {}
    fig = go.Figure([go.Bar(x=labels, y=np.asarray(v, dtype=np.float64), name=name,
                            marker_color=colours.get(name),
                            hovertemplate="%{x}: %{y:.6f}<extra>" + name + "</extra>")
                     for name, v in rows.items()])
    fig.update_layout(barmode="group", height=320, yaxis_range=[0, 1],
                      yaxis_title=t("figure.hover.weight"))
    _title_legend_and_margins(fig, title)
    return fig


# one colour, one meaning, on the RoPE experiment: moved together (flat) and moved apart
TOGETHER_COLOUR = "#2ca02c"
APART_COLOUR = "#9467bd"


def rope_scores(result: RopeShift) -> go.Figure:
    """The score of the same q and k against the offset s both are moved by (a flat line) and
    against the distance Δ between them (a curve).

    Parameters
    ----------
    result : RopeShift
        From ``attnviz.tutorials.experiments.rope_shift``.
    """
    together = t("figure.experiment.rope.together", m=result.m, n=result.n)
    apart = t("figure.experiment.rope.apart", n=result.n)
    hover = t("figure.experiment.rope.hover") + " %{y:.6f}"
    fig = go.Figure([
        go.Scatter(x=result.offsets, y=result.shifted_scores, name=together, mode="lines",
                   line=dict(color=TOGETHER_COLOUR, width=3),
                   hovertemplate="%{x}: " + hover + "<extra></extra>"),
        go.Scatter(x=result.distances, y=result.distance_scores, name=apart, mode="lines",
                   line=dict(color=APART_COLOUR, width=1.5),
                   hovertemplate="%{x}: " + hover + "<extra></extra>")])
    fig.update_layout(height=380, xaxis_title=t("figure.experiment.rope.x"),
                      yaxis_title=t("figure.experiment.rope.y"))
    _title_legend_and_margins(fig, t("figure.experiment.rope.title", base=f"{result.base:g}",
                                     d=result.q.shape[0]))
    return fig


def sink_layers(result: AttentionSink) -> go.Figure:
    """Bars: each layer's mean weight on the first token; a dashed line: what an even spread
    over the tokens each query sees would give it."""
    layers = np.arange(len(result.first_weight))
    fig = go.Figure([go.Bar(x=layers, y=result.first_weight, name=t("figure.experiment.sink.bar"),
                            marker_color=SCALED_COLOUR,
                            hovertemplate=t("figure.experiment.layer")
                            + " %{x}: %{y:.3f}<extra></extra>")])
    fig.add_hline(y=result.even, line_dash="dash", line_color=UNSCALED_COLOUR)
    fig.add_trace(go.Scatter(x=[None], y=[None], mode="lines", name=t(
        "figure.experiment.sink.even", even=f"{result.even:.3f}"),
        line=dict(color=UNSCALED_COLOUR, dash="dash")))          # the line's legend entry
    fig.update_layout(height=340, yaxis_range=[0, 1], xaxis_title=t("figure.experiment.layer"),
                      yaxis_title=t("figure.experiment.sink.y"))
    _title_legend_and_margins(fig, t("figure.experiment.sink.title"))
    return fig


def next_token_bars(result: AttentionSink, k: int = 5) -> go.Figure:
    """Grouped bars: the probability of each of the top-k next tokens (before and after the
    first token is hidden), with the first token visible and hidden."""
    ids = list(dict.fromkeys([i for i, _, _ in result.top(False, k)]
                             + [i for i, _, _ in result.top(True, k)]))
    labels = [escape(token_shown(result.piece_text(i))) for i in ids]   # ␣Paris, ␣
    rows = {t("figure.experiment.sink.before"): np.exp(result.logprobs_before[ids]),
            t("figure.experiment.sink.after"): np.exp(result.logprobs_after[ids])}
    colours = dict(zip(rows, (SCALED_COLOUR, UNSCALED_COLOUR)))
    fig = go.Figure([go.Bar(x=labels, y=v, name=name, marker_color=colours[name],
                            hovertemplate="%{x}: %{y:.4f}<extra>" + name + "</extra>")
                     for name, v in rows.items()])
    fig.update_layout(barmode="group", height=340, yaxis_range=[0, 1],
                      yaxis_title=t("figure.experiment.sink.probability"),
                      xaxis_title=t("figure.experiment.sink.next"))
    _title_legend_and_margins(fig, t("figure.experiment.sink.next_title", k=k))
    return fig


def _title_legend_and_margins(fig: go.Figure, title: str) -> None:
    """The title at the top, the legend in a row under it (never on it), and axes that grow
    their margins to fit their tick labels and titles (nothing clipped, nothing overlapping)."""
    fig.update_layout(title=dict(text=title, yref="container", y=1, yanchor="top",
                                 pad=dict(t=10)),
                      legend=dict(orientation="h", x=0, xanchor="left", y=1.01,
                                  yanchor="bottom"),
                      margin=dict(l=10, r=10, t=70, b=10))
    fig.update_xaxes(automargin=True, title_standoff=8)
    fig.update_yaxes(automargin=True, title_standoff=8)


# ---- the decoder designs (tutorials/designs) -----------------------------------------------------

def window_weights(result: SlidingWindow) -> go.Figure:
    """Lines: the last query's weight on each key (averaged over the heads) on the first local
    layer and the first global layer; a dotted line at the window's edge (the keys left of it
    are `window` or more positions back)."""
    positions = np.arange(result.n)
    rows = [(result.global_layer, result.global_weights, UNSCALED_COLOUR,
             "figure.experiment.window.global")]
    if result.local_weights is not None:
        rows.insert(0, (result.local_layer, result.local_weights, SCALED_COLOUR,
                        "figure.experiment.window.local"))
    fig = go.Figure([go.Scatter(x=positions, y=w.mean(axis=0), mode="lines", name=t(
        name, layer=layer), line=dict(color=colour, width=1.5),
        hovertemplate=t("figure.experiment.window.hover") + " %{x}: %{y:.3g}<extra></extra>")
        for layer, w, colour, name in rows])
    if result.window is not None and result.n > result.window:
        fig.add_vline(x=result.n - result.window - 0.5, line_dash="dot", line_color="#555")
    fig.update_layout(height=340, xaxis_title=t("figure.experiment.window.x"),
                      yaxis_title=t("figure.experiment.window.y"), yaxis_type="log")
    _title_legend_and_margins(fig, t("figure.experiment.window.title", query=result.n - 1))
    return fig


def layer_reach(reach: tuple[float, ...], n: int) -> go.Figure:
    """Bars: how many positions back a token's information can come from after each layer
    (a global layer: every earlier one, drawn to the text's length and written "all"); a
    dashed line: the text's length."""
    layers = np.arange(len(reach))
    shown = [n - 1 if math.isinf(r) else r for r in reach]
    labels = [t("figure.experiment.reach.all") if math.isinf(r) else f"{int(r):,}"
              for r in reach]
    fig = go.Figure([go.Bar(x=layers, y=shown, text=labels, textposition="outside",
                            marker_color=[UNSCALED_COLOUR if math.isinf(r) else SCALED_COLOUR
                                          for r in reach],
                            hovertemplate=t("figure.experiment.layer")
                            + " %{x}: %{text}<extra></extra>")])
    fig.add_hline(y=n - 1, line_dash="dash", line_color="#555")
    fig.update_layout(height=340, xaxis_title=t("figure.experiment.layer"),
                      yaxis_title=t("figure.experiment.reach.y"), showlegend=False,
                      yaxis_range=[0, max(shown) * 1.15 + 1])
    _title_legend_and_margins(fig, t("figure.experiment.reach.title"))
    return fig


def score_ranges(result: ScoreRange) -> go.Figure:
    """Per layer, the largest |scaled score| with QK-norm and without (log axis); a dashed
    line at Gemma 2's soft-cap, 50."""
    layers = np.arange(len(result.actual))
    fig = go.Figure([go.Scatter(x=layers, y=y, mode="lines+markers", name=name,
                                line=dict(color=colour),
                                hovertemplate=t("figure.experiment.layer")
                                + " %{x}: %{y:.4g}<extra>" + name + "</extra>")
                     for y, name, colour in (
                         (result.with_norm, t("figure.experiment.qk.with"), SCALED_COLOUR),
                         (result.without_norm, t("figure.experiment.qk.without"),
                          UNSCALED_COLOUR))])
    fig.add_hline(y=SOFTCAP, line_dash="dash", line_color="#555")
    fig.update_layout(height=340, xaxis_title=t("figure.experiment.layer"),
                      yaxis_title=t("figure.experiment.qk.y"), yaxis_type="log")
    _title_legend_and_margins(fig, t("figure.experiment.qk.title", cap=f"{SOFTCAP:g}"))
    return fig


def cache_bars(sizes: list[CacheSize]) -> go.Figure:
    """Grouped bars: each model's KV cache in bytes per token, as it is and as a full
    multi-head model of the same widths."""
    names = [escape(s.name) for s in sizes]
    rows = [(t("figure.experiment.kv.own"), [s.bytes_per_token() for s in sizes], SCALED_COLOUR),
            (t("figure.experiment.kv.mha"), [s.bytes_per_token(s.num_heads) for s in sizes],
             UNSCALED_COLOUR)]
    fig = go.Figure([go.Bar(x=names, y=y, name=name, marker_color=colour,
                            hovertemplate="%{x}: %{y:,} B<extra>" + name + "</extra>")
                     for name, y, colour in rows])
    fig.update_layout(barmode="group", height=340, yaxis_title=t("figure.experiment.kv.y"))
    _title_legend_and_margins(fig, t("figure.experiment.kv.title"))
    return fig
