"""The app in two languages (issue 21), in AppTest: the switch, the link, the browser's language
on a first visit, and the walk over every text of the converted pages and the sidebar.

A page converted later joins CONVERTED_PAGES (and its tabs, if any, a walk of their own).

Tests that only read a page share its run (`runs`: one per distinct opening in this module, so
the default page in each language, a sidebar form or a step's walk is run once for every test
reading it); a test that clicks, sets a widget or changes a catalogue opens its own."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

import attnviz
from attnviz import i18n
from attnviz.i18n import render, use_language
from attnviz.tutorials.presets import PRESET_NAMES, load_preset
from attnviz.app.pretrained import pretrained_view
from tests.apptest_helpers import (Runs, charts, check_all, no_exceptions, open_page,
                                   shown_tokens)
from tests.i18n_walker import CJK, Shown, chinese_outside, english_sentences, visible_texts
from tools import streamlit_compat

CONVERTED_PAGES = [
    "pages/home.py",
    "pages/pretrained.py",
    "pages/inputs.py",
    "pages/steps.py",
    "pages/multihead.py",
    "pages/generate.py",
    "pages/train.py",
    "pages/reading.py",
    "pages/trace.py",
    "pages/compare.py",
    "pages/atlas.py",
]
NAV = ["home", "inputs", "steps", "multihead", "experiments", "pretrained", "reading", "trace",
       "train", "generate", "compare", "atlas"]
NAV_ZH, NAV_EN = ([render(f"nav.{name}", lang) for name in NAV] for lang in ("zh", "en"))
TITLE_ZH, TITLE_EN = (render("home.title", lang) for lang in ("zh", "en"))


ZH = {"lang": "zh"}


@pytest.fixture(scope="module")
def runs():
    return Runs()


def nav_titles(at: AppTest) -> list[str]:
    return streamlit_compat.navigation_titles(at)


def language_switch(at: AppTest):
    found = [w for w in at.sidebar.button_group if w.key == "lang"]
    assert len(found) == 1, "one language switch in the sidebar"
    return found[0]


# ---- the switch and the link ---------------------------------------------------------------

def test_lang_zh_in_the_link_gives_chinese_titles_and_sidebar(runs):
    at = runs(params=ZH)
    assert nav_titles(at) == NAV_ZH
    assert at.title[0].value == TITLE_ZH
    assert [r.label for r in at.sidebar.radio] == ["输入"]
    assert at.sidebar.radio[0].options[:2] == ["句子", "教程示例"]
    assert dict(at.query_params)["lang"] == "zh"


@pytest.mark.slow
def test_a_chinese_page_starts_from_a_chinese_sentence_which_its_link_keeps(runs):
    """Issue 34.10: in 中文 the default sentence is Chinese (tutorial 000's, translated), not
    English; the link carries it, so an English page opened from it shows the same tokens.
    Only the default: an English page still starts from the English one."""
    zh = runs(params=ZH)
    assert shown_tokens(zh) == ["动", "物", "没", "有", "过", "马", "路", "，", "因", "为", "它",
                                "太", "累", "了"]
    link = dict(zh.query_params)
    assert link["sentence"] == "动物没有过马路，因为它太累了"
    opened = open_page(params={**link, "lang": "en"})
    assert shown_tokens(opened) == shown_tokens(zh)
    assert shown_tokens(runs())[:2] == ["The", "animal"]


@pytest.mark.slow
def test_the_switch_changes_the_language_and_the_link():
    at = open_page()
    assert nav_titles(at) == NAV_EN and at.title[0].value == TITLE_EN
    assert "lang" not in dict(at.query_params)            # English: the browser's (none) own
    assert language_switch(at).options == ["English", "中文"]
    language_switch(at).set_value("zh").run()
    assert at.session_state["lang"] == "zh"
    assert at.title[0].value == TITLE_ZH
    # a fresh session as the click left the link: its navigation and link (the browser test
    # clicks it)
    after = open_page(lang="zh")
    assert nav_titles(after) == NAV_ZH and dict(after.query_params)["lang"] == "zh"
    back = open_page(lang="en")
    assert nav_titles(back) == NAV_EN and "lang" not in dict(back.query_params)


@pytest.mark.slow
def test_a_first_visit_follows_the_browsers_language_and_a_link_overrides_it():
    at = open_page(locale="zh-CN")
    assert nav_titles(at) == NAV_ZH and at.session_state["lang"] == "zh"
    assert "lang" not in dict(at.query_params)            # the browser's own: nothing to carry
    chose = open_page(locale="zh-CN", lang="en")                # after clicking English
    assert nav_titles(chose) == NAV_EN
    assert dict(chose.query_params) == {"lang": "en"}     # differs from the browser: carried
    again = open_page(locale="zh-CN", params=dict(chose.query_params))   # a reload, or a restart
    assert nav_titles(again) == NAV_EN and again.session_state["lang"] == "en"
    assert open_page(locale="de-DE").session_state["lang"] == "en"


@pytest.mark.slow
def test_the_language_holds_on_every_page_with_its_sidebar(runs):
    for page in ("pages/steps.py", "pages/multihead.py", "pages/inputs.py"):
        at = runs(page, params=ZH)
        assert nav_titles(at) == NAV_ZH
        assert [e.label for e in at.sidebar.expander] == ["模型", "选项"], page
        assert language_switch(at).value == "zh"


@pytest.mark.slow
def test_the_train_page_has_the_switch_and_keeps_the_link(runs):
    at = runs("pages/train.py")
    assert "own settings" in at.sidebar.caption[0].value
    assert language_switch(at).value == "en"
    at = open_page("pages/train.py", lang="zh")
    assert at.sidebar.caption[0].value == i18n.render("sidebar.own_settings", "zh")
    # the language, and the Chinese default sentence (an English page would not start from it)
    assert dict(at.query_params) == {"lang": "zh", "sentence": "动物没有过马路，因为它太累了"}


@pytest.mark.slow
def test_mode_values_stay_language_independent_in_state_and_link():
    at = open_page(params={"lang": "zh"})
    radio = at.sidebar.radio[0]
    assert radio.value == "Sentence" and radio.options[1] == "教程示例"
    with use_language("zh"):          # AppTest calls the options' format_func in this thread
        radio.set_value("Preset").run()
    assert at.session_state["mode"] == "Preset"
    at = open_page(params={"lang": "zh"}, mode="Preset")
    assert dict(at.query_params)["mode"] == "Preset"
    assert at.sidebar.radio[0].value == "Preset"
    assert at.sidebar.selectbox[0].label == "教程示例"
    assert at.sidebar.selectbox[0].value == "three_inputs"


@pytest.mark.slow
def test_a_lang_no_catalogue_has_falls_back_with_a_notice():
    at = open_page(params={"lang": "fr"})
    assert nav_titles(at) == NAV_EN
    assert any("lang=“fr”" in w.value for w in at.sidebar.warning)
    zh = open_page(params={"lang": "xx"}, locale="zh-TW")
    assert nav_titles(zh) == NAV_ZH
    assert any("lang=“xx”" in w.value and "浏览器" in w.value for w in zh.sidebar.warning)


@pytest.mark.slow
def test_the_pages_numbers_do_not_depend_on_the_language(runs):
    en = runs()
    zh = open_page(params={"lang": "zh", "sentence": en.session_state["sentence"]})   # the same
    assert shown_tokens(en) == shown_tokens(zh)
    assert [c["data"][0]["z"] for c in charts(en)] == [c["data"][0]["z"] for c in charts(zh)]


EVERY_PAGE = ["pages/home.py", "pages/inputs.py", "pages/steps.py", "pages/multihead.py",
              "pages/experiments.py", "pages/pretrained.py", "pages/reading.py", "pages/train.py",
              "pages/generate.py", "pages/compare.py", "pages/atlas.py"]


@pytest.mark.slow
@pytest.mark.parametrize("page", EVERY_PAGE)
def test_every_page_runs_in_chinese_with_every_message_it_asks_for(page, runs):
    # strict in the tests (conftest): a message id a page (or a figure it draws) asks for and no
    # catalogue has would raise here
    at = runs(page, params=ZH)
    assert nav_titles(at) == NAV_ZH and language_switch(at).value == "zh"
    assert at.title and not at.error
    # Train and Head atlas draw their charts once trained or built
    assert charts(at) or page in ("pages/train.py", "pages/atlas.py")


# ---- the walker: no English sentence in Chinese, no Chinese in English -------------------------

def allowed_chinese() -> list[str]:
    """What may be Chinese in English: the presets' own words (their Chinese tokens, titles
    and articles) — the language switch's 中文 is allowed by the walker itself."""
    out = []
    for name in PRESET_NAMES:
        p = load_preset(name)
        out += [p.title, p.description, p.tutorial, *p.tokens, *p.key_tokens,
                *p.tutorial.split(" / ")]
    return out


