"""Figures: the numbers drawn are the trace's, and the heatmap conventions of SPEC.md hold."""

import json
import subprocess
import sys

import numpy as np
import pytest

import attnviz
from attnviz import MultiHeadWeights, embed_tokens, trace_attention
from attnviz.plot import colour_scales, figures, text_layout
from attnviz.plot.budget import figure_bytes
from attnviz.i18n import t
from tests.apptest_helpers import decode
from tests.message_helpers import message_pattern, raises_message

TOKENS = ["the", "cat", "<b>sat</b>", "the"]


@pytest.fixture(scope="module")
def trace():
    w = attnviz.MultiHeadWeights.random(8, 2, seed=0)
    return attnviz.trace_attention(attnviz.embed_tokens(TOKENS, 8), w, causal=True)


def z_of(fig, i=0) -> np.ndarray:
    return np.array(fig.data[i].z, dtype=float)


def test_heatmap_reads_like_a_table(trace):
    fig = figures.heatmap(trace.scores[0], row_labels=TOKENS, col_labels=TOKENS)
    np.testing.assert_array_equal(z_of(fig), trace.scores[0])
    assert fig.layout.yaxis.autorange == "reversed"              # first token on top
    labels = list(fig.data[0].y)
    assert labels == list(fig.layout.yaxis.categoryarray) and len(set(labels)) == 4
    assert labels[0] != labels[3] and labels[0].startswith("the")  # duplicates kept apart
    assert "%{z" in fig.data[0].hovertemplate                    # exact value on hover


def test_labels_are_escaped(trace):
    fig = figures.heatmap(trace.scores[0], row_labels=TOKENS, col_labels=TOKENS)
    assert fig.data[0].x[2] == fig.data[0].y[2] == "&lt;b&gt;sat&lt;/b&gt;"
    assert "<b>" not in json.loads(fig.to_json())["data"][0]["hovertemplate"]


def test_colour_scales(trace):
    weights = figures.heatmap(trace.weights[0], row_labels=TOKENS, col_labels=TOKENS,
                              kind="weights")
    assert (weights.data[0].zmin, weights.data[0].zmax) == (0, 1)
    signed = figures.heatmap(trace.scores[0], row_labels=TOKENS, col_labels=TOKENS)
    assert signed.data[0].zmid == 0 and signed.data[0].colorscale is not None


def test_masked_cells_are_drawn_apart(trace):
    fig = figures.step_figure(trace, "masked_scores", tokens_q=TOKENS)
    upper = np.triu(np.ones((4, 4), bool), 1)
    assert np.isnan(z_of(fig)[upper]).all() and not np.isnan(z_of(fig)[~upper]).any()
    overlay = fig.data[1]
    assert overlay.name == "masked" and "masked" in overlay.hovertemplate
    assert (~np.isnan(np.array(overlay.z, dtype=float)) == upper).all()


def test_values_in_cells_only_when_small():
    small = figures.heatmap(np.ones((3, 3)), row_labels=list("abc"), col_labels=list("abc"))
    assert small.data[0].texttemplate
    big = figures.heatmap(np.ones((64, 64)), row_labels=[str(i) for i in range(64)],
                          col_labels=[str(i) for i in range(64)])
    assert big.data[0].texttemplate is None
    assert big.data[0].z.dtype == np.float32                    # compact JSON


@pytest.mark.parametrize("name", ["x", "q", "k", "v", "scores", "scaled_scores",
                                  "masked_scores", "weights", "z", "output"])
def test_step_figure_draws_the_steps_array(trace, name):
    fig = figures.step_figure(trace, name, head=1, tokens_q=TOKENS)
    want = trace.step_array(name, 1)
    got = z_of(fig)
    finite = ~np.isnan(got)
    np.testing.assert_array_equal(got[finite], np.asarray(want, dtype=float)[finite])


