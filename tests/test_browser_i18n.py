"""中文 / English in headless Chromium (issue 21): Home in Chinese from the link, nothing
clipped at a wide and a small window, the switch in the sidebar, the browser's own language on
a first visit, the choice kept through a reload and a page change. The app runs with
ATTNVIZ_I18N_STRICT=1 (the session's `app_url`): a missing message would be an exception on the
page. Screenshots go to
$ATTNVIZ_SCREENSHOTS (default: a temporary folder). Under CI=true these never skip."""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest

from attnviz.i18n import render
from tests.browser_helpers import (SharedContext, a_run, exceptions, in_each_size, open_tab,
                                   wait_for_app, wait_for_idle, wait_for_layout)
from tests.test_browser_layout import layout_problems

pytestmark = pytest.mark.browser

SIZES = [(1400, 1000), (1024, 768)]
TITLE_ZH, TITLE_EN = (render("home.title", lang) for lang in ("zh", "en"))
NAV_ZH = ["首页", "输入与权重", "逐步计算", "多头注意力", "实验", "预训练模型", "解读模型", "追踪答案",
          "训练", "生成", "对比模型", "注意力头图谱"]
SHOTS = Path(os.environ.get("ATTNVIZ_SCREENSHOTS") or tempfile.mkdtemp(prefix="attnviz_i18n_"))

# Text cut off by its box: wider than the box shows (an ellipsis, or hidden overflow)
CLIPPED_JS = """() => {
    const sel = ['h1', 'h2', 'h3', '[data-testid="stWidgetLabel"] p', 'button p',
                 '[data-testid="stPageLink"] p',
                 '[data-testid="stExpander"] summary p', '[data-testid="stCaptionContainer"]'];
    const out = [];
    document.querySelectorAll(sel.join(',')).forEach(el => {
        const r = el.getBoundingClientRect();
        if (r.width === 0 || el.clientWidth === 0 || el.textContent.trim() === '') return;
        if (el.scrollWidth > el.clientWidth + 1)
            out.push(el.textContent.trim().slice(0, 60));
    });
    return out;
}"""


def open_home(browser, url: str, heading: str, *, size=(1400, 1000), locale="en-US"):
    context = SharedContext(browser, viewport={"width": size[0], "height": size[1]},
                                  locale=locale)
    page = context.new_page()
    page.goto(url)
    page.get_by_role("heading", name=heading).first.wait_for(timeout=90_000)
    wait_for_app(page, timeout_ms=90_000)
    wait_for_layout(page)                          # plotly's second layout pass (automargin)
    return context, page


def shoot(page, name: str) -> None:
    """Screenshots of the window at the top of the page and scrolled to its end (the page
    scrolls inside Streamlit's main block, which a full-page shot does not see)."""
    page.locator("h1").first.scroll_into_view_if_needed()
    page.screenshot(path=str(SHOTS / f"{name}_top.png"))
    page.locator('[data-testid="stExpander"]').last.scroll_into_view_if_needed()
    page.screenshot(path=str(SHOTS / f"{name}_end.png"))


def lang_in(page) -> str | None:
    return parse_qs(urlparse(page.url).query).get("lang", [None])[0]


def nav_links(page) -> list[str]:
    """The navigation's page titles (each link's text starts with its icon's ligature name)."""
    return [re.sub(r"^[a-z_]+", "", text) for text in page.eval_on_selector_all(
        '[data-testid="stSidebar"] .st-key-nav_links [data-testid="stPageLink"]',
        "els => els.map(e => e.textContent.trim())")]


def click_language(page, name: str, heading: str) -> None:
    with a_run(page):
        page.locator('[data-testid="stSidebar"]').get_by_role("radio", name=name,
                                                              exact=True).click()
    page.get_by_role("heading", name=heading).first.wait_for(timeout=60_000)
    wait_for_app(page)
    wait_for_layout(page)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_home_in_chinese_fits_and_switches_to_english(browser, app_url, size):
    context, page = open_home(browser, f"{app_url}/?lang=zh", TITLE_ZH, size=size)
    try:
        assert nav_links(page) == NAV_ZH
        shoot(page, f"home_zh_{size[0]}x{size[1]}")
        assert not exceptions(page)
        assert layout_problems(page) == []
        assert page.evaluate(CLIPPED_JS) == []
        sidebar = page.locator('[data-testid="stSidebar"]').inner_text()
        assert render("sidebar.language.label", "zh") in sidebar and \
            render("sidebar.max_tokens.label", "zh") in sidebar and \
            render("sidebar.max_tokens.label", "en") not in sidebar
        click_language(page, "English", TITLE_EN)
        assert nav_links(page)[:3] == [render(f"nav.{name}", "en")
                                       for name in ("home", "inputs", "steps")]
        assert lang_in(page) is None                # English is this browser's own language
        shoot(page, f"home_en_{size[0]}x{size[1]}")
        assert not exceptions(page) and layout_problems(page) == []
        assert page.evaluate(CLIPPED_JS) == []
    finally:
        context.close()


