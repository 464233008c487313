"""Compare models (issue 38 §3): one text, two decoders side by side. The numbers: the token
counts are the issue's (the tutorials' Chinese sentence, 37 SmolLM2 pieces, 12 Gemma 3 tokens);
each column's head map, continuation and first-token weights are its model's own run, which
tests/test_gemma3.py and tests/test_decoder.py hold to transformers."""

from __future__ import annotations

import numpy as np
import pytest

from attnviz.i18n import t
from tests.apptest_helpers import charts_titled, decode, no_exceptions, open_page, shows

ZH = "自注意力机制把查询、键和值联系起来。"
PAGE = "pages/compare.py"


@pytest.fixture(scope="module")
def page():
    """The page on the Chinese sentence, SmolLM2 left and Gemma 3 right (the defaults), Gemma's
    layer 5 head 2 picked."""
    return open_page(PAGE, sentence=ZH, cmp_layer_b=5, cmp_head_b=2)


@pytest.fixture(scope="module")
def models():
    from attnviz.models.decoders.decoder import DecoderModel

    return {"smollm2": DecoderModel.load(name="smollm2"),
            "gemma3-270m": DecoderModel.load(name="gemma3-270m")}


@pytest.mark.slow
def test_a_tokenizer_matters_37_pieces_against_12_tokens(page):
    assert shows(page.caption, "compare.tokens", model="SmolLM2-135M-Instruct", count=37)
    assert shows(page.caption, "compare.tokens_bos", model="Gemma 3 270M", count=12)
    assert not page.error


@pytest.mark.slow
def test_each_column_is_its_models_own_run(page, models):
    gemma, smol = models["gemma3-270m"], models["smollm2"]
    run = gemma.run(ZH)
    fig = charts_titled(page, "figure.compare.head.title", model="Gemma 3 270M", layer=5,
                        head=2)[0]
    z = decode(fig["data"][0]["z"])
    n = len(run.ids)
    below = np.tril(np.ones((n, n), bool))
    np.testing.assert_allclose(z[below], run.attentions[5, 2][below], rtol=1e-6, atol=1e-7)
    assert np.all(np.isnan(z[~below]))                          # after its query: masked
    sink = decode(charts_titled(page, "figure.compare.sink.title", model="Gemma 3 270M")[0]
                  ["data"][0]["z"])
    np.testing.assert_allclose(sink, run.attentions[:, :, 1:, 0].mean(-1), rtol=1e-6)
    assert not page.code                        # the continuations wait for the press
    [press] = [b for b in page.button if b.key == "cmp_continue"]
    press.click().run()
    no_exceptions(page)
    continued = [c.value.strip() for c in page.code]     # a code block drops a first newline
    assert continued == [smol.generate(ZH, max_new_tokens=12).text.strip(),
                         gemma.generate(ZH, max_new_tokens=12).text.strip()]


@pytest.mark.slow
def test_a_link_carries_both_models_and_every_pick(page):
    params = {k: v for k, v in page.query_params.items()}
    assert params.get("cmp_layer_b") in ("5", ["5"]) and params.get("cmp_head_b") in ("2", ["2"])
    again = open_page(PAGE, params={"cmp_a": "gemma3-270m", "cmp_b": "smollm2",
                                    "cmp_layer_a": "3", "sentence": "The cat sat on the mat."})
    no_exceptions(again)
    assert again.selectbox(key="cmp_a").value == "gemma3-270m"
    assert again.selectbox(key="cmp_b").value == "smollm2"
    assert again.selectbox(key="cmp_layer_a").value == 3
    assert charts_titled(again, "figure.compare.head.title", model="Gemma 3 270M", layer=3,
                         head=0)
    unknown = open_page(PAGE, params={"cmp_a": "no-such-model"})
    assert unknown.selectbox(key="cmp_a").value == "smollm2"


@pytest.mark.slow
def test_the_same_model_twice_is_said():
    at = open_page(PAGE, cmp_a="smollm2", cmp_b="smollm2", sentence="Hello there.")
    assert shows(at.info, "compare.same_model")
