"""In headless Chromium: no chart clips or overlaps its own labels, on every page and tab, at a
wide and a small window. Under CI=true these never skip.

What "clipped" and "overlapping" mean here, read from the real DOM (getBoundingClientRect):
- a tick label (``.xtick text``, ``.y2tick text`` …) or an axis title (``.xtitle``, ``.x2title`` …)
  reaches outside its plot's ``svg.main-svg`` box (plotly then cuts it: "1.00" shows as "00");
- an axis title overlaps a tick label of the same plot;
- the figure title overlaps a subplot title (an annotation) or the legend.
"""

from __future__ import annotations

from urllib.parse import quote

import pytest

from tests.browser_helpers import exceptions, wait_for_app

pytestmark = pytest.mark.browser

SIZES = [(1400, 1000), (1024, 768)]
EXPERIMENT_TABS = ["√d_k scaling", "Tied vs separate Q/K", "Raw softmax(XXᵀ)X",
                   "Word order & positions", "Masks & padding", "Cross-attention",
                   "Bug: scale after softmax"]
# (URL path and query, tab to open or None): every page, the Step by step page at its weights
# step (the vector view is on every step), every Experiments tab
VIEWS = ([("", None), ("inputs", None), ("steps?step=weights", None), ("multihead", None),
          ("pretrained", None)]
         + [("experiments", tab) for tab in EXPERIMENT_TABS])

# Every problem of every drawn plotly chart, as strings naming the chart and the labels.
LAYOUT_PROBLEMS_JS = """() => {
    const SLACK = 1;                                  // px: rounding of text boxes
    const box = el => el.getBoundingClientRect();
    const shown = el => { const r = box(el); return r.width > 0 && r.height > 0
                                                  && el.textContent.trim() !== ''; };
    const inside = (r, o) => r.left >= o.left - SLACK && r.right <= o.right + SLACK
                          && r.top >= o.top - SLACK && r.bottom <= o.bottom + SLACK;
    const overlap = (a, b) => Math.min(a.right, b.right) - Math.max(a.left, b.left) > SLACK
                           && Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top) > SLACK;
    const problems = [];
    document.querySelectorAll('.js-plotly-plot').forEach((plot, p) => {
        const svg = plot.querySelector('svg.main-svg');
        if (!svg) return;
        const name = `chart ${p} "${(plot.querySelector('.gtitle') || {}).textContent || ''}"`;
        const outer = box(svg);
        const ticks = Array.from(plot.querySelectorAll('g[class*="tick"] > text'))   // xtick, y2tick …
            .filter(t => /^[xy][0-9]*tick$/.test(t.parentNode.getAttribute('class'))).filter(shown);
        const titles = Array.from(plot.querySelectorAll('text'))
            .filter(t => /^[xy][0-9]*title$/.test(t.getAttribute('class') || '')).filter(shown);
        for (const el of ticks.concat(titles)) {
            if (!inside(box(el), outer))
                problems.push(`${name}: "${el.textContent}" is clipped`);
        }
        for (const title of titles) {
            const tick = ticks.find(t => overlap(box(title), box(t)));
            if (tick)
                problems.push(`${name}: axis title "${title.textContent}" overlaps tick `
                              + `"${tick.textContent}"`);
        }
        const main = plot.querySelector('.gtitle');
        if (main && shown(main)) {
            const others = Array.from(plot.querySelectorAll('.annotation-text, .legend .legendtext'))
                .filter(shown);
            const hit = others.find(o => overlap(box(main), box(o)));
            if (hit)
                problems.push(`${name}: title overlaps "${hit.textContent}"`);
        }
    });
    return problems;
}"""


def open_view(page, url: str, tab: str | None) -> None:
    page.goto(url)
    page.locator('[data-testid="stMainBlockContainer"] h1').first.wait_for(timeout=60_000)
    wait_for_app(page, timeout_ms=90_000)
    if tab:
        page.get_by_role("tab", name=tab).click()
        page.wait_for_timeout(300)
        wait_for_app(page)
    page.wait_for_timeout(500)                       # plotly's second layout pass (automargin)


def layout_problems(page) -> list[str]:
    return page.evaluate(LAYOUT_PROBLEMS_JS)


@pytest.fixture(params=SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def page(request, browser):
    width, height = request.param
    context = browser.new_context(viewport={"width": width, "height": height})
    yield context.new_page()
    context.close()


@pytest.mark.parametrize("path, tab", VIEWS, ids=[f"{p or 'home'}-{t or ''}" for p, t in VIEWS])
def test_no_chart_clips_or_overlaps_its_labels(page, app_url, path, tab):
    open_view(page, f"{app_url}/{path}", tab)
    assert page.locator(".js-plotly-plot").count() >= 1
    assert layout_problems(page) == []
    assert not exceptions(page)


@pytest.mark.parametrize("path", ["", "steps?step=weights", "multihead"])
def test_chinese_sentence_and_a_long_input_fit_too(page, app_url, path):
    for sentence, extra in (("早上好，今天天气很好。我们一起去公园散步吧", ""),
                            (" ".join(f"w{i}" for i in range(600)), "&max_tokens=512")):
        sep = "&" if "?" in path else "?"
        open_view(page, f"{app_url}/{path}{sep}sentence={quote(sentence)}{extra}", None)
        assert layout_problems(page) == [], sentence[:20]