SIDEBAR_STATES = {   # the sidebar in each of its forms
    "sentence": {},
    "preset with rounded weights": {"mode": "Preset", "preset": "three_inputs"},
    "preset, Q K V given": {"mode": "Preset", "preset": "two_queries"},
    "preset, raw X": {"mode": "Preset", "preset": "zao_shang_hao"},
    "matrix X": {"mode": "Matrix X"},
    "Q, K, V": {"mode": "Q, K, V"},
    "toy model, none trained": {"mode": "Toy model"},
    "d_model not dividing": {"d_model": 18},
    "d_k by hand": {"d_k": 3},
}


def page_state(page: str) -> dict:
    """What a page needs in the session to show all its parts: Train, a trained run; Trace
    the answer, a language model; Head atlas, an atlas built (of texts in neither language:
    the page shows their words)."""
    if page == "pages/trace.py":
        return {"model": "smollm2"}
    if page == "pages/atlas.py":
        return built_atlas()
    if page != "pages/train.py":
        return {}
    from attnviz.models.trainer import toy

    if "run" not in _TRAINED:
        _TRAINED["run"] = toy.train("shift", steps=60)
    return {"toy_run": _TRAINED["run"]}


_TRAINED: dict = {}


def built_atlas() -> dict:
    """The Head atlas page's state for a corpus whose atlas is built on this server (once)."""
    from attnviz.app import keys
    from attnviz.models import heavy

    state = {"at_corpus": "custom", "at_texts": "1 2 3 4 5 6 1 2 3 4 5 6\n\n7 8 9 7 8 9 7 8 9"}
    if "atlas" not in _TRAINED:
        at = open_page("pages/atlas.py", **state)
        [build] = [b for b in at.button if b.key == keys.AT_BUILD]
        build.click().run()
        assert heavy.default_queue().wait_idle(300)
        _TRAINED["atlas"] = True
    return state


