"""Time from opening a page in headless Chromium to its first heatmap, against a bare page.

    python benchmarks/bench_browser.py [--repeats 5] [--pages home,steps]

Starts two Streamlit servers on free ports: the app, and benchmarks/bare_page.py (a bare
Streamlit page with one plotly heatmap, run without the project's config) as the reference.
After one warm-up visit of every page (the servers' first runs: imports, model load), each
repeat opens, interleaved, the bare page and then every attnviz page, each in a new browser
context (empty cache: Streamlit's and plotly's JavaScript is fetched and compiled first), and
times `goto` → first `.js-plotly-plot .main-svg`. It prints per page the medians, the ratio
attnviz / bare (both measured in the same run, so the machine's speed cancels; target ≤ 1.3),
and the warm time (a tab that has opened the app before). Budget (SPEC.md): ≤ 3 s.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.browser_helpers import CHROMIUM_ARGS, chromium_path, running_app  # noqa: E402

PAGES = ("home", "inputs", "steps", "multihead", "experiments", "pretrained", "reading")
BUDGET_S = 3.0
TARGET_RATIO = 1.3
HEATMAP = ".js-plotly-plot .main-svg"
VIEWPORT = {"width": 1400, "height": 1000}


def serve(script: Path, cwd: Path):
    """`streamlit run script` from `cwd` (whose .streamlit/config applies): the tests' own
    server helper; yields the base URL."""
    return running_app(script=script, cwd=cwd)


def address(url: str, page: str) -> str:
    return url if page in ("", "home") else f"{url}/{page}"


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--pages", default=",".join(PAGES),
                        help=f"comma-separated, of {', '.join(PAGES)}")
    args = parser.parse_args()
    pages = [p for p in args.pages.split(",") if p]
    from playwright.sync_api import sync_playwright

    with (serve(ROOT / "app.py", ROOT) as app, serve(ROOT / "benchmarks" / "bare_page.py",
                                                      ROOT / "benchmarks") as bare,
          sync_playwright() as p):
        browser = p.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
        for page in pages:               # the servers' first runs: imports, model load
            cold(browser, address(app, page))
        cold(browser, bare)
        warm_context = browser.new_context(viewport=VIEWPORT)
        warm_tab = warm_context.new_page()
        time_to_heatmap(warm_tab, app)
        bare_s: list[float] = []
        app_s = {page: [] for page in pages}
        warm_s = {page: [] for page in pages}
        for _ in range(args.repeats):
            for page in pages:           # interleaved: bare, page, bare, page, …
                bare_s.append(cold(browser, bare))
                app_s[page].append(cold(browser, address(app, page)))
                warm_s[page].append(time_to_heatmap(warm_tab, address(app, page)))
        warm_context.close()
        browser.close()

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
