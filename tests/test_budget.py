"""The figure budget (attnviz.plot.budget) and how the figure builders keep to it: a matrix too
large for its share is pooled into as few blocks as fit, each drawn as one true cell of its block.
Expected values come from loops over the blocks written here, not from the pooling code."""

import itertools
import json

import numpy as np
import plotly.io as pio
import pytest

import attnviz
from attnviz.plot import budget, colour_scales, figures
from attnviz.plot.budget import Blocks, figure_bytes
from attnviz.i18n import t
from tests.apptest_helpers import decode

RNG = np.random.default_rng(7)


def blocks_of(n: int, size: int, breaks=()):
    """(start, stop) of each block along an axis, restarting at every break: by hand."""
    edges = [0, *breaks, n]
    out = []
    for a, b in zip(edges[:-1], edges[1:]):
        s = a
        while s < b:
            out.append((s, min(s + size, b)))
            s += size
    return out


def by_hand(a, blocks: Blocks, pick: str, row_breaks=(), col_breaks=()):
    """Each block's chosen value: the largest, or the one farthest from 0; NaN if all NaN."""
    out = []
    for r0, r1 in blocks_of(a.shape[0], blocks.rows, row_breaks):
        row = []
        for c0, c1 in blocks_of(a.shape[1], blocks.cols, col_breaks):
            cell = a[r0:r1, c0:c1].ravel()
            live = cell[~np.isnan(cell)]
            if not live.size:
                row.append(np.nan)
            else:
                row.append(live.max() if pick == "largest" else live[np.abs(live).argmax()])
        out.append(row)
    return np.array(out)


@pytest.mark.parametrize("shape, blocks, row_breaks, col_breaks", [
    ((10, 10), Blocks(3, 3), (), ()),
    ((7, 12), Blocks(1, 5), (), (4, 8)),          # blocks restart at each head's column
    ((9, 5), Blocks(4, 2), (8,), ()),             # a last row kept apart (the sum row)
    ((5, 5), Blocks(5, 5), (), ()),
])
@pytest.mark.parametrize("pick", ["largest", "farthest"])
def test_each_pooled_cell_is_its_blocks_largest_or_farthest_cell(shape, blocks, row_breaks,
                                                                 col_breaks, pick):
    a = RNG.standard_normal(shape)
    a[RNG.random(shape) < 0.2] = np.nan
    a[:min(shape[0], blocks.rows), :min(shape[1], blocks.cols)] = np.nan   # one block all NaN
    rows, cols = budget.pick_cells(budget.score_of(a, pick), blocks, row_breaks, col_breaks)
    np.testing.assert_array_equal(budget.take(a, rows, cols),
                                  by_hand(a, blocks, pick, row_breaks, col_breaks))


def test_pooling_several_heads_picks_within_each_head():
    a = RNG.random((3, 8, 8))                                   # (heads, n, n)
    rows, cols = budget.pick_cells(a, Blocks(2, 4))
    for h in range(3):
        np.testing.assert_array_equal(budget.take(a, rows, cols)[h],
                                      by_hand(a[h], Blocks(2, 4), "largest"))


def test_block_labels_name_positions_and_stay_distinct():
    labels = ["a", "b", "c", "0–1", "e", "f"]
    assert budget.block_labels(labels, 2) == ["0–1", "2–3", "4–5"]
    assert budget.block_labels(labels, 2, breaks=[3]) == ["0–1", "c", "3–4", "f"]
    assert budget.block_labels(labels[:4], 2, breaks=[2, 3]) == ["0–1", "c", "0–1′"]


@pytest.mark.parametrize("shape, cells", [((512, 1024), 262_144), ((512, 512), 100_000),
                                          ((37, 5), 10), ((6, 6), 1)])