@pytest.mark.slow
@pytest.mark.parametrize("page", CONVERTED_PAGES)
@pytest.mark.parametrize("sentence", ["The animal didn't cross the street because it was too "
                                      "tired", "早上好，今天天气很好"])
def test_a_converted_page_in_chinese_has_no_english_sentence(page, sentence):
    at = open_page(page, params={"lang": "zh"}, sentence=sentence, **page_state(page))
    texts = visible_texts(at)
    assert len(texts) > 40 and any(t.where.startswith("chart") for t in texts)
    assert english_sentences(texts, ignore=page_tokens(at, sentence)) == []


def page_tokens(at: AppTest, sentence: str) -> list[str]:
    """The tokens a page shows: Home's token line, else the sentence's tokens."""
    if any(m.value.lstrip("\u2068").startswith("`") for m in at.markdown):
        return shown_tokens(at)
    return attnviz.tokenize(sentence)


@pytest.mark.slow
@pytest.mark.parametrize("page", CONVERTED_PAGES)
@pytest.mark.parametrize("sentence", ["The animal didn't cross the street because it was too "
                                      "tired", "早上好，今天天气很好"])
def test_a_converted_page_in_english_has_no_chinese_outside_tokens(page, sentence):
    at = open_page(page, sentence=sentence, **page_state(page))
    texts = visible_texts(at)
    assert chinese_outside(texts, ignore=[*page_tokens(at, sentence), *allowed_chinese()]) == []


