"""The Pretrained model page in AppTest: it shows the model's own weights, every control changes
what it should, it runs alone and on any input, and it sends little for 128 tokens."""

import numpy as np
import pytest

from attnviz.app.pretrained.pretrained_view import EVERY_TOKEN
from attnviz.i18n import t
from tests.apptest_helpers import (chart_bytes, charts, click_points, decode, heatmap_z,
                                   no_exceptions, open_page, shown_tokens, shows, title_text,
                                   titled)
from tests.message_helpers import message_pattern

PAGE = "pages/pretrained.py"
DEFAULT = "The animal didn't cross the street because it was too tired"
LONG = " ".join(f"Sentence {i}: the animal didn't cross the street because it was too tired."
                for i in range(20))                       # ≈ 340 word pieces


# the page's three views are tabs, only the open one drawn; a tab's state is its label
MODEL_VIEW, ONE_HEAD = t("pretrained.tab.model_view"), t("pretrained.tab.one_head")
HEAD_VIEW = t("pretrained.tab.head_view")


def model_view(at) -> dict:
    return next(f for f in charts(at) if f["data"] and f["data"][0]["type"] == "image")


def head_heatmap(at) -> dict:
    return next(f for f in charts(at) if f["data"][0]["type"] == "heatmap")


def head_view(at) -> dict:
    return next(f for f in charts(at) if any(tr.get("name") == "queries" for tr in f["data"]))


def lines(fig: dict) -> set[tuple[int, int, int]]:
    """(head, query, key) of every line the head view draws."""
    out = set()
    for tr in fig["data"]:
        if tr.get("meta"):
            y = tr["y"]
            out |= {(tr["meta"]["head"], y[i], y[i + 1]) for i in range(0, len(y), 3)}
    return out


def labels(fig: dict) -> list[str]:
    return [t for tr in fig["data"] if tr.get("mode") == "text" for t in tr["text"]]


@pytest.mark.slow
def test_page_runs_alone_and_shows_the_models_weights(minilm):
    at = open_page(PAGE)
    no_exceptions(at)
    assert not at.error
    run = minilm.run(DEFAULT)
    assert shown_tokens(at) == run.tokens
    assert len(charts(at)) == 1                  # the first tab only: one head
    np.testing.assert_array_equal(heatmap_z(head_heatmap(at)), run.traces[0].weights[0])
    at = open_page(PAGE, pt_view=MODEL_VIEW)
    assert len(model_view(at)["data"]) == 72
    at = open_page(PAGE, pt_view=HEAD_VIEW)
    assert {"[CLS]", "animal", "[SEP]"} <= set(labels(head_view(at)))


def test_picking_a_layer_and_head_opens_that_head(minilm):
    at = open_page(PAGE, sentence="Thinking machines think about attention", pt_view=ONE_HEAD)
    at.button_group(key="pt_layer").set_value(3)
    at.button_group(key="pt_head").set_value(7)
    at.run()
    no_exceptions(at)
    fig = head_heatmap(at)
    expected = minilm.trace("Thinking machines think about attention")[3].weights[7]
    np.testing.assert_array_equal(heatmap_z(fig), expected)
    assert message_pattern("pretrained.one_head.title", layer=3, head=7).fullmatch(
        title_text(fig))
    at.button_group(key="pt_head").set_value(0).run()
    assert not np.array_equal(heatmap_z(head_heatmap(at)), expected)


def test_the_sidebar_layer_is_the_first_head_opened(minilm):
    at = open_page(PAGE, mode="Pretrained model", layer=4, head=2, pt_view=ONE_HEAD)
    np.testing.assert_array_equal(heatmap_z(head_heatmap(at)), minilm.trace(DEFAULT)[4].weights[2])


@pytest.mark.slow
def test_chinese_text_shows_its_unknown_characters(minilm):
    at = open_page(PAGE, sentence="早上好，今天天气很好")
    no_exceptions(at)
    tokens = minilm.tokenize("早上好，今天天气很好")
    assert shown_tokens(at) == tokens
    assert shows(at.caption, "pretrained.unknown", unknown=tokens.count("[UNK]"),
                 count=len(tokens))
    # the parsed figure's labels, not its JSON text: plotly may write 天 as \u5929 (issue 18.21)
    heat = head_heatmap(open_page(PAGE, sentence="早上好，今天天气很好", pt_view=ONE_HEAD))
    assert any("天" in label for label in heat["data"][0]["x"] + heat["data"][0]["y"])
    at = open_page(PAGE, sentence="早上好，今天天气很好", pt_view=HEAD_VIEW)
    assert "天" in labels(head_view(at))


