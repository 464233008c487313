"""The logit lens's budget (issue 28.1): a 64-token text, every layer boundary with top-10,
the target's probability and rank and KL(final ‖ layer), against the bare numpy matrix products
it needs (31 × the (64, 576) residual times the (576, 49,152) unembedding), interleaved in this
process, median of --repeats. Those products are timed two ways: as 31 products of 64 rows (the
budget's reading: one per layer boundary), and as one product of the 1,984 rows (the fastest
arrangement of the same products, which reads the 113 MB unembedding once; it needs the 390 MB
of logits at once, which the lens never holds).

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
    unembedding = m.token_embeddings(np.arange(m.vocab_size))         # E (vocab, d_model), tied
    m.logit_lens(ids, k=10)                                            # warm the lazy pieces

    def bare() -> float:
        start = time.perf_counter()
        for r in rows:
            r @ unembedding.T                                          # (64, 49,152)
        return time.perf_counter() - start

    def one_product() -> float:
        start = time.perf_counter()
        rows.reshape(-1, m.d_model) @ unembedding.T                    # (1984, 49,152)
        return time.perf_counter() - start

    def lens() -> float:
        start = time.perf_counter()
        m.logit_lens(ids, k=10)
        return time.perf_counter() - start

    bares, ones, lenses = [], [], []
    for _ in range(args.repeats):
        bares.append(bare())
        ones.append(one_product())
        lenses.append(lens())
    b, o, l = (statistics.median(t) for t in (bares, ones, lenses))
    print(header(args, tokens=len(ids), rows=m.num_layers + 1))
    print(f"bare matrix products, 31 x 64 rows   {b:.3f} s")
    print(f"bare matrix product, 1 x 1,984 rows  {o:.3f} s")
    print(f"logit lens (k=10, KL)                {l:.3f} s   (budget ≤ 3 s)")
    print(f"ratio to the 31 products             {l / b:.2f}   (budget ≤ 1.5)")
    print(f"ratio to the one product             {l / o:.2f}")


if __name__ == "__main__":
    main()