@pytest.mark.slow
@pytest.mark.parametrize("state", SIDEBAR_STATES.values(), ids=SIDEBAR_STATES.keys())
def test_the_sidebar_in_chinese_has_no_english_sentence(state, runs):
    at = runs(params=ZH, **state)
    texts = visible_texts(at, at.sidebar)
    assert len(texts) > 10
    assert english_sentences(texts, ignore=allowed_chinese()) == []


@pytest.mark.slow
@pytest.mark.parametrize("state", SIDEBAR_STATES.values(), ids=SIDEBAR_STATES.keys())
def test_the_sidebar_in_english_has_no_chinese(state, runs):
    at = runs(**state)
    assert chinese_outside(visible_texts(at, at.sidebar), ignore=allowed_chinese()) == []


@pytest.mark.slow
@pytest.mark.parametrize("page", ["pages/pretrained.py", "pages/train.py"])
def test_the_sidebar_of_a_page_with_its_own_settings_in_chinese(page, runs):
    at = runs(page, params=ZH)
    texts = visible_texts(at, at.sidebar)
    assert english_sentences(texts) == []
    english = runs(page)
    assert chinese_outside(visible_texts(english, english.sidebar)) == []


@pytest.mark.slow
def test_the_walker_finds_what_it_looks_for(monkeypatch, runs):
    # the walk over a page in Chinese finds English left in it (here a Chinese message made
    # English again), and over Chinese tokens in English finds them unless told they are tokens
    at = runs("pages/steps.py", params=ZH)
    assert english_sentences(visible_texts(at, at.main)) == []
    monkeypatch.setitem(i18n.catalogue("zh"), "steps.vector.subheader",
                        i18n.Entry("Follow one token"))
    at = open_page("pages/steps.py", params={"lang": "zh"})
    assert english_sentences(visible_texts(at, at.main))
    en = runs(mode="Preset", preset="zao_shang_hao")
    assert chinese_outside(visible_texts(en, en.sidebar))
    assert not chinese_outside(visible_texts(en, en.sidebar), ignore=allowed_chinese())
    assert english_sentences([Shown("x", "词元 `the cat sat` 和 $a + b = c$")]) == []
    assert english_sentences([Shown("x", "d_model 18 does not divide")]) != []


# ---- the Experiments page, every tab (each is drawn only when open) ------------------------------

EXPERIMENT_TABS = {   # the tab (its label's id experiments.tab.<name>), a variant, its state
    "scaling": {}, "tied": {}, "tied, your X": {"exp_tied_source": "your input X"},
    "raw": {}, "raw, your X": {"exp_raw_source": "your input X"},
    "order": {}, "masks": {"exp_len": 4}, "cross": {}, "bug": {},
    "rope": {}, "rope, random": {"exp_rope_source": "random"}, "sink": {},
    # the decoder designs (issue 38): on SmolLM2 (no window, no QK-norm) and on Gemma 3
    "window": {}, "window, gemma": {"decoder": "gemma3-270m"},
    "qk": {}, "qk, gemma": {"decoder": "gemma3-270m"}, "kv": {},
}
DECODER_TEXT = "The capital of France is"


