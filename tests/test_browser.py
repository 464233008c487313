"""End to end in headless Chromium: what only a browser shows. Under CI=true these never skip."""


import numpy as np
import pytest

import attnviz
from attnviz.i18n import t
from tests.message_helpers import lead
from tests.browser_helpers import (SharedContext, enter, exceptions, first_heatmap, open_page, page_at, running_app,
                                   tick_labels, type_into_first_cell, type_sentence,
                                   wait_for_app, wait_for_first_z)

pytestmark = pytest.mark.browser


@pytest.fixture
def page(browser, app_url):
    context = SharedContext(browser, viewport={"width": 1400, "height": 1000})
    pg = context.new_page()
    dialogs = []
    pg.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    pg.dialogs = dialogs
    pg.goto(app_url)
    wait_for_app(pg)
    yield pg
    context.close()


@pytest.fixture(scope="module")
def home(browser, app_url):
    """One tab at Home for the tests that only open pages and read them: each goes on from
    where the last one left it, by the navigation's links."""
    with page_at(browser, app_url) as pg:
        yield pg


def wait_for_tick(page, text: str) -> None:
    """Wait until some heatmap's axis label contains `text` (an x axis of many tokens may show
    one label in two; the y axis beside it shows them all)."""
    page.wait_for_function(
        "t => Array.from(document.querySelectorAll("
        "'.js-plotly-plot .xtick text, .js-plotly-plot .ytick text'))"
        ".some(e => e.textContent.includes(t))", arg=text, timeout=30_000)


def test_typed_sentence_becomes_the_heatmap_labels(page):
    type_sentence(page, "Thinking machines think")
    wait_for_tick(page, "machines")
    labels = tick_labels(page)
    for token in ("Thinking", "machines", "think"):
        assert any(token in lab for lab in labels), (token, labels[:20])
    assert not exceptions(page)


def test_chinese_sentence_renders(page):
    type_sentence(page, "早上好")
    wait_for_tick(page, "早")
    assert {"早", "上", "好"} <= {lab.strip() for lab in tick_labels(page)}


@pytest.mark.parametrize("link, title", [
    (t("nav.inputs"), t("inputs.title")), (t("nav.steps"), t("steps.title")),
    (t("nav.multihead"), t("multihead.title")), (t("nav.experiments"), t("experiments.title")),
    (t("nav.home"), t("home.title"))])
def test_every_page_opens_without_exception(home, link, title):
    open_page(home, link, title)
    assert home.locator(".js-plotly-plot").count() >= 1, link
    assert not exceptions(home), link


def test_html_in_the_sentence_shows_as_text(page):
    type_sentence(page, "<b>bold</b> <script>alert('x')</script> <img src=x onerror=alert(1)>")
    wait_for_tick(page, "bold")
    labels = tick_labels(page)
    assert any(lab.startswith("<") for lab in labels)
    assert any(lab.startswith("script") for lab in labels)
    assert page.locator(".js-plotly-plot b").count() == 0
    assert page.locator("img[src=x]").count() == 0
    assert page.dialogs == []
    assert not exceptions(page)


def test_editing_a_cell_changes_the_heatmap(page):
    open_page(page, t("nav.inputs"), t("inputs.title"))
    before = first_heatmap(page)["z"][0][0]
    type_into_first_cell(page, "7.5")
    wait_for_first_z(page, 0, 0, 7.5)
    assert before != 7.5
    assert not exceptions(page)


def test_a_shared_link_opens_the_same_heatmap(browser):
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    pg = context.new_page()
    with running_app() as fresh_url:   # the link is the server's very first request
        pg.goto(f"{fresh_url}/steps?sentence=the+cat+sat&d_model=8&num_heads=2&seed=3"
                "&step=weights&head=1")
        wait_for_app(pg)
        assert pg.get_by_role("link", name=t("nav.multihead")).count() >= 1   # the app's navigation
        shown = np.array(first_heatmap(pg)["z"], dtype=float)
        want = attnviz.trace_attention(
            attnviz.embed_tokens(["the", "cat", "sat"], 8, seed=3),
            attnviz.MultiHeadWeights.random(8, 2, seed=3)).weights[1]
        np.testing.assert_allclose(shown, want, rtol=1e-6)
        assert "sentence=the+cat+sat" in pg.url or "sentence=the%20cat%20sat" in pg.url
        assert not exceptions(pg)
    context.close()


def test_the_sentence_survives_switching_the_input_away_and_back(page):
    from playwright.sync_api import expect

    type_sentence(page, "my own words")
    page.get_by_role("radio", name="Preset").check(force=True)
    page.get_by_role("combobox").first.wait_for(timeout=30_000)   # the preset picker
    wait_for_app(page)
    page.get_by_role("radio", name="Sentence").check(force=True)
    box = page.get_by_role("textbox", name="Sentence")
    expect(box).to_have_value("my own words", timeout=30_000)   # the value may come a moment later
    wait_for_tick(page, "words")


def test_a_page_that_cannot_compute_still_shows_the_sidebar_to_fix_it(browser, app_url):
    """An empty sentence stops the page with an error; the sidebar, where it is fixed, is
    there (a sidebar drawn after the page would be lost to st.stop)."""
    context = SharedContext(browser, viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    try:
        page.goto(f"{app_url}/steps?sentence=%20%20")
        page.get_by_text(lead("status.cannot_compute")).wait_for(timeout=60_000)
        box = page.get_by_role("textbox", name=t("sidebar.sentence.label"))
        enter(page, box, "now it works")
        page.get_by_role("heading", name=t("steps.title")).wait_for(timeout=30_000)
        wait_for_app(page)
        assert not page.get_by_text(lead("status.cannot_compute")).count()
    finally:
        context.close()
