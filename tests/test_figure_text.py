"""Every figure shows a token as it is written (issue 27, item 3: Generate showed `&quot;`).

plotly.js draws every text of a figure — titles, axis and tick labels, bar and cell texts,
legend names, hover texts — as its pseudo-HTML (``svg_text_utils.convertToTspans``, read in the
copy Streamlit 1.67 bundles, static/js/PlotlyChart.*.js): the tags sup, sub, s, u, b, i, a,
span, em are styling, br a line break, and everything else is text after decoding the entities
&mu; &amp; &lt; &gt; &nbsp; &times; &plusmn; &deg; and numeric ones. It escapes nothing itself,
and it does not know &quot;. So what the figure's JSON must hold for a token is the token with
&, < and > escaped exactly once, and quotes as they are; ``plotly_shows`` below is that
rendering, written here from plotly.js, and each figure builder of attnviz/plot is built with
a token made of "<>&' and checked to show it."""

from __future__ import annotations

import inspect
import re

import numpy as np
import plotly.graph_objects as go
import pytest

import attnviz
from attnviz.plot import (decoder_figures, diff_figures, experiment_figures, figures,
                          flow_figures, generate_figures, lens_figures, model_figures,
                          reading_figures, text_layout)
from attnviz.tutorials.experiments import AttentionSink

RAW = "\"<>&'"
TOKEN = f"Ψ{RAW}Ψ"              # Ψ … Ψ marks where the token is in whatever text holds it

# plotly.js's svg_text_utils: the styling tags, the entities it decodes
TAGS = {"sup", "sub", "s", "u", "b", "i", "a", "span", "em"}
ENTITIES = {"mu": "μ", "amp": "&", "lt": "<", "gt": ">", "nbsp": "\xa0", "times": "×",
            "plusmn": "±", "deg": "°"}


def _entity(m: re.Match) -> str:
    name = m.group(1)
    if name.startswith("#"):
        return chr(int(name[2:], 16) if name[1] in "xX" else int(name[1:]))
    return ENTITIES.get(name, m.group(0))          # unknown (&quot;): left as written


def plotly_shows(text: str) -> str:
    """What plotly.js draws for `text` (buildSVGText: newlines → spaces, text split around
    <…>, a known tag styles, <br> breaks the line, anything else is text, entities decoded)."""
    out = []
    for part in re.split(r"(<[^<>]*>)", re.sub(r"\r\n?|\n", " ", text)):
        tag = re.fullmatch(r"<(/?)([^ >]*)(\s+(.*))?>", part)
        name = tag.group(2).lower() if tag else None
        if name == "br":
            out.append("\n")
        elif name not in TAGS:
            out.append(re.sub(r"&(#\d+|#x[\da-fA-F]+|[a-z]+);", _entity, part))
    return "".join(out)


def test_the_rendering_written_here_is_plotlys():
    assert plotly_shows("a &lt;b&gt; &amp;amp; &#39;x&#x27;") == "a <b> &amp; 'x'"
    assert plotly_shows("&quot;") == "&quot;"                  # what Generate showed
    assert plotly_shows("<b>bold</b><br>x<y") == "bold\nx<y"
    assert plotly_shows(text_layout.escape(RAW)) == RAW