def experiments_tab(label: str, lang: str | None, sentence: str) -> AppTest:
    tab = render(f"experiments.tab.{label.split(', ')[0]}", "en")   # the tab's state: its
    return open_page("pages/experiments.py", params={"lang": lang} if lang else None,  # label
                     sentence=sentence, experiment=tab, **EXPERIMENT_TABS[label])


def experiments_tokens(sentence: str) -> list[str]:
    """The tokens the tabs may show: the sidebar's sentence's, SmolLM2's of its text, the
    Cross-attention tab's second sentence's and the tutorials' presets'."""
    from attnviz import DecoderModel, tokenize

    return [*tokenize(sentence), *DecoderModel.load().tokenize(DECODER_TEXT),
            *tokenize("Le chat est assis"), *allowed_chinese()]


@pytest.mark.slow
@pytest.mark.parametrize("label", EXPERIMENT_TABS)
@pytest.mark.parametrize("sentence", ["The animal didn't cross the street because it was too "
                                      "tired", "早上好，今天天气很好"])
def test_every_experiments_tab_in_chinese_has_no_english_sentence(label, sentence):
    at = experiments_tab(label, "zh", sentence)
    assert not at.error, [e.value for e in at.error]
    texts = visible_texts(at)
    assert len(texts) > 30 and any(t.where.startswith("chart") for t in texts)
    assert any(CJK.search(t.text) for t in texts if t.where.startswith("chart"))
    assert english_sentences(texts, ignore=experiments_tokens(sentence)) == []


@pytest.mark.slow
@pytest.mark.parametrize("label", EXPERIMENT_TABS)
@pytest.mark.parametrize("sentence", ["The animal didn't cross the street because it was too "
                                      "tired", "早上好，今天天气很好"])
def test_every_experiments_tab_in_english_has_no_chinese_outside_tokens(label, sentence):
    at = experiments_tab(label, None, sentence)
    assert not at.error, [e.value for e in at.error]
    assert chinese_outside(visible_texts(at), ignore=experiments_tokens(sentence)) == []


@pytest.mark.slow
def test_the_experiments_walk_finds_what_it_looks_for():
    # the same walk over the tabs drawn in English finds their English sentences
    for tab in ("scaling", "rope", "sink"):
        at = open_page("pages/experiments.py",
                       experiment=render(f"experiments.tab.{tab}", "en"))      # drawn in English
        assert english_sentences(visible_texts(at), ignore=experiments_tokens("x")), tab

READING_TABS = {name: tuple(render(f"reading.tab.{name}", lang) for lang in ("en", "zh"))
                for name in ("rollout", "value", "stats", "ablation", "lens")}


# every tab of each model (the logit lens needs a language-model head: MiniLM has no such tab)
READING_CASES = [(tab, model) for model in ("minilm", "smollm2") for tab in READING_TABS
                 if tab != "lens" or model == "smollm2"]


@pytest.mark.slow
@pytest.mark.parametrize("tab, model", READING_CASES, ids=[f"{t}-{m}" for t, m in READING_CASES])
def test_every_tab_of_read_the_model_in_both_languages(tab, model):
    english, chinese = READING_TABS[tab]
    # a tab opened in one language stays open in the other (its label is in the session)
    zh = open_page("pages/reading.py", params={"lang": "zh"}, model=model, rd_view=english)
    assert [t.label for t in zh.tabs] == [c for name, (_, c) in READING_TABS.items()
                                          if name != "lens" or model == "smollm2"]
    assert zh.session_state["rd_view"] == chinese
    texts = visible_texts(zh)
    assert len(texts) > 30 and any(t.where.startswith("chart") for t in texts)
    assert english_sentences(texts, ignore=shown_tokens(zh)) == []
    en = open_page("pages/reading.py", model=model, rd_view=chinese)
    assert en.session_state["rd_view"] == english
    assert chinese_outside(visible_texts(en),
                           ignore=[*shown_tokens(en), *allowed_chinese()]) == []


TRACE_CASES = [("lens", "logit"), ("lens", "tuned"), ("patching", "logit"), ("flow", "logit")]


