"""The logit lens's budget (issue 28.1): a 64-token text, every layer boundary with top-10,
the target's probability and rank and KL(final ‖ layer), against the bare numpy matrix products
it needs (31 × the (64, 576) residual times the (576, 49,152) unembedding), interleaved in this
process, median of --repeats.

    python benchmarks/bench_lens.py [--repeats 5] [--threads 1]

Budgets: ratio ≤ 1.5 and ≤ 3 s. Prints the load average, since the machine is shared. Numbers
only; nothing is asserted.
"""

from __future__ import annotations

import statistics
import time

from _common import header, parse, text_ids


def main() -> None:
    args = parse(__doc__, repeats=5)
    import numpy as np

    from attnviz import DecoderModel

    m = DecoderModel.load()
    ids = text_ids(m, 64)
    rng = np.random.default_rng(0)
    rows = rng.standard_normal((m.num_layers + 1, len(ids), m.d_model)).astype(np.float32)
    unembedding = m.embed(np.arange(m.vocab_size))                     # E (vocab, d_model), tied
    m.logit_lens(ids, k=10)                                            # warm the lazy pieces

    def bare() -> float:
        start = time.perf_counter()
        for r in rows:
            r @ unembedding.T                                          # (64, 49,152)
        return time.perf_counter() - start

    def lens() -> float:
        start = time.perf_counter()
        m.logit_lens(ids, k=10)
        return time.perf_counter() - start

    bares, lenses = [], []
    for _ in range(args.repeats):
        bares.append(bare())
        lenses.append(lens())
    b, l = statistics.median(bares), statistics.median(lenses)
    print(header(args, tokens=len(ids), rows=m.num_layers + 1))
    print(f"bare matrix products   {b:.3f} s")
    print(f"logit lens (k=10, KL)  {l:.3f} s   (budget ≤ 3 s)")
    print(f"ratio                  {l / b:.2f}   (budget ≤ 1.5)")


if __name__ == "__main__":
    main()
