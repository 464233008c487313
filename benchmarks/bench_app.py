"""Server-side rerun time and figure payload of every page, measured with AppTest.

    python benchmarks/bench_app.py [--repeats 5]
    python benchmarks/bench_app.py --largest

For a 12-token and a 128-token sentence with 12 heads (d_model 96), each page is opened once
(warm-up: imports, first model load), then rerun `repeats` times; the median rerun time and the
bytes of plotly JSON the page sends are printed. Budgets (SPEC.md): ≤ 0.5 s for 12 tokens,
≤ 2 s for 128 tokens, ≤ 3 MB of figures (3 000 000 bytes, as Streamlit sends them).

--largest: the figure bytes of every page and tab at the largest inputs the app allows (512
tokens, d_model 1024, 16 heads, the pretrained model's 512 tokens, a pinned baseline, the
second sentences), on each colour scale: the cases of tools/largest_pages.py (the figure budget's).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from streamlit.testing.v1 import AppTest  # noqa: E402

PAGES = ("pages/home.py", "pages/inputs.py", "pages/steps.py", "pages/multihead.py")
EXTRA_PAGES = ("pages/experiments.py", "pages/pretrained.py")
BUDGET_S = {12: 0.5, 128: 2.0}
BUDGET_BYTES = 3_000_000               # attnviz.plot.budget.PAGE_MAX_BYTES


def sentence(n_tokens: int) -> str:
    words = "the animal didn't cross the street because it was too tired".split()
    return " ".join(words[i % len(words)] for i in range(n_tokens))


def measure(page: str, n_tokens: int, repeats: int, steps: str) -> tuple[float, int]:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300)
    at.session_state["sentence"] = sentence(n_tokens)
    at.session_state["num_heads"] = 12
    at.session_state["d_model"] = 96
    at.session_state["max_tokens"] = max(64, n_tokens)
    at.session_state["step"] = steps
    at.run()
    if page != "pages/home.py":
        at.switch_page(page)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        at.run()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), sent_bytes(at)


def sent_bytes(at) -> int:
    """The page's figures as Streamlit sends them: each chart's JSON, UTF-8."""
    return sum(len(c.proto.spec.encode("utf-8")) for c in at.get("plotly_chart"))


def largest() -> None:
    """Every case of the figure budget test, on each colour scale: MB sent (10⁶ bytes)."""
    from tools.apptest import open_page
    from tools.largest_pages import CASES, SCALES

    print(f"{'page, tab and input':<28} " + " ".join(f"{s:>7}" for s in SCALES) + "   MB")
    for name, page, state in CASES:
        sizes = []
        for scale in SCALES:
            seeded = dict(state, weight_scale=scale, weight_scale_chosen=True)
            at = open_page(page, **seeded)
            assert not at.exception, [e.value for e in at.exception]
            sizes.append(sent_bytes(at))
        flag = "  OVER" if max(sizes) > BUDGET_BYTES else ""
        print(f"{name:<28} " + " ".join(f"{b / 1e6:>7.2f}" for b in sizes) + flag, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--step", default="weights", help="step shown on the Step page")
    parser.add_argument("--largest", action="store_true",
                        help="figure bytes of every page at the largest inputs, each scale")
    args = parser.parse_args()
    if args.largest:
        largest()
        return
    pages = PAGES + tuple(p for p in EXTRA_PAGES if (ROOT / p).exists())
    print(f"{'page':<22} {'tokens':>6} {'rerun s':>8} {'budget':>7} {'figures MB':>11}")
    for n in (12, 128):
        for page in pages:
            seconds, payload = measure(page, n, args.repeats, args.step)
            flag = "" if seconds <= BUDGET_S[n] and payload <= BUDGET_BYTES else "  OVER"
            print(f"{page:<22} {n:>6} {seconds:>8.3f} {BUDGET_S[n]:>7.1f} "
                  f"{payload / 1e6:>11.3f}{flag}")


if __name__ == "__main__":
    main()
