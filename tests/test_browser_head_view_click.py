"""Clicking a token in the head view highlights it, as pointing at it does in BertViz (issue
27.10), in headless Chromium: a click on a label (at its far end, where the text starts, and on
either side) makes it "Highlight token"'s choice and only its lines are drawn; a click on it again
draws every token's lines — MiniLM in English, SmolLM2 in 中文. Screenshots are written to
ATTNVIZ_SCREENSHOTS (default: a temporary folder) for a person to look at."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from urllib.parse import urlencode

import pytest

from attnviz.i18n import t, use_language
from tests.browser_helpers import SharedContext, exceptions, open_tab, wait_for_app, wait_for_layout

pytestmark = pytest.mark.browser

SHOTS = Path(os.environ.get("ATTNVIZ_SCREENSHOTS") or tempfile.mkdtemp(prefix="attnviz_shots_"))
HEAD_VIEW_JS = """() => Array.from(document.querySelectorAll('.js-plotly-plot'))
    .find(el => el.data && el.data.some(tr => tr.name === 'queries'))"""
# the queries (y at x = 0) of every line drawn, and the labels in bold
DRAWN_JS = f"""() => {{
    const el = ({HEAD_VIEW_JS})();
    const queries = new Set();
    el.data.filter(tr => tr.meta).forEach(tr => {{
        for (let i = 0; i < tr.y.length; i += 3) queries.add(tr.y[i]);
    }});
    const bold = el.data.find(tr => tr.name === 'queries').text.filter(s => s.startsWith('<b>'));
    return {{queries: Array.from(queries).sort((a, b) => a - b), bold}};
}}"""
# where each label of one side is drawn on the screen: [text, left, top, right, bottom]
LABELS_JS = f"""(side) => {{
    const el = ({HEAD_VIEW_JS})();
    const curve = el.data.findIndex(tr => tr.name === side);
    const trace = el.querySelectorAll('.scatterlayer .trace')[curve];
    return Array.from(trace.querySelectorAll('text')).map(t => {{
        const r = t.getBoundingClientRect();
        return [t.textContent, r.left, r.top, r.right, r.bottom];
    }});
}}"""


def texts(lang: str, *ids: str) -> list[str]:
    with use_language(lang):
        return [t(i) for i in ids]


def open_head_view(browser, url: str, lang: str):
    """A new context's tab at `url`, on the head view; returns (context, page)."""
    title, tab = texts(lang, "pretrained.title", "pretrained.tab.head_view")
    context = SharedContext(browser, viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.goto(url)
    page.get_by_role("heading", name=title).first.wait_for(timeout=90_000)
    wait_for_app(page)
    open_tab(page, tab)
    page.wait_for_function(f"() => ({HEAD_VIEW_JS})()", timeout=60_000)
    return context, page


def click_label(page, side: str, row: int, where: str) -> None:
    """Click label `row` of `side` ("queries" or "keys") at its middle, or at the end of the
    text farthest from the lines ("far": a query's first letter, a key's last one), once it is
    scrolled into the window, as a person does."""
    page.evaluate(f"""([side, row]) => {{
        const el = ({HEAD_VIEW_JS})();
        const curve = el.data.findIndex(tr => tr.name === side);
        el.querySelectorAll('.scatterlayer .trace')[curve].querySelectorAll('text')[row]
            .scrollIntoView({{block: 'center'}});
    }}""", [side, row])
    text, left, top, right, bottom = page.evaluate(f"({LABELS_JS})", side)[row]
    far = left + 2 if side == "queries" else right - 2
    x = (left + right) / 2 if where == "middle" else far
    page.mouse.click(x, (top + bottom) / 2)


def wait_highlight(page, label: str, lang: str) -> None:
    """Wait until "Highlight token" shows `label` and the script has run."""
    name, = texts(lang, "pretrained.highlight.label")
    box = page.get_by_role("combobox", name=name)
    page.wait_for_function("([el, want]) => el.value === want",
                           arg=[box.element_handle(), label], timeout=30_000)
    wait_for_app(page)
    wait_for_layout(page)                           # the chart redrawn with its new lines


def test_clicking_a_token_highlights_its_lines_and_again_every_token_minilm(browser, app_url):
    context, page = open_head_view(browser, f"{app_url}/pretrained", "en")
    try:
        before = page.evaluate(DRAWN_JS)
        tokens = [row[0] for row in page.evaluate(f"({LABELS_JS})", "queries")]
        assert len(before["queries"]) == len(tokens) and not before["bold"]
        it = tokens.index("it")
        click_label(page, "queries", it, "middle")
        wait_highlight(page, f"{it}: it", "en")
        after = page.evaluate(DRAWN_JS)
        assert after == {"queries": [it], "bold": ["<b>it</b>"]}
        assert not exceptions(page)
        page.screenshot(path=str(SHOTS / "head_view_click_minilm.png"), full_page=True)
        animal = tokens.index("animal")                 # a key's label, at its far end
        click_label(page, "keys", animal, "far")
        wait_highlight(page, f"{animal}: animal", "en")
        assert page.evaluate(DRAWN_JS)["queries"] == [animal]
        click_label(page, "queries", animal, "far")     # the highlighted token again: all
        wait_highlight(page, *texts("en", "pretrained.highlight.every"), "en")
        assert page.evaluate(DRAWN_JS) == before
    finally:
        context.close()


def test_clicking_a_token_highlights_it_smollm2_in_chinese(browser, app_url):
    query = urlencode({"model": "smollm2", "lang": "zh",
                       "sentence": "早上好 The animal didn't cross the street"})
    context, page = open_head_view(browser, f"{app_url}/pretrained?{query}", "zh")
    try:
        before = page.evaluate(DRAWN_JS)
        labels = page.evaluate(f"({LABELS_JS})", "queries")
        row = next(i for i, label in enumerate(labels) if label[0].strip() == "animal")
        click_label(page, "queries", row, "far")
        wait_highlight(page, f"{row}: {labels[row][0]}", "zh")
        after = page.evaluate(DRAWN_JS)
        assert after["queries"] == [row] and len(after["bold"]) == 1
        assert not exceptions(page)
        page.screenshot(path=str(SHOTS / "head_view_click_smollm2_zh.png"), full_page=True)
        click_label(page, "queries", row, "middle")
        wait_highlight(page, *texts("zh", "pretrained.highlight.every"), "zh")
        assert page.evaluate(DRAWN_JS) == before
    finally:
        context.close()


def test_the_pages_link_brings_the_tab_and_the_highlighted_token_back(browser, app_url):
    # issue 27.1 in the browser: the address bar after a click is a link that reopens the view
    context, page = open_head_view(browser, f"{app_url}/pretrained", "en")
    try:
        tokens = [row[0] for row in page.evaluate(f"({LABELS_JS})", "queries")]
        it = tokens.index("it")
        click_label(page, "queries", it, "middle")
        wait_highlight(page, f"{it}: it", "en")
        page.wait_for_function("() => window.location.search.includes('pt_hv_token')",
                               timeout=30_000)
        link, drawn = page.url, page.evaluate(DRAWN_JS)
    finally:
        context.close()
    fresh = SharedContext(browser, viewport={"width": 1400, "height": 1000})
    try:
        again = fresh.new_page()
        again.goto(link)                               # a fresh session: only the link
        again.get_by_role("heading", name=texts("en", "pretrained.title")[0]).first.wait_for(
            timeout=90_000)
        again.wait_for_function(f"() => ({HEAD_VIEW_JS})()", timeout=60_000)   # the tab
        wait_highlight(again, f"{it}: it", "en")
        assert again.evaluate(DRAWN_JS) == drawn == {"queries": [it], "bold": ["<b>it</b>"]}
        assert not exceptions(again)
    finally:
        fresh.close()
