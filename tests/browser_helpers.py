"""Start the app on a free port and drive it in Debian's headless Chromium (Playwright)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run",
                 "--disable-quic"]


def chromium_path() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def running_app(timeout: float = 90, *, script: Path = ROOT / "app.py", cwd: Path = ROOT,
                port: int | None = None):
    """`streamlit run script` (default the app) on 127.0.0.1 and `port` (default: a free one),
    from `cwd` (whose .streamlit/config applies); yields the base URL."""
    with streamlit_server(timeout, script=script, cwd=cwd, port=port) as (url, _):
        yield url


@contextmanager
def streamlit_server(timeout: float = 90, *, script: Path = ROOT / "app.py", cwd: Path = ROOT,
                     port: int | None = None, options: tuple[str, ...] = (),
                     env: dict[str, str] | None = None):
    """`running_app`, with more Streamlit command-line `options` ("--server.x", "value", …)
    and more environment variables `env`; yields (the base URL, the server's process)."""
    port = port or free_port()
    log = tempfile.TemporaryFile()           # not a pipe: a long run must never block on it
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", str(script),
         "--server.port", str(port), "--server.address", "127.0.0.1",
         "--server.headless", "true", "--browser.gatherUsageStats", "false", *options],
        cwd=cwd, stdout=log, stderr=subprocess.STDOUT,
        env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})})
    url = f"http://127.0.0.1:{port}"
    try:
        try:
            wait_healthy(url, proc, timeout)
        except RuntimeError:
            log.seek(0)
            raise RuntimeError(f"streamlit run {script} did not start:\n"
                               + log.read().decode(errors="replace")) from None
        yield url, proc
    finally:
        stop_process(proc)
        log.close()


def wait_healthy(url: str, proc: subprocess.Popen | None, timeout: float = 120) -> None:
    """Wait until `url`/_stcore/health answers 200 (Streamlit's, or a proxy's in front of it);
    RuntimeError if `proc` exits first or `timeout` s pass."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        if (proc is not None and proc.poll() is not None) or time.monotonic() > deadline:
            raise RuntimeError(f"{url} did not become healthy")
        time.sleep(0.3)


def stop_process(proc: subprocess.Popen, timeout: float = 10) -> None:
    """Terminate `proc`, and kill it if it has not exited after `timeout` s."""
    proc.terminate()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()


VIEWPORT = {"width": 1400, "height": 1000}


@contextmanager
def page_at(browser, url: str, heading: str | None = None):
    """A new browser context's tab at `url`, once the page's `heading` (if given) and its first
    heatmap are drawn; the context is closed afterwards."""
    context = browser.new_context(viewport=VIEWPORT)
    try:
        page = context.new_page()
        page.goto(url)
        if heading is not None:
            page.get_by_role("heading", name=heading).first.wait_for(timeout=60_000)
        wait_for_app(page)
        yield page
    finally:
        context.close()


def open_tab(page, name: str, timeout_ms: int = 60_000) -> None:
    """Click one of the page's tabs (only the open one is drawn: a click on another than the
    open one reruns the script) and wait until that run has ended and a chart is drawn."""
    click_tab(page, page.get_by_role("tab", name=name), timeout_ms)
    wait_for_app(page, timeout_ms)




def type_sentence(page, text: str) -> None:
    """Paste `text` into the sidebar's Sentence box and press Enter, as a person does (a text
    other than the one in the box: Enter then reruns the script); wait for that run."""
    box = page.get_by_role("textbox", name="Sentence")
    box.fill(text)
    with a_run(page):
        box.press("Enter")
    wait_for_app(page)


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
    _wait(page, IDLE_JS, None, timeout_ms)


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


def _wait(page, js: str, arg, timeout_ms: int) -> None:
    """page.wait_for_function(js, arg); on a timeout, an AssertionError saying what the page was
    doing (STATE_JS), so that an intermittent failure names its cause."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    try:
        page.wait_for_function(js, arg=arg, timeout=timeout_ms)
    except PlaywrightTimeout:
        raise AssertionError(f"waited {timeout_ms} ms; the page: "
                             f"{page.evaluate(STATE_JS)}") from None


# the open tab's panel has what the run drew into it (a tab is drawn only while open: a tab just
# clicked is empty until the run it starts has drawn it), and the run has ended
TAB_DRAWN_JS = """(name) => {
    const tab = Array.from(document.querySelectorAll('[role="tab"][aria-selected="true"]'))
        .find(el => el.textContent.trim() === name);
    const panel = tab && document.getElementById(tab.getAttribute('aria-controls'));
    return !!panel && panel.querySelector('[data-testid="stElementContainer"]') !== null
        && (%s)();
}""" % IDLE_JS