def test_a_chinese_browser_gets_chinese_and_the_choice_survives_reload_and_pages(
        browser, app_url):
    context, page = open_home(browser, app_url, TITLE_ZH, locale="zh-CN")
    try:
        assert lang_in(page) is None and nav_links(page) == NAV_ZH
        click_language(page, "English", TITLE_EN)
        page.wait_for_function("() => location.search.includes('lang=en')", timeout=30_000)
        page.reload()
        page.get_by_role("heading", name=TITLE_EN).first.wait_for(timeout=60_000)
        click_language(page, "中文", TITLE_ZH)
        page.wait_for_function("() => !location.search.includes('lang=')", timeout=30_000)
    finally:
        context.close()
    context, page = open_home(browser, app_url, TITLE_EN)        # an English browser
    try:
        click_language(page, "中文", TITLE_ZH)
        page.wait_for_function("() => location.search.includes('lang=zh')", timeout=30_000)
        page.get_by_role("link", name="逐步计算").first.click()
        page.wait_for_url("**/steps**", timeout=30_000)
        wait_for_app(page)
        page.locator('[data-testid="stSidebar"]').get_by_text("词元上限").wait_for(
            timeout=30_000)
        assert nav_links(page) == NAV_ZH
        page.reload()
        page.locator('[data-testid="stSidebar"]').get_by_text("词元上限").wait_for(
            timeout=60_000)
        assert lang_in(page) == "zh" and not exceptions(page)
    finally:
        context.close()


SELECTED_PRESET_JS = """(start) => Array.from(document.querySelectorAll(
    '[data-testid="stSidebar"] [data-testid="stSelectbox"] input[role="combobox"]'))
    .some(el => el.value.startsWith(start))"""


def test_after_a_switch_the_choices_show_in_the_new_language(browser, app_url):
    # the browser matches a widget's value to the label it drew last: without the values
    # given again on the switch, the preset would keep its Chinese title and the input radio
    # would show nothing selected
    url = f"{app_url}/?lang=zh&mode=Preset&preset=two_queries"
    context, page = open_home(browser, url, TITLE_ZH)
    try:
        sidebar = page.locator('[data-testid="stSidebar"]')
        preset = sidebar.locator('[data-testid="stSelectbox"] input[role="combobox"]').first
        assert preset.input_value() == render("preset.two_queries.short", "zh")
        assert sidebar.get_by_role("radio", name="教程示例", exact=True).is_checked()
        click_language(page, "English", TITLE_EN)
        page.wait_for_function(SELECTED_PRESET_JS, arg=render("preset.two_queries.short", "en"),
                               timeout=30_000)
        assert sidebar.get_by_role("radio", name="Preset", exact=True).is_checked()
        click_language(page, "中文", TITLE_ZH)
        page.wait_for_function(SELECTED_PRESET_JS, arg="两个查询", timeout=30_000)
        assert sidebar.get_by_role("radio", name="教程示例", exact=True).is_checked()
        page.screenshot(path=str(SHOTS / "preset_after_switches.png"))
        assert not exceptions(page)
    finally:
        context.close()


# ---- Step by step, Multi-head, Inputs & weights in Chinese (issue 21) ---------------------------

CHART_TITLES_JS = """() => Array.from(document.querySelectorAll('.js-plotly-plot .gtitle'))
    .map(el => el.textContent)"""
ENGLISH_RUN = re.compile(r"\b[A-Za-z]{2,}(?:[ ,]+[A-Za-z]{2,}){2,}\b")   # three English words


def open_page(browser, url: str, heading: str, size):
    context = SharedContext(browser, viewport={"width": size[0], "height": size[1]},
                                  locale="en-US")
    page = context.new_page()
    page.goto(url)
    page.get_by_role("heading", name=heading).first.wait_for(timeout=90_000)
    wait_for_app(page, timeout_ms=90_000)
    wait_for_layout(page)
    return context, page


