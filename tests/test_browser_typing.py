"""Typing and pasting as a person does: only a browser shows what a typed value becomes.
Under CI=true these never skip."""

import pytest

from tests.browser_helpers import (alerts, exceptions, first_heatmap, tick_labels,
                                   type_into_first_cell, wait_for_app, wait_for_first_z)

pytestmark = pytest.mark.browser

W_Q_HEAD_1 = "/inputs?matrix=w_q&edit_head=1"
CELL = "W_Q of head 1, row 1 (d0), column 1 (q0)"     # as the page labels that cell


@pytest.fixture
def context(browser):
    ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
    yield ctx
    ctx.close()


def open_w_q(context, app_url):
    page = context.new_page()
    page.goto(app_url + W_Q_HEAD_1)
    wait_for_app(page)
    return page


@pytest.mark.parametrize("typed, stored", [
    ("1e-3", 0.001), ("2.5e2", 250.0), ("-.5", -0.5), ("−2E+1", -20.0),
])
def test_a_typed_number_is_stored_exactly_as_written(context, app_url, typed, stored):
    page = open_w_q(context, app_url)
    type_into_first_cell(page, typed)
    wait_for_first_z(page, 0, 0, stored)       # the W_Q heatmap below the editor
    assert not exceptions(page)
    assert not [a for a in alerts(page) if CELL in a]


@pytest.mark.parametrize("typed, problem", [
    ("1,5", "'1,5' is not a number (write the decimal point as a dot: 1.5)"),
    ("1e400", "'1e400' is too large"),
    ("abc", "'abc' is not a number"),
])
def test_a_number_that_cannot_be_stored_as_written_is_refused_naming_the_cell(
        context, app_url, typed, problem):
    page = open_w_q(context, app_url)
    before = first_heatmap(page)["z"]
    type_into_first_cell(page, typed)
    page.get_by_text(CELL).first.wait_for(timeout=30_000)
    wait_for_app(page)
    message = [a for a in alerts(page) if CELL in a]
    assert message and problem in message[0], alerts(page)
    assert first_heatmap(page)["z"] == before          # nothing stored
    assert not exceptions(page)


def test_a_pasted_article_is_accepted_and_cut_to_the_token_limit(context, app_url):
    page = context.new_page()
    page.goto(app_url)
    wait_for_app(page)
    article = " ".join(f"w{i}" for i in range(2800))            # 14,689 characters
    assert len(article) > 14_000
    box = page.get_by_role("textbox", name="Sentence")
    box.click()
    page.keyboard.press("Control+A")
    page.keyboard.insert_text(article)                         # one input event, as a paste
    box.press("Enter")
    page.get_by_text("The sentence has 2800 tokens; only the first 64").first.wait_for(
        timeout=30_000)
    wait_for_app(page)
    assert box.input_value() == article
    labels = tick_labels(page)
    assert "w63" in labels and "w64" not in labels
    assert not exceptions(page)


def test_markdown_in_a_link_or_a_typed_cell_shows_as_text_never_a_link_or_image(context,
                                                                                app_url):
    page = context.new_page()
    requests = []
    page.on("request", lambda r: requests.append(r.url))
    page.goto(app_url + "/?%5BYour+session+expired%5D(https://evil.example/login)=1"
                        "&!%5Bx%5D(https://evil.example/pixel.png)=1")
    wait_for_app(page)
    page.get_by_text("Your session expired").first.wait_for(timeout=30_000)
    assert page.locator('a[href*="evil.example"]').count() == 0
    assert page.locator('img[src*="evil.example"]').count() == 0
    assert any("[Your session expired](https://evil.example/login)" in a for a in alerts(page))
    page.goto(app_url + W_Q_HEAD_1)
    wait_for_app(page)
    type_into_first_cell(page, "[x](https://e.io)")          # short: shown whole
    page.get_by_text(CELL).first.wait_for(timeout=30_000)
    assert page.locator('a[href*="e.io"]').count() == 0
    assert any("'[x](https://e.io)' is not a number" in a for a in alerts(page))
    assert not [u for u in requests if u.startswith(("http://evil", "https://evil"))]


def test_two_quick_downloads_both_arrive(context, app_url):
    page = context.new_page()
    page.goto(app_url + "/steps")
    wait_for_app(page)
    page.get_by_text("Download every intermediate").click()
    names = []
    for label in ("JSON", "NumPy .npz"):
        with page.expect_download(timeout=30_000) as download:
            page.get_by_role("button", name=label).click()
        names.append(download.value.suggested_filename)
    assert names == ["attnviz_trace.json", "attnviz_trace.npz"]
    assert not exceptions(page)