def click_tab(page, tab, timeout_ms: int = 60_000) -> None:
    """Click the `tab` (a locator) and wait until it is open, the run the click starts has
    ended and its panel is drawn."""
    wait_for_idle(page, timeout_ms)
    tab.click()
    page.wait_for_function(TAB_DRAWN_JS, arg=tab.text_content().strip(), timeout=timeout_ms)


# Each run the script begins and each connection lost, counted from before an action (the
# first call installs the counter), so that a wait cannot pass before the run the action
# starts has even begun
RUNS_JS = """() => {
    if (!window.__attnvizRuns) {
        const runs = window.__attnvizRuns = {begun: 0, lost: 0, state: null, connection: null};
        const on = (state) => state === 'running' || state === 'rerunRequested';
        // every value each attribute took, in order: the records' old values, then the
        // current one (a run that began and ended between two callbacks is still counted)
        const look = (records) => {
            const app = document.querySelector('[data-testid="stApp"]');
            if (app === null) return;
            const states = [], connections = [];
            for (const r of records || []) {
                if (r.target !== app || r.oldValue === null) continue;
                if (r.attributeName === 'data-test-script-state') states.push(r.oldValue);
                else if (r.attributeName === 'data-test-connection-state')
                    connections.push(r.oldValue);
            }
            states.push(app.getAttribute('data-test-script-state'));
            connections.push(app.getAttribute('data-test-connection-state'));
            for (const state of states) {
                if (on(state) && !on(runs.state)) runs.begun += 1;
                runs.state = state;
            }
            for (const connection of connections) {
                if (connection !== 'CONNECTED' && runs.connection === 'CONNECTED') runs.lost += 1;
                runs.connection = connection;
            }
        };
        look();
        new MutationObserver(look).observe(document.documentElement, {
            subtree: true, childList: true, attributes: true, attributeOldValue: true,
            attributeFilter: ['data-test-script-state', 'data-test-connection-state']});
    }
    return window.__attnvizRuns.begun;
}"""
RUN_ENDED_JS = f"""(begun) => {{
    const runs = window.__attnvizRuns;          // none: the action loaded a new document
    return (!runs || runs.begun > begun) && ({IDLE_JS})();
}}"""


def runs_begun(page) -> int:
    """How many runs of the script this document has seen begin since it was first asked."""
    return page.evaluate(RUNS_JS)


def wait_for_run_after(page, begun: int, timeout_ms: int = 60_000) -> None:
    """Wait until a run begun after `runs_begun` said `begun` has ended and is drawn."""
    _wait(page, RUN_ENDED_JS, begun, timeout_ms)


@contextmanager
def a_run(page, timeout_ms: int = 60_000):
    """`with a_run(page): <click>`: the block's action starts a run of the script; wait until
    that run has ended and is drawn. Waits first for the run before it to end (an action
    during a run restarts it: no new run is seen to begin)."""
    wait_for_idle(page, timeout_ms)
    begun = runs_begun(page)
    yield
    wait_for_run_after(page, begun, timeout_ms)


def connections_lost(page) -> int:
    """How many times this document has lost its connection since `runs_begun` was first
    asked."""
    runs_begun(page)
    return page.evaluate("() => window.__attnvizRuns.lost")


def wait_for_reconnect(page, lost: int, timeout_ms: int = 60_000) -> None:
    """Wait until the connection, lost since `connections_lost` said `lost`, is back."""
    page.wait_for_function(f"""(lost) => window.__attnvizRuns.lost > lost && ({IDLE_JS})()""",
                           arg=lost, timeout=timeout_ms)


# Every chart's size and plot area, the page's fonts: what plotly's automargin changes in its
# second layout pass (a label measured longer than the margin moves the plot area)
LAYOUT_JS = """() => document.fonts.status + '|' + Array.from(
    document.querySelectorAll('.js-plotly-plot')).map(el => {
        const r = el.getBoundingClientRect(), size = (el._fullLayout || {})._size || {};
        return [r.left, r.top, r.width, r.height, size.l, size.r, size.t, size.b,
                el.querySelectorAll('text').length].join(',');
    }).join(';')"""
SETTLED_JS = f"""(frames) => {{
    const now = ({LAYOUT_JS})();
    const s = window.__attnvizLayout = window.__attnvizLayout || {{last: null, same: 0}};
    const idle = ({IDLE_JS})();
    s.same = idle && now === s.last && !now.startsWith('loading') ? s.same + 1 : 0;
    s.last = now;
    return s.same >= frames;
}}"""


