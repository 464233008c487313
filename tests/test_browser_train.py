"""The Train page in headless Chromium: train with few steps (the progress shows, then the heads),
and the checkpoint slider redraws the heatmap. Under CI=true this never skips."""

import pytest

from tests.browser_helpers import exceptions, first_heatmap, wait_for_app

pytestmark = pytest.mark.browser

TITLE_JS = """() => {
    const el = document.querySelector('.js-plotly-plot');
    return el && el.layout && el.layout.title ? el.layout.title.text : '';
}"""


def test_train_with_few_steps_then_the_slider_redraws_the_heads(browser, app_url):
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    try:
        page.goto(f"{app_url}/train")
        page.get_by_role("heading", name="Train attention yourself").wait_for(timeout=60_000)
        page.get_by_text("This page has its own settings").wait_for(timeout=30_000)
        assert page.get_by_role("textbox", name="Sentence").count() == 0   # not used here
        steps = page.get_by_role("spinbutton", name="Steps")
        steps.fill("60")
        steps.press("Enter")
        train = page.get_by_test_id("stButton").get_by_role("button", name="Train")
        page.wait_for_timeout(500)                        # the number reaches the server
        train.click()
        page.get_by_text("Training reverse").wait_for(timeout=30_000)
        page.get_by_text("Weights after training step").wait_for(timeout=90_000)
        wait_for_app(page)
        assert not exceptions(page)
        assert "after step 60" in page.evaluate(TITLE_JS)
        final = first_heatmap(page)["z"]
        assert final[0][7] > 0.5                         # reverse: query 0 reads key 7

        page.get_by_role("slider").focus()
        page.keyboard.press("Home")                      # the first checkpoint: step 0
        page.wait_for_function(f"() => ({TITLE_JS})().includes('after step 0')",
                               timeout=30_000)
        start = first_heatmap(page)["z"]
        assert start != final and start[0][7] < 0.5
    finally:
        context.close()
