"""The Train page in headless Chromium: train with few steps (the progress shows, then the heads),
the checkpoint slider redraws the heatmap, and "Step through this layer" opens the trained layer
on Step by step. Under CI=true these never skip."""

import re

import pytest

from attnviz.i18n import t
from tests.message_helpers import lead
from tests.browser_helpers import (SharedContext, enter, exceptions, first_heatmap, wait_for_app,
                                   wait_for_idle, wait_for_layout)

pytestmark = pytest.mark.browser

TITLE_JS = """() => {
    const el = document.querySelector('.js-plotly-plot');
    return el && el.layout && el.layout.title ? el.layout.title.text : '';
}"""


def train_60_steps(page, app_url: str) -> None:
    """Open the Train page, train reverse for 60 steps and wait for the heads."""
    page.goto(f"{app_url}/train")
    page.get_by_role("heading", name=t("train.title")).wait_for(timeout=60_000)
    page.get_by_text(lead("sidebar.own_settings")).wait_for(timeout=30_000)
    assert page.get_by_role("textbox", name=t("sidebar.sentence.label")).count() == 0   # unused
    steps = page.get_by_role("spinbutton", name=t("train.field.steps"))
    enter(page, steps, "60", timeout_ms=120_000)          # the number reaches the server
    train = page.get_by_test_id("stButton").get_by_role("button", name="Train")
    train.click()
    # (no wait for the progress bar's "Training reverse": a 60-step run can end between polls)
    page.get_by_text(t("train.checkpoint.label")).wait_for(timeout=120_000)
    wait_for_app(page)
    assert not exceptions(page)


def test_train_with_few_steps_then_the_slider_redraws_the_heads(browser, app_url):
    context = SharedContext(browser, viewport={"width": 1400, "height": 1000})
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
    context = SharedContext(browser, viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    try:
        train_60_steps(page, app_url)
        page.get_by_role("button", name=t("train.step_through.label")).click()
        page.get_by_role("heading", name=t("steps.title")).first.wait_for(timeout=30_000)
        wait_for_app(page)
        assert not exceptions(page)
        assert page.get_by_role("radio", name="Toy model").is_checked()
        wait_for_layout(page)            # the charts drawn: plotly draws after the script ends
        rows = page.eval_on_selector_all(".js-plotly-plot .ytick text",
                                         "els => els.map(e => e.textContent)")
        assert sorted(int(r.split(": ")[0]) for r in rows) == list(range(8))   # "0: 6" …
        bold = re.search(r"\*\*(.+?)\*\*", lead("toy_view.heading")).group(1)  # its heading
        page.get_by_text(bold, exact=True).wait_for(timeout=30_000)
    finally:
        context.close()


def test_a_typed_99999_is_kept_shown_as_an_error_and_turns_train_off(browser, app_url):
    """Issue 18.6: typing 99999 into Length left it in the box with the error only in a
    tooltip, and Train trained length 8. Typed as a person does: click, select, type, Enter."""
    context = SharedContext(browser, viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    try:
        page.goto(f"{app_url}/train")
        page.get_by_role("heading", name=t("train.title")).wait_for(timeout=60_000)
        train = page.get_by_test_id("stButton").get_by_role("button", name="Train")
        train.wait_for(timeout=60_000)
        wait_for_idle(page)                                         # the first run has ended
        assert train.is_enabled()
        for label, low, high in ((t("train.field.length"), 3, 16),
                                 (t("train.field.steps"), 1, 5000)):
            message = t("train.error.range", field=label, low=low, high=high, value="99999")
            box = page.get_by_role("spinbutton", name=label)
            box.click()
            page.keyboard.press("Control+A")
            page.keyboard.type("99999", delay=80)
            page.keyboard.press("Enter")
            page.get_by_text(message).wait_for(timeout=30_000)
            assert box.input_value() == "99999"
            assert train.is_disabled()
            assert page.get_by_text(t("train.button.off")) \
                .is_visible()
            box.click()
            page.keyboard.press("Control+A")
            page.keyboard.type("8", delay=80)
            page.keyboard.press("Tab")
            page.get_by_text(message).wait_for(state="detached", timeout=30_000)
        assert train.is_enabled()
        assert not exceptions(page)
    finally:
        context.close()


def test_a_run_stops_once_streamlit_has_dropped_the_learners_session(browser, tmp_path):
    """Issue 19.2: a run outlived its learner by minutes. Here the learner starts a long run
    and closes the tab; Streamlit keeps the session server.disconnectedSessionTTL = 2 s for a
    reconnect, then drops it, and the pool's log must say the run stopped (its learner left)
    within 10 s of that."""
    import subprocess
    import sys
    import time

    from tests.browser_helpers import ROOT, free_port, stop_process, wait_healthy

    port, log_path = free_port(), tmp_path / "server.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port),
             "--server.address", "127.0.0.1", "--server.headless", "true",
             "--browser.gatherUsageStats", "false", "--server.disconnectedSessionTTL", "2"],
            cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_healthy(url, proc)
        context = browser.new_context(viewport={"width": 1400, "height": 1000})
        page = context.new_page()
        page.goto(f"{url}/train?toy_steps=5000")          # a long run, by the page's link
        page.get_by_role("spinbutton", name="Steps").wait_for(timeout=90_000)
        wait_for_idle(page, 120_000)
        page.get_by_test_id("stButton").get_by_role("button", name="Train").click()
        page.get_by_text("Training reverse").wait_for(timeout=60_000)
        assert "left" not in log_path.read_text()
        context.close()                                  # the learner leaves
        closed = time.monotonic()
        while time.monotonic() - closed < 2 + 10 and " left at step " not in \
                log_path.read_text():
            time.sleep(0.2)
        text = log_path.read_text()
        assert " left at step " in text, text[-2000:]
        assert " finished at step " not in text
    finally:
        stop_process(proc)
