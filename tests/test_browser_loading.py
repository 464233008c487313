"""Issue 27.2: no blank page while SmolLM2 loads. A fresh server over an empty model cache (the
GGUF is converted: tens of seconds) — each page that needs SmolLM2, opened meanwhile, shows its
title and a progress bar within seconds, then draws once the load is done. Issue 34.6: a fresh
server's first page says what is loading from the moment Streamlit draws anything, in the
browser's language, and never lists the file names of pages/; 34.10: the sentence box's
counter is not drawn over its text, and Experiments' nine tabs are all in sight at 1024 px.
Under CI=true these never skip."""

from __future__ import annotations

import re

import pytest

from attnviz import i18n
from attnviz.i18n import t
from tests.browser_helpers import (ROOT, VIEWPORT, exceptions, streamlit_server,
                                   wait_for_app)

pytestmark = [pytest.mark.browser, pytest.mark.slow]

SHOWN_WITHIN_MS = 8_000      # the title and the bar: at once, not after the load
PAGES = [("/pretrained?model=smollm2", t("pretrained.title")),
         ("/reading?model=smollm2", t("nav.reading")),
         ("/trace?model=smollm2", t("nav.trace")),
         ("/generate", t("generate.title"))]


@pytest.fixture
def cold_server(tmp_path, monkeypatch):
    """A server whose model cache is empty: its first SmolLM2 load converts the GGUF."""
    monkeypatch.setenv("ATTNVIZ_CACHE_DIR", str(tmp_path / "cache"))
    with streamlit_server(120) as (url, _):
        yield url


def test_every_page_waiting_for_smollm2_shows_its_title_and_progress_at_once(browser,
                                                                              cold_server):
    context = browser.new_context(viewport=VIEWPORT)
    try:
        tabs = []
        for path, title in PAGES:              # opened one after another, during the one load
            page = context.new_page()
            page.goto(cold_server + path)
            page.get_by_role("heading", name=title).first.wait_for(timeout=SHOWN_WITHIN_MS)
            page.locator('[data-testid="stProgress"]').first.wait_for(timeout=SHOWN_WITHIN_MS)
            assert page.locator(".js-plotly-plot").count() == 0, f"{path}: drawn before loading"
            tabs.append(page)
        for page in tabs:                        # then each draws, with no exception
            wait_for_app(page, timeout_ms=240_000)
            assert page.locator('[data-testid="stProgress"]').count() == 0
            assert not exceptions(page)
    finally:
        context.close()


# Everything a first visit shows, watched from before the page's own scripts run: every link
# text the sidebar ever holds, and when (ms after the document starts) Streamlit first draws
# anything, the loading notice is first seen, the title, the first chart.
WATCH_JS = """() => {
    const seen = window.__seen = {links: [], app: null, notice: null, noticeText: null,
                                  title: null, chart: null};
    const t0 = performance.now();
    const now = () => Math.round(performance.now() - t0);
    const look = () => {
        document.querySelectorAll(
            '[data-testid="stSidebarNav"] a, [data-testid="stSidebar"] [data-testid="stPageLink"]'
        ).forEach(a => {
            const text = a.textContent.trim();
            if (!seen.links.includes(text)) seen.links.push(text);
        });
        if (seen.app === null && document.querySelector('[data-testid="stMain"]')) seen.app = now();
        const notice = document.querySelector('[class*="st-key-loading_notice"] [data-testid="stAlert"]');
        if (seen.notice === null && notice && notice.checkVisibility()) {
            seen.notice = now();
            seen.noticeText = notice.querySelector('[data-testid="stMarkdownContainer"]').textContent;
        }
        if (seen.title === null && document.querySelector('h1')) seen.title = now();
        if (seen.chart === null && document.querySelector('.js-plotly-plot .main-svg')) seen.chart = now();
    };
    new MutationObserver(look).observe(document, {subtree: true, childList: true,
                                                  characterData: true});
}"""
# how far the edited sentence box's text runs under its counter of characters ("59/20000"
# drawn inside the box, issue 34.10): the text's right edge minus the counter's left one
COUNTER_OVERLAP_JS = """() => {
    const box = document.querySelector('[data-testid="stSidebar"] [data-testid="stTextInput"]');
    const input = box.querySelector('input'), counter = box.querySelector(
        '[data-testid="InputInstructions"]');
    const text_right = input.getBoundingClientRect().right
        - parseFloat(getComputedStyle(input).paddingRight);
    return text_right - counter.getBoundingClientRect().left;
}"""
PAGE_FILES = {"app"} | {p.stem for p in (ROOT / "pages").glob("*.py")}


