"""Time from opening a page in headless Chromium to its first heatmap being drawn.

    python benchmarks/bench_browser.py [--repeats 3]

Starts the app on a free port, opens each page in a fresh browser context (no cache) and
prints the median seconds until the first plotly heatmap's SVG exists. Budget (SPEC.md): ≤ 3 s.
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
        print(f"{'page':<14} {'first heatmap s':>16} {'budget':>7}")
        for page in PAGES:
            times = []
            for _ in range(args.repeats):
                context = browser.new_context(viewport={"width": 1400, "height": 1000})
                tab = context.new_page()
                t0 = time.perf_counter()
                tab.goto(f"{url}/{page}")
                tab.wait_for_selector(".js-plotly-plot .main-svg", timeout=60_000)
                times.append(time.perf_counter() - t0)
                context.close()
            median = statistics.median(times)
            flag = "" if median <= BUDGET_S else "  OVER"
            print(f"/{page:<13} {median:>16.2f} {BUDGET_S:>7.1f}{flag}")
        browser.close()


if __name__ == "__main__":
    main()
