"""Trace the answer in headless Chromium (issue 28), in English and 中文, at 1400×1000 and
1024×768: each tab draws with no exception and nothing cut off; activation patching stops on
"Stop" with what it computed shown, and "Resume" finishes it; a click on a head's edge of the
information flow names it and "Step through this head" opens that head on Step by step.
Screenshots are written to ATTNVIZ_SCREENSHOTS (default: a temporary folder) for a person to
look at."""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

import pytest

from attnviz.i18n import t, use_language
from tests.browser_helpers import (SharedContext, alerts, click_tab, exceptions, in_each_size,
                                   wait_for_app, wait_for_idle)
from tests.message_helpers import message_pattern

pytestmark = [pytest.mark.browser, pytest.mark.slow]

SHOTS = Path(os.environ.get("ATTNVIZ_SCREENSHOTS") or tempfile.mkdtemp(prefix="attnviz_trace_"))
SIZES = [(1400, 1000), (1024, 768)]
FLOW_JS = """() => Array.from(document.querySelectorAll('.js-plotly-plot'))
    .find(el => el.data && el.data.some(tr => tr.meta === 'head'))"""


def texts(lang: str, *ids: str, **params) -> list[str]:
    with use_language(lang):
        return [t(i, **params) for i in ids]


def open_trace(browser, url: str, lang: str, size: tuple[int, int], query: str = ""):
    context = SharedContext(browser, viewport={"width": size[0], "height": size[1]})
    page = context.new_page()
    page.goto(f"{url}/trace?model=smollm2&lang={lang}{query}")
    [title] = texts(lang, "nav.trace")
    page.get_by_role("heading", name=title).first.wait_for(timeout=120_000)
    wait_for_app(page, 120_000)
    return context, page


def open_tab(page, name: str) -> None:
    """Click a tab and wait for the script to finish (the patching tab has no chart before
    a run)."""
    click_tab(page, page.get_by_role("tab", name=name), timeout_ms=120_000)
    wait_for_idle(page, 120_000)


def titles_cut(page) -> list[str]:
    """Chart titles wider than their chart (plotly draws a title on one line and cuts it at
    both ends): each as its text."""
    return page.evaluate("""() => Array.from(document.querySelectorAll('.js-plotly-plot'))
        .map(el => [el.getBoundingClientRect(), el.querySelector('.gtitle')])
        .filter(([r, title]) => title && r.width > 0 && (
            title.getBoundingClientRect().left < r.left - 1 ||
            title.getBoundingClientRect().right > r.right + 1))
        .map(([r, title]) => title.textContent)""")


def no_overflow(page) -> list[str]:
    """Charts wider than the main column (cut off on the right)."""
    return page.evaluate("""() => {
        const main = document.querySelector('[data-testid="stMain"]').getBoundingClientRect();
        return Array.from(document.querySelectorAll('.js-plotly-plot')).filter(el => {
            const r = el.getBoundingClientRect();
            return r.width > 0 && r.left < main.left - 1;
        }).map(el => el.className);
    }""")


def look_in_both_sizes(page, name: str) -> None:
    """In the window's size, then in the other one (in_each_size): no exception, no chart cut
    off on the left, no chart title cut; a screenshot of each."""
    for width, _ in in_each_size(page, SIZES):
        page.screenshot(path=str(SHOTS / f"{name}_{width}.png"), full_page=True)
        assert exceptions(page) == [], name
        assert no_overflow(page) == [], (name, width)
        assert titles_cut(page) == [], (name, width)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_every_tab_draws_in_both_languages_and_sizes(browser, app_url, lang):
    """The page opened once per language; each tab looked at in both window sizes."""
    # the IOI pair in both languages (a Chinese session's own first pair is the weekday one)
    context, page = open_trace(browser, app_url, lang, SIZES[0], "&tr_pair=ioi")
    try:
        for tab in ("lens", "patching", "flow"):
            [label] = texts(lang, f"trace.tab.{tab}")
            open_tab(page, label)
            if tab == "patching":
                [start] = texts(lang, "trace.patch.button", count=31 * 14)
                # a patching already done (an earlier test's, on this server) is shown for
                # every learner at once; else press Patch
                page.get_by_role("button", name=start).or_(
                    page.locator(".js-plotly-plot")).first.wait_for(timeout=60_000)
                if page.get_by_role("button", name=start).count():
                    page.get_by_role("button", name=start).click()
                wait_for_app(page, 120_000)
            if tab == "flow":
                page.wait_for_function(f"() => ({FLOW_JS})()", timeout=60_000)
            look_in_both_sizes(page, f"trace_{tab}_{lang}")
            assert page.locator(".js-plotly-plot").count() >= 1, tab
            if tab == "lens":                 # the tuned lens beside it (fitted once, ~1.5 min)
                [tuned] = texts(lang, "reading.lens.kind.option.tuned")
                [kl] = texts(lang, "reading.lens.tuned.kl_title", tokens=0)   # its start
                page.get_by_text(tuned, exact=True).click()
                wait_for_app(page, 120_000)
                [fit] = texts(lang, "reading.lens.tuned.fit")
                fit_button = page.get_by_role("button", name=fit)
                if fit_button.count():    # none kept on this machine: only a press fits it
                    fit_button.click()
                page.wait_for_function(
                    "(t) => Array.from(document.querySelectorAll('.js-plotly-plot .gtitle'))"
                    ".some(el => el.textContent.startsWith(t))", arg=kl[:8], timeout=300_000)
                wait_for_app(page, 120_000)
                look_in_both_sizes(page, f"trace_tuned_{lang}")
    finally:
        context.close()


