"""Drive the app in Debian's headless Chromium (Playwright), as the browser tests do. The server
and the waits the benchmarks share are in tools/ (tools/server.py, tools/browser.py), imported
here, so a test imports every browser helper from this module."""

from __future__ import annotations

from contextlib import contextmanager

from tools.browser import (CELL_EDITOR, CHROMIUM_ARGS, DECODE_Z_JS, EDITOR,  # noqa: F401
                           IDLE_JS, chromium_path, double_click, editor_cells, focus_grid,
                           type_into_cell, wait_for_app, wait_for_cell_editor, wait_for_idle,
                           wait_for_js)
from tools.server import (ROOT, free_port, running_app, stop_process,  # noqa: F401
                          streamlit_server, wait_healthy)

VIEWPORT = {"width": 1400, "height": 1000}


class SharedContext:
    """What a test asks of ``browser.new_context(**options)`` — ``new_page()``, ``close()`` —
    from one context per worker and options, shared by the tests: its HTTP cache holds the
    app's scripts already (a fresh context fetches and compiles them again, ~1.4 s of every
    first page load here). Nothing else carries over: the app keeps nothing in the browser
    (no local or session storage; Streamlit's XSRF cookie alone, which a browser shares across
    its tabs too), each tab is a new session of the app, and ``close()`` closes this test's
    tabs (their sessions end, as a closed context's do)."""

    _contexts: dict = {}

    def __init__(self, browser, **options):
        key = (id(browser), repr(sorted(options.items())))
        if key not in self._contexts or not self._contexts[key][0].is_connected():
            self._contexts[key] = (browser, browser.new_context(**options))
        self._context = self._contexts[key][1]
        self._pages = []

    def new_page(self):
        page = self._context.new_page()
        self._pages.append(page)
        return page

    def close(self) -> None:
        for page in self._pages:
            if not page.is_closed():
                page.close()
        self._pages.clear()


@contextmanager
def page_at(browser, url: str, heading: str | None = None):
    """A new tab (in the worker's shared context: SharedContext) at `url`, once the page's
    `heading` (if given) and its first heatmap are drawn; the tab is closed afterwards."""
    context = SharedContext(browser, viewport=VIEWPORT)
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
    enter(page, page.get_by_role("textbox", name="Sentence"), text)
    wait_for_app(page)


def enter(page, box, text: str, timeout_ms: int = 60_000) -> None:
    """Type `text` into `box` and press Enter, as a person does, and wait for the run it starts.
    Both inside the run's wait: a value typed while a run draws the page can reach the server
    before Enter (the run then begins on the typing, and Enter has nothing new to send)."""
    widget = box.locator("xpath=ancestor::*[@data-testid='stTextInput' or "
                         "@data-testid='stNumberInput' or @data-testid='stTextArea'][1]")
    with a_run(page, timeout_ms):
        box.fill(text)
        # the widget has taken the text (it says "Press Enter to apply"): an Enter pressed
        # before the widget has seen the typing sends nothing new, and starts no run
        widget.get_by_test_id("InputInstructions").filter(has_text="Enter").wait_for(
            timeout=timeout_ms)
        box.press("Enter")












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
# a run seen to begin, or the link changed (only a run writes it: a run so short that the
# browser drew its start and its end at once leaves the script-state attribute unchanged)
RUN_ENDED_JS = f"""([begun, href]) => {{
    const runs = window.__attnvizRuns;          // none: the action loaded a new document
    return (!runs || runs.begun > begun || location.href !== href) && ({IDLE_JS})();
}}"""


def runs_begun(page) -> int:
    """How many runs of the script this document has seen begin since it was first asked."""
    return page.evaluate(RUNS_JS)


def wait_for_run_after(page, begun: int, href: str, timeout_ms: int = 60_000) -> None:
    """Wait until a run begun after `runs_begun` said `begun` (or one that changed the link
    from `href`) has ended and is drawn."""
    wait_for_js(page, RUN_ENDED_JS, [begun, href], timeout_ms)


@contextmanager
def a_run(page, timeout_ms: int = 60_000):
    """`with a_run(page): <click>`: the block's action starts a run of the script; wait until
    that run has ended and is drawn. Waits first for the run before it to end (an action
    during a run restarts it: no new run is seen to begin). A run is seen by the script's
    state in the page, or by the link it wrote: a short run's start and end can reach the
    browser together and be drawn as one (CI of stop 45: Train's typed steps were in the link,
    and no run had been seen to begin)."""
    wait_for_idle(page, timeout_ms)
    begun = runs_begun(page)
    href = page.evaluate("() => location.href")
    yield
    wait_for_run_after(page, begun, href, timeout_ms)


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


def in_each_size(page, sizes):
    """Each window size of `sizes`, (width, height), the page's own first: for every other
    one the window is resized and plotly's layout awaited (the charts fill their column and
    are laid out again for the new width, as a fresh load at that size lays them out). The
    page stays in the last size."""
    now = (page.viewport_size["width"], page.viewport_size["height"])
    for width, height in sorted(sizes, key=lambda size: tuple(size) != now):
        if (width, height) != (page.viewport_size["width"], page.viewport_size["height"]):
            page.set_viewport_size({"width": width, "height": height})
            wait_for_layout(page)
        yield width, height




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
    focus_grid(page, page.locator('[data-testid="stDataFrame"]').first)   # any cell: the
    page.keyboard.press("Control+Home")                                # keys go to the first
    page.keyboard.press("ArrowRight")
    page.keyboard.press("Enter")
    wait_for_cell_editor(page)                                         # its text box is open
    page.keyboard.press("Control+A")
    page.keyboard.type(text, delay=30)
    page.keyboard.press("Enter")


def alerts(page) -> list[str]:
    """The text of every alert as a reader sees it (invisible word joiners dropped)."""
    return [t.replace("\u2060", "") for t in page.eval_on_selector_all(
        '[data-testid="stAlert"]', "els => els.map(e => e.textContent)")]


# ---- a data editor's cells, as a person reaches them ---------------------------------------