def test_the_smallest_blocks_merge_the_fewest_cells(shape, cells):
    got = budget.smallest_blocks(shape, cells)
    n, m = shape
    count = -(-n // got.rows) * -(-m // got.cols)
    assert count <= cells
    fewer = [(r, c) for r, c in itertools.product(range(1, n + 1), range(1, m + 1))
             if -(-n // r) * -(-m // c) <= cells and r * c < got.rows * got.cols]
    assert not fewer, fewer[:3]


# ---- the figures -------------------------------------------------------------------------------

def weights_512(dtype=np.float32):
    tokens = [f"w{i}" for i in range(512)]
    w = attnviz.MultiHeadWeights.random(64, 1, seed=3, dtype=dtype)
    x = attnviz.embed_tokens(tokens, 64).astype(dtype)
    return tokens, attnviz.trace_attention(x, w).weights[0]


@pytest.mark.parametrize("scale", ["fixed", "row"])
def test_a_map_too_large_for_its_share_is_pooled_to_true_cells_within_it(scale):
    tokens, w = weights_512()
    whole = figure_bytes(figures.heatmap(w, row_labels=tokens, col_labels=tokens,
                                         kind="weights", weight_scale=scale, max_bytes=10**9))
    fig = figures.heatmap(w, row_labels=tokens, col_labels=tokens, kind="weights",
                          weight_scale=scale, max_bytes=400_000)
    assert figure_bytes(fig) <= 400_000 < whole
    spec = json.loads(pio.to_json(fig, validate=False))
    trace = spec["data"][0]
    shown = decode(trace["customdata"] if scale == "row" else trace["z"]).astype(np.float64)
    nb, mb = shown.shape
    br, bc = -(-512 // nb), -(-512 // mb)
    assert 1 < br * bc <= 2 * whole / 400_000                   # pooled no more than it must
    colour = w / w.max(axis=1, keepdims=True) if scale == "row" else w
    for i, j in [(0, 0), (nb - 1, mb - 1), (nb // 2, 3), (7, mb // 3)]:
        block = np.s_[i * br:(i + 1) * br, j * bc:(j + 1) * bc]
        r, c = np.unravel_index(colour[block].argmax(), colour[block].shape)
        assert shown[i, j] == w[block][r, c]                    # that very cell's weight
        if scale == "row":                                       # and its own colour
            assert decode(trace["z"])[i, j] == 1 + round(colour[block][r, c] * 249)
    assert spec["layout"]["title"]["subtitle"]["text"] == \
        t("figure.pooled.map.largest", rows=br, cols=bc)
    assert "largest weight" in trace["hovertemplate"]
    assert trace["x"][0] == (f"0–{bc - 1}" if bc > 1 else "w0")
    key_positions = t("figure.axis.positions", axis=t("figure.axis.key"))
    assert spec["layout"]["xaxis"]["title"]["text"].startswith(key_positions) == (bc > 1)


def test_a_map_within_its_share_sends_every_weight():
    tokens, w = weights_512()
    fig = figures.heatmap(w, row_labels=tokens, col_labels=tokens, kind="weights",
                          weight_scale="row", max_bytes=figures.MAIN_MAX_BYTES)
    assert figure_bytes(fig) <= figures.MAIN_MAX_BYTES
    trace = json.loads(pio.to_json(fig, validate=False))["data"][0]
    np.testing.assert_array_equal(decode(trace["customdata"]), w)          # float32 as is
    assert trace["z"]["dtype"] == "u1" and "≈" not in trace["hovertemplate"]
    assert "subtitle" not in json.loads(pio.to_json(fig))["layout"].get("title", {})


def test_a_uniform_map_on_a_relative_scale_is_sent_whole():
    """Every row's weights equal (512 copies of one token): every colour is the top level.
    Its byte is never 255, whose base64 "////" plotly escapes to 24 bytes."""
    tokens = ["the"] * 512
    w = np.full((512, 512), np.float32(1 / 512))
    fig = figures.heatmap(w, row_labels=tokens, col_labels=tokens, kind="weights",
                          weight_scale="row", max_bytes=figures.MAIN_MAX_BYTES)
    trace = json.loads(pio.to_json(fig, validate=False))["data"][0]
    assert (decode(trace["z"]) == 1 + colour_scales.COLOUR_LEVELS).all()   # all darkest, unpooled
    assert "/" not in trace["z"]["bdata"]


@pytest.mark.slow
@pytest.mark.parametrize("scale", ["fixed", "row"])
def test_a_large_masked_map_drops_its_overlay_before_any_cell(scale):
    """512 tokens with a causal mask: the grey overlay (a third array) does not fit beside the
    weights, so masked cells show grey without it and every live weight is still sent."""
    tokens = [f"w{i}" for i in range(512)]
    t = attnviz.trace_attention(attnviz.embed_tokens(tokens, 64).astype(np.float32),
                                attnviz.MultiHeadWeights.random(64, 1, seed=3, dtype=np.float32),
                                causal=True)
    fig = figures.step_figure(t, "weights", tokens_q=tokens, weight_scale=scale,
                              max_bytes=figures.MAIN_MAX_BYTES)
    assert figure_bytes(fig) <= figures.MAIN_MAX_BYTES
    assert [d.name for d in fig.data] == [None]                   # no "masked" overlay
    above = np.triu(np.ones((512, 512), bool), 1)
    z = np.asarray(fig.data[0].z)
    if scale == "row":                                             # level 0: grey, a byte
        assert z.dtype == np.uint8 and (z[above] == 0).all() and (z[~above] >= 1).all()
        assert fig.data[0].colorscale[0][1] == colour_scales.MASKED_COLOR and fig.data[0].zmin == 0
        np.testing.assert_array_equal(np.asarray(fig.data[0].customdata), t.weights[0])
    else:                                                          # gaps on grey
        assert np.isnan(z[above]).all() and fig.layout.plot_bgcolor == colour_scales.MASKED_COLOR
        np.testing.assert_array_equal(z[~above], t.weights[0][~above])
    small = figures.step_figure(t, "weights", tokens_q=tokens, weight_scale=scale,
                                max_bytes=10**9)                  # room: the overlay stays
    assert [d.name for d in small.data] == [None, "masked"]


def test_a_float64_map_sent_as_float32_says_its_hover_is_rounded():
    tokens, w = weights_512(np.float64)
    fig = figures.heatmap(w, row_labels=tokens, col_labels=tokens, kind="weights")
    assert "weight ≈ %{z:.7~g}" in fig.data[0].hovertemplate
    small = figures.heatmap(w[:20, :20], row_labels=tokens[:20], col_labels=tokens[:20],
                            kind="weights")
    assert "weight: %{z:.15~g}" in small.data[0].hovertemplate        # sent as float64


@pytest.mark.parametrize("engine", ["json", "orjson"])
def test_the_budget_is_counted_as_the_json_plotly_writes_with_either_engine(engine):
    """Without orjson plotly's json engine writes non-ASCII as \\uXXXX (two to four times the
    bytes): the budget counts what the installed engine writes."""
    pytest.importorskip(engine)
    tokens = [f"早{i}上好" for i in range(300)]
    w = RNG.random((300, 300))
    before = pio.json.config.default_engine
    pio.json.config.default_engine = engine
    try:
        fig = figures.heatmap(w, row_labels=tokens, col_labels=tokens, kind="weights",
                              max_bytes=300_000)
        assert len(pio.to_json(fig, validate=False).encode()) <= 300_000
    finally:
        pio.json.config.default_engine = before


def test_concatenation_pools_within_each_head_and_marks_their_boundaries():
    tokens = [f"w{i}" for i in range(512)]
    t = attnviz.trace_attention(attnviz.embed_tokens(tokens, 96),
                                attnviz.MultiHeadWeights.random(96, 3, seed=0))
    fig = figures.concat_figure(t, tokens, max_bytes=300_000)
    assert figure_bytes(fig) <= 300_000
    cols = list(fig.data[0].x)
    lines = [s.x0 + 0.5 for s in fig.layout.shapes]            # first pooled column of heads 1, 2
    assert len(lines) == 2
    for head, at in zip((1, 2), lines):
        first = cols[int(at)]
        assert first.split("–")[0] == str(head * 32) or first == f"h{head}·d0"
    for col in cols:                                            # no block straddles two heads
        if "–" in col:
            a, b = map(int, col.split("–"))
            assert a // 32 == b // 32, col
    assert [a.text for a in fig.layout.annotations] == ["head 0", "head 1", "head 2"]


@pytest.mark.slow
def test_the_weighted_sum_keeps_its_sum_row_apart_when_pooled():
    tokens = [f"w{i}" for i in range(512)]
    t = attnviz.trace_attention(attnviz.embed_tokens(tokens, 256),
                                attnviz.MultiHeadWeights.random(256, 1, seed=0))
    fig = figures.weighted_sum_figure(t, 5, tokens_q=tokens, max_bytes=120_000)
    assert figure_bytes(fig) <= 120_000
    rows, z = list(fig.data[0].y), np.asarray(fig.data[0].z, dtype=np.float64)
    assert rows[-1] == figures.SUM_LABEL                         # the sum: never pooled
    assert all(int(r.split("–")[-1].lstrip("w")) < 512 for r in rows[:-1])   # keys only
    bc = -(-256 // z.shape[1])
    want = by_hand(t.z[0, 5][None, :], Blocks(1, bc), "farthest")[0]
    np.testing.assert_allclose(z[-1], want, rtol=1e-6)
    assert fig.layout.shapes[0].y0 == len(rows) - 1.5            # the line above the sum


@pytest.mark.slow
def test_a_large_masked_grid_on_a_relative_scale_keeps_a_byte_a_cell():
    """128 tokens, 12 heads, causal, each row's max: level 0 (grey) marks a masked cell, so the
    colours stay uint8 and every token fits the grid's share."""
    tokens = [f"w{i % 40}" for i in range(128)]
    t = attnviz.trace_attention(attnviz.embed_tokens(tokens, 96),
                                attnviz.MultiHeadWeights.random(96, 12, seed=1), causal=True)
    fig = figures.heads_grid(t, tokens, weight_scale="row")
    assert figure_bytes(fig) <= figures.GRID_MAX_BYTES
    z = np.asarray(fig.data[0].z)
    above = np.triu(np.ones((128, 128), bool), 1)
    assert z.dtype == np.uint8 and z.shape == (128, 128)
    assert (z[above] == 0).all() and (z[~above] >= 1).all()
    assert fig.layout.coloraxis.colorscale[0][1] == colour_scales.MASKED_COLOR
    assert fig.layout.coloraxis.cmin == 0
    np.testing.assert_array_equal(np.asarray(fig.data[0].customdata)[~above],
                                  t.weights[0][~above].astype(np.float32))
