"""Reading the real model (issue 11): value norms, rollout, head statistics, the sentence
embedding and the single-head ablation ranking, timed for 16 and 128 tokens.

    python benchmarks/bench_reading.py [--repeats 5]

The issue's budgets, printed beside the numbers (nothing is asserted): rollout, value norms and
head statistics for 128 tokens ≤ 0.3 s together; the 72-head ablation ranking for two 16-token
sentences ≤ 3 s. The machine's load average is printed first: on a shared 2-core machine,
other processes' load slows BLAS a great deal, so read the numbers with it.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from attnviz import attention_rollout, head_stats  # noqa: E402
from attnviz.models.encoder.pretrained import PretrainedModel  # noqa: E402

SIZES = (16, 128)
TEXT_A = " ".join(f"Sentence {i}: the animal didn't cross the street because it was too tired."
                  for i in range(20))         # ≈ 330 word pieces, cut to each size
TEXT_B = " ".join(f"Line {i}: a dog slept under the old bridge since the night was so cold."
                  for i in range(20))
BUDGET_READING_128 = 0.3       # s: rollout + value norms + head statistics, 128 tokens
BUDGET_ABLATION_16 = 3.0       # s: 72 single-head ablations of two 16-token sentences


def times_of(fn, repeats: int) -> tuple[float, float]:
    """(median, fastest) of `repeats` timed calls after a warm-up: the fastest is what the
    code costs when the machine's other work leaves it alone."""
    fn()                                           # warm up (caches, thread pool)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), min(times)


def time_reading(model: PretrainedModel, n: int, repeats: int) -> dict[str, tuple]:
    run = model.run(TEXT_A, max_tokens=n)
    assert len(run.tokens) == n

    def value_norms():
        run.__dict__.pop("value_norms", None)      # a cached property: time a fresh computation
        return run.value_norms

    return {
        "value_norms": times_of(value_norms, repeats),
        "rollout": times_of(lambda: attention_rollout(run.attentions), repeats),
        "head_stats": times_of(lambda: head_stats(run.attentions, run.tokens), repeats),
        "embed": times_of(lambda: model.embed(TEXT_A, max_tokens=n), repeats),
        "head_ablation_effects": times_of(
            lambda: model.head_ablation_effects(TEXT_A, TEXT_B, max_tokens=n),
            max(1, repeats // 2) if n > 16 else repeats),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    print(f"load average (1, 5, 15 min): {', '.join(f'{x:.2f}' for x in os.getloadavg())} "
          f"on {os.cpu_count()} cores")
    model = PretrainedModel.load()
    for n in SIZES:
        times = time_reading(model, n, args.repeats)
        print(f"{n} tokens, median (fastest) of {args.repeats}:")
        for name, (median, fastest) in times.items():
            print(f"  {name:22s} {median * 1e3:9.1f} ms ({fastest * 1e3:.1f})")
        reading = [sum(times[k][i] for k in ("value_norms", "rollout", "head_stats"))
                   for i in (0, 1)]
        print(f"  value norms + rollout + head stats: {reading[0] * 1e3:.1f} ms "
              f"({reading[1] * 1e3:.1f})"
              + (f", budget {BUDGET_READING_128 * 1e3:.0f} ms" if n == 128 else ""))
        if n == 16:
            median, fastest = times["head_ablation_effects"]
            print(f"  72-head ablation ranking, two sentences: {median:.2f} s ({fastest:.2f}), "
                  f"budget {BUDGET_ABLATION_16:.0f} s")


if __name__ == "__main__":
    main()
