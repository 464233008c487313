"""The Train page and what it says, in both languages (issue 21): the form's errors, the
verdict and the time estimate (attnviz.models.trainer.toy_plan), the pool's errors
(attnviz.models.trainer.training), the run's tables and charts, the toy model's answer on the step
pages (attnviz.app.shared.toy_view) and the HTML report, made in the language it was asked in."""

from __future__ import annotations

import re

import pytest
from streamlit.testing.v1 import AppTest

import attnviz
from attnviz.core.errors import AttnvizInputError
from attnviz.i18n import render, use_language
from attnviz.models.trainer import toy_plan, training
from attnviz.session.settings import Settings
from tests.apptest_helpers import charts, open_page, record_downloads
from tests.i18n_walker import CJK, chinese_outside, english_sentences, visible_texts
from tests.lazy import LazyModule

toy = LazyModule("attnviz.models.trainer.toy")      # torch with it: imported by the first test

pytestmark = pytest.mark.usefixtures("torch")    # one torch thread
PAGE = "pages/train.py"


@pytest.fixture(scope="module")
def shift_run():
    return toy.train("shift", steps=60)


def train_page(lang: str, **state) -> AppTest:
    return open_page(PAGE, params={"lang": lang}, **state)


# ---- the form's errors, in both languages --------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_value_out_of_range_is_named_in_the_pages_language(lang):
    at = train_page(lang, toy_length=99999)
    assert [e.value for e in at.error] == [
        render("train.error.range", lang, field=render("train.field.length", lang), low=3,
               high=16, value="99999")]
    train = [b for b in at.button if b.key == "toy_train"][0]
    assert train.disabled
    assert train.help == render("train.button.fix_first", lang)


@pytest.mark.slow
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_heads_that_do_not_divide_d_model_are_said_in_the_pages_language(lang):
    at = train_page(lang, toy_d_model=30, toy_heads=4)
    assert [e.value for e in at.error] == [
        render("train.error.heads_divide", lang, d_model=30, heads=4)]


@pytest.mark.slow
def test_induction_with_one_layer_is_refused_in_both_languages():
    for lang in ("en", "zh"):
        at = train_page(lang, toy_task="induction", toy_layers=1)
        assert [e.value for e in at.error] == [
            render("train.error.min_layers", lang, task=render("toy.task.induction.name", lang),
                   count=2, layers=1)]


@pytest.mark.slow
def test_steps_over_the_bound_in_chinese_name_the_most_allowed():
    at = train_page("zh", toy_task="induction", toy_length=16, toy_vocab=50, toy_layers=4,
                    toy_heads=8, toy_d_model=128, toy_steps=5000)
    assert [e.value for e in at.error] == [
        render("train.error.range_at_sizes", "zh", field=render("train.field.steps", "zh"),
               low=1, high=1000, value="5000")]


# ---- the plan and the pool say their words in the reader's language ----------------------------

def test_the_time_estimate_in_both_languages():
    for lang in ("en", "zh"):                # seconds rounded to 10 from 20 on, minutes up
        with use_language(lang):
            assert [toy_plan.describe_seconds(s) for s in (0.4, 4.2, 42, 150)] == [
                render("toy.time.under_a_second", lang), render("toy.time.seconds", lang, seconds=4),
                render("toy.time.seconds", lang, seconds=40),
                render("toy.time.minutes", lang, minutes=3)]


def test_a_verdict_and_its_advice_in_chinese():
    cfg = toy.make_config("reverse", length=16, vocab=50, d_model=4, heads=1, steps=600)
    history = [toy.Point(s, 3.9, 0.02) for s in range(0, 601, 60)]
    with use_language("zh"):
        v = toy_plan.verdict(cfg, history, 0.02)
    assert not v.learnt
    assert v.reason == render("toy.verdict.guessing", "zh", accuracy=0.02, bar=0.9, chance=0.02)
    tip = {lang: render("toy.tip.small_d_model", lang, d_model=4, vocab=50) for lang in ("en", "zh")}
    assert v.advice == render("toy.tip.sentence", "zh", text=tip["zh"])
    with use_language("en"):
        english = toy_plan.verdict(cfg, history, 0.02)
    assert english.advice == render("toy.tip.sentence", "en", text=tip["en"])   # d_model: as is


def test_the_pools_errors_are_ids_said_in_both_languages(monkeypatch):
    with pytest.raises(AttnvizInputError) as caught:
        training.TrainingPool(workers=0)
    assert caught.value.message.msg_id == "error.training.no_worker"
    assert caught.value.message.params == {"workers": 0}
    for lang in ("en", "zh"):
        with use_language(lang):
            assert str(caught.value) == render("error.training.no_worker", lang, workers=0)
    monkeypatch.setenv(training.WORKERS_VARIABLE, "two")
    with pytest.raises(AttnvizInputError) as bad:
        training.default_workers()
    with use_language("zh"):
        assert str(bad.value) == "ATTNVIZ_TRAIN_WORKERS 必须是 ≥ 1 的整数，而不是 'two'"
    big = toy.make_config("induction", length=16, vocab=50, layers=4, heads=8, d_model=128,
                          steps=5000)
    with pytest.raises(AttnvizInputError) as over:
        toy_plan.check_work(big)
    with use_language("zh"):
        assert str(over.value).startswith("在这些尺寸下，5,000 步超过了服务器一次训练的上限")
        assert "最多 1,000 步" in str(over.value)
    with use_language("en"):
        assert "4 layers, length 16" in str(over.value)


