"""Typing and pasting as a person does: only a browser shows what a typed value becomes.
Under CI=true these never skip."""

import re

import numpy as np
import pytest

from attnviz.i18n import t
from tests.browser_helpers import (SharedContext, EDITOR, alerts, editor_cells, exceptions, first_heatmap,
                                   tick_labels, type_into_cell, type_into_first_cell,
                                   wait_for_app, wait_for_first_z, wait_for_idle)

pytestmark = pytest.mark.browser

W_Q_HEAD_1 = "/inputs?matrix=w_q&edit_head=1"
CELL = "W_Q of head 1, row 1 (d0), column 1 (q0)"     # as the page labels that cell


@pytest.fixture
def context(browser):
    ctx = SharedContext(browser, viewport={"width": 1400, "height": 1000})
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
    # 64 labels may be thinned to one in `step`: the last shown is within a step of w63
    shown = sorted({int(lab[1:]) for lab in tick_labels(page) if re.fullmatch(r"w\d+", lab)})
    step = shown[1] - shown[0]
    assert shown[0] == 0 and 63 - step < shown[-1] <= 63, shown
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
    page.get_by_text(t("downloads.label")).click()
    names = []
    for label in ("JSON", "NumPy .npz"):
        with page.expect_download(timeout=30_000) as download:
            page.get_by_role("button", name=label).click()
        names.append(download.value.suggested_filename)
    assert names == ["attnviz_trace.json", "attnviz_trace.npz"]
    assert not exceptions(page)


# 24 numbers of every kind (whole, decimal, negative, scientific), typed one after another into
# different cells of W_Q and W_K (head 0): (row, column, text, how, key). `how`: "double" =
# double-click the cell, "click" = click it and type, "keys" = type on, as in a spreadsheet, into
# the cell the last Enter (one down) or Tab (one right) moved to. Each ended with Enter or Tab.
TYPED = {
    "w_q": [(0, 0, "2", "double", "Tab"), (0, 1, "6", "keys", "Enter"),
            (1, 1, "-3", "keys", "Tab"), (1, 2, "1.5", "keys", "Enter"),
            (3, 0, "0.25", "click", "Enter"), (4, 0, "10", "keys", "Tab"),
            (4, 1, "3e-2", "keys", "Enter"), (6, 3, "-2.75", "double", "Enter"),
            (7, 3, "4", "keys", "Enter"), (8, 3, "-1.5E3", "keys", "Enter"),
            (5, 2, "7", "click", "Tab"), (5, 3, "2.5e1", "keys", "Enter")],
    "w_k": [(0, 0, "5", "click", "Tab"), (0, 1, "0.5", "keys", "Tab"),
            (0, 2, "-6", "keys", "Enter"), (1, 2, "12", "keys", "Enter"),
            (2, 2, "-0.125", "keys", "Tab"), (2, 3, "1e2", "keys", "Enter"),
            (4, 0, "9", "double", "Enter"), (5, 0, "-4e-3", "keys", "Tab"),
            (5, 1, "1", "keys", "Enter"), (7, 2, "0.75", "double", "Tab"),
            (7, 3, "-7", "keys", "Enter"), (8, 3, "8", "keys", "Enter")],
}
SHOWN = {"w_q": "W_Q", "w_k": "W_K"}


def paste_box(page) -> np.ndarray:
    """The matrix in the page's paste box: the stored matrix, every number written exactly."""
    box = page.get_by_label(t("edit.paste.text"), exact=True)
    return np.array([[float(v) for v in line.split(",")]
                     for line in box.input_value().splitlines()])


def editor_text(page, row: int, col: int) -> str:
    """The text the first data editor shows in number cell (row, col) (its accessible
    table, once drawn)."""
    cell = f'{EDITOR} #glide-cell-{col + 1}-{row}'
    page.wait_for_selector(cell, state="attached", timeout=30_000)
    return page.locator(cell).text_content()


def open_matrix(page, name: str) -> None:
    page.get_by_role("radio", name=SHOWN[name], exact=True).click()
    page.wait_for_function(f"""() => Array.from(document.querySelectorAll('.gtitle'))
        .some(t => t.textContent === '{SHOWN[name]} — head 0')""", timeout=30_000)
    wait_for_app(page)


