"""The Pretrained model page in headless Chromium: its pictures and lines are drawn, the head
view's legend hides a head, and "Step through this head" opens Step by step. Under CI=true these
never skip."""


import pytest

from attnviz.i18n import t
from tests.browser_helpers import exceptions, open_tab, page_at, wait_for_app

pytestmark = pytest.mark.browser

MODEL_VIEW_JS = """() => Array.from(document.querySelectorAll('.js-plotly-plot'))
    .find(el => el.data && el.data.length && el.data.every(tr => tr.type === 'image'))"""
HEAD_VIEW_JS = """() => Array.from(document.querySelectorAll('.js-plotly-plot'))
    .find(el => el.data && el.data.some(tr => tr.name === 'queries'))"""


@pytest.fixture
def page(browser, app_url):
    """The page at /pretrained, opened directly (on one head's heatmap)."""
    with page_at(browser, f"{app_url}/pretrained", "Pretrained model") as pg:
        yield pg


def test_model_view_and_head_view_are_drawn(page):
    assert not exceptions(page)
    assert page.get_by_role("link", name=t("nav.pretrained")).count() >= 1   # the app's nav
    open_tab(page, t("pretrained.tab.model_view"))
    page.wait_for_function(f"() => ({MODEL_VIEW_JS})()", timeout=30_000)
    page.wait_for_function(f"() => ({MODEL_VIEW_JS})().querySelectorAll('image').length === 72",
                           timeout=30_000)
    sources = page.evaluate(f"() => ({MODEL_VIEW_JS})().data.map(tr => tr.source.slice(0, 22))")
    assert sources == ["data:image/png;base64,"] * 72
    open_tab(page, t("pretrained.tab.head_view"))
    page.wait_for_function(f"() => ({HEAD_VIEW_JS})()", timeout=30_000)
    head_view_text = page.evaluate(
        f"() => Array.from(({HEAD_VIEW_JS})().querySelectorAll('text')).map(t => t.textContent)")
    for token in ("[CLS]", "animal", "tired", "head 0", "head 11"):
        assert token in head_view_text, token
    lines = page.evaluate(f"() => ({HEAD_VIEW_JS})().querySelectorAll('.scatterlayer path.js-line')"
                          ".length")
    assert lines > 12


def test_clicking_a_head_in_the_legend_hides_its_lines(page):
    open_tab(page, t("pretrained.tab.head_view"))
    legend_item = page.locator(".js-plotly-plot .legend .traces").filter(has_text="head 3")
    legend_item.first.click()
    page.wait_for_function(f"""() => ({HEAD_VIEW_JS})().data
        .filter(tr => tr.legendgroup === 'head 3')
        .every(tr => tr.visible === 'legendonly')""", timeout=10_000)
    still = page.evaluate(f"""() => ({HEAD_VIEW_JS})().data
        .filter(tr => tr.legendgroup === 'head 4').map(tr => tr.visible)""")
    assert all(v in (None, True) for v in still)


def test_step_through_this_head_opens_step_by_step(page):
    page.get_by_role("button", name=t("pretrained.step_through.label")).click()
    page.get_by_role("heading", name=t("steps.title")).first.wait_for(timeout=30_000)
    wait_for_app(page)
    assert page.get_by_role("radio", name="Pretrained model").is_checked()
    assert not exceptions(page)
