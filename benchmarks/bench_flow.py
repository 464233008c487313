"""Information flow's budget (issue 28.3): a 64-token text, every layer's per-head importances
(30 layers × 9 heads × the 2,080 (i, j ≤ i) pairs, each an L1 distance over 576 numbers) and
the graph from the last position at threshold 0.04, against one bare forward pass of the same
64 tokens (the 30 layers, ``run_layers``), taking turns in this process, median of --repeats.
Also the token-level view (heads=False) and a re-walk of the graph (``f.graph``).

    python benchmarks/bench_flow.py [--repeats 5] [--threads 1]

Budget: ≤ 2 s. Prints the load average, since the machine is shared. Numbers only; nothing is
asserted.
"""

from __future__ import annotations

import statistics
import time

from _common import header, parse, text_ids


def main() -> None:
    args = parse(__doc__, repeats=5)
    from attnviz import DecoderModel

    m = DecoderModel.load()
    ids = text_ids(m, 64)
    h0 = m.embed(ids)
    f = m.information_flow(ids)                                        # warm

    def timed(run) -> float:
        start = time.perf_counter()
        run()
        return time.perf_counter() - start

    runs = {"forward": lambda: m.run_layers(h0),
            "flow": lambda: m.information_flow(ids),
            "flow, heads summed": lambda: m.information_flow(ids, heads=False),
            "graph again": lambda: f.graph(position=30, threshold=0.02)}
    seconds = {name: [] for name in runs}
    for _ in range(args.repeats):
        for name, run in runs.items():
            seconds[name].append(timed(run))
    s = {name: statistics.median(values) for name, values in seconds.items()}
    print(header(args, tokens=len(ids), layers=m.num_layers, heads=m.num_heads))
    print(f"one forward pass            {s['forward']:.3f} s")
    print(f"information flow (heads)    {s['flow']:.3f} s   = {s['flow'] / s['forward']:.1f} "
          f"forwards   (budget ≤ 2 s)   {len(f.edges)} edges at 0.04")
    print(f"information flow (tokens)   {s['flow, heads summed']:.3f} s   = "
          f"{s['flow, heads summed'] / s['forward']:.1f} forwards")
    print(f"graph again (no model run)  {s['graph again'] * 1000:.1f} ms")


if __name__ == "__main__":
    main()
