"""Time from opening a page in headless Chromium to its first heatmap being drawn.

    python benchmarks/bench_browser.py [--repeats 3]

Starts the app on a free port and prints, per page, the median seconds until the first plotly
heatmap's SVG exists: "cold" opens it in a fresh browser context (empty cache: Streamlit's and
plotly's JavaScript, ~7 MB, is fetched and compiled first), "warm" in a context that has
opened the app before (a returning visitor or a second tab). Budget (SPEC.md): ≤ 3 s.
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

PAGES = ("", "inputs", "steps", "multihead", "experiments", "pretrained")
BUDGET_S = 3.0


def _time_to_heatmap(tab, address: str) -> float:
    t0 = time.perf_counter()
    tab.goto(address)
    tab.wait_for_selector(".js-plotly-plot .main-svg", timeout=60_000)
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    with running_app() as url, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
        warm = browser.new_page()
        warm.goto(url)                      # the server's first run: imports, model load
        warm.wait_for_selector(".js-plotly-plot .main-svg", timeout=120_000)
        warm.close()
        print(f"{'page':<14} {'cold s':>7} {'warm s':>7} {'budget':>7}")
        warm_context = browser.new_context(viewport={"width": 1400, "height": 1000})
        warm_tab = warm_context.new_page()
        warm_tab.goto(url)
        warm_tab.wait_for_selector(".js-plotly-plot .main-svg", timeout=60_000)
        for page in PAGES:
            cold, warm = [], []
            for _ in range(args.repeats):
                context = browser.new_context(viewport={"width": 1400, "height": 1000})
                cold.append(_time_to_heatmap(context.new_page(), f"{url}/{page}"))
                context.close()
                warm.append(_time_to_heatmap(warm_tab, f"{url}/{page}"))
            cold_s, warm_s = statistics.median(cold), statistics.median(warm)
            flag = "" if max(cold_s, warm_s) <= BUDGET_S else "  OVER"
            print(f"/{page:<13} {cold_s:>7.2f} {warm_s:>7.2f} {BUDGET_S:>7.1f}{flag}")
        warm_context.close()
        browser.close()


if __name__ == "__main__":
    main()