@pytest.mark.slow
@pytest.mark.parametrize("tab, lens", TRACE_CASES, ids=[f"{t}-{k}" for t, k in TRACE_CASES])
def test_every_tab_of_trace_the_answer_in_both_languages(tab, lens):
    """Each tab drawn whole (patching: a patched view, Patch pressed and the server's queue
    waited for; the lens tab with the logit lens and with the tuned lens and its KL chart), in
    Chinese on the Chinese prompt pair and in English on the English one."""
    from attnviz.i18n import render

    english, chinese = render(f"trace.tab.{tab}", "en"), render(f"trace.tab.{tab}", "zh")
    zh = patched(open_page("pages/trace.py", params={"lang": "zh"}, model="smollm2",
                           sentence="早上好，今天天气很好", tr_view=english, tr_ran=True,
                           tr_pair="weekday_zh", tr_where="mlp", lens_kind=lens), "zh")
    assert zh.session_state["tr_view"] == chinese
    texts = visible_texts(zh)
    assert len(texts) > 20 and any(t.where.startswith("chart") for t in texts)
    assert english_sentences(texts, ignore=code_spans(zh)) == []
    en = patched(open_page("pages/trace.py", model="smollm2", tr_view=chinese, tr_ran=True,
                           tr_pair="ioi", tr_where="mlp", lens_kind=lens))
    assert en.session_state["tr_view"] == english
    assert chinese_outside(visible_texts(en),
                           ignore=[*code_spans(en), *allowed_chinese()]) == []


def patched(at: AppTest, lang: str = "en") -> AppTest:
    """The patching tab's Patch pressed (if the page shows it) and the page again once the
    server's queue has computed it: a link never patches by itself."""
    from attnviz.models import heavy

    found = [b for b in at.button if b.key == "tr_patch"]
    if found:
        with use_language(lang):        # AppTest formats the widgets' values in this thread
            found[0].click().run()
            assert heavy.default_queue().wait_idle(300)
            at.run()
        no_exceptions(at)
    return at


def code_spans(at: AppTest) -> list[str]:
    """Every token the page writes in its token lines (the sentence's, both prompts')."""
    import re

    return [m.group(2).strip() for line in at.markdown
            for m in re.finditer(r"(`+)(.+?)(?<!`)\1(?!`)", line.value)]


# ---- caches hold a language's words only under that language -----------------------------------

def test_shared_figures_are_kept_per_language(monkeypatch):
    monkeypatch.setattr(pretrained_view, "_sentence_and_limit", lambda: ("a cache test", 8))
    built = []

    def build():
        built.append(i18n.language())
        return {"title": i18n.t("figure.axis.query")}

    with use_language("en"):
        assert pretrained_view.shared_figure("i18n_test", build)["title"] == "query"
    with use_language("zh"):
        assert pretrained_view.shared_figure("i18n_test", build)["title"] == "查询"
        assert pretrained_view.shared_figure("i18n_test", build)["title"] == "查询"
    assert built == ["en", "zh"]                    # built once per language, then shared


# ---- Step by step, Multi-head, Inputs & weights: every step, tab and toggle (issue 21) ---------

SENTENCE = "The animal didn't cross the street because it was too tired"
STEP_NAMES = ["x", "q", "k", "v", "scores", "scaled_scores", "weights", "weighted_values", "z",
              "concat", "output"]
TOGGLES = {"vector_view": True, "vector_shown": True,
           **{f"step_table_{n}_shown": True for n in STEP_NAMES}}


def walk_states(lang: str):
    """(page, state) of every step (vector view and tables on), every Multi-head tab and every
    editable matrix, the tabs named as the language shows them."""
    for name in STEP_NAMES:
        yield "pages/steps.py", {"step": name, **TOGGLES}
    with use_language(lang):
        for tab in ("multihead.tab.z", "multihead.tab.concat", "multihead.tab.output",
                    "multihead.tab.second"):
            yield "pages/multihead.py", {"mh_section": i18n.t(tab), "mh_compare": "The cat",
                                         "mh_z_table_shown": True,
                                         "mh_concat_table_shown": True,
                                         "mh_output_table_shown": True}
    for matrix in ("x", "w_q", "w_o"):
        yield "pages/inputs.py", {"matrix": matrix}


