"""Pin as baseline, type into W_Q, see the change on Step by step, in headless Chromium.
Under CI=true these never skip."""

import pytest

from attnviz.i18n import t
from tests.message_helpers import lead
from tests.browser_helpers import (SharedContext, exceptions, open_page, type_into_first_cell, wait_for_app,
                                   wait_for_first_z)

pytestmark = pytest.mark.browser


def test_pin_type_a_weight_and_step_by_step_shows_the_change(browser, app_url):
    context = SharedContext(browser, viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    try:
        page.goto(app_url + "/inputs?matrix=w_q&edit_head=0")
        wait_for_app(page)
        page.get_by_role("button", name=t("baseline.pin")).click()
        page.get_by_text(lead("baseline.status.pinned")).first.wait_for(timeout=30_000)
        wait_for_app(page)
        type_into_first_cell(page, "2.5")
        wait_for_first_z(page, 0, 0, 2.5)                  # the W_Q heatmap below the editor
        open_page(page, t("nav.steps"), t("steps.title"))
        page.get_by_role("heading", name=t("figure.change.title")).first.wait_for(
            timeout=30_000)
        titles = page.eval_on_selector_all(".js-plotly-plot .gtitle",
                                           "els => els.map(e => e.textContent)")
        assert any(title.startswith(t("figure.change.title")) for title in titles), titles
        assert not exceptions(page)
    finally:
        context.close()
