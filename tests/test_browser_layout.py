"""In headless Chromium: no chart clips or overlaps its own labels, on every page and tab, at a
wide and a small window. Under CI=true these never skip.

What "clipped" and "overlapping" mean here, read from the real DOM (getBoundingClientRect):
- a tick label (``.xtick text``, ``.y2tick text`` …), an axis title (``.xtitle``, ``.x2title`` …),
  the figure title, a subplot title or the colour bar's title reaches outside its plot's
  ``svg.main-svg`` box (plotly then cuts it: "1.00" shows as "00");
- an axis title overlaps a tick label of the same plot;
- the figure title overlaps a subplot title (an annotation) or the legend.
"""

from __future__ import annotations

from urllib.parse import quote

import pytest

from attnviz.i18n import t
from tests.browser_helpers import (a_run, click_tab, exceptions, in_each_size, wait_for_app,
                                   wait_for_layout)

pytestmark = pytest.mark.browser

SIZES = [(1400, 1000), (1024, 768)]
MULTIHEAD_TABS = [t("multihead.tab.z"), t("multihead.tab.concat"), t("multihead.tab.output")]
EXPERIMENT_TABS = [t("experiments.tab.scaling"), t("experiments.tab.tied"), t("experiments.tab.raw"),
                   t("experiments.tab.order"), t("experiments.tab.masks"), t("experiments.tab.cross"),
                   t("experiments.tab.bug")]
PRETRAINED_TABS = [t("pretrained.tab.model_view"), t("pretrained.tab.one_head"),
                   t("pretrained.tab.head_view")]
READING_TABS = [t("reading.tab.rollout"), t("reading.tab.value"), t("reading.tab.stats"), t("reading.tab.ablation"),
                "button:Rank every head"]
# (URL path and query, tabs to open one after the other, or [None] for the page as it opens):
# every page, the Step by step page at its weights step, then with its vector view switched on
# ("toggle:<label>" clicks a toggle instead of a tab, "button:<label>" a button)
VIEWS = [("", [None]), ("inputs", [None]),
         ("steps?step=weights", [None, "toggle:Show the vector view"]),
         ("multihead", MULTIHEAD_TABS),
         ("pretrained", PRETRAINED_TABS), ("experiments", EXPERIMENT_TABS),
         ("reading", READING_TABS)]
CHINESE = "早上好，今天天气很好。我们一起去公园散步吧"
CHINESE_VIEWS = [("", [None]), ("steps?step=weights", [None]), ("multihead", MULTIHEAD_TABS),
                 ("experiments", [t("experiments.tab.masks"), t("experiments.tab.cross")]),
                 ("pretrained", PRETRAINED_TABS)]

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
        const texts = Array.from(plot.querySelectorAll('.gtitle, .g-gtitle-subtitle, .annotation-text, .cbtitle text'))
            .filter(shown);                          // figure title, subtitle, facet titles, colour bar
        for (const el of ticks.concat(titles, texts)) {
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


def open_view(page, url: str, tab: str | None = None) -> None:
    page.goto(url)
    page.locator('[data-testid="stMainBlockContainer"] h1').first.wait_for(timeout=60_000)
    wait_for_app(page, timeout_ms=90_000)
    if tab:
        open_tab(page, tab)
    wait_for_layout(page)                            # plotly's second layout pass (automargin)


def open_tab(page, tab: str) -> None:
    """Click a tab, a "toggle:<label>" or a "button:<label>"; wait for the run the click starts
    and for plotly's second layout pass."""
    if tab.startswith(("toggle:", "button:")):
        with a_run(page, timeout_ms=90_000):
            if tab.startswith("toggle:"):
                page.get_by_text(tab.removeprefix("toggle:"), exact=True).click()
            else:
                page.get_by_role("button", name=tab.removeprefix("button:")).click()
    else:
        click_tab(page, page.get_by_role("tab", name=tab), timeout_ms=90_000)
    wait_for_app(page)
    wait_for_layout(page)


def problems_in_each_tab(page, url: str, tabs: list) -> dict:
    """{(window size, tab): its layout problems}, the page opened once and its tabs clicked
    one by one, each looked at in every window size (in_each_size)."""
    open_view(page, url)
    found = {}
    for tab in tabs:
        if tab:
            open_tab(page, tab)
        assert page.locator(".js-plotly-plot").count() >= 1, tab
        for width, height in in_each_size(page, SIZES):
            found[f"{width}x{height}", tab] = layout_problems(page)
    return found


def no_problems(tabs: list) -> dict:
    return {(f"{width}x{height}", tab): [] for tab in tabs for width, height in SIZES}


def layout_problems(page) -> list[str]:
    return page.evaluate(LAYOUT_PROBLEMS_JS)


@pytest.fixture(scope="module")
def page(browser):
    """One tab for the module: each test opens its own address in it (a new session of the
    app each time), at the first window size."""
    context = browser.new_context(viewport=dict(zip(("width", "height"), SIZES[0])))
    yield context.new_page()
    context.close()


def ids(views):
    return [path.split("?")[0] or "home" for path, _ in views]


@pytest.mark.parametrize("path, tabs", VIEWS, ids=ids(VIEWS))
def test_no_chart_clips_or_overlaps_its_labels(page, app_url, path, tabs):
    found = problems_in_each_tab(page, f"{app_url}/{path}", tabs)
    assert found == no_problems(tabs)
    assert not exceptions(page)


@pytest.mark.parametrize("path, tabs", CHINESE_VIEWS, ids=ids(CHINESE_VIEWS))
def test_a_chinese_sentence_fits_too(page, app_url, path, tabs):
    sep = "&" if "?" in path else "?"
    found = problems_in_each_tab(page, f"{app_url}/{path}{sep}sentence={quote(CHINESE)}", tabs)
    assert found == no_problems(tabs)


@pytest.mark.parametrize("path", ["", "steps?step=weights", "multihead"])
def test_512_tokens_fit_too(page, app_url, path):
    sep = "&" if "?" in path else "?"
    long = " ".join(f"w{i}" for i in range(600))
    found = problems_in_each_tab(
        page, f"{app_url}/{path}{sep}sentence={quote(long)}&max_tokens=512", [None])
    assert found == no_problems([None])
