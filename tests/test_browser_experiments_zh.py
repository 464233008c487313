"""The Experiments page's decoder tabs (issue 22) in Chinese and English (issue 21), in headless
Chromium at a wide and a small window: no exception, no label cut off (metric labels included),
no chart clipping or overlapping its own labels, and the open tab kept through the language
switch.
Screenshots go to $ATTNVIZ_SCREENSHOTS (default: a temporary folder)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

from attnviz.i18n import render, t
from tests.browser_helpers import SharedContext, click_tab, exceptions, wait_for_app, wait_for_layout
from tests.test_browser_i18n import CLIPPED_JS
from tests.test_browser_layout import layout_problems

pytestmark = pytest.mark.browser

SIZES = [(1400, 1000), (1024, 768)]
TABS = {lang: {tab: render(f"experiments.tab.{tab}", lang) for tab in ("rope", "sink")}
        for lang in ("zh", "en")}
HEADING = {lang: render("experiments.title", lang) for lang in ("zh", "en")}
SHOTS = Path(os.environ.get("ATTNVIZ_SCREENSHOTS") or tempfile.mkdtemp(prefix="attnviz_exp_"))
METRIC_LABELS_CLIPPED_JS = CLIPPED_JS.replace(
    "'[data-testid=\"stCaptionContainer\"]'];",
    "'[data-testid=\"stCaptionContainer\"]',"
    " '[data-testid=\"stMetricLabel\"] [data-testid=\"stMarkdownContainer\"]'];")


def open_tab(page, name: str) -> None:
    click_tab(page, page.get_by_role("tab", name=name), timeout_ms=120_000)
    wait_for_app(page, timeout_ms=120_000)
    wait_for_layout(page)                          # plotly's second layout pass (automargin)


@pytest.mark.parametrize("lang", TABS)
@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_the_decoder_tabs_fit(browser, app_url, size, lang):
    assert METRIC_LABELS_CLIPPED_JS != CLIPPED_JS            # the metric labels are checked
    context = SharedContext(browser, viewport={"width": size[0], "height": size[1]})
    try:
        page = context.new_page()
        page.goto(f"{app_url}/experiments?lang={lang}")
        page.get_by_role("heading", name=HEADING[lang]).first.wait_for(timeout=90_000)
        wait_for_app(page, timeout_ms=120_000)
        for name, label in TABS[lang].items():
            open_tab(page, label)
            assert page.locator('[data-testid="stMetricLabel"]').count() >= 3, name
            assert not exceptions(page), name
            assert page.evaluate(METRIC_LABELS_CLIPPED_JS) == [], name
            assert layout_problems(page) == [], name
            page.screenshot(path=str(SHOTS / f"experiments_{name}_{lang}_{size[0]}.png"))
    finally:
        context.close()


def test_the_language_switch_keeps_the_open_tab(browser, app_url):
    context = SharedContext(browser, viewport={"width": 1400, "height": 1000})
    try:
        page = context.new_page()
        page.goto(f"{app_url}/experiments")
        page.get_by_role("heading", name=t("experiments.title")).first.wait_for(timeout=90_000)
        wait_for_app(page, timeout_ms=120_000)
        open_tab(page, t("experiments.tab.sink"))
        page.locator('[data-testid="stSidebar"]').get_by_role("radio", name="中文",
                                                              exact=True).click()
        page.get_by_role("heading", name="实验").first.wait_for(timeout=60_000)
        wait_for_app(page, timeout_ms=120_000)
        page.get_by_text("第一个词元上的平均权重").first.wait_for(timeout=60_000)
        assert page.locator("[role=tab][aria-selected=true]").all_inner_texts() == ["注意力汇聚点"]
    finally:
        context.close()