def test_24_numbers_typed_at_a_persons_pace_all_land_exactly(context, app_url):
    # one round: the 24 cells hold every kind of number, every way into a cell and both keys
    # (three identical rounds of the same 24 ran before; a dropped keystroke would show in one)
    page = context.new_page()
    page.goto(app_url + "/inputs?matrix=w_q&edit_head=0")
    wait_for_app(page)
    before = {}
    for name, typed in TYPED.items():
        for (r, c, _, _, key), (row, col, _, how, _) in zip(typed, typed[1:]):
            assert how != "keys" or (row, col) == ((r + 1, c) if key == "Enter" else (r, c + 1))
        if name != "w_q":
            open_matrix(page, name)
        before[name] = np.array(first_heatmap(page)["z"])
        cells = editor_cells(page, columns=before[name].shape[1])
        for row, col, text, how, key in typed:
            type_into_cell(page, cells, row, col, text, how=how, commit=key)
            page.wait_for_timeout(1100)                  # a person's pause between cells
    wait_for_app(page)
    for name, typed in TYPED.items():
        expected = before[name].copy()
        for row, col, text, _, _ in typed:
            expected[row, col] = float(text)             # Python's reading of the text
        open_matrix(page, name)
        shown = {"heatmap": np.array(first_heatmap(page)["z"]), "paste box": paste_box(page)}
        wrong = {where: [(r, c, t, float(got[r, c])) for r, c, t, _, _ in typed
                         if got[r, c] != float(t)] for where, got in shown.items()}
        # the editor writes a cell to 4 significant digits (issue 34.10: raw float64 was cut
        # in its cell); what it stores, the heatmap and the paste box are exact (above)
        wrong["editor"] = [(r, c, t, editor_text(page, r, c)) for r, c, t, _, _ in typed
                           if editor_text(page, r, c) not in (t, repr(float(t)),
                                                              format(float(t), ".4g"))]
        assert not any(wrong.values()), f"{name}: typed (row, column, text), holds: {wrong}"
        for where, got in shown.items():            # and no other cell changed
            np.testing.assert_array_equal(got, expected, err_msg=f"{name} {where}")
    assert not exceptions(page)
    assert not [a for a in alerts(page) if "W_Q" in a or "W_K" in a], alerts(page)


def test_a_refused_cell_keeps_its_value_and_names_itself_while_the_others_land(context,
                                                                             app_url):
    page = context.new_page()
    page.goto(app_url + "/inputs?matrix=w_q&edit_head=0")
    wait_for_app(page)
    before = np.array(first_heatmap(page)["z"])
    cells = editor_cells(page, columns=before.shape[1])
    for row, col, text, how, key in [(0, 0, "2", "double", "Enter"), (1, 0, "abc", "keys", "Tab"),
                                     (1, 1, "-0.5", "keys", "Enter"), (3, 2, "1,5", "click",
                                                                        "Enter")]:
        type_into_cell(page, cells, row, col, text, how=how, commit=key)
        page.wait_for_timeout(1100)
    wait_for_app(page)
    refused = [a for a in alerts(page) if "W_Q of head 0" in a]
    assert len(refused) == 1, alerts(page)
    assert "W_Q of head 0, row 2 (d1), column 1 (q0): 'abc' is not a number" in refused[0]
    assert "W_Q of head 0, row 4 (d3), column 3 (q2): '1,5' is not a number" in refused[0]
    assert t("edit.kept_previous", count=2) in refused[0]
    expected = before.copy()
    expected[0, 0], expected[1, 1] = 2.0, -0.5          # the others landed; d1/q0, d3/q2 kept
    np.testing.assert_array_equal(first_heatmap(page)["z"], expected)
    type_into_cell(page, cells, 1, 0, "3", how="double")     # the learner fixes one cell
    wait_for_first_z(page, 1, 0, 3.0)
    refused = [a for a in alerts(page) if "W_Q of head 0" in a]
    assert len(refused) == 1 and "(d1)" not in refused[0] and "'1,5'" in refused[0], refused
    assert t("edit.kept_previous", count=1) in refused[0]
    assert not exceptions(page)


def wait_for_alert(page, text: str) -> None:
    page.wait_for_function("""(text) => Array.from(document.querySelectorAll(
        '[data-testid="stAlert"]')).some(a => a.textContent.replace(/\\u2060/g, '')
        .includes(text))""", arg=text, timeout=30_000)


def test_a_huge_weight_names_its_cell_and_step_and_reset_brings_the_heatmaps_back(context,
                                                                                  app_url):
    overflow = "W_Q of head 0, row 1 (d0), column 1 (q0) = 1e308 makes the scores QKᵀ overflow"
    page = context.new_page()
    page.goto(app_url + "/inputs?scaled=0&matrix=w_q&edit_head=0")
    wait_for_app(page)
    type_into_first_cell(page, "1e308")
    wait_for_alert(page, overflow)
    wait_for_first_z(page, 0, 0, 1e308)           # the editor and W_Q's own heatmap stay
    assert page.locator(EDITOR).count() == 1
    page.get_by_role("link", name=t("nav.home")).first.click()
    wait_for_alert(page, overflow)                # Home: the error and the ways out
    wait_for_idle(page, 30_000)
    assert page.locator(".js-plotly-plot").count() == 0
    page.get_by_role("button", name="Change W_Q of head 0 on Inputs & weights").click()
    page.get_by_role("heading", name=t("inputs.title")).first.wait_for(timeout=30_000)
    wait_for_alert(page, overflow)
    page.reload()                                 # the edit is in the link: still reachable
    wait_for_alert(page, overflow)
    wait_for_first_z(page, 0, 0, 1e308)
    page.get_by_role("button", name="Reset edits").first.click()
    page.wait_for_function("""() => !Array.from(document.querySelectorAll(
        '[data-testid="stAlert"]')).some(a => a.textContent.includes('overflow'))""",
                           timeout=30_000)
    page.get_by_role("link", name=t("nav.home")).first.click()
    page.get_by_role("heading", name=t("home.title")).first.wait_for(
        timeout=30_000)
    wait_for_app(page)                            # the heatmaps are back
    assert not [a for a in alerts(page) if "overflow" in a]
    assert not exceptions(page)


