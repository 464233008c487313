"""Where a first visit's time goes: wall time and the browser main thread's CPU time, per script.

    python benchmarks/profile_first_visit.py [--repeats 5] [--pages home,steps]

Like bench_browser.py (new empty context per visit, interleaved, medians), but each visit runs
Chrome's sampling profiler until the first `.js-plotly-plot .main-svg`, and prints for
benchmarks/bare_page.py, benchmarks/bare_sidebar_page.py (the bare page plus attnviz's sidebar)
and each attnviz page: the wall seconds, the main thread's busy seconds (every sample but idle),
each as a ratio to the bare page, and the scripts that kept the main thread busiest. Busy time
varies less than wall time on a shared machine: use it to tell what costs, the wall ratio
(bench_browser.py) to tell how far from the target.
"""

from __future__ import annotations

import argparse
import collections
import statistics
import sys
import time
from contextlib import ExitStack
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.bench_browser import HEATMAP, PAGES, VIEWPORT, address, serve  # noqa: E402
from tools.browser import CHROMIUM_ARGS, chromium_path  # noqa: E402


def profiled_visit(browser, url: str) -> tuple[float, collections.Counter]:
    """(wall seconds, milliseconds of main-thread samples by script file or category)."""
    context = browser.new_context(viewport=VIEWPORT)
    try:
        tab = context.new_page()
        cdp = context.new_cdp_session(tab)
        cdp.send("Profiler.enable")
        cdp.send("Profiler.setSamplingInterval", {"interval": 1000})   # µs
        cdp.send("Profiler.start")
        t0 = time.perf_counter()
        tab.goto(url)
        tab.wait_for_selector(HEATMAP, timeout=120_000)
        wall = time.perf_counter() - t0
        profile = cdp.send("Profiler.stop")["profile"]
    finally:
        context.close()
    frames = {node["id"]: node["callFrame"] for node in profile["nodes"]}
    by_script = collections.Counter()
    for sample, delta_us in zip(profile["samples"], profile["timeDeltas"]):
        frame = frames[sample]
        name = frame["url"].rsplit("/", 1)[-1] or frame["functionName"] or "(native)"
        by_script[name] += delta_us / 1000
    return wall, by_script


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--pages", default="home", help=f"comma-separated, of {', '.join(PAGES)}")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    bench = ROOT / "benchmarks"
    with ExitStack() as stack, sync_playwright() as p:
        urls = {"bare": stack.enter_context(serve(bench / "bare_page.py", bench)),
                "bare+sidebar": stack.enter_context(serve(bench / "bare_sidebar_page.py", bench))}
        app = stack.enter_context(serve(ROOT / "app.py", ROOT))
        urls |= {f"/{page}": address(app, page) for page in args.pages.split(",") if page}
        browser = p.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
        for url in urls.values():           # the servers' first runs
            profiled_visit(browser, url)
        wall = {name: [] for name in urls}
        busy = {name: [] for name in urls}
        scripts = {name: collections.Counter() for name in urls}
        for _ in range(args.repeats):
            for name, url in urls.items():
                seconds, by_script = profiled_visit(browser, url)
                wall[name].append(seconds)
                busy[name].append(sum(ms for s, ms in by_script.items() if s != "(idle)") / 1000)
                scripts[name].update(by_script)
        browser.close()

    wall_ref, busy_ref = statistics.median(wall["bare"]), statistics.median(busy["bare"])
    print(f"{'':<13} {'wall s':>6} {'ratio':>5} {'busy s':>6} {'ratio':>5}  "
          f"busiest scripts (mean ms per visit)")
    for name in urls:
        w, b = statistics.median(wall[name]), statistics.median(busy[name])
        top = ", ".join(f"{s} {ms / args.repeats:.0f}"
                        for s, ms in scripts[name].most_common(7) if s != "(idle)")
        print(f"{name:<13} {w:>6.2f} {w / wall_ref:>5.2f} {b:>6.2f} {b / busy_ref:>5.2f}  {top}")


if __name__ == "__main__":
    main()
