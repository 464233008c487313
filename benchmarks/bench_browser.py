"""Time from opening a page in headless Chromium to its first heatmap, against a bare page;
and from Enter in a weight cell to the heatmap showing the new number, against a bare editor.

    python benchmarks/bench_browser.py [--repeats 5] [--pages home,steps] [--edits 12]

Starts two Streamlit servers on free ports: the app, and benchmarks/bare_page.py (a bare
Streamlit page with one plotly heatmap, run without the project's config) as the reference.
After one warm-up visit of every page (the servers' first runs: imports, model load), each
repeat opens, interleaved, the bare page and then every attnviz page, each in a new browser
context (empty cache: Streamlit's and plotly's JavaScript is fetched and compiled first), and
times `goto` → first `.js-plotly-plot .main-svg`. It prints per page the medians, the ratio
attnviz / bare (both measured in the same run, so the machine's speed cancels; target ≤ 1.3),
and the warm time (a tab that has opened the app before). Budget (SPEC.md): ≤ 3 s.

Edit to repaint: one tab on Inputs & weights (W_Q, head 0) and one on
benchmarks/bare_editor_page.py (one data editor on constant data, one heatmap redrawn from it),
each opened once; then, interleaved, `--edits` numbers typed into a new cell of each as a
person does (double-click, type, 0.2 s, Enter), timing Enter → the first heatmap holds the
number (in the page's own clock, checked every frame). It prints the medians and the ratio
attnviz / bare editor (target ≤ 1.15). `--pages ""` measures only this.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tools.browser import (CHROMIUM_ARGS, DECODE_Z_JS, chromium_path,  # noqa: E402
                           editor_cells, type_into_cell, wait_for_app)
from tools.server import running_app  # noqa: E402

PAGES = ("home", "inputs", "steps", "multihead", "experiments", "pretrained", "reading")
BUDGET_S = 3.0
TARGET_RATIO = 1.3
HEATMAP = ".js-plotly-plot .main-svg"
VIEWPORT = {"width": 1400, "height": 1000}
EDIT_PAGE = "inputs?matrix=w_q&edit_head=0"
EDIT_TARGET_RATIO = 1.15
EDIT_ROWS, EDIT_COLS = 9, 4           # the cells typed into: visible, and so is the
#                                       one below each (Enter moves there: no scrolling)
# the time of the last Enter, in the page's clock
ENTER_CLOCK_JS = """() => { window.__enterAt = null; document.addEventListener('keydown',
    e => { if (e.key === 'Enter') window.__enterAt = performance.now(); }, true); }"""


def serve(script: Path, cwd: Path):
    """`streamlit run script` from `cwd` (whose .streamlit/config applies): the tests' own
    server helper; yields the base URL."""
    return running_app(script=script, cwd=cwd)


LANG = ""                             # --lang: the interface's language ("" = the browser's)


def address(url: str, page: str) -> str:
    """The page's address, in --lang's language when one is given (?lang=zh)."""
    base = url if page in ("", "home") else f"{url}/{page}"
    if not LANG:
        return base
    return base + ("&" if "?" in base else "?") + f"lang={LANG}"


def time_to_heatmap(tab, address: str) -> float:
    t0 = time.perf_counter()
    tab.goto(address)
    tab.wait_for_selector(HEATMAP, timeout=120_000)
    return time.perf_counter() - t0


def cold(browser, address: str) -> float:
    """Seconds to the first heatmap in a new, empty browser context."""
    context = browser.new_context(viewport=VIEWPORT)
    try:
        return time_to_heatmap(context.new_page(), address)
    finally:
        context.close()


class EditTab:
    """A tab kept open on a page with a data editor (its session lives on), ready to type."""

    def __init__(self, browser, url: str):
        self.context = browser.new_context(viewport=VIEWPORT)
        self.tab = self.context.new_page()
        self.tab.goto(url)
        wait_for_app(self.tab)
        self.tab.evaluate(ENTER_CLOCK_JS)
        self.cells = editor_cells(self.tab, columns=EDIT_COLS)

    def edit_to_repaint(self, index: int) -> float:
        """Type a new whole number into cell `index` (row by row) and Enter: seconds from the
        Enter to the first heatmap holding it."""
        row, col = divmod(index % (EDIT_ROWS * EDIT_COLS), EDIT_COLS)
        value = index + 2                                  # never a generated weight
        self.tab.bring_to_front()
        type_into_cell(self.tab, self.cells, row, col, str(value))
        shown_at = self.tab.wait_for_function(f"""() => {{
            const decode = {DECODE_Z_JS};
            const el = document.querySelector('.js-plotly-plot');
            return el && el.data && decode(el.data[0].z)[{row}][{col}] === {value}
                && window.__enterAt !== null && performance.now();
        }}""", timeout=60_000).json_value()
        seconds = (shown_at - self.tab.evaluate("window.__enterAt")) / 1000
        self.tab.wait_for_timeout(1200)                     # a person's pause between cells
        return seconds

    def close(self) -> None:
        self.context.close()


def edits_to_repaint(browser, app: str, bare: str, count: int) -> tuple[list, list]:
    """Seconds from Enter to repaint, `count` edits each, interleaved: bare, app, bare, …"""
    tabs = EditTab(browser, bare), EditTab(browser, address(app, EDIT_PAGE))
    try:
        for tab in tabs:                               # the first edit's imports and caches
            tab.edit_to_repaint(EDIT_ROWS * EDIT_COLS - 1)
        times = [], []
        for i in range(count):
            for tab, seconds in zip(tabs, times):
                seconds.append(tab.edit_to_repaint(i))
        return times
    finally:
        for tab in tabs:
            tab.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--pages", default=",".join(PAGES),
                        help=f"comma-separated, of {', '.join(PAGES)}")
    parser.add_argument("--edits", type=int, default=12,
                        help="numbers typed into each editor for edit to repaint (0: none)")
    parser.add_argument("--lang", default="", choices=["", "en", "zh"],
                        help="the app's language (zh: the Chinese interface; the bare pages "
                             "have no words to translate)")
    args = parser.parse_args()
    global LANG
    LANG = args.lang
    pages = [p for p in args.pages.split(",") if p]
    from playwright.sync_api import sync_playwright

    with (serve(ROOT / "app.py", ROOT) as app, serve(ROOT / "benchmarks" / "bare_page.py",
                                                      ROOT / "benchmarks") as bare,
          serve(ROOT / "benchmarks" / "bare_editor_page.py", ROOT / "benchmarks") as editor,
          sync_playwright() as p):
        browser = p.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
        edit_app_s, edit_bare_s = [], []
        if args.edits:
            edit_bare_s, edit_app_s = edits_to_repaint(browser, app, editor, args.edits)
        bare_s: list[float] = []
        app_s = {page: [] for page in pages}
        warm_s = {page: [] for page in pages}
        if pages:
            for page in pages:               # the servers' first runs: imports, model load
                cold(browser, address(app, page))
            cold(browser, bare)
            warm_context = browser.new_context(viewport=VIEWPORT)
            warm_tab = warm_context.new_page()
            time_to_heatmap(warm_tab, app)
            for _ in range(args.repeats):
                for page in pages:           # interleaved: bare, page, bare, page, …
                    bare_s.append(cold(browser, bare))
                    app_s[page].append(cold(browser, address(app, page)))
                    warm_s[page].append(time_to_heatmap(warm_tab, address(app, page)))
            warm_context.close()
        browser.close()

    if edit_app_s:
        app_m, bare_m = statistics.median(edit_app_s), statistics.median(edit_bare_s)
        ratio = app_m / bare_m
        print(f"edit to repaint (Enter → heatmap shows the number), median of {len(edit_app_s)}"
              f": /{EDIT_PAGE.split('?')[0]} {app_m:.3f} s (min {min(edit_app_s):.3f}, max "
              f"{max(edit_app_s):.3f}), bare editor page {bare_m:.3f} s (min "
              f"{min(edit_bare_s):.3f}, max {max(edit_bare_s):.3f}): ratio {ratio:.2f}, target "
              f"≤ {EDIT_TARGET_RATIO}" + ("" if ratio <= EDIT_TARGET_RATIO else "  ratio OVER"))
    if not pages:
        return
    bare_median = statistics.median(bare_s)
    print(f"bare page (one heatmap), cold: median {bare_median:.2f} s over {len(bare_s)} "
          f"(min {min(bare_s):.2f}, max {max(bare_s):.2f})")
    print(f"{'page':<13} {'cold s':>7} {'ratio':>6} {'warm s':>7}   "
          f"target ratio ≤ {TARGET_RATIO}, budget ≤ {BUDGET_S:.0f} s")
    for page in pages:
        cold_m, warm_m = statistics.median(app_s[page]), statistics.median(warm_s[page])
        ratio = cold_m / bare_median
        flags = ("" if ratio <= TARGET_RATIO else "  ratio OVER") + (
            "" if max(cold_m, warm_m) <= BUDGET_S else "  budget OVER")
        print(f"/{page:<12} {cold_m:>7.2f} {ratio:>6.2f} {warm_m:>7.2f}{flags}")


if __name__ == "__main__":
    main()
