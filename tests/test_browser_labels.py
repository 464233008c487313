"""Every token label readable (issue 27.5), in headless Chromium at both window sizes: up to
the size where the labels fit the chart on the narrowest page every label is drawn (plotly
left out every other one of 15 on Home and 6 of 12 on Read the model), beyond that one label in
k, which the axis title says; no two labels of an axis overlap, and no axis title covers a
label — in English and in 中文."""

from __future__ import annotations

from urllib.parse import quote

import pytest

from attnviz.i18n import render
from tests.browser_helpers import exceptions
from tests.test_browser_layout import SIZES, layout_problems, open_tab, open_view

pytestmark = pytest.mark.browser

SENTENCE = "我爱自然语言处理，因为它很有趣"          # 15 tokens, one a character

# the tick labels of each axis of each chart, in the order drawn, and the pairs that overlap
TICKS_JS = """() => Array.from(document.querySelectorAll('.js-plotly-plot')).map(plot => {
    const axes = {};
    plot.querySelectorAll('g[class*="tick"] > text').forEach(t => {
        const kind = t.parentNode.getAttribute('class');
        if (!/^[xy][0-9]*tick$/.test(kind)) return;
        const r = t.getBoundingClientRect();
        if (r.width === 0 || t.textContent.trim() === '') return;
        (axes[kind] = axes[kind] || []).push({text: t.textContent, r: [r.left, r.top, r.right, r.bottom]});
    });
    const title = (plot.querySelector('.gtitle') || {}).textContent || '';
    const overlaps = [];
    for (const [kind, ticks] of Object.entries(axes)) {
        for (let i = 0; i < ticks.length; i++) for (let j = i + 1; j < ticks.length; j++) {
            const a = ticks[i].r, b = ticks[j].r;
            if (Math.min(a[2], b[2]) - Math.max(a[0], b[0]) > 1 && Math.min(a[3], b[3]) - Math.max(a[1], b[1]) > 1)
                overlaps.push(`${kind}: "${ticks[i].text}" and "${ticks[j].text}"`);
        }
    }
    return {title, axes: Object.fromEntries(Object.entries(axes).map(([k, v]) => [k, v.map(t => t.text)])), overlaps};
})"""


@pytest.fixture(scope="module", params=SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def page(request, browser):
    """One tab at each window size for the module: each test opens its own address in it
    (a new session of the app each time)."""
    width, height = request.param
    context = browser.new_context(viewport={"width": width, "height": height})
    yield context.new_page()
    context.close()


def charts(page) -> list[dict]:
    return page.evaluate(TICKS_JS)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_home_shows_every_one_of_15_tokens_on_its_maps(page, app_url, lang):
    open_view(page, f"{app_url}/?lang={lang}&sentence={quote(SENTENCE)}")
    grid = charts(page)[0]
    tokens = list(SENTENCE)
    bottom = [ticks for kind, ticks in grid["axes"].items() if kind.startswith("x")]
    assert bottom and all(ticks == tokens for ticks in bottom), grid["axes"]
    left = [ticks for kind, ticks in grid["axes"].items() if kind.startswith("y")]
    assert left and all(ticks == tokens for ticks in left)
    assert all(not c["overlaps"] for c in charts(page)), [c["overlaps"] for c in charts(page)]
    assert layout_problems(page) == []
    assert not exceptions(page)


@pytest.mark.parametrize("lang, tabs", [
    (lang, [render(f"reading.tab.{tab}", lang) for tab in ("rollout", "value")])
    for lang in ("en", "zh")])
def test_read_the_model_labels_never_cover_each_other(page, app_url, lang, tabs):
    """No label covers another, no axis title covers a label (in 中文 the bars' "键" was drawn
    over them); which labels a narrow map thins is held in tests/test_figures.py."""
    open_view(page, f"{app_url}/reading?lang={lang}")
    for tab in tabs:
        open_tab(page, tab)                          # its run ended, its layout still
        for chart in charts(page):
            assert not chart["overlaps"], (tab, chart["title"], chart["overlaps"])
        assert layout_problems(page) == [], tab
    assert not exceptions(page)