def test_weighted_values_for_one_query(trace):
    fig = figures.step_figure(trace, "weighted_values", head=1, tokens_q=TOKENS, query=2)
    np.testing.assert_allclose(z_of(fig), trace.weighted_values(1)[2])
    assert len(fig.data[0].y) == trace.n_k and len(fig.data[0].x) == trace.d_v


def test_heads_grid_one_facet_per_head_on_one_scale(trace):
    fig = figures.heads_grid(trace, TOKENS)
    heat = [d for d in fig.data if d.name and not d.name.endswith("masked")]
    assert len(heat) == 2
    for h, d in enumerate(heat):
        got = np.array(d.z, dtype=float)
        np.testing.assert_array_equal(np.nan_to_num(got), trace.weights[h])
        assert d.coloraxis == "coloraxis"
    assert (fig.layout.coloraxis.cmin, fig.layout.coloraxis.cmax) == (0, 1)


def test_heads_grid_of_128_tokens_and_12_heads_stays_small():
    tokens = [f"w{i}" for i in range(128)]
    w = attnviz.MultiHeadWeights.random(96, 12, dtype=np.float32)
    t = attnviz.trace_attention(attnviz.embed_tokens(tokens, 96).astype(np.float32), w)
    size = len(figures.heads_grid(t, tokens).to_json())
    assert size <= 3 * 1024 * 1024, size


def test_concat_marks_head_boundaries(trace):
    fig = figures.concat_figure(trace, TOKENS)
    np.testing.assert_array_equal(z_of(fig), trace.concat)
    lines = [s.x0 for s in fig.layout.shapes]
    assert lines == [trace.d_v - 0.5]                            # between head 0 and head 1
    assert [a.text for a in fig.layout.annotations if a.text.startswith("head")] == \
        ["head 0", "head 1"]


def test_query_vector_view_follows_one_row(trace):
    fig = figures.query_vector_figure(trace, 2, head=1, tokens_q=TOKENS)
    np.testing.assert_allclose(np.array(fig.data[0].y), trace.scores[1, 2])
    np.testing.assert_allclose(np.array(fig.data[2].y), trace.weights[1, 2])
    assert np.array(fig.data[2].y)[3] == 0                       # a later key, masked


def test_bad_arguments_are_domain_errors(trace):
    with raises_message("error.figure.labels_count", name="row_labels", count=3, n=4):
        figures.heatmap(np.ones((4, 4)), row_labels=list("abc"), col_labels=list("abcd"))
    with raises_message("error.figure.one_of", name="kind", allowed="signed, weights",
                        value="'rainbow'"):
        figures.heatmap(np.ones((2, 2)), row_labels=list("ab"), col_labels=list("ab"),
                        kind="rainbow")
    with raises_message("error.trace.no_step", name="'nope'"):
        figures.step_figure(trace, "nope")


def test_figures_serialise(trace):
    for fig in (figures.heads_grid(trace, TOKENS), figures.concat_figure(trace, TOKENS),
                figures.query_vector_figure(trace, 0, tokens_q=TOKENS)):
        json.loads(fig.to_json())


# ---- what plotly is actually sent --------------------------------------------------------------

def sent(fig) -> dict:
    """The figure as the browser gets it."""
    return json.loads(fig.to_json())



@pytest.fixture(scope="module")
def long_trace():
    """128 tokens (many repeated), 12 heads, causal."""
    tokens = [f"w{i % 40}" for i in range(128)]
    w = attnviz.MultiHeadWeights.random(96, 12, seed=1)
    return tokens, attnviz.trace_attention(attnviz.embed_tokens(tokens, 96), w, causal=True)


def test_large_heatmap_is_float32_and_small_in_json(long_trace):
    tokens, t = long_trace
    fig = figures.step_figure(t, "weights", head=3, tokens_q=tokens)
    spec = sent(fig)
    z = spec["data"][0]["z"]
    assert z["dtype"] == "f4"                                    # base64 float32, no lists
    got = decode(z)
    upper = np.triu(np.ones((128, 128), bool), 1)
    assert np.isnan(got[upper]).all()
    np.testing.assert_allclose(got[~upper], t.weights[3][~upper], rtol=1e-6)
    assert "text" not in spec["data"][0] and "texttemplate" not in spec["data"][0]
    assert len(fig.to_json()) < 300_000
    unmasked = attnviz.trace_attention(t.x, t.params)
    assert len(figures.step_figure(unmasked, "weights", tokens_q=tokens).to_json()) < 150_000