def check_chinese(page, name: str) -> None:
    """Nothing clipped or overlapping, no exception, chart titles in Chinese, no English
    sentence in the main block (the sentence's own tokens aside)."""
    page.screenshot(path=str(SHOTS / f"{name}.png"))
    assert not exceptions(page)
    assert layout_problems(page) == []
    assert page.evaluate(CLIPPED_JS) == []
    titles = [t for t in page.evaluate(CHART_TITLES_JS) if t.strip()]
    assert titles and all(re.search(r"[\u4e00-\u9fff]", t) or not ENGLISH_RUN.search(t)
                          for t in titles), titles
    main = page.locator('[data-testid="stMain"]').inner_text()
    sentence = "The animal didn't cross the street because it was too tired"
    assert ENGLISH_RUN.findall(main.replace(sentence, " ")) == [], name


PAGES_ZH = [("steps", "逐步计算", "逐步计算"), ("multihead", "多头注意力", "多头注意力"),
            ("inputs", "输入与权重", "输入与权重")]


def check_chinese_in_both_sizes(page, name: str, scroll=None) -> None:
    """check_chinese in the window's size, then in the other one (in_each_size): `scroll`, a
    locator, is brought into view in each."""
    for width, height in in_each_size(page, SIZES):
        if scroll is not None:
            scroll.scroll_into_view_if_needed()
        check_chinese(page, f"{name}_{width}x{height}")


@pytest.mark.parametrize("path, heading, _", PAGES_ZH, ids=[p[0] for p in PAGES_ZH])
def test_the_step_pages_in_chinese_fit(browser, app_url, path, heading, _):
    """Each page opened once, each of its views looked at in both window sizes."""
    context, page = open_page(browser, f"{app_url}/{path}?lang=zh", heading, SIZES[0])
    tag = f"{path}_zh"
    try:
        check_chinese_in_both_sizes(page, f"{tag}_top")
        if path == "steps":                     # the cited step, then the vector view
            assert "图解Transformer 第 1 步" not in page.inner_text("body")   # X: no step
            page.get_by_role("button", name="下一步 ▶").click()
            page.get_by_text("图解Transformer 第 1 步").first.wait_for(timeout=30_000)
            page.get_by_text("显示向量视图").first.click()
            page.get_by_text("每个值向量 × 它的权重").first.wait_for(timeout=30_000)
            wait_for_app(page)
            wait_for_layout(page)
            check_chinese_in_both_sizes(page, f"{tag}_vector",
                                        page.get_by_text("每个值向量 × 它的权重").first)
        elif path == "multihead":               # every tab
            for tab in ("拼接", "W_O 与输出", "第二个句子"):
                open_tab(page, tab)
                wait_for_layout(page)
                check_chinese_in_both_sizes(page, f"{tag}_{tab.split()[0]}",
                                            page.get_by_role("tab", name=tab))
        else:
            check_chinese_in_both_sizes(page, f"{tag}_editor",
                                        page.get_by_text("粘贴或上传").first)
    finally:
        context.close()


# ---- Generate and Train in Chinese (issue 21): the two pages with their own settings ----------

def test_generate_and_train_in_chinese_fit(browser, app_url):
    """Both sizes (each page opened once, then the window resized): nothing clipped or
    overlapping, no exception, no English sentence in the page (Generate's English prompt and
    its tokens aside); Generate's chart titles Chinese."""
    prompt = "The capital of France is"
    for path, heading in (("generate", "逐个词元生成"), ("train", "亲手训练注意力")):
        context = SharedContext(browser, viewport=dict(zip(("width", "height"), SIZES[0])),
                                locale="en-US")
        page = context.new_page()
        try:
            page.goto(f"{app_url}/{path}?lang=zh")
            page.get_by_role("heading", name=heading).first.wait_for(timeout=120_000)
            if path == "generate":                   # Train has no chart before a run
                page.locator(".js-plotly-plot .main-svg").first.wait_for(timeout=120_000)
            wait_for_idle(page, 120_000)
            wait_for_layout(page)
            for size in in_each_size(page, SIZES):
                page.screenshot(path=str(SHOTS / f"{path}_zh_{size[0]}x{size[1]}.png"))
                assert not exceptions(page)
                assert layout_problems(page) == []
                assert page.evaluate(CLIPPED_JS) == []
                titles = [t for t in page.evaluate(CHART_TITLES_JS) if t.strip()]
                assert all(re.search(r"[\u4e00-\u9fff]", t) for t in titles), titles
                assert path != "generate" or titles
                main = page.locator('[data-testid="stMain"]').inner_text()
                assert ENGLISH_RUN.findall(main.replace(prompt, " ")) == [], (path, size)
        finally:
            context.close()