# ---- the finished run in Chinese ---------------------------------------------------------------

@pytest.mark.slow
def test_a_finished_run_in_chinese(shift_run):
    at = train_page("zh", toy_run=shift_run)
    assert at.title[0].value == "亲手训练注意力"
    assert at.success[0].value.startswith("学会了：留出序列上答对 ")
    assert at.subheader[0].value == f"右移：留出序列上答对 {shift_run.mean_accuracy:.0%}"
    frame = at.dataframe[0].value
    assert list(frame.index) == ["输入", "正确答案", "第 60 步的模型"]
    titles = [c["layout"]["title"]["text"] for c in charts(at)]
    assert titles == ["第 0 层，训练第 60 步后：注意力权重，每个头（因果掩码）"]
    texts = visible_texts(at)
    assert english_sentences(texts) == []
    assert chinese_outside(visible_texts(train_page("en", toy_run=shift_run))) == []


@pytest.mark.slow
def test_the_toy_models_answer_on_the_step_pages_in_chinese(shift_run):
    at = open_page("pages/steps.py", params={"lang": "zh"}, toy_run=shift_run, mode="Toy model")
    frame = next(d.value for d in at.dataframe if "用你编辑后的权重" in d.value.index)
    assert list(frame.index) == ["输入", "正确答案", "训练得到的权重", "用你编辑后的权重"]
    heading = [m.value for m in at.markdown if "模型的答案" in m.value]
    assert heading and "第 0 层训练第 60 步后的权重" in heading[0]


# ---- the HTML report, in the language it was made in -----------------------------------------

def _visible(page: str) -> str:
    page = re.sub(r"<(script|style)\b.*?</\1>", "", page, flags=re.S | re.I)
    page = re.sub(r"<annotation\b.*?</annotation>", "", page, flags=re.S)
    return re.sub(r"<[^>]+>", " ", page)


@pytest.mark.slow
def test_the_report_is_in_the_language_it_was_made_in():
    s = Settings(mode="Sentence", sentence="the cat sat", d_model=8, num_heads=2, causal=True)
    from attnviz.session.build import build_view

    view = build_view(s, {}, None)
    with use_language("zh"):
        zh = attnviz.report_html(view.trace, view.tokens_q, settings=s)
    with use_language("en"):
        en = attnviz.report_html(view.trace, view.tokens_q, settings=s)
    assert "<html lang='zh'>" in zh and "<html lang='en'>" in en
    shown = _visible(zh)
    for words in ("attnviz 报告", "输入", "设置", "这次计算", "句子：“the cat sat”", "查询：",
                  "因果掩码", "位置编码", "头数", "因果（每个词元只看到自己和前面的词元）"):
        assert words in shown, words
    assert re.search(r"缩放\s+÷ √d_k = ÷ √4 = × 0\.5\b", shown)      # d_k = 8 / 2 heads
    for msg_id, params in (("report.title", {}), ("report.this_trace", {}),
                           ("report.source.sentence", {"sentence": "the cat sat"}),
                           ("report.setting.causal", {})):
        words = render(msg_id, "en", **params)
        assert words in _visible(en) and words not in shown, words
    assert not CJK.search(_visible(en).replace("the cat sat", ""))


@pytest.mark.slow
def test_the_downloaded_report_is_in_the_language_of_the_page_it_was_asked_from(monkeypatch):
    # the download button makes its file when clicked, outside the script run: it must still
    # be in the language of the page that drew the button
    made = record_downloads(monkeypatch)
    at = open_page("pages/steps.py", params={"lang": "zh"}, sentence="the cat sat")
    report = made["attnviz_report.html"]()            # as Streamlit calls it: no script run
    report = report.decode() if isinstance(report, bytes) else report
    assert "<html lang='zh'>" in report
    assert "句子：“the cat sat”" in _visible(report) and "attnviz 报告" in report


# ---- the task names (issue 27.12) ----------------------------------------------------------------

ZH_TASK_NAMES = {"copy": "复制", "reverse": "反转", "sort": "排序", "shift": "右移",
                 "induction": "归纳"}


def test_the_task_names_are_chinese_in_chinese_and_the_link_keeps_the_id():
    """In 中文 the task picker, the page's first hint and the sizes' error name each task in
    Chinese (they said "reverse：把输入倒过来输出"); the widget's value stays the English id."""
    from attnviz.app import keys

    at = train_page("zh")
    picker = at.selectbox(key=keys.TOY_TASK)
    assert picker.value == "reverse"
    shown = picker.options
    assert len(shown) == len(ZH_TASK_NAMES)
    for option, (task, name) in zip(shown, ZH_TASK_NAMES.items()):
        assert option.startswith(name + "：") and task not in option, option
    english = [s for s in visible_texts(at)
               if re.search(r"\b(copy|reverse|sort|shift|induction)\b", s.text)]
    assert not english


def test_an_errors_task_is_named_in_the_readers_language():
    with pytest.raises(AttnvizInputError) as caught:
        toy.train("induction", layers=1, steps=1)
    with use_language("zh"):                      # an error is rendered when it is read
        said = str(caught.value)
    assert "归纳" in said and "induction" not in said
