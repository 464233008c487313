"""The tuned lens's fit (issue 28, beyond), done once per machine: SmolLM2 writing its training
text (16 prompts, 64 sampled tokens each), the streams at every layer boundary of those
tokens, and the 30 ridge regressions, each timed in this process (nothing is written to the
cache); then the lens of 64 tokens with and without the translators, median of --repeats.

    python benchmarks/bench_tuned_lens.py [--repeats 3] [--threads 1]

Prints the load average, since the machine is shared. Numbers only; nothing is asserted.
"""

from __future__ import annotations

import statistics
import time

from _common import header, parse, text_ids


def main() -> None:
    args = parse(__doc__, repeats=3)
    import numpy as np

    from attnviz import DecoderModel
    from attnviz.models.readers import tuned_lens
    from attnviz.models.readers.lens import layer_streams

    m = DecoderModel.load()
    start = time.perf_counter()
    texts = tuned_lens.training_ids(m)
    generated = time.perf_counter() - start
    start = time.perf_counter()
    streams = np.concatenate([layer_streams(m, ids) for ids in texts], axis=1)
    read = time.perf_counter() - start
    start = time.perf_counter()
    tuned_lens.fit(streams, m.config.rms_eps)
    fitted = time.perf_counter() - start

    ids = text_ids(m, 64)
    m.tuned_lens()                                     # the machine's, from its cache
    plain, tuned = [], []
    for _ in range(args.repeats):
        for times, kind in ((plain, False), (tuned, True)):
            start = time.perf_counter()
            m.logit_lens(ids, k=10, tuned=kind)
            times.append(time.perf_counter() - start)
    p, t = statistics.median(plain), statistics.median(tuned)
    total = generated + read + fitted
    print(header(args, tokens=streams.shape[1], texts=len(texts)))
    print(f"generating the training text   {generated:7.2f} s")
    print(f"streams at every layer         {read:7.2f} s")
    print(f"30 ridge regressions           {fitted:7.2f} s")
    print(f"the fit in all                 {total:7.2f} s   (generating: {generated / total:.0%})")
    print(f"logit lens, 64 tokens          {p:7.3f} s")
    print(f"tuned lens, 64 tokens          {t:7.3f} s   (ratio {t / p:.2f})")


if __name__ == "__main__":
    main()
