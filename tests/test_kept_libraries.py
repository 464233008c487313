"""What a kept library already does, it does (issue 20 item 4): the model view's PNGs are
Pillow's, GELU's erf is torch's, the CSV cells are the csv module's."""

import csv
import io
import math
import zipfile

import numpy as np
import pytest
from PIL import Image

import attnviz
from attnviz.models.encoder import bert_layer
from attnviz.plot import model_figures as mf


def test_the_model_views_png_is_a_valid_palette_png_pillow_reads_back():
    indices = np.random.default_rng(0).integers(0, 256, size=(37, 53)).astype(np.uint8)
    palette = mf.weights_palette()
    data = mf.png_palette_image(indices, palette)
    image = Image.open(io.BytesIO(data))
    image.load()                                          # checks every chunk's CRC
    assert image.mode == "P" and image.size == (53, 37)
    np.testing.assert_array_equal(np.array(image), indices)
    np.testing.assert_array_equal(
        np.array(image.getpalette()[:768], dtype=np.uint8).reshape(-1, 3), palette)


@pytest.mark.reference
def test_gelus_erf_is_torchs_bit_for_bit_and_within_an_ulp_of_math_erf():
    """erf is torch.special.erf's, bit for bit: the function transformers' GELU
    (torch.nn.functional.gelu) evaluates."""
    import torch

    x = np.concatenate([np.linspace(-7.0, 7.0, 14001), [-0.0, 1e-300, 40.0, -40.0]])
    np.testing.assert_array_equal(bert_layer.erf(x), torch.special.erf(torch.from_numpy(x)).numpy())
    np.testing.assert_allclose(bert_layer.erf(x), [math.erf(v) for v in x], rtol=0, atol=2.3e-16)
    h = np.linspace(-5, 5, 101, dtype=np.float32).reshape(1, -1)
    gelu = bert_layer.gelu(h)
    assert gelu.dtype == np.float32
    expected = torch.nn.functional.gelu(torch.from_numpy(h.astype(np.float64))).numpy()
    np.testing.assert_allclose(gelu, expected, rtol=1e-6, atol=1e-7)


def test_the_csv_cells_are_the_csv_modules_a_token_with_comma_quote_and_newline_round_trips():
    tokens = ['a,b', 'say "hi"', "two\nlines", "=1+1"]
    x = np.random.default_rng(0).normal(size=(4, 4))
    t = attnviz.trace_attention(x, attnviz.MultiHeadWeights.random(4, 1, seed=0))
    buf = io.BytesIO()
    t.to_csv_zip(buf, tokens_q=tokens, tokens_k=tokens)
    with zipfile.ZipFile(buf) as zf:
        rows = list(csv.reader(io.StringIO(zf.read("weights_head0.csv").decode("utf-8"))))
    assert rows[0][1:] == ['a,b', 'say "hi"', "two\nlines", "'=1+1"]
    assert [r[0] for r in rows[1:]] == ['a,b', 'say "hi"', "two\nlines", "'=1+1"]
    np.testing.assert_allclose(np.array([r[1:] for r in rows[1:]], dtype=float), t.weights[0])
