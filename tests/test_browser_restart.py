"""Every click counts, even the first one after the server restarted (issue 14.6): the
browser keeps the old page on screen and reconnects to a new session, whose first run is the
click. Streamlit does not know the new session's callbacks yet, and on a fresh server it runs
a sub-page alone first; neither may lose the click."""

import pytest

from tests.browser_helpers import free_port, running_app, wait_for_app

pytestmark = pytest.mark.browser


def _step_title(page) -> str:
    return page.locator('[data-testid="stHeading"]').nth(1).inner_text()


def _settled_title(page) -> str:
    """The step's title once the page has finished every run the click started."""
    page.wait_for_timeout(1_500)
    page.wait_for_function(
        "() => !document.querySelector('[data-testid=\"stStatusWidget\"]')", timeout=30_000)
    page.wait_for_timeout(1_500)
    return _step_title(page)


def test_the_first_click_after_a_server_restart_is_not_lost(browser):
    port = free_port()
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    try:
        with running_app(port=port) as url:
            page.goto(f"{url}/steps?sentence=one+two+three")
            wait_for_app(page)
            assert _step_title(page).startswith("Input X")
            page.get_by_role("button", name="Next ▶").click()
            assert _settled_title(page).startswith("Queries Q")
        with running_app(port=port):                 # a new server on the same address
            page.wait_for_timeout(6_000)             # the browser reconnects (nothing reruns)
            assert _step_title(page).startswith("Queries Q")
            page.get_by_role("button", name="Next ▶").click()
            assert _settled_title(page).startswith("Keys K")
            page.get_by_role("button", name="Next ▶").click()    # and the ones after it
            assert _settled_title(page).startswith("Values V")
            page.get_by_role("button", name="◀ Previous").click()
            assert _settled_title(page).startswith("Keys K")
            assert page.get_by_role("textbox", name="Sentence").input_value() == \
                "one two three"                          # app.py's sidebar is there
    finally:
        context.close()