def wait_for_layout(page, frames: int = 10, timeout_ms: int = 30_000) -> None:
    """Wait until the script has ended, the page is drawn and every chart's place, size and
    plot area (plotly's automargin draws twice) have held still for `frames` animation frames
    in a row, with the page's fonts loaded."""
    page.evaluate("() => { window.__attnvizLayout = null; }")
    page.wait_for_function(SETTLED_JS, arg=frames, polling="raf", timeout=timeout_ms)


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


def first_heatmap(page) -> dict:
    """The data of the first plotly chart on the page: x, y labels and z (list of rows)."""
    return page.evaluate(f"""() => {{
        const decode = {DECODE_Z_JS};
        const tr = document.querySelector('.js-plotly-plot').data[0];
        return {{x: Array.from(tr.x || []), y: Array.from(tr.y || []), z: decode(tr.z)}};
    }}""")


def wait_for_first_z(page, row: int, col: int, value: float, timeout_ms: int = 30_000):
    """Wait until the first heatmap's z[row][col] equals `value`."""
    page.wait_for_function(f"""() => {{
        const decode = {DECODE_Z_JS};
        const el = document.querySelector('.js-plotly-plot');
        return el && el.data && decode(el.data[0].z)[{row}][{col}] === {value};
    }}""", timeout=timeout_ms)


def open_page(page, link: str, title: str) -> None:
    """Click a navigation link and wait until that page's title and heatmaps are drawn."""
    page.get_by_role("link", name=link).first.click()
    page.get_by_role("heading", name=title).first.wait_for(timeout=30_000)
    wait_for_app(page)


def tick_labels(page) -> list[str]:
    return page.eval_on_selector_all(".js-plotly-plot .xtick text, .js-plotly-plot .ytick text",
                                     "els => els.map(e => e.textContent)")


def exceptions(page) -> list[str]:
    return page.eval_on_selector_all('[data-testid="stException"]',
                                     "els => els.map(e => e.textContent)")


def type_into_first_cell(page, text: str) -> None:
    """Type `text` into the first data editor's first number cell, as a person does with the
    keyboard: focus the grid, go to the first cell (Ctrl+Home lands on the row labels, so one
    step right), Enter to edit, select what is there, type, Enter."""
    grid = page.locator('[data-testid="stDataFrame"]').first
    grid.scroll_into_view_if_needed()
    grid.click()                             # any cell: the keys below go to the first one
    page.keyboard.press("Control+Home")
    page.keyboard.press("ArrowRight")
    page.keyboard.press("Enter")
    page.locator(CELL_EDITOR).first.wait_for(timeout=10_000)    # the cell's text box is open
    page.keyboard.press("Control+A")
    page.keyboard.type(text, delay=30)
    page.keyboard.press("Enter")


def alerts(page) -> list[str]:
    """The text of every alert as a reader sees it (invisible word joiners dropped)."""
    return [t.replace("\u2060", "") for t in page.eval_on_selector_all(
        '[data-testid="stAlert"]', "els => els.map(e => e.textContent)")]


# ---- a data editor's cells, as a person reaches them ---------------------------------------

EDITOR = '[class*="st-key-editor_"] [data-testid="stDataFrame"]'   # the weight editor's grid
CELL_EDITOR = "textarea.gdg-input"          # the grid's text box over a cell being edited


def editor_cells(page, columns: int) -> dict:
    """Where the first data editor draws its number cells, from its top left corner: {"x":
    [centre of each number column], "y0": centre of the first row, "row": row height} in
    pixels. The grid is a canvas, so each column is measured once with the keyboard (open its
    first cell's text box, read where it is, Escape: nothing is edited). A column measured
    after the grid scrolled sideways to show it (a grid wider than the page) is off by that
    scroll; the others are right once Ctrl+Home has scrolled back."""
    grid = page.locator(EDITOR).first
    grid.scroll_into_view_if_needed()
    grid.click()
    corner = grid.bounding_box()
    page.keyboard.press("Control+Home")               # the row labels' first cell
    boxes = []
    for col in range(columns + 1):
        page.keyboard.press("ArrowRight" if col < columns else "ArrowDown")
        page.keyboard.press("Enter")
        box = page.locator(CELL_EDITOR).first
        box.wait_for(timeout=10_000)
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
            page.locator(CELL_EDITOR).first.wait_for(timeout=10_000)
            page.keyboard.press("Control+A")
        else:
            page.mouse.click(x, y)
        page.wait_for_timeout(250)                 # the eye finds the cell, the hand types
    page.keyboard.type(text, delay=90)
    page.wait_for_timeout(before_commit_s * 1000)
    page.keyboard.press(commit)
