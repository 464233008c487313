"""Every click counts, even the first one after the server restarted (issue 14.6): the
browser keeps the old page on screen and reconnects to a new session, whose first run is the
click. Streamlit does not know the new session's callbacks yet, and on a fresh server it runs
a sub-page alone first; neither may lose the click."""

import pytest

from attnviz.i18n import t
from tests.message_helpers import lead
from tests.browser_helpers import (a_run, connections_lost, first_heatmap, free_port,
                                   running_app, wait_for_app, wait_for_layout,
                                   wait_for_reconnect)

pytestmark = pytest.mark.browser


@pytest.fixture
def page(browser):
    """A tab of its own context (the server restarts under it), downloads kept."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000},
                                  accept_downloads=True)
    yield context.new_page()
    context.close()


def _step_title(page) -> str:
    return page.locator('[data-testid="stHeading"]').nth(1).inner_text()


def _click_and_settle(page, button: str) -> str:
    """Click `button`; the step's title once the page has finished every run the click started
    (a run begun, then no run for as long as the charts take to hold still)."""
    with a_run(page, timeout_ms=30_000):
        page.get_by_role("button", name=button).click()
    wait_for_layout(page)
    return _step_title(page)


def test_the_first_click_after_a_server_restart_is_not_lost(page):
    port = free_port()
    with running_app(port=port) as url:
        page.goto(f"{url}/steps?sentence=one+two+three")
        wait_for_app(page)
        assert _step_title(page).startswith("Input X")
        assert _click_and_settle(page, "Next ▶").startswith("Queries Q")
        lost = connections_lost(page)
    with running_app(port=port):                 # a new server on the same address
        wait_for_reconnect(page, lost)           # the browser reconnects (nothing reruns)
        assert _step_title(page).startswith("Queries Q")
        assert _click_and_settle(page, "Next ▶").startswith("Keys K")
        # and the ones after it
        assert _click_and_settle(page, "Next ▶").startswith("Values V")
        assert _click_and_settle(page, "◀ Previous").startswith("Keys K")
        assert page.get_by_role("textbox", name="Sentence").input_value() == \
            "one two three"                          # app.py's sidebar is there


def test_the_first_click_after_a_restart_on_a_pick_the_link_carries_is_not_lost(page):
    """The link says W_Q; the first click after the restart picks W_K. The new session reads
    the link at its first run, and session state wins over a widget's value: the click must
    still be what the page shows, the link following it, the other settings kept."""
    port = free_port()
    with running_app(port=port) as url:
        page.goto(f"{url}/inputs?d_model=8")
        wait_for_app(page)
        with a_run(page, timeout_ms=30_000):
            page.get_by_role("radio", name="W_Q").click()
        wait_for_app(page)
        assert "matrix=w_q" in page.url
        lost = connections_lost(page)
    with running_app(port=port):                 # a new server on the same address
        wait_for_reconnect(page, lost)
        page.get_by_role("radio", name="W_K").click()
        page.wait_for_url("**matrix=w_k**", timeout=30_000)
        wait_for_app(page)
        assert page.get_by_role("radio", name="W_K").get_attribute("aria-checked") == "true"
        assert page.get_by_role("radio", name="W_Q").get_attribute("aria-checked") == "false"
        assert "d_model=8" in page.url
        assert len(first_heatmap(page)["y"]) == 8       # W_K: d_model rows


def _matrix_text(x) -> str:
    return "\n".join(", ".join(repr(float(v)) for v in row) for row in x)


def test_edits_too_large_for_the_link_are_never_lost_silently(page, tmp_path):
    """Issue 18.17: an edit of X (11 × 64) too large for the link. At once the sidebar says a
    reload or restart loses it and to download the .npz; after a server restart, the first
    click shows the generated X with a notice naming the lost edit, and the downloaded .npz
    loads it back."""
    import numpy as np

    port = free_port()
    x = np.round(np.random.default_rng(3).standard_normal((11, 64)), 6)
    shown = x.astype(np.float32)                    # what a heatmap of 704 cells is sent as
    npz = tmp_path / "attnviz_trace.npz"
    with running_app(port=port) as url:
        page.goto(f"{url}/inputs?d_model=64")
        wait_for_app(page)
        page.get_by_text(lead("edit.paste.expander", matrix="X")).click()
        page.get_by_label(t("edit.paste.text"), exact=True) \
            .fill(_matrix_text(x))
        with a_run(page, timeout_ms=30_000):         # the click's run, seen to end
            page.get_by_role("button", name=t("edit.paste.apply")).click()
        said = lead("link.edits_session_only", names="X")       # up to the .npz's name
        warning = page.get_by_text(said)
        warning.first.wait_for(timeout=30_000)
        assert said in warning.first.inner_text()
        assert "unsaved_edits=X" in page.url and "edits=" not in page.url.replace(
            "unsaved_edits", "")
        wait_for_app(page)
        np.testing.assert_array_equal(np.array(first_heatmap(page)["z"]), shown)
        with page.expect_download(timeout=30_000) as download:
            page.get_by_role("button", name=t("link.keep_edits")).click()
        download.value.save_as(npz)
        lost = connections_lost(page)
    with running_app(port=port):                 # a new server on the same address
        wait_for_reconnect(page, lost)           # the browser reconnects (nothing reruns)
        page.get_by_role("radio", name="W_Q").click()       # the first click after it
        lost = page.get_by_text(t("link.edits_lost", names="X"))
        lost.first.wait_for(timeout=60_000)
        with a_run(page, timeout_ms=30_000):
            page.get_by_role("radio", name="X", exact=True).click()
        wait_for_app(page)
        assert not np.array_equal(np.array(first_heatmap(page)["z"]), shown)   # generated
        uploader = page.locator('[data-testid="stFileUploader"]').filter(
            has_text=t("link.restore.label"))
        uploader.locator('input[type="file"]').set_input_files(str(npz))
        page.get_by_text("your edits of X are back").first.wait_for(timeout=60_000)
        wait_for_app(page)
        np.testing.assert_array_equal(np.array(first_heatmap(page)["z"]), shown)
        assert page.get_by_text(t("link.edits_lost", names="X")).count() == 0