def test_hiding_cls_and_sep_removes_them_from_every_view(minilm):
    at = open_page(PAGE, pt_view=ONE_HEAD)
    at.checkbox(key="pt_hide_special").check().run()
    no_exceptions(at)
    weights = minilm.trace(DEFAULT)[0].weights[0]                   # (n, n)
    heat = head_heatmap(at)
    np.testing.assert_array_equal(heatmap_z(heat), weights[1:-1, 1:-1])   # not renormalised
    assert "[CLS]" not in heat["data"][0]["y"] and "[SEP]" not in heat["data"][0]["x"]
    at.session_state["pt_view"] = HEAD_VIEW
    at.run()
    assert not {"[CLS]", "[SEP]"} & set(labels(head_view(at)))
    n = len(weights) - 2
    at.session_state["pt_view"] = MODEL_VIEW
    at.run()
    mv = model_view(at)
    assert mv["layout"]["xaxis"]["range"] == [0.5, n + 0.5]   # positions as in the token list
    assert mv["data"][0]["x0"] == 1
    assert shows(at.caption, "pretrained.hidden_special")


def test_head_view_follows_its_layer_heads_and_token(minilm):
    at = open_page(PAGE, pt_view=HEAD_VIEW)
    weights = minilm.trace(DEFAULT)[4].weights                       # (12, n, n)
    at.selectbox(key="pt_hv_layer").set_value(4).run()
    expected = {tuple(int(i) for i in idx) for idx in np.argwhere(weights >= 0.05)}
    assert lines(head_view(at)) == expected
    at.button_group(key="pt_hv_heads").set_value([2, 5]).run()
    fig = head_view(at)
    assert {tr["legendgroup"] for tr in fig["data"] if tr.get("legendgroup")} == \
        {"head 2", "head 5"}
    assert lines(fig) == {t for t in expected if t[0] in (2, 5)}
    it = minilm.tokenize(DEFAULT).index("it")
    at.selectbox(key="pt_hv_token").set_value(it).run()
    assert lines(head_view(at)) == {t for t in expected if t[0] in (2, 5) and t[1] == it}
    at.button_group(key="pt_hv_heads").set_value([]).run()
    no_exceptions(at)
    assert shows(at.info, "pretrained.head_view.no_heads")


def label_point(fig: dict, side: str, row: int) -> dict:
    """The point a click on the head view's label `row` sends (`side` "queries" or "keys")."""
    curve = next(i for i, tr in enumerate(fig["data"]) if tr.get("name") == side)
    tr = fig["data"][curve]
    return {"x": tr["x"][row], "y": tr["y"][row], "curve_number": curve, "point_number": row,
            "point_index": row, "text": tr["text"][row]}


def test_clicking_a_token_in_the_head_view_highlights_it_and_again_shows_every_token(minilm):
    # issue 27.10: BertViz lights up a token's lines when it is pointed at
    at = open_page(PAGE, pt_view=HEAD_VIEW)
    tokens = minilm.tokenize(DEFAULT)
    weights = minilm.trace(DEFAULT)[0].weights                       # (12, n, n)
    every = {tuple(int(i) for i in idx) for idx in np.argwhere(weights >= 0.05)}
    assert lines(head_view(at)) == every
    it = tokens.index("it")
    click_points(at, "pt_head_view", [label_point(head_view(at), "queries", it)])
    no_exceptions(at)
    assert at.selectbox(key="pt_hv_token").value == it
    assert lines(head_view(at)) == {t for t in every if t[1] == it}
    animal = tokens.index("animal")                     # a key's label on the right: that token
    click_points(at, "pt_head_view", [label_point(head_view(at), "keys", animal)])
    assert at.selectbox(key="pt_hv_token").value == animal
    assert lines(head_view(at)) == {t for t in every if t[1] == animal}
    click_points(at, "pt_head_view", [label_point(head_view(at), "queries", animal)])
    assert at.selectbox(key="pt_hv_token").value == EVERY_TOKEN      # the same again: all
    assert lines(head_view(at)) == every
    click_points(at, "pt_head_view", [])                              # a click beside: nothing
    assert at.selectbox(key="pt_hv_token").value == EVERY_TOKEN


def test_a_click_on_a_token_with_cls_and_sep_hidden_highlights_that_token(minilm):
    at = open_page(PAGE, pt_view=HEAD_VIEW, pt_hide_special=True)
    tokens = minilm.tokenize(DEFAULT)
    it = tokens.index("it")                                          # its position in the text
    click_points(at, "pt_head_view", [label_point(head_view(at), "queries", it - 1)])
    no_exceptions(at)
    assert at.selectbox(key="pt_hv_token").value == it
    queries = next(tr for tr in head_view(at)["data"] if tr.get("name") == "queries")
    assert [s for s in queries["text"] if "<b>" in s] == ["<b>it</b>"]


def test_long_text_is_cut_with_a_notice(minilm):
    at = open_page(PAGE, sentence=LONG, max_tokens=16, pt_view=ONE_HEAD)
    no_exceptions(at)
    assert shows(at.info, "notice.pretrained.truncated", limit=16, pieces=14)
    assert len(shown_tokens(at)) == 16
    assert len(heatmap_z(head_heatmap(at))) == 16


