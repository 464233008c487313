"""An axis title stands clear of its tick labels (issue 27.13): the Ablation map of SmolLM2 on
Read the model in 中文 at 1024×768, where the rotated title "层" touched "层 14" and "层 15"
(0 px apart). Measured in headless Chromium: the gap between the title's box and the nearest
tick label's box on that side."""

from __future__ import annotations

import pytest

from attnviz.i18n import t, use_language
from tests.browser_helpers import SharedContext, exceptions, wait_for_app, wait_for_layout

pytestmark = pytest.mark.browser

MIN_GAP_PX = 5
# the ablation map: the chart whose y axis title is `title`; the gap from that title's right
# edge to the leftmost y tick label, and from the x title's top to the lowest x tick label
GAPS_JS = """(title) => {
    const plot = Array.from(document.querySelectorAll('.js-plotly-plot')).find(el =>
        el.layout && el.layout.yaxis && el.layout.yaxis.title && el.layout.yaxis.title.text === title
        && el.data.length && el.data[0].type === 'heatmap');
    const box = el => el.getBoundingClientRect();
    const ticks = kind => Array.from(plot.querySelectorAll(`g.${kind} > text`)).map(box);
    const yTitle = box(plot.querySelector('.ytitle')), xTitle = box(plot.querySelector('.xtitle'));
    return {y: Math.min(...ticks('ytick').map(r => r.left)) - yTitle.right,
            x: xTitle.top - Math.max(...ticks('xtick').map(r => r.bottom))};
}"""


def test_the_ablation_maps_layer_title_stands_clear_of_its_labels_in_chinese(browser, app_url):
    with use_language("zh"):
        heading, layer = t("nav.reading"), t("figure.axis.layer")
    context = SharedContext(browser, viewport={"width": 1024, "height": 768})
    try:
        page = context.new_page()
        page.goto(f"{app_url}/reading?model=smollm2&lang=zh&rd_view=Ablation")
        page.get_by_role("heading", name=heading).first.wait_for(timeout=90_000)
        wait_for_app(page)
        page.wait_for_function(f"(title) => ({GAPS_JS})(title) !== undefined", arg=layer,
                               timeout=60_000)
        wait_for_layout(page)                            # automargin's second layout pass
        gaps = page.evaluate(f"({GAPS_JS})", layer)
        assert not exceptions(page)
        assert gaps["y"] >= MIN_GAP_PX and gaps["x"] >= 0, gaps
    finally:
        context.close()