@pytest.mark.slow
@pytest.mark.parametrize("lang", ["zh", "en"])
def test_every_step_tab_and_toggle_speaks_one_language(lang, runs):
    seen_charts, failures = set(), []
    for page, state in walk_states(lang):
        at = runs(page, params={"lang": lang}, sentence=SENTENCE, **state)
        texts = visible_texts(at)
        seen_charts |= {t.text for t in texts if t.where.startswith("chart")}
        tokens = attnviz.tokenize(SENTENCE) + attnviz.tokenize("The cat")
        if lang == "zh":
            wrong = english_sentences(texts, ignore=tokens)
        else:
            wrong = chinese_outside(texts, ignore=[*tokens, *allowed_chinese()])
        if wrong:
            failures.append(f"{page} {state} ({lang}): {wrong}")
    check_all(failures)
    # the vector view's and the tabs' charts were drawn, in the language asked for
    want = {"zh": ["查询", "加权和", "拼接", "第二个句子"],
            "en": ["Query", "their sum", "Concatenation", "Second sentence"]}[lang]
    for word in want:
        assert any(word in text for text in seen_charts), (word, sorted(seen_charts)[:20])


@pytest.mark.slow
def test_step_by_step_cites_tutorial_000s_step_in_both_languages(runs):
    # on the walk's runs of each step (its sentence, the vector view and tables shown): the
    # citation follows the step and the language alone
    failures = []
    for lang, cite in (("zh", "图解Transformer 第 {} 步"), ("en", "The Illustrated Transformer, "
                                                              "step {}")):
        for name, number in (("q", 1), ("scores", 2), ("scaled_scores", 3), ("weights", 4),
                             ("weighted_values", 5), ("z", 6), ("concat", None)):
            at = runs("pages/steps.py", params={"lang": lang}, sentence=SENTENCE,
                      step=name, **TOGGLES)
            captions = [c.value for c in at.caption]
            cited = [c for c in captions if "Transformer" in c]
            if number is None and cited:
                failures.append(f"steps {name} ({lang}) cites no step, yet: {cited}")
            if number is not None and not any(cite.format(number) in c for c in cited):
                failures.append(f"steps {name} ({lang}) cites step {number}: {captions}")
    check_all(failures)


# ---- Step by step on a Gemma 3 layer: the steps its designs add (issue 38) ----------------------

GEMMA_STEPS = ["embedded", "k", "q_normed", "q_rotated", "scaled_scores", "masked_scores",
               "output_normed"]


@pytest.mark.slow
@pytest.mark.parametrize("lang", ["zh", "en"])
def test_every_gemma_3_step_speaks_one_language(lang, runs):
    """Gemma 3 270M's layer 5 (global) and 0 (local) on Step by step, each step its designs
    add or reword, in one language (its tokens aside)."""
    from attnviz.models.decoders.decoder import DecoderModel

    tokens = list(DecoderModel.load(name="gemma3-270m").run(SENTENCE).tokens)
    failures = []
    for layer in (0, 5):
        for name in GEMMA_STEPS:
            at = runs("pages/steps.py", params={"lang": lang}, mode="Pretrained model",
                      model="gemma3-270m", sentence=SENTENCE, layer=layer, step=name)
            texts = visible_texts(at)
            wrong = english_sentences(texts, ignore=tokens) if lang == "zh" else \
                chinese_outside(texts, ignore=[*tokens, *allowed_chinese()])
            if wrong:
                failures.append(f"layer {layer} {name} ({lang}): {wrong}")
    check_all(failures)
