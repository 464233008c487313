"""One learner's first visit of each decoder page on SmolLM2 and on Gemma 3, in one process.

    python benchmarks/bench_decoder_pages.py [--repeats 3] [--profile generate,trace]

Issue 38's budget: a Gemma 3 page's first chart ≤ 1.5× the same SmolLM2 page's, in the same
run. bench_load.py --decoder measures it with 10 learners on a server (and takes the machine);
this runs one learner in AppTest (tools/apptest.open_page: a fresh session per page, a link
with the learner's sentence and model), the pages in bench_load's order — Pretrained model,
Read the model, Trace the answer, Generate — each a new session of the same learner (their
runs cached between pages, as on a server). Each model and page is run once first on a
sentence of its own (the model loaded, the modules imported), then `--repeats` times on new
sentences, the models interleaved; printed: each page's median seconds (the whole first run)
on each model and their ratio. `--profile PAGES` prints cProfile's top functions of Gemma's
first visit of those pages. One BLAS thread (--threads). Numbers only; nothing is asserted.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._common import header, parse  # noqa: E402

MODELS = ("smollm2", "gemma3-270m")
PAGES = ("pretrained", "reading", "trace", "generate")
WORDS = ("river garden lantern copper violin meadow harbor pepper canyon marble falcon velvet "
         "orchard thunder glacier saddle compass ember willow quarry ribbon tundra beacon "
         "walnut prairie cobalt meteor juniper").split()
BUDGET = 1.5


def sentence(i: int) -> str:
    """The learner's sentence of run `i`: its own words, about 30 tokens on either model."""
    words = [WORDS[(i * 7 + k * 5) % len(WORDS)] for k in range(12)]
    return f"Run {i}: the {' and the '.join(' '.join(words[j:j + 2]) for j in range(0, 12, 2))}."


def visit(page: str, model: str, text: str, profile: bool = False) -> float:
    """Seconds of `page`'s first run in a fresh session opened by a link (model, sentence)."""
    import cProfile
    import pstats
    import time

    from attnviz.app import main as app_main
    from tools.apptest import open_page

    profiler = cProfile.Profile() if profile else None
    run = app_main.run

    def profiled(*a, **kw):                     # in the script's thread (AppTest's own)
        profiler.enable()
        try:
            return run(*a, **kw)
        finally:
            profiler.disable()

    if profiler:
        app_main.run = profiled
    t0 = time.perf_counter()
    try:
        at = open_page(f"pages/{page}.py", params={"model": model, "sentence": text,
                                                   "gen_prompt": text}, timeout=600)
    finally:
        app_main.run = run
    seconds = time.perf_counter() - t0
    if at.error:
        raise RuntimeError([e.value for e in at.error])
    if profiler:
        print(f"\n--- {page} on {model}: {seconds:.2f} s")
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(r"attnviz|numpy", 25)
    return seconds


def main() -> None:
    import statistics

    profiled = set()
    if "--profile" in sys.argv:              # (not _common's: taken out before it parses)
        at = sys.argv.index("--profile")
        profiled = set(sys.argv[at + 1].split(","))
        del sys.argv[at:at + 2]
    args = parse(__doc__, repeats=3)
    print(header(args, pages=", ".join(PAGES)))
    print("(Generate's prompt is the learner's sentence, as its link carries it)")
    warm = {}
    for model in MODELS:                     # warm: the model loaded, every page's modules
        for page in PAGES:
            warm[model, page] = visit(page, model, f"Warm {model}: the cat sat on the mat.")
    print("the process's first visit of each page (s; Pretrained model's loads the model):")
    for model in MODELS:
        print(f"    {model:12s} " + "  ".join(f"{p} {warm[model, p]:.2f}" for p in PAGES))
    took = {(m, p): [] for m in MODELS for p in PAGES}
    for r in range(args.repeats):
        for k, model in enumerate(MODELS):
            text = sentence(2 * r + k)
            for page in PAGES:
                took[model, page].append(visit(page, model, text,
                                               profile=r == 0 and model != MODELS[0]
                                               and page in profiled))
    a, b = MODELS
    print(f"\nfirst run of each page, median of {args.repeats} (s): {a} / {b} / ratio "
          f"(budget ≤ {BUDGET})")
    for page in PAGES:
        sa, sb = (statistics.median(took[m, page]) for m in MODELS)
        print(f"    {page:10s} {sa:6.2f} {sb:6.2f} {sb / sa:5.2f} "
              f"({'within' if sb / sa <= BUDGET else 'OVER'})")


if __name__ == "__main__":
    main()