def first_visit(browser, url: str, locale: str) -> dict:
    """Open `url` in a new browser context of this `locale`, watching from the start (WATCH_JS);
    once drawn, what was seen, and whether the notice is still visible."""
    context = browser.new_context(viewport=VIEWPORT, locale=locale)
    try:
        context.add_init_script(f"({WATCH_JS})()")
        page = context.new_page()
        page.goto(url)
        wait_for_app(page, timeout_ms=120_000)    # the run ended, every element drawn
        seen = page.evaluate("window.__seen")
        seen["notice_after"] = page.locator(
            '[class*="st-key-loading_notice"] [data-testid="stAlert"]').is_visible()
        box = page.locator('[data-testid="stSidebar"] [data-testid="stTextInput"] input').first
        box.click()                                  # the sentence box, edited: its counter
        page.keyboard.press("End")
        page.locator('[data-testid="InputInstructions"]').first.wait_for()
        seen["text_past_counter_px"] = page.evaluate(COUNTER_OVERLAP_JS)
        assert not exceptions(page)
        return seen
    finally:
        context.close()


def shown(msg_id: str, lang: str) -> str:
    """A message as the page shows it (markdown's ** marks dropped)."""
    return re.sub(r"\*\*", "", i18n.render(msg_id, lang))


def tabs_hidden_px(browser, url: str) -> int:
    """How much of Experiments' row of tabs is out of sight at 1024 px (scrolled away)."""
    context = browser.new_context(viewport={"width": 1024, "height": 768})
    try:
        page = context.new_page()
        page.goto(url + "/experiments")
        wait_for_app(page, timeout_ms=120_000)
        return page.evaluate("""() => { const tabs = document.querySelector('[role="tablist"]');
                                        return tabs.scrollWidth - tabs.clientWidth; }""")
    finally:
        context.close()


def notice_left_on(browser, url: str) -> bool:
    """Whether a first visit's loading notice is still visible once `url` is drawn."""
    context = browser.new_context(viewport=VIEWPORT)
    try:
        page = context.new_page()
        page.goto(url)
        wait_for_app(page, timeout_ms=120_000)    # the run ended, every element drawn
        return page.locator('[class*="st-key-loading_notice"] [data-testid="stAlert"]'
                            ).is_visible()
    finally:
        context.close()


def test_a_fresh_servers_first_page_says_what_loads_and_never_lists_file_names(browser):
    with streamlit_server(120) as (url, _):
        visits = {"en": first_visit(browser, url, "en-US"),      # the server's first page
                  "zh": first_visit(browser, url, "zh-CN")}      # a later learner's first
        assert tabs_hidden_px(browser, url) <= 0           # 34.10: all 9 tabs in sight
        # a page that ends early (st.stop: Generate before its button) writes nothing after
        # it: the notice still goes once the page is drawn
        assert not notice_left_on(browser, url + "/generate")
    for lang, seen in visits.items():
        assert seen["links"], lang                               # the app's own links ...
        assert not PAGE_FILES & set(seen["links"]), (lang, seen["links"])   # ... never files
        assert seen["noticeText"] == shown("app.loading", lang), lang
        # the notice is the page's first element, before its title and charts; how soon after
        # Streamlit's frame is a matter of the machine's load (2 s bound, 3 s seen under a load
        # of 8), not of the code: no wall-clock bound here (issue 35)
        assert seen["app"] <= seen["notice"] <= seen["title"] < seen["chart"], (lang, seen)
        assert not seen["notice_after"], lang                    # gone once the page is drawn
        assert seen["text_past_counter_px"] <= 0, (lang, seen)  # the text stops before it