def test_patching_stops_keeping_what_it_computed_and_resumes(browser, app_url):
    """Each head of each layer (270 patches): Stop mid-way shows the partial map and says how
    many were done; Resume finishes with the whole map."""
    context, page = open_trace(browser, app_url, "en", SIZES[0],
                               "&tr_where=heads&tr_pair=factual")
    try:
        [label, start, stop, resume] = texts("en", "trace.tab.patching", "trace.patch.button",
                                             "trace.patch.stop", "trace.patch.resume",
                                             count=30 * 9)
        open_tab(page, label)
        page.get_by_role("button", name=start).click()
        page.get_by_role("button", name=stop).wait_for(timeout=30_000)
        page.locator('[data-testid="stProgress"]').first.wait_for(timeout=30_000)
        page.wait_for_function("""() => {               // at least one chunk done
            const bar = document.querySelector('[data-testid="stProgress"] [role="progressbar"]');
            return bar !== null && Number(bar.getAttribute('aria-valuenow')) > 0;
        }""", timeout=60_000)
        page.get_by_role("button", name=stop).click()
        page.get_by_role("button", name=resume).wait_for(timeout=60_000)
        wait_for_app(page)
        with use_language("en"):
            stopped = message_pattern("trace.patch.stopped", total=270)
        said = [a for a in alerts(page) if stopped.search(a)]
        assert said, alerts(page)
        done = int(re.findall(r"\d+", said[0])[0])
        assert 0 < done < 270
        blank = page.evaluate("""() => {
            const el = document.querySelector('.js-plotly-plot');
            return JSON.stringify(el.data[0].z).includes('null');
        }""")
        assert blank                                      # the cells not computed are blank
        page.get_by_role("button", name=resume).click()
        page.wait_for_function("""() => {
            const el = document.querySelector('.js-plotly-plot');
            return el && !JSON.stringify(el.data[0].z).includes('null');
        }""", timeout=120_000)
        wait_for_app(page)
        assert exceptions(page) == []
        # a click on the cell of layer 23, head 4 opens that head (the map's hovers and clicks
        # are an invisible marker's at each cell's centre: plotly's heatmaps answer no click)
        page.locator(".js-plotly-plot").first.scroll_into_view_if_needed()
        x, y = page.evaluate("""() => {
            const gd = document.querySelector('.js-plotly-plot');
            const xa = gd._fullLayout.xaxis, ya = gd._fullLayout.yaxis;
            const box = gd.querySelector('.main-svg').getBoundingClientRect();
            return [box.left + xa._offset + xa.l2p(4), box.top + ya._offset + ya.l2p(23)];
        }""")
        page.mouse.click(x, y)
        [step] = texts("en", "pretrained.step_through.label")
        [picked] = texts("en", "trace.patch.picked", layer=23, head=4)
        page.get_by_text(picked).first.wait_for(timeout=30_000)
        page.get_by_role("button", name=step).click()
        [steps_title] = texts("en", "steps.title")
        page.get_by_role("heading", name=steps_title).first.wait_for(timeout=60_000)
        assert exceptions(page) == []
    finally:
        context.close()


def test_a_click_on_a_heads_edge_of_the_flow_names_it_and_opens_it(browser, app_url):
    context, page = open_trace(browser, app_url, "zh", SIZES[1],
                               "&sentence=The%20Eiffel%20Tower%20is%20in%20the%20city%20of")
    try:
        [label] = texts("zh", "trace.tab.flow")
        open_tab(page, label)
        page.wait_for_function(f"() => ({FLOW_JS})()", timeout=60_000)
        page.evaluate(f"() => ({FLOW_JS})().scrollIntoView({{block: 'center'}})")
        x, y, data = page.evaluate(f"""() => {{
            const gd = ({FLOW_JS})();
            const curve = gd.data.findIndex(tr => tr.meta === 'head');
            const tr = gd.data[curve];
            const xa = gd._fullLayout.xaxis, ya = gd._fullLayout.yaxis;
            const box = gd.querySelector('.main-svg').getBoundingClientRect();
            return [box.left + xa._offset + xa.l2p(tr.x[0]), box.top + ya._offset + ya.l2p(tr.y[0]),
                    Array.from(tr.customdata[0])];
        }}""")
        page.mouse.click(x, y)
        layer, head = data[0], data[1]           # each head's marker is its own, never hidden
        [step] = texts("zh", "pretrained.step_through.label")
        page.get_by_role("button", name=step).wait_for(timeout=30_000)
        with use_language("zh"):
            named = message_pattern("trace.flow.edge.head", layer=layer, head=head)
        said = page.evaluate("() => document.body.innerText")
        assert named.search(said.replace("`", "")), said[-600:]
        page.get_by_role("button", name=step).click()          # the caption's promise
        [steps_title] = texts("zh", "steps.title")
        page.get_by_role("heading", name=steps_title).first.wait_for(timeout=60_000)
        assert exceptions(page) == []
    finally:
        context.close()