@pytest.mark.slow
def test_empty_or_unreadable_text_is_an_error_not_a_crash():
    for text in ("   ", "\u200b\u200b"):
        at = open_page(PAGE, sentence=text)
        no_exceptions(at)
        assert at.error and shows(at.error[:1], "pretrained.cannot_run")


@pytest.mark.parametrize("view", [ONE_HEAD, HEAD_VIEW, "no such view"])
def test_stale_or_foreign_widget_values_do_not_break_the_page(view):
    at = open_page(PAGE, pt_layer=99, pt_head="x", pt_hv_heads=[40], pt_hv_token=999, pt_hv_layer=7,
                   pt_hide_special="yes", layer=-3, pt_view=view)
    no_exceptions(at)
    assert len(charts(at)) == 1
    if view == ONE_HEAD:
        assert at.session_state["pt_layer"] == 0
    if view == HEAD_VIEW:
        assert at.session_state["pt_hv_token"] == EVERY_TOKEN


@pytest.mark.slow
@pytest.mark.parametrize("view", [MODEL_VIEW, ONE_HEAD, HEAD_VIEW])
def test_payload_for_128_tokens_is_under_the_budget(view):
    at = open_page(PAGE, sentence=LONG, max_tokens=128, pt_view=view)
    no_exceptions(at)
    if view == ONE_HEAD:
        assert len(head_heatmap(at)["data"][0]["y"]) == 128
    images = sum(len(img.url) for node in at.get("imgs") for img in node.proto.imgs)
    total = chart_bytes(at) + images   # the model view's pictures are inside its chart
    assert 0 < total <= 3_000_000      # SPEC: a page's figures for 128 tokens (issue 5: 5 MB)


@pytest.mark.slow
def test_in_the_app_step_through_opens_step_by_step_on_that_head(minilm):
    at = open_page(PAGE, mode="Q, K, V", step="weights", pt_view=ONE_HEAD)
    no_exceptions(at)
    assert at.title[0].value == t("pretrained.title")
    at.button_group(key="pt_layer").set_value(1)
    at.button_group(key="pt_head").set_value(5)
    at.run()
    at.button(key="pt_step_through").click().run()
    no_exceptions(at)
    assert at.title[0].value == t("steps.title")
    assert at.session_state["mode"] == "Pretrained model"
    expected = minilm.trace(DEFAULT, max_tokens=64)[1].weights[5]
    assert at.session_state["step"] == "weights"
    np.testing.assert_allclose(decode(charts(at)[0]["data"][0]["z"]), expected, rtol=1e-6)


@pytest.mark.slow
def test_learners_on_the_same_text_share_the_figures(monkeypatch):
    """The second to tenth learner on a text pay almost nothing (issue 13): the model view and
    head view are built once per text and choice, and again for another text."""
    from attnviz.plot import model_figures

    built = []
    for name in ("model_view", "head_view"):
        real = getattr(model_figures, name)
        monkeypatch.setattr(model_figures, name,
                            lambda *a, _real=real, _name=name, **k: (built.append(_name),
                                                                     _real(*a, **k))[1])
    text = "Ten learners share one figure of this sentence"
    for view in (MODEL_VIEW, MODEL_VIEW, HEAD_VIEW, HEAD_VIEW, MODEL_VIEW):
        no_exceptions(open_page(PAGE, sentence=text, pt_view=view))
    assert built == ["model_view", "head_view"]
    at = open_page(PAGE, sentence=text + " and one more", pt_view=MODEL_VIEW)
    assert built == ["model_view", "head_view", "model_view"]
    assert len(model_view(at)["data"]) == 72


def test_a_second_sentence_shows_the_same_head_and_the_difference(minilm):
    other = "The animal didn't cross the road because it was too wide"
    at = open_page(PAGE, pt_view=ONE_HEAD, pt_layer=2, pt_head=4)
    assert len(charts(at)) == 1                              # empty by default: off
    at.text_input(key="pt_compare").input(other).run()
    no_exceptions(at)
    first, second = minilm.run(DEFAULT), minilm.run(other)
    np.testing.assert_array_equal(heatmap_z(titled(at, "figure.first_sentence")),
                                  first.attentions[2, 4])
    np.testing.assert_array_equal(heatmap_z(titled(at, "figure.second_sentence")),
                                  second.attentions[2, 4])
    same = [i for i, (a, b) in enumerate(zip(first.tokens, second.tokens)) if a == b]
    assert "street" not in [first.tokens[i] for i in same] and len(same) == len(first.tokens) - 2
    expected = (second.attentions[2, 4][np.ix_(same, same)]
                - first.attentions[2, 4][np.ix_(same, same)])
    delta = titled(at, "figure.delta_weights")
    np.testing.assert_allclose(heatmap_z(delta), expected, atol=1e-7)
    assert f"{np.abs(expected).max():.3f}" in delta["layout"]["title"]["text"]
