"""The pretrained model's figures: the model view's pictures show the weights, the head view's
lines are the weights ≥ the threshold at the right opacity, one legend group per head."""

import base64
import io

import numpy as np
import plotly.colors as pc
import pytest
from PIL import Image   # an independent PNG decoder (a dependency of streamlit)

from attnviz import AttnvizInputError
from attnviz.plot import model_figures as mf
from attnviz.plot.colour_scales import WEIGHTS_COLORSCALE
from attnviz.models.encoder.pretrained import PretrainedModel

SENTENCE = "The animal didn't cross the street because it was too tired"


@pytest.fixture(scope="module")
def run():
    return PretrainedModel.load().run(SENTENCE)


@pytest.fixture(scope="module")
def weights(run):
    return np.stack([t.weights for t in run.traces])            # (6, 12, n, n)


def random_weights(shape, seed=0):
    """Softmax rows of random scores: (…, n, n), each row sums to 1."""
    s = np.random.default_rng(seed).normal(size=shape) * 3
    e = np.exp(s - s.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def decode_png(data: bytes) -> tuple[np.ndarray, np.ndarray]:
    """(indices (h, w), palette (k, 3)) of a palette PNG, decoded by Pillow."""
    im = Image.open(io.BytesIO(data))
    im.load()                                    # checks every chunk's CRC
    assert im.mode == "P"
    palette = np.array(im.getpalette()[:768], dtype=np.uint8).reshape(-1, 3)
    return np.array(im), palette


def decode_uri(uri: str) -> bytes:
    prefix = "data:image/png;base64,"
    assert uri.startswith(prefix)
    return base64.b64decode(uri[len(prefix):])


def image_traces(fig):
    return [tr for tr in fig.data if tr.type == "image"]


def line_traces(fig):
    return [tr for tr in fig.data if tr.type == "scatter" and tr.meta]


def segments(trace):
    """[(query, key)] of a None-separated lines trace."""
    x, y = list(trace.x), list(trace.y)
    assert len(x) % 3 == 0 and x[2::3] == [None] * (len(x) // 3) == y[2::3]
    assert x[0::3] == [0] * (len(x) // 3) and x[1::3] == [1] * (len(x) // 3)
    return list(zip(y[0::3], y[1::3]))


# ---- weights → pixels --------------------------------------------------------------------------

def test_palette_is_the_weights_colour_scale():
    palette = mf.weights_palette()
    assert palette.shape == (256, 3) and palette.dtype == np.uint8
    scale = pc.get_colorscale(WEIGHTS_COLORSCALE)
    np.testing.assert_array_equal(palette[0], pc.unlabel_rgb(scale[0][1]))
    np.testing.assert_array_equal(palette[255], pc.unlabel_rgb(scale[-1][1]))
    darkness = palette.astype(int).sum(axis=1)
    assert np.all(np.diff(darkness) <= 0), "a larger weight is never lighter"


def test_png_decodes_to_the_weights_as_palette_indices():
    w = random_weights((7, 11))                                   # not square on purpose
    indices, palette = decode_png(mf.weights_png(w))
    assert indices.shape == (7, 11)
    np.testing.assert_array_equal(indices, np.rint(w * 255).astype(np.uint8))
    np.testing.assert_array_equal(palette, mf.weights_palette())
    assert np.abs(indices / 255 - w).max() <= 0.5 / 255 + 1e-12


def test_weights_outside_0_1_are_clipped_and_nan_is_0():
    indices = mf.weights_to_indices(np.array([[-0.5, 0.0, 0.5], [1.0, 1.5, np.nan]]))
    np.testing.assert_array_equal(indices, [[0, 0, 128], [255, 255, 0]])


def test_pool_max_keeps_the_strongest_weight_of_each_block():
    w = np.full((300, 300), 0.001)
    w[150, 7] = 0.9
    pixels, block = mf.pool_max(w, 128)
    assert block == 3 and pixels.shape == (100, 100)
    assert pixels[50, 2] == pytest.approx(0.9)
    assert np.count_nonzero(pixels > 0.01) == 1
    same, one = mf.pool_max(w[:128, :128], 128)
    assert one == 1 and same.shape == (128, 128)
    np.testing.assert_array_equal(same, w[:128, :128])     # 128 fits: nothing is pooled


def test_keep_tokens_drops_rows_and_columns_without_renormalising():
    w = random_weights((2, 3, 5, 5))
    kept, tokens = mf.keep_tokens(w, ["[CLS]", "a", "b", "c", "[SEP]"], [1, 2, 3])
    assert tokens == ["a", "b", "c"] and kept.shape == (2, 3, 3, 3)
    np.testing.assert_array_equal(kept, w[:, :, 1:4, 1:4])
    assert np.all(kept.sum(-1) < 1)


# ---- the model view ----------------------------------------------------------------------------

@pytest.mark.slow
def test_model_view_has_one_picture_per_layer_and_head_showing_its_weights(weights):
    fig = mf.model_view(weights)
    images = image_traces(fig)
    assert len(images) == 72 == len(fig.data)
    n = weights.shape[-1]
    for layer in range(6):
        for head in range(12):
            tr = images[layer * 12 + head]
            assert tr.name == f"layer {layer}, head {head}"
            indices, palette = decode_png(decode_uri(tr.source))
            assert indices.shape == (n, n)
            np.testing.assert_array_equal(indices,
                                          np.rint(weights[layer, head] * 255).astype(np.uint8))
            np.testing.assert_array_equal(palette, mf.weights_palette())


def test_model_view_lays_layers_out_as_rows_and_heads_as_columns():
    w = np.zeros((2, 3, 4, 4))
    for layer in range(2):
        for head in range(3):
            w[layer, head] = (layer * 3 + head + 1) / 10            # one shade per panel
    fig = mf.model_view(w)
    for layer in range(2):
        for head in range(3):
            k = layer * 3 + head + 1
            ax = "" if k == 1 else str(k)
            tr = fig.data[k - 1]
            assert (tr.xaxis, tr.yaxis) == (f"x{ax}", f"y{ax}")
            indices, _ = decode_png(decode_uri(tr.source))
            assert set(indices.ravel()) == {round(k / 10 * 255)}
            x_dom = fig.layout[f"xaxis{ax}"].domain
            y_dom = fig.layout[f"yaxis{ax}"].domain
            first = fig.layout.xaxis.domain
            assert (x_dom[0] > first[0]) == (head > 0)               # heads left to right
            assert (y_dom[0] < fig.layout.yaxis.domain[0]) == (layer > 0)   # layer 0 on top
            assert tuple(fig.layout[f"yaxis{ax}"].range) == (3.5, -0.5)     # query 0 on top
    texts = [a.text for a in fig.layout.annotations]
    assert {"layer 0", "layer 1", "0", "1", "2", "head"} <= set(texts)


def test_model_view_of_long_text_is_pooled_and_small():
    w = random_weights((6, 12, 300, 300))
    fig = mf.model_view(w, max_side=128)
    indices, _ = decode_png(decode_uri(fig.data[0].source))
    assert indices.shape == (100, 100)
    pooled, _ = mf.pool_max(w[0, 0], 128)
    np.testing.assert_array_equal(indices, np.rint(pooled * 255).astype(np.uint8))
    assert fig.data[0].dx == 3 and fig.data[0].x0 == 1


def test_model_view_starts_at_the_first_shown_position():
    fig = mf.model_view(random_weights((1, 2, 5, 5)), start=1)
    for ax in ("xaxis", "xaxis2"):
        assert tuple(fig.layout[ax].range) == (0.5, 5.5)
    assert tuple(fig.layout.yaxis.range) == (5.5, 0.5)
    assert fig.data[1].x0 == fig.data[1].y0 == 1 and fig.data[1].dx == 1


@pytest.mark.slow
def test_model_view_for_128_tokens_is_small(run):
    text = " ".join([SENTENCE] * 12)
    traces = PretrainedModel.load().trace(text, max_tokens=128)
    fig = mf.model_view(np.stack([t.weights for t in traces]))
    assert len(fig.to_json()) < 1_500_000


def test_model_view_rejects_bad_shapes():
    with pytest.raises(AttnvizInputError):
        mf.model_view(np.zeros((12, 4, 4)))
    with pytest.raises(AttnvizInputError):
        mf.model_view(np.zeros((1, 1, 4, 4)), max_side=0)


# ---- the head view -----------------------------------------------------------------------------

def test_head_view_draws_each_weight_above_the_threshold_once_at_its_level(weights, run):
    layer = weights[2]                                                # (12, n, n)
    fig = mf.head_view(layer, run.tokens)
    levels = mf.opacity_levels()
    drawn = set()
    for tr in line_traces(fig):
        h, lo, hi = tr.meta["head"], tr.meta["low"], tr.meta["high"]
        assert (lo, hi, tr.opacity) in levels
        assert tr.line.color == mf.HEAD_COLORS[h]
        for q, k in segments(tr):
            assert lo <= layer[h, q, k] and (layer[h, q, k] < hi or hi == 1.0)
            assert (h, q, k) not in drawn
            drawn.add((h, q, k))
    expected = {tuple(int(i) for i in idx)
                for idx in np.argwhere(layer >= mf.HEAD_VIEW_MIN_WEIGHT)}
    assert drawn == expected


def test_opacity_grows_with_the_weight():
    levels = mf.opacity_levels()
    assert levels[0][0] == mf.HEAD_VIEW_MIN_WEIGHT and levels[-1][1] == 1.0
    opacities = [o for _, _, o in levels]
    assert opacities == sorted(opacities) and len(set(opacities)) == len(opacities)
    for lo, hi, o in levels:
        assert lo <= o <= hi


def test_head_view_has_one_legend_entry_per_head_even_a_head_with_no_line():
    w = random_weights((3, 4, 4), seed=1)
    w[1] = np.eye(4)                   # head 1: every weight is 0 or 1, no line in low levels
    fig = mf.head_view(w, list("abcd"), min_weight=0.05)
    groups = {}
    for tr in fig.data:
        if tr.legendgroup:
            groups.setdefault(tr.legendgroup, []).append(tr)
    assert sorted(groups) == ["head 0", "head 1", "head 2"]
    for name, traces in groups.items():
        shown = [tr for tr in traces if tr.showlegend]
        assert len(shown) == 1 and shown[0].name == name and shown[0].opacity in (None, 1)
        assert len({tr.line.color for tr in traces}) == 1
    assert fig.layout.legend.groupclick == "togglegroup"


def test_head_view_draws_only_the_picked_heads():
    w = random_weights((4, 5, 5))
    fig = mf.head_view(w, list("abcde"), heads=[1, 3])
    assert {tr.legendgroup for tr in fig.data if tr.legendgroup} == {"head 1", "head 3"}
    assert {tr.meta["head"] for tr in line_traces(fig)} == {1, 3}


def test_highlighting_a_token_keeps_only_its_lines(weights, run):
    it = run.tokens.index("it")
    fig = mf.head_view(weights[3], run.tokens, highlight=it)
    pairs = [(tr.meta["head"], q, k) for tr in line_traces(fig) for q, k in segments(tr)]
    assert pairs and {q for _, q, _ in pairs} == {it}
    expected = {(h, it, int(k)) for h, k in np.argwhere(weights[3][:, it] >= 0.05)}
    assert set(pairs) == expected
    queries = next(tr for tr in fig.data if tr.name == "queries")
    assert queries.text[it] == "<b>it</b>"
    assert queries.textfont.color[it] != queries.textfont.color[0]


def test_hidden_special_tokens_are_not_in_the_head_view(weights, run):
    keep = np.flatnonzero(~run.encoding.special)
    w, tokens = mf.keep_tokens(weights[0], run.tokens, keep)
    fig = mf.head_view(w, tokens)
    labels = [t for tr in fig.data if tr.mode == "text" for t in tr.text]
    assert "[CLS]" not in labels and "[SEP]" not in labels and "animal" in labels
    assert max(q for tr in line_traces(fig) for q, _ in segments(tr)) < len(tokens)


def test_head_view_escapes_token_text():
    w = random_weights((2, 3, 3))
    tokens = ["<b>x</b>", "a&b", "<img src=x onerror=alert(1)>"]
    fig = mf.head_view(w, tokens)
    for tr in fig.data:
        if tr.mode == "text":
            assert list(tr.text) == ["&lt;b&gt;x&lt;/b&gt;", "a&amp;b",
                                     "&lt;img src=x onerror=alert(1)&gt;"]
            assert list(tr.hovertext) == list(tr.text)


def test_head_view_rejects_bad_input():
    w = random_weights((2, 3, 3))
    for kwargs in (dict(heads=[2]), dict(highlight=3), dict(min_weight=0)):
        with pytest.raises(AttnvizInputError):
            mf.head_view(w, list("abc"), **kwargs)
    with pytest.raises(AttnvizInputError):
        mf.head_view(w, list("ab"))
    with pytest.raises(AttnvizInputError):
        mf.head_view(np.zeros((3, 3)), list("abc"))
