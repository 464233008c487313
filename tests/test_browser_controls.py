"""The sidebar's steppers and disabled settings in headless Chromium (issue 18 items 4 and 5).
Under CI=true these never skip."""

import pytest

from attnviz.i18n import t
from tests.message_helpers import message_pattern
from tests.browser_helpers import a_run, alerts, exceptions, page_at, wait_for_app

pytestmark = pytest.mark.browser

# every drawn heatmap's (rows, columns), from the charts' own data in the page
SHAPES_JS = """() => Array.from(document.querySelectorAll('.js-plotly-plot'))
    .flatMap(el => (el.data || []).filter(tr => tr.type === 'heatmap')
    .map(tr => tr.z.shape ? String(tr.z.shape).split(',').map(Number)
                          : [tr.z.length, tr.z[0].length]))"""


def number_input(page, label: str):
    return page.get_by_test_id("stNumberInput").filter(
        has=page.get_by_text(label, exact=True)).first


def test_plus_on_d_model_moves_16_to_20_with_4_heads_and_the_heatmaps_are_drawn(browser,
                                                                                   app_url):
    with page_at(browser, app_url, t("home.title")) as page:
        box = number_input(page, "d_model")
        assert box.locator("input").input_value() == "16"
        with a_run(page):
            box.get_by_test_id("stNumberInputStepUp").click()
        page.wait_for_function(
            """() => Array.from(document.querySelectorAll('[data-testid="stNumberInput"]'))
                .some(el => el.innerText.includes('d_model')
                            && el.querySelector('input').value === '20')""", timeout=30_000)
        wait_for_app(page)
        # the output (n × d_model) is drawn 20 wide: the click reached the computation
        page.wait_for_function(f"() => ({SHAPES_JS})().some(s => s[1] === 20)",
                               timeout=30_000)
        assert not exceptions(page)
        problems = [message_pattern(msg_id) for msg_id in ("sidebar.size_fix.warning",
                                                           "status.cannot_compute")]
        assert not [a for a in alerts(page) if any(said.search(a) for said in problems)]
        assert len(page.evaluate(SHAPES_JS)) >= 5               # 4 heads' weights, output


@pytest.mark.parametrize("path, heading", [("pretrained", t("pretrained.title")),
                                           ("reading", t("nav.reading"))])
def test_the_pretrained_model_pages_show_its_sizes_disabled(browser, app_url, path, heading):
    with page_at(browser, f"{app_url}/{path}", heading) as page:
        for label, value in (("d_model", "384"), ("Heads", "12"), ("d_k", "32")):
            field = number_input(page, label).locator("input")
            assert field.input_value() == value and field.is_disabled(), label
        assert number_input(page, "Token limit").locator("input").is_enabled()
        assert page.get_by_role("textbox", name="Sentence", exact=True).is_enabled()
        assert not exceptions(page)
