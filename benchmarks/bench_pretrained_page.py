"""Pretrained model page: server-side rerun time and what the page sends.

    python benchmarks/bench_pretrained_page.py [--repeats 7]

Runs pages/pretrained.py alone in AppTest (the model and its runs cached, as in a live
session after the first run) and prints, for 16 and 128 tokens, the median time of a rerun with
the same text (a click on any control) and of a rerun with a new text (the model runs again),
against the budgets of SPEC.md (≤ 0.5 s for a 12-token sentence, ≤ 2 s for 128 tokens). Then
the bytes the page sends for 128 tokens, chart by chart, against the budgets (SPEC: ≤ 3 MB;
issue 5: ≤ 5 MB). Numbers only; nothing here is asserted.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from streamlit.testing.v1 import AppTest  # noqa: E402

PAGE = ROOT / "pages" / "pretrained.py"
SIZES = (16, 128)
TEXT = " ".join(f"Sentence {i}: the animal didn't cross the street because it was too tired."
                for i in range(20))               # ≈ 340 word pieces, cut to each size


def page(max_tokens: int, sentence: str = TEXT) -> AppTest:
    at = AppTest.from_file(str(PAGE), default_timeout=300)
    at.session_state["sentence"] = sentence
    at.session_state["max_tokens"] = max_tokens
    at.run()
    if at.exception:
        raise RuntimeError([e.value for e in at.exception])
    return at


def median_rerun(at: AppTest, repeats: int, new_text: bool) -> float:
    times = []
    for i in range(repeats):
        if new_text:                                  # a text the caches have not seen
            at.session_state["sentence"] = f"Run {time.time_ns()} {i}. " + TEXT
        t0 = time.perf_counter()
        at.run()
        times.append(time.perf_counter() - t0)
    if at.exception:
        raise RuntimeError([e.value for e in at.exception])
    return statistics.median(times)


def payload(at: AppTest) -> list[tuple[str, int]]:
    """(what, bytes) of every plotly chart and picture the page sends."""
    out = []
    for chart in at.get("plotly_chart"):
        fig = json.loads(chart.proto.spec)
        kind = fig["data"][0]["type"] if fig["data"] else "empty"
        name = {"image": "model view (72 PNGs)", "heatmap": "opened head (heatmap)"}.get(
            kind, "head view (lines)")
        out.append((name, len(chart.proto.spec)))
    for node in at.get("imgs"):
        out.append(("st.image", sum(len(img.url) for img in node.proto.imgs)))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()

    t0 = time.perf_counter()
    at = page(16)
    print(f"first run (model load + first text): {time.perf_counter() - t0:.3f} s")
    print("tokens  rerun, same text  rerun, new text  budget")
    for n in SIZES:
        at = page(n)
        same = median_rerun(at, args.repeats, new_text=False)
        new = median_rerun(at, args.repeats, new_text=True)
        budget = 0.5 if n <= 16 else 2.0
        print(f"{n:6d}  {same:14.3f} s  {new:13.3f} s  ≤ {budget} s")

    at = page(128)
    parts = payload(at)
    for name, size in parts:
        print(f"128 tokens: {name:24s} {size / 1e6:7.3f} MB")
    total = sum(size for _, size in parts)
    print(f"128 tokens: {'total':24s} {total / 1e6:7.3f} MB  (budget 3 MB SPEC, 5 MB issue 5)")


if __name__ == "__main__":
    main()
