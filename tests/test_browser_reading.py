"""The Read the model page in headless Chromium: each tab draws its charts without an exception,
and switching heads off changes the similarity shown. Under CI=true these never skip."""

import pytest

from attnviz.i18n import t
from tests.browser_helpers import enter, exceptions, open_tab, page_at

pytestmark = pytest.mark.browser

TABS = [t("reading.tab.rollout"), t("reading.tab.value"), t("reading.tab.stats"), t("reading.tab.ablation")]
CHART_TITLES_JS = """() => Array.from(document.querySelectorAll('.js-plotly-plot .gtitle'))
    .map(t => t.textContent)"""


@pytest.fixture
def page(browser, app_url):
    """The page at /reading, opened directly."""
    with page_at(browser, f"{app_url}/reading", t("nav.reading")) as pg:
        yield pg


@pytest.fixture(scope="module")
def shared(browser, app_url):
    """One tab at /reading for the tests that only open its tabs and read them."""
    with page_at(browser, f"{app_url}/reading", t("nav.reading")) as pg:
        yield pg


def metric_value(page, label: str) -> str:
    metric = page.locator('[data-testid="stMetric"]').filter(has_text=label).first
    return metric.locator('[data-testid="stMetricValue"]').inner_text()


@pytest.mark.parametrize("tab, title", [
    (t("reading.tab.rollout"), t("reading.rollout.title", layer=0)),
    (t("reading.tab.value"), t("reading.value.norms_title", layer=0, head=0)),
    (t("reading.tab.stats"), t("reading.stats.entropy")),
    (t("reading.tab.ablation"), t("reading.ablation.map.title"))])
def test_each_tab_draws_its_chart(shared, tab, title):
    open_tab(shared, tab)
    shared.wait_for_function(
        f"() => ({CHART_TITLES_JS})().some(t => t.startsWith({title!r}))", timeout=30_000)
    assert shared.locator(".js-plotly-plot .main-svg").count() >= 1, tab
    assert not exceptions(shared), tab


def test_switching_a_layer_off_changes_the_similarity_and_ranking_draws(page):
    open_tab(page, t("reading.tab.ablation"))
    assert metric_value(page, t("reading.ablation.similarity_off.label")) == "—"
    box = page.get_by_label(t("reading.ablation.heads.label"), exact=True)       # typed exactly: L2 is every head of layer 2
    enter(page, box, "L2")
    page.wait_for_function("""() => Array.from(document.querySelectorAll(
        '[data-testid="stMetricValue"]')).filter(e => /^0\\.\\d{4}$/.test(e.textContent.trim()))
        .length >= 3""", timeout=30_000)
    assert metric_value(page, t("reading.ablation.similarity_off.label")) != metric_value(page, "Similarity")
    page.get_by_role("button", name=t("reading.ranking.button")).click()
    page.wait_for_function(f"() => ({CHART_TITLES_JS})().some(t => t.startsWith('Change in'))",
                           timeout=60_000)
    assert not exceptions(page)
