"""Activation patching's budgets (issue 28.2): every head (30 × 9) and the residual stream
(31 × 16) of a 16-token pair, each against one full forward pass of the same 16 tokens (the
30 layers on one sequence), measured in this process.

    python benchmarks/bench_patching.py [--threads 1] [--repeats 3]

Three pairs: an IOI pair whose prompts differ in one token (position 10: the shared tokens
before it are computed once, and the patches there, which put back what the corrupted run
already has, are not run), a factual pair differing from position 8 on (" Eiffel Tower" /
" Colosseum") and the same pair differing from position 1 on: the worst case, where almost
every patch runs every position. Budgets: every head
≤ 10 s, the residual ≤ 10 s. Prints the load average, since the machine is shared. Numbers
only; nothing is asserted.
"""

from __future__ import annotations

import statistics
import time

from _common import header, parse

PAIRS = {
    "ioi": ("When Mary and John went to the big store, John gave a cold drink to",
            "When Mary and John went to the big store, Mary gave a cold drink to"),
    "factual": ("According to the old travel guide, the Eiffel Tower is in the city of",
                "According to the old travel guide, the Colosseum is in the city of"),
    "factual, differing early": (
        "The Eiffel Tower, says the old travel guide, is in the city of",
        "The Colosseum, says the old travel guide, is in the city of"),
}


def main() -> None:
    args = parse(__doc__, repeats=3)
    from attnviz import DecoderModel

    m = DecoderModel.load()
    print(header(args))
    for name, (clean, corrupted) in PAIRS.items():
        ids = m.encode(clean)
        assert len(ids) == len(m.encode(corrupted)), name
        h0 = m.token_embeddings(ids)[None]
        m.run_layers(h0)                                               # warm

        def forward() -> float:
            start = time.perf_counter()
            m.unembed(m.run_layers(h0)[:, -1])
            return time.perf_counter() - start

        forward_s = statistics.median(forward() for _ in range(args.repeats))
        differ = int((ids != m.encode(corrupted)).argmax())
        print(f"{name}: {len(ids)} tokens, first difference at {differ}, one full forward "
              f"{forward_s * 1000:.1f} ms")
        for where in ("heads", "resid"):
            start = time.perf_counter()
            p = m.patch(clean, corrupted, where=where)
            seconds = time.perf_counter() - start
            print(f"  {where:6s} {p.effect.shape[0]} × {p.effect.shape[1]}: {seconds:6.2f} s  "
                  f"= {seconds / forward_s:6.0f} forwards   (budget ≤ 10 s)")


if __name__ == "__main__":
    main()
