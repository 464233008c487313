"""Read the model on SmolLM2: the ranking of the 270 single heads (each removed alone, the next
token's log-probability) batched from the layer each changes, against 270 separate runs
(``DecoderModel.next_token_logprobs(text, head_mask=…)``) estimated from a sample of them, and
the head detector's repeated random sequence, measured in one run.

    python benchmarks/bench_decoder_reading.py [--tokens 12 64] [--threads 1] [--sample 9]
"""

from __future__ import annotations

import argparse
import os
import time


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokens", type=int, nargs="+", default=[12, 64])
    parser.add_argument("--sample", type=int, default=9,
                        help="separate runs timed to estimate 270 of them")
    parser.add_argument("--threads", type=int, default=1,
                        help="BLAS threads (0: the library's default)")
    args = parser.parse_args()
    if args.threads:                     # before numpy loads OpenBLAS
        os.environ["OPENBLAS_NUM_THREADS"] = os.environ["OMP_NUM_THREADS"] = str(args.threads)
    print(f"load average before: {os.getloadavg()}, BLAS threads "
          f"{os.environ.get('OPENBLAS_NUM_THREADS', 'default')}, cores {os.cpu_count()}")

    import numpy as np

    from attnviz.models.decoders.decoder import DecoderModel
    from attnviz.models.decoders.decoder_reading import repeated_random_text, single_head_logprobs

    model = DecoderModel.load()
    t0 = time.perf_counter()
    text, _ = repeated_random_text(model)
    model.run(text)
    print(f"repeated random sequence (40 tokens) and its run: {time.perf_counter() - t0:.2f} s")
    words = ("the cat sat on a mat while river stones kept singing about seven old lanterns "
             "because nobody could remember which door opened toward the quiet garden").split()
    for n in args.tokens:
        prompt = " ".join(words[i % len(words)] for i in range(4 * n))
        ids = model.encode(prompt)[:n]
        prompt = model.decode(ids)
        run = model.run(prompt)
        target = int(np.argmax(run.logits[-1]))
        t0 = time.perf_counter()
        single_head_logprobs(model, run, [target])
        batched = time.perf_counter() - t0
        rng = np.random.default_rng(0)
        t0 = time.perf_counter()
        for layer, head in zip(rng.integers(0, 30, args.sample), rng.integers(0, 9, args.sample)):
            mask = np.ones((30, 9))
            mask[layer, head] = 0
            model.next_token_logprobs(prompt, head_mask=mask)
        separate = (time.perf_counter() - t0) / args.sample * 270
        print(f"{len(run.ids)} tokens: 270 heads ranked {batched:.1f} s; 270 separate runs "
              f"≈ {separate:.1f} s (from {args.sample}); ratio {batched / separate:.2f}")
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
