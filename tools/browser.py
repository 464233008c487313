"""A browser on the app, as a person uses it: Debian's headless Chromium (Playwright) waited
on until the page is drawn, and a data editor's cells reached and typed into with the mouse and
the keyboard. The parts the benchmarks use too; tests/browser_helpers.py holds the rest."""

from __future__ import annotations

import shutil

CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run",
                 "--disable-quic"]


def chromium_path() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def wait_for_app(page, timeout_ms: int = 60_000) -> None:
    """Wait until the script has finished running, connected, and the page is drawn: a
    heatmap among its charts, every chart drawn, no element still a placeholder."""
    page.wait_for_selector(".js-plotly-plot .main-svg", timeout=timeout_ms)
    wait_for_idle(page, timeout_ms)


# Streamlit's app root says what the script is doing and how the browser is connected
# (data-test-script-state: initial, running, notRunning …; data-test-connection-state:
# CONNECTED …), the attributes Streamlit's own browser tests read. (Its status widget, the
# "running" figure, is never drawn here: a wait for it to be gone passes at once.)
IDLE_JS = """() => {
    const app = document.querySelector('[data-testid="stApp"]');
    return app !== null && app.getAttribute('data-test-script-state') === 'notRunning'
        && app.getAttribute('data-test-connection-state') === 'CONNECTED'
        && !document.querySelector('[data-testid="stMain"] [data-testid="stSkeleton"],'
                                   + ' [data-testid="stPlotlyChart"] > div:empty');
}"""


def wait_for_idle(page, timeout_ms: int = 60_000) -> None:
    """Wait until the script is not running, the browser is connected and every element of
    the main area is drawn (charts too); a page with no chart passes."""
    wait_for_js(page, IDLE_JS, None, timeout_ms)


# what the page was doing, for a wait that timed out: which of IDLE_JS's conditions failed
STATE_JS = """() => {
    const app = document.querySelector('[data-testid="stApp"]');
    return {script: app && app.getAttribute('data-test-script-state'),
            connection: app && app.getAttribute('data-test-connection-state'),
            skeletons: document.querySelectorAll('[data-testid="stMain"] [data-testid="stSkeleton"]').length,
            empty_charts: document.querySelectorAll('[data-testid="stPlotlyChart"] > div:empty').length,
            runs: window.__attnvizRuns || null,
            heading: Array.from(document.querySelectorAll('h1, h2, h3')).map(h => h.textContent).slice(0, 3)};
}"""