def test_small_heatmap_keeps_every_digit(trace):
    spec = sent(figures.step_figure(trace, "scores", head=0, tokens_q=TOKENS))
    np.testing.assert_array_equal(decode(spec["data"][0]["z"]), trace.scores[0])
    assert "%{z:.15~g}" in spec["data"][0]["hovertemplate"]


def test_small_grid_keeps_every_digit(trace):
    fig = figures.heads_grid(trace, TOKENS, step_name="scores")
    spec = sent(fig)
    for h in range(trace.num_heads):
        np.testing.assert_array_equal(decode(spec["data"][h]["z"]), trace.scores[h])
        assert "%{z:.15~g}" in spec["data"][h]["hovertemplate"]


def test_masked_grid_of_128_tokens_and_12_heads_stays_small(long_trace):
    tokens, t = long_trace
    fig = figures.heads_grid(t, tokens)
    assert len(fig.to_json()) <= 3 * 1024 * 1024
    heads = [d for d in fig.data if d.name.startswith("head") and not d.name.endswith("masked")]
    assert len(heads) == 12                                       # one facet per head
    assert len({(d.xaxis, d.yaxis) for d in heads}) == 12
    # large facets: masked cells are gaps over the grey background (no overlay traces)
    assert fig.layout.plot_bgcolor == colour_scales.MASKED_COLOR
    assert not any(d.name.endswith("masked") for d in fig.data)
    assert all(np.isnan(np.array(d.z, float)[np.triu(np.ones((128, 128), bool), 1)]).all()
               for d in heads)


def test_grid_axes_read_top_down_with_head_titles(trace):
    fig = figures.heads_grid(trace, TOKENS)
    ys = [fig.layout[k] for k in fig.layout if k.startswith("yaxis")]
    assert len(ys) == trace.num_heads and all(y.autorange == "reversed" for y in ys)
    titles = [a.text for a in fig.layout.annotations]
    assert titles == [f"head {h}" for h in range(trace.num_heads)]
    overlays = [d for d in fig.data if d.name.endswith("masked")]  # small: overlay per head
    assert len(overlays) == trace.num_heads


def test_masked_text_only_in_masked_cells(trace):
    fig = figures.step_figure(trace, "masked_scores", tokens_q=TOKENS)
    upper = np.triu(np.ones((4, 4), bool), 1)
    text = np.array(fig.data[1].text)
    assert (text[upper] == "−∞").all() and (text[~upper] == "").all()
    assert fig.data[1].texttemplate == "%{text}"
    weights = figures.step_figure(trace, "weights", tokens_q=TOKENS)
    assert "masked (0)" in weights.data[1].hovertemplate


def test_float_minus_inf_mask_is_shown_masked():
    x = attnviz.embed_tokens(["a", "b", "c"], 4)
    w = attnviz.MultiHeadWeights.random(4, 1, seed=0)
    add = np.zeros((3, 3))
    add[0, 2] = -np.inf
    t = attnviz.trace_attention(x, w, attn_mask=add)
    fig = figures.step_figure(t, "weights", tokens_q=["a", "b", "c"])
    assert len(fig.data) == 2
    marked = ~np.isnan(np.array(fig.data[1].z, float))
    assert marked[0, 2] and marked.sum() == 1


def test_number_like_tokens_stay_categories(trace):
    fig = figures.heatmap(np.eye(3), row_labels=["1", "2", "2024"], col_labels=["3", "1", "2"])
    assert fig.layout.xaxis.type == fig.layout.yaxis.type == "category"
    assert list(fig.layout.xaxis.categoryarray) == ["3", "1", "2"]


