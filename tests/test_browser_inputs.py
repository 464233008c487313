"""Inputs as they are (issue 18.12, 18.13), in headless Chromium: right-to-left text and bidi
controls never reorder the tokens, and a 1 MB word draws."""

import time

import pytest

from attnviz.app.shared.text import MAX_TEXT_CHARS
from tests.browser_helpers import (exceptions, page_at, tick_labels, type_sentence,
                                   wait_for_app)

pytestmark = pytest.mark.browser

TOKEN_LINE_JS = """() => {
    const heading = Array.from(document.querySelectorAll('h3'))
        .find(h => h.textContent.startsWith('Tokens'));
    const block = heading.closest('[data-testid="stVerticalBlock"]');
    const line = Array.from(block.querySelectorAll('[data-testid="stMarkdownContainer"]'))
        .find(m => m.querySelector('code'));
    return Array.from(line.querySelectorAll('code')).map(c => {
        const r = c.getBoundingClientRect();
        return {text: c.textContent, left: r.left, top: r.top};
    });
}"""


@pytest.fixture
def page(browser, app_url):
    with page_at(browser, app_url) as pg:
        yield pg


def test_an_override_and_right_to_left_words_keep_the_token_line_in_order(page):
    """U+202E once reversed every token after it on screen, and two Hebrew tokens side by side
    swapped places: each token is now isolated, the override is gone, and the tokens stand
    left to right in the order they were typed."""
    type_sentence(page, "one \u202etwo three שָׁלוֹם עוֹלָם four")
    page.get_by_text("four", exact=True).first.wait_for(timeout=30_000)
    shown = page.evaluate(TOKEN_LINE_JS)
    assert [s["text"] for s in shown] == ["one", "two", "three", "שָׁלוֹם", "עוֹלָם", "four"]
    assert len({round(s["top"]) for s in shown}) == 1, "one line"
    lefts = [s["left"] for s in shown]
    assert lefts == sorted(lefts), f"tokens out of order on screen: {shown}"
    box = page.get_by_role("textbox", name="Sentence")
    assert "\u202e" not in box.input_value()          # the box shows what the tokens read
    page.get_by_text("⟨U+202E⟩").first.wait_for(timeout=10_000)
    assert not exceptions(page)


def test_the_longest_word_the_box_takes_draws_with_its_label_cut(page):
    # the box takes MAX_TEXT_CHARS characters (a longer paste is cut there, tests/test_text_limits)
    started = time.perf_counter()
    type_sentence(page, "a " + "x" * (MAX_TEXT_CHARS - 4) + " b")
    page.get_by_text("Tokens (3)").wait_for(timeout=60_000)
    wait_for_app(page)
    print(f"a {MAX_TEXT_CHARS - 4}-character word: Home drawn "
          f"{time.perf_counter() - started:.1f} s after Enter")
    labels = tick_labels(page)
    assert "a" in labels and "b" in labels
    long = [lab for lab in labels if lab.startswith("x")]
    assert long and all(len(lab) <= 20 and lab.endswith("…") for lab in long), long[:3]
    assert not exceptions(page)