def wait_for_js(page, js: str, arg, timeout_ms: int) -> None:
    """page.wait_for_function(js, arg); on a timeout, an AssertionError saying what the page was
    doing (STATE_JS), so that an intermittent failure names its cause."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    try:
        page.wait_for_function(js, arg=arg, timeout=timeout_ms)
    except PlaywrightTimeout:
        raise AssertionError(f"waited {timeout_ms} ms; the page: "
                             f"{page.evaluate(STATE_JS)}") from None


# plotly keeps numpy arrays as {dtype, bdata (base64), shape} in fig.data: decode them here
DECODE_Z_JS = """(z) => {
    if (!z || !z.bdata) return Array.from(z, row => Array.from(row));
    const bin = atob(z.bdata);
    const bytes = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
    const T = {f8: Float64Array, f4: Float32Array, i4: Int32Array}[z.dtype];
    const flat = Array.from(new T(bytes.buffer));
    const cols = Number(String(z.shape).split(',')[1]);
    const rows = [];
    for (let i = 0; i < flat.length; i += cols) rows.push(flat.slice(i, i + cols));
    return rows;
}"""


EDITOR = '[class*="st-key-editor_"] [data-testid="stDataFrame"]'   # the weight editor's grid


CELL_EDITOR = "textarea.gdg-input"          # the grid's text box over a cell being edited

# what holds the keyboard, and what the page was doing: for a wait on a grid that timed out
FOCUS_JS = """() => {
    const a = document.activeElement;
    return {focus: [a.tagName, a.getAttribute('data-testid'), a.className].join(' '),
            in_grid: !!a.closest('[data-testid="stDataFrame"]'), url: location.href};
}"""


def focus_grid(page, grid) -> None:
    """Click `grid` (a data editor's locator) and wait until its canvas holds the keyboard:
    keys pressed before go to the page, not to the grid."""
    grid.scroll_into_view_if_needed()
    grid.click()
    wait_for_js(page, """(grid) => grid.contains(document.activeElement)""",
                grid.element_handle(), 10_000)


def wait_for_cell_editor(page, timeout_ms: int = 10_000):
    """The text box the grid opens over a cell being edited, once it is there; if it does not
    open, an AssertionError saying what held the keyboard and what the page was doing."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    box = page.locator(CELL_EDITOR).first
    try:
        box.wait_for(timeout=timeout_ms)
    except PlaywrightTimeout:
        raise AssertionError(f"no cell editor after {timeout_ms} ms; the keyboard: "
                             f"{page.evaluate(FOCUS_JS)}; the page: "
                             f"{page.evaluate(STATE_JS)}") from None
    return box


def editor_cells(page, columns: int) -> dict:
    """Where the first data editor draws its number cells, from its top left corner: {"x":
    [centre of each number column], "y0": centre of the first row, "row": row height} in
    pixels. The grid is a canvas, so each column is measured once with the keyboard (open its
    first cell's text box, read where it is, Escape: nothing is edited). A column measured
    after the grid scrolled sideways to show it (a grid wider than the page) is off by that
    scroll; the others are right once Ctrl+Home has scrolled back."""
    grid = page.locator(EDITOR).first
    focus_grid(page, grid)
    corner = grid.bounding_box()
    page.keyboard.press("Control+Home")               # the row labels' first cell
    boxes = []
    for col in range(columns + 1):
        page.keyboard.press("ArrowRight" if col < columns else "ArrowDown")
        page.keyboard.press("Enter")
        box = wait_for_cell_editor(page)
        boxes.append(box.bounding_box())
        page.keyboard.press("Escape")
        box.wait_for(state="detached", timeout=10_000)
    page.keyboard.press("Control+Home")
    centres = [b["x"] + b["width"] / 2 - corner["x"] for b in boxes[:columns]]
    y0 = boxes[0]["y"] + boxes[0]["height"] / 2 - corner["y"]
    return {"x": centres, "y0": y0, "row": boxes[-1]["y"] - boxes[-2]["y"]}


def double_click(page, x: float, y: float) -> None:
    """Double-click at (x, y) with a hand's timing (a press lasts ~60 ms, ~120 ms between the
    clicks). Playwright's own dblclick sends both clicks within a millisecond, faster than any
    hand: the grid then opens its cell editor twice and drops what is typed into it, on a
    bare page with one data editor too."""
    page.mouse.move(x, y)
    for count in (1, 2):
        page.mouse.down(click_count=count)
        page.wait_for_timeout(60)
        page.mouse.up(click_count=count)
        if count == 1:
            page.wait_for_timeout(120)


def type_into_cell(page, cells: dict, row: int, col: int, text: str, *, how: str = "double",
                   commit: str = "Enter", before_commit_s: float = 0.2) -> None:
    """Type `text` into number cell (row, col) of the first data editor as a person does:
    `how` "double" = double-click the cell, select what is there, type; "click" = click the
    cell once and type over it; "keys" = just type, as in a spreadsheet: the cell is the one
    the last Enter (one down) or Tab (one right) moved to. Keys ~90 ms apart; then,
    `before_commit_s` after the last key, `commit` ("Enter" or "Tab")."""
    if how != "keys":
        grid = page.locator(EDITOR).first
        grid.scroll_into_view_if_needed()
        corner = grid.bounding_box()               # where the grid is now: the page above
        x = corner["x"] + cells["x"][col]          # it may have grown since it was measured
        y = corner["y"] + cells["y0"] + row * cells["row"]
        if how == "double":
            double_click(page, x, y)
            wait_for_cell_editor(page)
            page.keyboard.press("Control+A")
        else:
            page.mouse.click(x, y)
        page.wait_for_timeout(250)                 # the eye finds the cell, the hand types
    page.keyboard.type(text, delay=90)
    page.wait_for_timeout(before_commit_s * 1000)
    page.keyboard.press(commit)
