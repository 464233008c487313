"""The Read the model page in AppTest: each tab runs alone from seeded state, and what it shows
equals the API's own (separately tested) functions on the real model, computed here."""

import re

import numpy as np
import pandas as pd
import pytest

from attnviz import attention_rollout, head_stats
from attnviz.i18n import t, use_language
from tests.apptest_helpers import (charts, decode, heatmap_z, no_exceptions, open_page, shows,
                                   shown_tokens, titled)

PAGE = "pages/reading.py"
DEFAULT = "The animal didn't cross the street because it was too tired"
# the tabs by their labels' message ids; a tab is seeded by its label, t(id)
ROLLOUT, VALUE, STATS, ABLATION = TABS = tuple(
    f"reading.tab.{tab}" for tab in ("rollout", "value", "stats", "ablation"))
OTHER = "The animal did not cross the road because it was tired."


def metric(at, msg_id: str) -> str:
    """The value of the metric labelled with the message `msg_id`."""
    return next(m.value for m in at.metric if m.label == t(msg_id))


def frame_with(at, column: str) -> pd.DataFrame:
    return next(d.value for d in at.dataframe if column in d.value.columns)


# not slow: the fast loop's one run of each tab of Read the model (tests/conftest.py)
@pytest.mark.parametrize("tab", TABS)
def test_each_tab_runs_alone(tab, minilm):
    """Each tab, alone from seeded state, shows the model's tokens and its first numbers: the
    API's own (separately tested) functions on the real model, computed here."""
    at = open_page(PAGE, rd_view=t(tab), ab_other=OTHER)
    no_exceptions(at)
    assert not at.error
    assert at.tabs                                     # the page's tabs are there
    run = minilm.run(DEFAULT)
    assert shown_tokens(at) == run.tokens
    if tab == ROLLOUT:                                 # layer 0, with the residual, on arrival
        np.testing.assert_allclose(heatmap_z(titled(at, "reading.rollout.title", layer=0)),
                                   attention_rollout(run.attentions)[0], rtol=1e-6)
    elif tab == VALUE:
        np.testing.assert_allclose(heatmap_z(titled(at, "reading.value.weights_title", layer=0,
                                                    head=0)),
                                   run.attentions[0, 0], rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(heatmap_z(titled(at, "reading.value.norms_title", layer=0,
                                                    head=0)),
                                   run.value_norms[0, 0], rtol=1e-5, atol=1e-6)
    elif tab == STATS:                                 # one row per layer and head
        table = next(d.value for d in at.dataframe if len(d.value) == 6 * 12)
        expected = head_stats(run.attentions, run.tokens)
        assert list(zip(table["layer"], table["head"])) == list(zip(expected["layer"],
                                                                    expected["head"]))
        for column in ("entropy", "max_weight", "on_cls", "on_self"):
            np.testing.assert_allclose(table[column], expected[column], rtol=1e-6,
                                       err_msg=column)
    else:
        a, b = minilm.embed(DEFAULT), minilm.embed(OTHER)
        assert float(metric(at, "reading.ablation.similarity.label")) == \
            pytest.approx(a @ b, abs=1e-4)


@pytest.mark.slow
def test_rollout_is_attention_rollout_of_the_run(minilm):
    at = open_page(PAGE, rd_view=t(ROLLOUT), ro_layer=3, ro_residual=False, ro_token=4)
    no_exceptions(at)
    run = minilm.run(DEFAULT)
    rollout = attention_rollout(run.attentions, residual=False)
    np.testing.assert_allclose(heatmap_z(titled(at, "reading.rollout.title", layer=3)),
                               rollout[3], rtol=1e-6)
    raw = run.attentions[3].mean(axis=0)
    np.testing.assert_allclose(heatmap_z(titled(at, "reading.rollout.raw_title", layer=3)), raw,
                               rtol=1e-6)
    bars = titled(at, "reading.rollout.row_title", token=4, layer=3)["data"][0]
    np.testing.assert_allclose(decode(bars["y"]), rollout[3, 4], rtol=1e-6)
    at.checkbox(key="ro_residual").check().run()
    with_residual = attention_rollout(run.attentions, residual=True)[3]
    np.testing.assert_allclose(heatmap_z(titled(at, "reading.rollout.title", layer=3)),
                               with_residual, rtol=1e-6)


@pytest.mark.slow
def test_value_weighted_heatmap_is_the_runs_value_norms(minilm):
    at = open_page(PAGE, rd_view=t(VALUE), vw_layer=2, vw_head=5)
    no_exceptions(at)
    run = minilm.run(DEFAULT)
    norms_chart = titled(at, "reading.value.norms_title", layer=2, head=5)
    norms = heatmap_z(norms_chart)
    np.testing.assert_allclose(norms, run.value_norms[2, 5], rtol=1e-6)
    np.testing.assert_array_equal(heatmap_z(titled(at, "reading.value.weights_title", layer=2,
                                                   head=5)),
                                  run.attentions[2, 5])
    bar = norms_chart["data"][0]["colorbar"]["title"]["text"]
    assert "‖αf(x)‖" in bar and f"{run.value_norms[2, 5].max():.3g}" in bar
    table = frame_with(at, "share of weight").set_index("keys")
    sep = [j for j, token in enumerate(run.tokens) if token == "[SEP]"]
    a, v = run.attentions[2, 5].astype(float), run.value_norms[2, 5].astype(float)
    assert table.loc["[SEP]", "share of weight"] == pytest.approx(a[:, sep].sum() / a.sum())
    assert table.loc["[SEP]", "share of ‖αf(x)‖"] == pytest.approx(v[:, sep].sum() / v.sum())
    assert table["share of weight"].sum() == pytest.approx(1)     # the four groups: every key


@pytest.mark.slow
def test_head_statistics_table_is_head_stats(minilm):
    at = open_page(PAGE, rd_view=t(STATS), hs_column="on_sep")
    no_exceptions(at)
    run = minilm.run(DEFAULT)
    shown = frame_with(at, "entropy")
    assert len(shown) == 72
    pd.testing.assert_frame_equal(shown.reset_index(drop=True),
                                  head_stats(run.attentions, run.tokens))
    np.testing.assert_allclose(heatmap_z(titled(at, "reading.stats.on_sep")),
                               head_stats(run.attentions, run.tokens)["on_sep"]
                               .to_numpy().reshape(6, 12))
    assert at.button(key="pt_step_through").label == t("pretrained.step_through.label")


@pytest.mark.slow
def test_switching_heads_off_shows_the_ablated_similarity(minilm):
    at = open_page(PAGE, rd_view=t(ABLATION), ab_other=OTHER)
    no_exceptions(at)
    a, b = minilm.embed(DEFAULT), minilm.embed(OTHER)
    assert float(metric(at, "reading.ablation.similarity.label")) == \
        pytest.approx(a @ b, abs=1e-4)
    at.text_input(key="ab_heads").input("L0H3, L5H11, L2").run()
    no_exceptions(at)
    mask = np.ones((6, 12))
    mask[0, 3] = mask[5, 11] = 0
    mask[2] = 0
    a_off, b_off = minilm.embed(DEFAULT, head_mask=mask), minilm.embed(OTHER, head_mask=mask)
    shown = float(metric(at, "reading.ablation.similarity_off.label"))
    assert shown == pytest.approx(a_off @ b_off, abs=1e-4)
    assert shown != pytest.approx(a @ b, abs=1e-3)
    itself = float(metric(at, "reading.ablation.itself.label"))
    assert itself == pytest.approx(a_off @ a, abs=1e-4)


@pytest.mark.slow
def test_rank_every_head_matches_head_ablation_effects(minilm):
    at = open_page(PAGE, rd_view=t(ABLATION), ab_other="A cat sat on the mat.")
    at.button(key="ab_rank").click().run()
    no_exceptions(at)
    expected = minilm.head_ablation_effects(DEFAULT, "A cat sat on the mat.", max_tokens=64)
    top = frame_with(at, "change")
    assert len(top) == 10
    pd.testing.assert_frame_equal(top.reset_index(drop=True), expected.head(10),
                                  check_exact=False, rtol=1e-6)
    change = heatmap_z(titled(at, "reading.ranking.map_title"))
    assert change[expected["layer"][0], expected["head"][0]] == pytest.approx(
        expected["change"][0])
    # a second learner on the same pair sees it without clicking (cached for every session)
    again = open_page(PAGE, rd_view=t(ABLATION), ab_other="A cat sat on the mat.")
    assert len(frame_with(again, "change")) == 10


USER_TEXT = "<b>x</b> [a](http://e.x)"


@pytest.mark.slow
@pytest.mark.parametrize("tab", TABS)
def test_markdown_and_html_in_user_text_show_literally(tab):
    at = open_page(PAGE, sentence=USER_TEXT, rd_view=t(tab), ab_other=USER_TEXT)
    no_exceptions(at)
    assert "<" in shown_tokens(at) and "[" in shown_tokens(at)
    for element in [*at.markdown, *at.caption]:
        outside_code = re.sub(r"(`+).*?\1", "", element.value)
        assert "<b>" not in outside_code and "](http" not in outside_code, element.value
    for fig in charts(at):
        for tr in fig["data"]:
            assert not any("<b>" in str(x) for x in tr.get("x") or [])


LONG = " ".join(f"Sentence {i}: the animal didn't cross the street because it was too tired."
                for i in range(20))                       # ≈ 340 word pieces
LONG_OTHER = " ".join(f"Line {i}: a cat sat quietly on the warm mat by the door." for i in range(20))


def sentence_transformers_similarity(hf, a: str, b: str, max_tokens: int) -> float:
    """Cosine of the two texts' embeddings as sentence-transformers computes them (mean of the
    last layer over every token, unit length), by transformers on the first `max_tokens`."""
    import torch

    model, tokenizer = hf
    pooled = []
    for text in (a, b):
        enc = tokenizer(text, truncation=True, max_length=max_tokens, return_tensors="pt")
        with torch.no_grad():
            h = model(**enc).last_hidden_state[0].mean(dim=0)
        pooled.append(torch.nn.functional.normalize(h, dim=0))
    return float(pooled[0] @ pooled[1])


@pytest.mark.slow
def test_with_every_head_the_similarity_is_one_number_on_the_tokens_the_model_reads(hf):
    """Issue 18 item 8: for long texts the metric read 256 tokens (0.0245) while the ranking
    read 64 (0.0187). Both must be one number, on the same first 64 tokens (the sidebar's
    limit), as transformers computes it."""
    at = open_page(PAGE, sentence=LONG, rd_view=t(ABLATION), ab_other=LONG_OTHER)
    at.button(key="ab_rank").click().run()
    no_exceptions(at)
    on_64 = sentence_transformers_similarity(hf, LONG, LONG_OTHER, 64)
    on_256 = sentence_transformers_similarity(hf, LONG, LONG_OTHER, 256)
    assert abs(on_64 - on_256) > 1e-3                   # the texts are long enough to tell
    top = metric(at, "reading.ablation.similarity.label")
    assert shows(at.caption, "reading.ranking.baseline", baseline=top)     # the same number
    assert float(top) == pytest.approx(on_64, abs=1.5e-4)      # shown to 4 decimals
    assert shows(at.caption, "reading.ablation.limit", limit=64)
    assert shows(at.caption, "reading.ablation.cut", count=2)


def test_the_second_sentence_starts_in_the_interfaces_language_and_follows_a_switch():
    """Issue 27.12: in 中文 the Ablation tab's second sentence was English. It starts as a
    Chinese sentence; an untouched default becomes the other language's default in that
    language; a typed sentence stays as typed."""
    from attnviz.app import keys
    from tests.apptest_helpers import open_page

    cjk = re.compile(r"[\u4e00-\u9fff]")
    with use_language("zh"):
        zh = open_page(PAGE, params={"lang": "zh"}, rd_view=t(ABLATION))
    chinese = zh.session_state[keys.AB_OTHER]
    assert cjk.search(chinese) and not re.search(r"[A-Za-z]", chinese)
    at = open_page(PAGE, params={"lang": "en"}, rd_view=t(ABLATION), ab_other=chinese)
    assert at.session_state[keys.AB_OTHER] == OTHER
    with use_language("zh"):
        at = open_page(PAGE, params={"lang": "zh"}, rd_view=t(ABLATION), ab_other="Two cats slept.")
    assert at.session_state[keys.AB_OTHER] == "Two cats slept."
