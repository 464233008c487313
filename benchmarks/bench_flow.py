"""Information flow's budget (issue 28.3): a 64-token text, every layer's per-head importances
(30 layers × 9 heads × the 2,080 (i, j ≤ i) pairs, each an L1 distance over 576 numbers) and
the graph from the last position at threshold 0.04, against one bare forward pass of the same
64 tokens (the 30 layers, ``run_layers``), taking turns in this process, median of --repeats.
Also the token-level view (heads=False) and a re-walk of the graph (``f.graph``).

Then threshold 0 (issue 34.3: 549,027 edges for 64 tokens), in CPU seconds of this process
(``time.process_time``: every thread, the page's included): the walk bounded to the figure's
1,500 most important edges against the whole graph walked, and Trace the answer's flow tab in
AppTest — its first run (the importances, the walk, the figure) and its reruns (the same
inputs: everything from the caches; budget ≤ 1 s) — with the bytes its caches hold and the
process's resident memory before, after, and once the caches have expired (the learner gone).

    python benchmarks/bench_flow.py [--repeats 5] [--threads 1]

Budget: ≤ 2 s. Prints the load average, since the machine is shared. Numbers only; nothing is
asserted.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

from _common import TEXT, header, parse, text_ids

ROOT = Path(__file__).resolve().parents[1]


def cpu(run) -> float:
    """The process's CPU seconds (every thread) that `run()` takes."""
    start = time.process_time()
    run()
    return time.process_time() - start


def main() -> None:
    args = parse(__doc__, repeats=5)
    from attnviz import DecoderModel
    from attnviz.plot.flow_figures import MAX_EDGES

    m = DecoderModel.load()
    ids = text_ids(m, 64)
    h0 = m.token_embeddings(ids)
    f = m.information_flow(ids)                                        # warm

    def timed(run) -> float:
        start = time.perf_counter()
        run()
        return time.perf_counter() - start

    runs = {"forward": lambda: m.run_layers(h0),
            "flow": lambda: m.information_flow(ids),
            "flow, heads summed": lambda: m.information_flow(ids, heads=False),
            "graph again": lambda: f.graph(position=30, threshold=0.02),
            "bounded at 0": lambda: f.graph(threshold=0.0, max_edges=MAX_EDGES),
            "whole at 0": lambda: f.graph(threshold=0.0, max_edges=None)}
    seconds = {name: [] for name in runs}
    for _ in range(args.repeats):
        for name, run in runs.items():
            seconds[name].append(cpu(run) if "at 0" in name else timed(run))
    s = {name: statistics.median(values) for name, values in seconds.items()}
    whole = f.graph(threshold=0.0, max_edges=None)
    print(header(args, tokens=len(ids), layers=m.num_layers, heads=m.num_heads))
    print(f"one forward pass            {s['forward']:.3f} s")
    print(f"information flow (heads)    {s['flow']:.3f} s   = {s['flow'] / s['forward']:.1f} "
          f"forwards   (budget ≤ 2 s)   {len(f.edges)} edges at 0.04")
    print(f"information flow (tokens)   {s['flow, heads summed']:.3f} s   = "
          f"{s['flow, heads summed'] / s['forward']:.1f} forwards")
    print(f"graph again (no model run)  {s['graph again'] * 1000:.1f} ms")
    print(f"threshold 0, {MAX_EDGES} most important of {whole.total_edges} edges: "
          f"{s['bounded at 0'] * 1000:.0f} ms CPU;  every edge walked: "
          f"{s['whole at 0'] * 1000:.0f} ms CPU")
    del whole
    page(args.repeats)


def page(repeats: int) -> None:
    """Trace the answer's flow tab at threshold 0 on 64 tokens, in AppTest: the first run's
    CPU and the reruns' (median and most), then the memory the session leaves behind."""
    sys.path.insert(0, str(ROOT))
    from attnviz.app.trace import trace_view

    warm = session("The Eiffel Tower is in the city of", 0.04)   # the app's imports, once
    warm.run()
    del warm
    leave()
    idle = rss()
    at = session(TEXT, 0.0)
    first = cpu(at.run)
    if at.exception:
        raise RuntimeError([e.value for e in at.exception])
    again = [cpu(at.run) for _ in range(repeats)]
    held = {name: cache.bytes / 2**20 for name, cache in (
        ("flows", trace_view._FLOWS), ("graphs", trace_view._GRAPHS),
        ("figures", trace_view._FLOW_FIGURES))}
    print(f"flow tab at threshold 0, 64 tokens (AppTest): first run {first:.2f} s CPU "
          f"(the model loaded before); rerun median {statistics.median(again):.3f} s, "
          f"most {max(again):.3f} s CPU (budget ≤ 1 s)")
    print("caches held: " + ", ".join(f"{name} {mb:.1f} MB" for name, mb in held.items()))
    busy = rss()
    del at
    leave()
    print(f"resident memory: {idle:.0f} MB idle (the app imported, its caches empty), "
          f"{busy:.0f} MB after the runs, {rss():.0f} MB once the session left and the "
          f"caches expired")


def session(text: str, threshold: float):
    """An AppTest session on Trace the answer's flow tab, `text` read to 64 tokens."""
    from streamlit.testing.v1 import AppTest

    from attnviz.i18n import render

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=600)
    at.query_params["lang"] = "en"
    for key, value in {"model": "smollm2", "sentence": text, "max_tokens": 64,
                       "tr_view": render("trace.tab.flow", "en"),
                       "fl_threshold": threshold}.items():
        at.session_state[key] = value
    at.switch_page("pages/trace.py")
    return at


def leave() -> None:
    """What the server's sweeper does once a class has left: every cache's entries expired,
    the garbage collected, free pages handed back."""
    from attnviz.app.runtime import sweeper
    from attnviz.core import cache

    for c in list(cache._CACHES):
        if c.max_idle is not None:
            c.expire(now=time.monotonic() + 2 * c.max_idle)
    sweeper.sweep()


def rss() -> float:
    """This process's resident memory, MB (Linux)."""
    import os

    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


if __name__ == "__main__":
    main()
