"""The Pretrained model page with SmolLM2 in headless Chromium, at 1400×1000 and 1024×768, in
English and Chinese: one head's map (the masked triangle grey), the 30 × 9 model view drawn as
270 pictures, the head view's 9 heads; the tokens shown as readable pieces. Screenshots are
written to ATTNVIZ_SCREENSHOTS (default: a temporary folder) for a person to look at."""

import os
import tempfile
from pathlib import Path
from urllib.parse import urlencode

import pytest

from attnviz.i18n import render, t
from tests.browser_helpers import SharedContext, exceptions, open_tab, wait_for_idle

pytestmark = pytest.mark.browser

SIZES = [(1400, 1000), (1024, 768)]
TEXT = "早上好 The animal didn't cross the street"
MODEL_VIEW_JS = """() => Array.from(document.querySelectorAll('.js-plotly-plot'))
    .find(el => el.data && el.data.length && el.data.every(tr => tr.type === 'image'))"""
HEAD_VIEW_JS = """() => Array.from(document.querySelectorAll('.js-plotly-plot'))
    .find(el => el.data && el.data.some(tr => tr.name === 'queries'))"""
TABS = {"en": ("Pretrained model", t("pretrained.tab.model_view"),
               t("pretrained.tab.head_view"), t("pretrained.tab.one_head")),
        "zh": ("预训练模型", "模型视图：每一层、每个头", "头视图：一层的每个头",
               render("pretrained.tab.one_head", "zh"))}
SHOTS = Path(os.environ.get("ATTNVIZ_SCREENSHOTS") or tempfile.mkdtemp(prefix="attnviz_shots_"))


def wait_drawn(page) -> None:
    page.wait_for_selector(".js-plotly-plot .main-svg", timeout=60_000)
    wait_for_idle(page, 60_000)


def look_at_every_tab(page, lang: str, size, model_tab: str, head_tab: str,
                      first: bool) -> None:
    """At this window size: the one-head map, the model view's 270 pictures and the head
    view's 9 heads drawn (each screenshot), nothing wider than the window."""
    if not first:                                   # back to the first tab, drawn at this size
        open_tab(page, TABS[lang][3])
    page.screenshot(path=str(SHOTS / f"decoder_{lang}_{size[0]}_one_head.png"))
    page.locator(".js-plotly-plot").first.screenshot(
        path=str(SHOTS / f"decoder_{lang}_{size[0]}_one_head_chart.png"))

    open_tab(page, model_tab)
    page.wait_for_function(f"() => ({MODEL_VIEW_JS})()", timeout=60_000)
    page.wait_for_function(
        f"() => ({MODEL_VIEW_JS})().querySelectorAll('image').length === 270",
        timeout=60_000)
    page.screenshot(path=str(SHOTS / f"decoder_{lang}_{size[0]}_model_view.png"))
    page.locator(".js-plotly-plot").last.screenshot(
        path=str(SHOTS / f"decoder_{lang}_{size[0]}_model_view_chart.png"))

    open_tab(page, head_tab)
    page.wait_for_function(f"() => ({HEAD_VIEW_JS})()", timeout=60_000)
    legend = page.evaluate(f"""() => Array.from(({HEAD_VIEW_JS})()
        .querySelectorAll('.legend text')).map(t => t.textContent)""")
    assert len(legend) == 9
    page.screenshot(path=str(SHOTS / f"decoder_{lang}_{size[0]}_head_view.png"))
    page.locator(".js-plotly-plot").last.screenshot(
        path=str(SHOTS / f"decoder_{lang}_{size[0]}_head_view_chart.png"))
    # nothing wider than the window: no horizontal scrolling
    assert page.evaluate("() => document.documentElement.scrollWidth") <= size[0]
    assert not exceptions(page)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_smollm2_page_is_drawn_at_both_sizes(browser, app_url, lang):
    """One page per language, drawn at 1400×1000 and then, resized as a person resizes the
    window, at 1024×768 (every chart laid out again at the new width)."""
    title, model_tab, head_tab, _ = TABS[lang]
    context = SharedContext(browser, viewport={"width": SIZES[0][0], "height": SIZES[0][1]})
    try:
        page = context.new_page()
        page.goto(f"{app_url}/pretrained?" + urlencode({"model": "smollm2", "sentence": TEXT,
                                                        "lang": lang}))
        page.get_by_role("heading", name=title).first.wait_for(timeout=90_000)
        wait_drawn(page)
        assert not exceptions(page)
        assert "SmolLM2-135M-Instruct" in page.inner_text("body")
        tokens = page.locator("[data-testid='stMarkdown']:has(code)").first.inner_text()
        assert "Ġ" not in tokens and "早[1/2]" not in tokens and "早" in tokens
        labels = page.evaluate("() => document.querySelector('.js-plotly-plot').data[0].y")
        assert "Ġ" not in "".join(labels) and " The" in labels
        # the one-head map: the heatmap and the masked upper triangle's grey overlay
        traces = page.evaluate("() => document.querySelector('.js-plotly-plot').data"
                               ".map(tr => tr.name || tr.type)")
        assert traces[0] == "heatmap" or "heatmap" in traces
        for i, size in enumerate(SIZES):
            if i:
                page.set_viewport_size({"width": size[0], "height": size[1]})
                wait_for_idle(page)
            look_at_every_tab(page, lang, size, model_tab, head_tab, first=i == 0)
    finally:
        context.close()
