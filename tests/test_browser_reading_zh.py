"""Read the model on SmolLM2 in Chinese, in headless Chromium (issues 21 and 22): each tab at a
wide and a small window draws its charts with Chinese titles, nothing clipped, no layout
problem, no exception (the app runs with ATTNVIZ_I18N_STRICT=1: conftest's `app_url`).
Screenshots go to $ATTNVIZ_SCREENSHOTS (default: a temporary folder). Under CI=true these never
skip."""

from __future__ import annotations

import pytest

from tests.browser_helpers import exceptions, wait_for_layout
from tests.test_browser_i18n import CLIPPED_JS, SHOTS, open_home
from tests.test_browser_layout import layout_problems
from tests.i18n_walker import CJK

pytestmark = pytest.mark.browser

SIZES = [(1400, 1000), (1024, 768)]
TABS = {"注意力展开": "第 0 层之后的注意力展开", "值加权": "层 0，头 0：权重 α",
        "头的统计": "行熵的平均（比特）", "消融": "在用的头（红色：已去掉）"}
TITLES_JS = """() => Array.from(document.querySelectorAll('.js-plotly-plot .gtitle'))
    .map(t => t.textContent)"""


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_read_the_model_on_smollm2_in_chinese_fits(browser, app_url, size):
    context, page = open_home(browser, f"{app_url}/reading?lang=zh&model=smollm2",
                              "解读模型", size=size)
    try:
        assert "SmolLM2-135M-Instruct（解码器" in page.locator(
            '[data-testid="stMain"] [data-testid="stCaptionContainer"]').first.inner_text()
        for i, (tab, title) in enumerate(TABS.items()):
            page.get_by_role("tab", name=tab).click()
            page.locator(".js-plotly-plot .gtitle", has_text=title).first.wait_for(
                timeout=180_000)
            wait_for_layout(page, timeout_ms=120_000)
            page.screenshot(path=str(SHOTS / f"reading_smollm2_zh_{i}_{size[0]}x{size[1]}.png"))
            assert not exceptions(page), tab
            assert layout_problems(page) == [], tab
            assert page.evaluate(CLIPPED_JS) == [], tab
            titles = page.evaluate(TITLES_JS)
            assert titles and all(CJK.search(t) for t in titles), (tab, titles)
    finally:
        context.close()