def test_escaping_reaches_every_builder(trace):
    for fig in (figures.heads_grid(trace, TOKENS), figures.concat_figure(trace, TOKENS),
                figures.query_vector_figure(trace, 2, tokens_q=TOKENS),
                figures.step_figure(trace, "weighted_values", tokens_q=TOKENS, query=2)):
        strings = list(all_strings(sent(fig)))                   # to_json writes < as \u003c
        assert not any("<b>sat" in s for s in strings)
        assert any("&lt;b&gt;sat&lt;/b&gt;" in s for s in strings)


def all_strings(obj):
    if isinstance(obj, str):
        yield obj
    elif isinstance(obj, dict):
        for v in obj.values():
            yield from all_strings(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from all_strings(v)


def test_query_vector_view_names_the_query_and_masked_keys(trace):
    fig = figures.query_vector_figure(trace, 0, head=1, tokens_q=TOKENS)
    assert fig.layout.title.text == t("figure.vector.title", query="the (1)", head=1)
    assert list(fig.data[1].text[1:]) == ["−∞ (masked)"] * 3      # keys after the query
    assert list(fig.data[2].text[1:]) == ["0 (masked)"] * 3


@pytest.mark.slow
def test_figures_module_does_not_import_streamlit():
    code = "import sys, attnviz.plot.figures; assert 'streamlit' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_heads_grid_of_a_long_text_pools_blocks_to_their_largest_weight():
    tokens = [f"w{i}" for i in range(300)]
    w = attnviz.MultiHeadWeights.random(16, 2, seed=1)
    t = attnviz.trace_attention(attnviz.embed_tokens(tokens, 16), w, causal=True)
    fig = figures.heads_grid(t, tokens)
    heat = [d for d in fig.data if d.name == "head 1"][0]
    z = np.array(heat.z, dtype=float)
    assert z.shape == (100, 100)                     # 300 tokens → blocks of 3
    assert heat.y[0] == "0–2" and heat.x[-1] == "297–299"
    for i, j in [(0, 0), (5, 2), (99, 99), (50, 10)]:
        block = t.weights[1, 3 * i:3 * i + 3, 3 * j:3 * j + 3]
        live = ~np.triu(np.ones((300, 300), bool), 1)[3 * i:3 * i + 3, 3 * j:3 * j + 3]
        assert z[i, j] == pytest.approx(block[live].max(), rel=1e-6)
    assert np.isnan(z[0, 5])                         # a block entirely above the diagonal
    assert "3×3 tokens per cell" in fig.layout.title.subtitle.text


# ---- the weights' colour scale -----------------------------------------------------------------

@pytest.mark.parametrize("scale, words", [("fixed", "weight"), ("head", "head max"),
                                          ("row", "row max")])
def test_colour_bar_title_names_the_scale(trace, scale, words):
    single = figures.step_figure(trace, "weights", tokens_q=TOKENS, weight_scale=scale)
    grid = figures.heads_grid(trace, TOKENS, weight_scale=scale)
    for title in (single.data[0].colorbar.title.text, grid.layout.coloraxis.colorbar.title.text):
        assert words in title
        assert ("max" in title) == (scale != "fixed")


def test_row_max_scale_colours_each_row_by_its_max_and_hovers_the_true_weight(trace):
    fig = figures.step_figure(trace, "weights", head=1, tokens_q=TOKENS, weight_scale="row")
    z, true = z_of(fig), np.array(fig.data[0].customdata, dtype=float)
    live = ~np.triu(np.ones((4, 4), bool), 1)                    # causal: unmasked cells
    np.testing.assert_array_equal(np.nanmax(z, axis=1), 250)     # every row's max: darkest
    assert np.isnan(z[~live]).all()                              # masked cells stay apart
    w = trace.weights[1]
    expected = w / np.max(np.where(live, w, 0), axis=1, keepdims=True)
    colour = (z - 1) / 249                                       # levels 1 + round(249 c)
    np.testing.assert_allclose(colour[live], expected[live], atol=0.5 / 249)
    np.testing.assert_allclose(true[live], trace.weights[1][live], rtol=1e-12)
    assert not np.allclose(colour[live], trace.weights[1][live])   # the colours did change
    assert "%{customdata" in fig.data[0].hovertemplate           # hover: the true weight
    cells = np.array(fig.data[0].text)                           # numbers: the true weights
    assert cells[3, 0] == f"{trace.weights[1, 3, 0]:.2f}" and fig.data[0].texttemplate == "%{text}"


def test_head_max_scale_divides_each_facet_by_its_own_max(trace):
    fig = figures.heads_grid(trace, TOKENS, weight_scale="head")
    heat = [d for d in fig.data if not d.name.endswith("masked")]
    for h, d in enumerate(heat):
        z, true = np.array(d.z, dtype=float), np.array(d.customdata, dtype=float)
        live = ~np.triu(np.ones((4, 4), bool), 1)                # causal: unmasked cells
        assert np.nanmax(z) == 250 and np.isnan(z[~live]).all()
        np.testing.assert_allclose((z[live] - 1) / 249,
                                   trace.weights[h][live] / trace.weights[h].max(),
                                   atol=0.5 / 249)
        np.testing.assert_allclose(true[live], trace.weights[h][live], rtol=1e-12)
        assert "%{customdata" in d.hovertemplate


def test_fixed_scale_sends_the_weights_themselves(trace):
    fig = figures.step_figure(trace, "weights", head=1, tokens_q=TOKENS)
    assert fig.data[0].customdata is None
    np.testing.assert_array_equal(np.nan_to_num(z_of(fig)), trace.weights[1])


def test_unknown_scale_is_a_domain_error(trace):
    with raises_message("error.figure.one_of", name="weight_scale", allowed="fixed, head, row",
                        value="'log'"):
        figures.step_figure(trace, "weights", weight_scale="log")


@pytest.fixture(scope="module")
def trace_512():
    tokens = [f"w{i}" for i in range(512)]
    w = attnviz.MultiHeadWeights.random(64, 16, seed=0, dtype=np.float32)
    return tokens, attnviz.trace_attention(
        attnviz.embed_tokens(tokens, 64).astype(np.float32), w)


@pytest.mark.slow
def test_at_512_tokens_the_default_scale_shows_structure(trace_512):
    tokens, t = trace_512
    assert colour_scales.default_weight_scale(512) == "row"
    assert colour_scales.default_weight_scale(12) == "fixed"
    fixed = figures.step_figure(t, "weights", head=0, tokens_q=tokens)
    assert np.percentile(z_of(fixed), 99) < 0.05                 # the white map of the issue
    shown = figures.step_figure(t, "weights", head=0, tokens_q=tokens,
                                weight_scale=colour_scales.default_weight_scale(512),
                                max_bytes=figures.MAIN_MAX_BYTES)      # as Step by step sends it
    z = (z_of(shown) - 1) / 249                                  # colour levels 1–250
    assert shown.data[0].z.dtype == np.uint8                     # one byte a cell
    assert np.median(z) > 0.05 and np.percentile(z, 10) < np.percentile(z, 90) - 0.1
    np.testing.assert_allclose(np.array(shown.data[0].customdata, float), t.weights[0],
                               rtol=1e-6)
    grid = figures.heads_grid(t, tokens, weight_scale="row")     # pooled, 16 heads
    pooled = (np.concatenate([np.array(d.z, float).ravel() for d in grid.data]) - 1) / 249
    assert np.median(pooled) > 0.05


@pytest.mark.slow
def test_relative_grids_stay_within_the_figure_budget(trace_512, long_trace):
    for tokens, t in (trace_512, long_trace):
        for scale in ("row", "head"):
            assert figure_bytes(figures.heads_grid(t, tokens, weight_scale=scale)) \
                <= figures.GRID_MAX_BYTES
    tokens, t = long_trace                       # 128 tokens, 12 heads: every token kept
    assert figures.heads_grid(t, tokens, weight_scale="row").data[0].z.shape == (128, 128)


def test_pooled_grid_subtitle_sits_above_the_head_titles():
    tokens = [f"w{i}" for i in range(300)]
    t = attnviz.trace_attention(attnviz.embed_tokens(tokens, 8),
                                attnviz.MultiHeadWeights.random(8, 2, seed=1))
    fig = figures.heads_grid(t, tokens)
    title = fig.layout.title
    assert "<sub>" not in title.text and \
        message_pattern("figure.pooled.grid.tokens.largest").fullmatch(title.subtitle.text)
    assert (title.yref, title.y, title.yanchor) == ("container", 1, "top")   # pinned at the top
    assert fig.layout.margin.t >= 90                             # room for title, subtitle, heads


# ---- every label, or one in k said (issue 27.5) -----------------------------------------------

def test_every_label_is_a_tick_while_they_fit_and_one_in_k_beyond_said_in_the_title():
    from attnviz.i18n import t

    rng = np.random.default_rng(0)
    few = [f"tok{i}" for i in range(20)]
    fig = figures.heatmap(rng.random((20, 20)), row_labels=few, col_labels=few, kind="weights")
    assert list(fig.layout.xaxis.tickvals) == few and list(fig.layout.yaxis.tickvals) == few
    # one of two maps side by side: 274 px, about 114 px of plot, 11 px a small label: 10 fit
    fig = figures.heatmap(rng.random((20, 20)), row_labels=few, col_labels=few, kind="weights",
                          width=text_layout.HALF_WIDTH)
    step = -(-20 // ((text_layout.HALF_WIDTH - text_layout.AXIS_PX) // text_layout.SMALL_LABEL_PX))
    assert step > 1
    assert list(fig.layout.xaxis.tickvals) == few[::step]
    assert fig.layout.xaxis.title.text == t("figure.axis.thinned", axis=t("figure.axis.key"),
                                            step=step)
    assert list(fig.layout.yaxis.tickvals) == few                  # the rows still fit


def test_a_grid_of_heads_keeps_every_label_by_using_fewer_columns():
    tokens = list("我爱自然语言处理，因为它很有趣")
    x = embed_tokens(tokens, 16)
    fig = figures.heads_grid(trace_attention(x, MultiHeadWeights.random(16, 4)), tokens)
    shown = [ax for name, ax in fig.layout.to_plotly_json().items()
             if name.startswith("xaxis") and ax.get("showticklabels")]
    assert shown and all(list(ax["tickvals"]) == tokens for ax in shown)
    few = tokens[:6]
    fig = figures.heads_grid(trace_attention(embed_tokens(few, 16),
                                             MultiHeadWeights.random(16, 4)), few)
    assert sum(1 for name in fig.layout.to_plotly_json() if name.startswith("xaxis")) == 4
    assert fig.layout.xaxis4.domain[0] > 0.5 and fig.layout.xaxis.domain[1] < 0.5  # one row


def test_x_rows_are_tokens_and_q_k_v_columns_are_their_projections_columns():
    """Issue 34.10: X's rows are titled "token" (the input is not yet queries), and Q's, K's,
    V's columns are named as W_Q's, W_K's, W_V's columns are (q0 …, k0 …, v0 …), not d0 …"""
    from attnviz.i18n import t

    x = embed_tokens(["a", "b", "c"], 4)
    tr = trace_attention(x, MultiHeadWeights.random(4, 2, seed=0))
    fig = figures.step_figure(tr, "x")
    assert fig.layout.yaxis.title.text == t("figure.axis.token")
    assert fig.layout.xaxis.title.text == t("figure.axis.feature")
    for step in ("q", "k", "v"):
        assert list(figures.step_figure(tr, step).data[0].x) == [f"{step}0", f"{step}1"], step
    assert list(figures.step_figure(tr, "z").data[0].x) == ["d0", "d1"]