def test_typed_cells_are_in_the_link_so_a_reload_keeps_them(context, app_url):
    page = context.new_page()
    page.goto(app_url + "/inputs?matrix=w_q&edit_head=0")
    wait_for_app(page)
    cells = editor_cells(page, columns=4)
    for row, col, text, how in [(0, 0, "2", "double"), (2, 1, "-0.5", "click"),
                                (4, 3, "3e-2", "double")]:     # the first edit reruns the
        type_into_cell(page, cells, row, col, text, how=how)   # page, the others only the
        page.wait_for_timeout(1100)                            # editor and its heatmap
    wait_for_first_z(page, 4, 3, 0.03)
    wait_for_app(page)                          # the run that drew it wrote the link, then ended
    page.wait_for_function("() => location.search.includes('edits=')", timeout=30_000)
    page.reload()
    wait_for_app(page)
    z = first_heatmap(page)["z"]
    assert (z[0][0], z[2][1], z[4][3]) == (2.0, -0.5, 0.03)
    assert not exceptions(page)


ANSWERS_JS = """() => {
    for (const tr of document.querySelectorAll('[data-testid="stDataFrame"] tbody tr')) {
        const cells = Array.from(tr.querySelectorAll('td')).map(td => td.textContent);
        if (cells[0] === 'with your edits') return cells.slice(1);
    }
    return null;
}"""


def answers_with_edits(page) -> list[str]:
    """The Toy model's answer with the edits, as the page's answers table shows it."""
    return page.evaluate(ANSWERS_JS)


def answer_drawn(page, other_than: list[str] | None = None) -> None:
    """Wait until the answers table shows an answer with the edits (other than `other_than`,
    when given: the one an earlier edit gave); after 10 s go on, for the test's assertions to
    say what is shown."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    try:
        page.wait_for_function(f"""(before) => {{
            const now = ({ANSWERS_JS})();
            return now !== null && JSON.stringify(now) !== JSON.stringify(before);
        }}""", arg=other_than, timeout=10_000)
    except PlaywrightTimeout:
        pass


def test_in_the_toy_model_mode_each_typed_cell_updates_the_models_answer(context, app_url):
    from tests.test_browser_train import train_60_steps

    page = context.new_page()
    train_60_steps(page, app_url)
    page.get_by_role("button", name=t("train.step_through.label")).click()
    page.get_by_role("heading", name=t("steps.title")).first.wait_for(timeout=30_000)
    wait_for_app(page)
    page.get_by_role("link", name=t("nav.inputs")).first.click()
    page.get_by_role("heading", name=t("inputs.title")).first.wait_for(timeout=30_000)
    wait_for_app(page)
    page.get_by_role("radio", name="W_O", exact=True).click()
    page.wait_for_function("""() => Array.from(document.querySelectorAll('.gtitle'))
        .some(t => t.textContent === 'W_O')""", timeout=30_000)
    wait_for_app(page)
    cells = editor_cells(page, columns=2)
    type_into_cell(page, cells, 0, 0, "0.5")           # the first edit: the page runs whole
    wait_for_first_z(page, 0, 0, 0.5)
    wait_for_app(page)
    first = answers_with_edits(page)
    page.wait_for_timeout(1100)
    type_into_cell(page, cells, 1, 1, "1e6")           # a later one: the answer must follow
    wait_for_first_z(page, 1, 1, 1e6)
    wait_for_app(page)
    answer_drawn(page, other_than=first)
    shown = answers_with_edits(page)
    page.get_by_role("link", name=t("nav.steps")).first.click()    # away and back: the page
    page.get_by_role("heading", name=t("steps.title")).first.wait_for(timeout=30_000)
    wait_for_app(page)
    page.get_by_role("link", name=t("nav.inputs")).first.click()  # computed afresh
    page.get_by_role("heading", name=t("inputs.title")).first.wait_for(timeout=30_000)
    wait_for_app(page)
    answer_drawn(page)
    afresh = answers_with_edits(page)
    assert afresh != first, "the second edit should change the answer (premise)"
    assert shown == afresh, (first, shown, afresh)
    assert not exceptions(page)
