"""The Train page in headless Chromium: train with few steps (the progress shows, then the heads),
the checkpoint slider redraws the heatmap, and "Step through this layer" opens the trained layer
on Step by step. Under CI=true these never skip."""

import pytest

from tests.browser_helpers import exceptions, first_heatmap, wait_for_app

pytestmark = pytest.mark.browser

TITLE_JS = """() => {
    const el = document.querySelector('.js-plotly-plot');
    return el && el.layout && el.layout.title ? el.layout.title.text : '';
}"""


def train_60_steps(page, app_url: str) -> None:
    """Open the Train page, train reverse for 60 steps and wait for the heads."""
    page.goto(f"{app_url}/train")
    page.get_by_role("heading", name="Train attention yourself").wait_for(timeout=60_000)
    page.get_by_text("This page has its own settings").wait_for(timeout=30_000)
    assert page.get_by_role("textbox", name="Sentence").count() == 0   # not used here
    steps = page.get_by_role("spinbutton", name="Steps")
    steps.fill("60")
    steps.press("Enter")
    train = page.get_by_test_id("stButton").get_by_role("button", name="Train")
    page.wait_for_timeout(500)                            # the number reaches the server
    train.click()
    page.get_by_text("Training reverse").wait_for(timeout=30_000)
    page.get_by_text("Weights after training step").wait_for(timeout=90_000)
    wait_for_app(page)
    assert not exceptions(page)


def test_train_with_few_steps_then_the_slider_redraws_the_heads(browser, app_url):
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    try:
        train_60_steps(page, app_url)
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


def test_step_through_this_layer_opens_the_trained_layer_on_step_by_step(browser, app_url):
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    try:
        train_60_steps(page, app_url)
        page.get_by_role("button", name="Step through this layer").click()
        page.get_by_role("heading", name="Step by step").first.wait_for(timeout=30_000)
        wait_for_app(page)
        assert not exceptions(page)
        assert page.get_by_role("radio", name="Toy model").is_checked()
        rows = page.eval_on_selector_all(".js-plotly-plot .ytick text",
                                         "els => els.map(e => e.textContent)")
        assert sorted(int(r.split(": ")[0]) for r in rows) == list(range(8))   # "0: 6" …
        page.get_by_text("The model's answer", exact=True).wait_for(timeout=30_000)
    finally:
        context.close()