def strings(value) -> list[str]:
    """Every string in a figure's JSON (data and layout)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in strings(v)]
    if isinstance(value, (list, tuple)):
        return [s for v in value for s in strings(v)]
    if isinstance(value, np.ndarray) and value.dtype.kind in "OU":
        return [s for v in value.ravel().tolist() for s in strings(v)]
    return []


def shown_tokens(fig) -> list[str]:
    """What plotly shows between the Ψ marks, in every text of the figure."""
    texts = strings(fig.to_plotly_json() if isinstance(fig, go.Figure) else fig)
    return [m.group(1) for s in texts if "Ψ" in s
            for m in re.finditer("Ψ(.*?)Ψ", plotly_shows(s))]


# ---- every builder, with the token -----------------------------------------------------------------

def _trace():
    x = np.arange(8, dtype=np.float64).reshape(2, 4) / 8
    return attnviz.trace_attention(x, attnviz.MultiHeadWeights.random(4, 2, seed=0),
                                   causal=True)


def _sink() -> AttentionSink:
    lp = np.log(np.array([0.5, 0.3, 0.2]))
    return AttentionSink(tokens=[TOKEN, "b"], first_weight_per_head=np.full((2, 2), 0.5),
                         even=0.5, logprobs_before=lp, logprobs_after=lp[::-1].copy(),
                         piece_text=lambda i: [TOKEN, "b", "c"][i])


def _cache_size():
    from attnviz.tutorials.designs import CacheSize

    return CacheSize(name=TOKEN, num_layers=2, num_heads=4, num_kv_heads=1, d_k=8, window=None,
                     local_layers=0)


TOKENS = [TOKEN, "b"]
W = np.array([[1.0, 0.0], [0.4, 0.6]])
BUILDERS = {
    "figures.heatmap": lambda: figures.heatmap(W, row_labels=TOKENS, col_labels=TOKENS,
                                               kind="weights"),
    "figures.heatmap pooled": lambda: figures.heatmap(    # rows pooled 5 a block, keys kept
        np.ones((1000, 2)), row_labels=[f"t{i}" for i in range(1000)], col_labels=TOKENS,
        max_bytes=16_000),
    **{f"figures.step_figure {name}": (lambda name=name: figures.step_figure(
        _trace(), name, tokens_q=TOKENS, query=0 if name == "weighted_values" else None))
       for name in ("x", "q", "k", "v", "scores", "scaled_scores", "masked_scores", "weights",
                    "weighted_values", "z", "concat", "output")},
    "figures.heads_grid": lambda: figures.heads_grid(_trace(), TOKENS),
    "figures.concat_figure": lambda: figures.concat_figure(_trace(), TOKENS),
    "figures.query_vector_figure": lambda: figures.query_vector_figure(_trace(), 0,
                                                                       tokens_q=TOKENS),
    "figures.weighted_sum_figure": lambda: figures.weighted_sum_figure(_trace(), 0,
                                                                       tokens_q=TOKENS),
    "generate_figures.next_token_bars": lambda: generate_figures.next_token_bars(
        [(TOKEN, 0.6), ("b", 0.3)], chosen=0),
    "generate_figures.attention_row_map": lambda: generate_figures.attention_row_map(
        W, TOKENS, title=generate_figures.row_title(2, TOKEN, 29)),
    "model_figures.head_view": lambda: model_figures.head_view(W[None], TOKENS, highlight=0),
    # a model's name from its own GGUF (a server's file): the KV cache's bars
    "experiment_figures.cache_bars": lambda: experiment_figures.cache_bars([_cache_size()]),
    "experiment_figures.weight_bars": lambda: experiment_figures.weight_bars(
        {"w": W[1]}, TOKENS, title="t"),
    "reading_figures.scaled_heatmap": lambda: reading_figures.scaled_heatmap(
        W, row_labels=TOKENS, col_labels=TOKENS, title="t", value_name="v"),
    "reading_figures.norms_heatmap": lambda: reading_figures.norms_heatmap(W, TOKENS),
    "reading_figures.token_bars": lambda: reading_figures.token_bars(W[1], TOKENS, title="t",
                                                                     value_name="v"),
    "diff_figures.change_heatmap": lambda: diff_figures.change_heatmap(
        W - 0.5, row_labels=TOKENS, col_labels=TOKENS),
    "diff_figures.kl_bars": lambda: diff_figures.kl_bars([0.1, np.inf], TOKENS),
    "decoder_figures.rotation_angles_figure": lambda: decoder_figures.rotation_angles_figure(
        W, 1e4, [0, 1], tokens=TOKENS),
    "lens_figures.lens_grid": lambda: lens_figures.lens_grid(          # cells, hover, columns
        np.stack([W, W * 0.5], axis=-1), [[[TOKEN, TOKEN]] * 2] * 2,
        row_labels=["r0", "r1"], col_labels=TOKENS, title="t"),
    "lens_figures.lens_grid coloured": lambda: lens_figures.lens_grid(
        np.stack([W, W * 0.5], axis=-1), [[[TOKEN, TOKEN]] * 2] * 2,
        row_labels=["r0", "r1"], col_labels=TOKENS, title="t", colour=W, colour_name="a"),
    "lens_figures.top_bars": lambda: lens_figures.top_bars(TOKENS, [0.6, 0.3], title="t"),
    "lens_figures.rank_line": lambda: lens_figures.rank_line(
        [3, 1], row_labels=TOKENS, title="t"),
    "lens_figures.kl_lines": lambda: lens_figures.kl_lines(           # legend, ticks, hover
        {"logit": [2.0, 0.0], "tuned": [1.0, 0.0]}, {"logit": TOKEN, "tuned": "t"},
        row_labels=TOKENS, title="t"),
    "flow_figures.flow_graph": lambda: flow_figures.flow_graph(        # ticks, hovers
        [(0, 0, 1, "head", 2, 0.6), (0, 1, 1, "attn_residual", -1, 0.4),
         (0, 0, 0, "mlp", -1, 0.3)], TOKENS, 1, title="t", position=1),
    "lens_figures.step_lens": lambda: lens_figures.step_lens(     # cells, hover, panel title
        W, [[TOKEN, TOKEN]] * 2, [3, 1], [0.1, 0.6], row_labels=["r0", "r1"], token=TOKEN,
        title="t"),
}


@pytest.mark.parametrize("name", BUILDERS)
def test_each_figure_shows_the_token_as_written(name):
    shown = shown_tokens(BUILDERS[name]())
    assert shown, f"{name}: the token is not shown at all"
    assert set(shown) == {RAW}, f"{name} shows {sorted(set(shown))} for {RAW!r}"


def test_the_lens_kl_lines_escape_their_row_labels_once():
    # a label that reads like an entity is shown as written, on the axis as on the line
    written = "&lt;b&gt; &amp;"
    fig = lens_figures.kl_lines({"logit": [2.0, 0.0], "tuned": [1.0, 0.0]},
                                {"logit": "l", "tuned": "t"},
                                row_labels=[f"Ψ{written}Ψ", "out"], title="t")
    assert set(shown_tokens(fig)) == {written}
    axis = fig.layout.xaxis                      # every point at its own tick
    for line in fig.data:
        assert list(axis.categoryarray) == list(line.x) == list(axis.tickvals)


def test_the_sink_experiments_bars_show_the_token_as_written():
    # the bars write a piece in the pages' one notation (␣ for an edge space), not as repr
    shown = shown_tokens(experiment_figures.next_token_bars(_sink(), k=2))
    assert shown and set(shown) == {RAW}


# builders that draw no user text: numbers, positions and the page's own words only
NO_USER_TEXT = {
    "generate_figures.sink_map", "generate_figures.cache_bars", "model_figures.model_view",
    "experiment_figures.dot_product_histogram", "experiment_figures.rope_scores",
    "experiment_figures.sink_layers", "reading_figures.layers_heads_map",
    "decoder_figures.kv_sharing_figure", "experiment_figures.window_weights",
    "experiment_figures.layer_reach", "experiment_figures.score_ranges",
}


def test_every_figure_builder_is_checked():
    builders = set()
    for module in (figures, generate_figures, model_figures, experiment_figures,
                   reading_figures, diff_figures, decoder_figures, lens_figures,
                   flow_figures):
        for name, fn in vars(module).items():
            if (inspect.isfunction(fn) and fn.__module__ == module.__name__
                    and not name.startswith("_")
                    and inspect.signature(fn).return_annotation in ("go.Figure", go.Figure)):
                builders.add(f"{module.__name__.rsplit('.', 1)[1]}.{name}")
    checked = {name.split()[0] for name in BUILDERS} | NO_USER_TEXT \
        | {"experiment_figures.next_token_bars"}
    assert builders - checked == set()
    assert checked - builders == set()
