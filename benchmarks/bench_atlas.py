"""The head atlas's budgets (issue 39), each measured in this one run:

    python benchmarks/bench_atlas.py [--model smollm2] [--skip-pool] [--skip-tsne]

- all heads' metrics and PCA maps of the bundled corpus (``atlas_corpus.texts("all")``, 5,033
  tokens of SmolLM2 in 36 texts) against the bare forward passes of those tokens (each text's
  ``run_layers`` on its embeddings, nothing read), one process, one BLAS thread, interleaved
  text by text, the best of `--repeats` runs: budget ≤ 1.3×;
- the process pool (``atlas_runners.run_pool``) with 2 workers against 1, wall time including
  spawning the workers and loading the model in each: budget ≤ 0.65×;
- t-SNE of 10,000 points — one head's queries and keys over the corpus (layer 3, head 0,
  after RoPE, made joint, 5,000 of each) — ``atlas_map.tsne``, one thread: budget ≤ 30 s;
- tokens per second per core (the atlas in one process), and the atlas's bytes.
Numbers only; nothing is asserted. The machine is shared: the load average is printed.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

for _k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_k] = "1"

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from attnviz.models.readers import atlas, atlas_map, atlas_runners  # noqa: E402
from attnviz.tutorials import atlas_corpus  # noqa: E402


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def bare(model, text: str) -> float:
    start = time.perf_counter()
    ids = model.encode(text)[:model.max_tokens]
    model.run_layers(model.token_embeddings(ids))
    return time.perf_counter() - start


def interleaved(model, texts):
    """(bare seconds, atlas seconds, partial, maps): text by text, the bare pass then the
    text's partial merged into the atlas, so that a change in the machine's load falls on
    both alike; the PCA maps of every head at the end, on the atlas's side."""
    t_bare = t_atlas = 0.0
    partial = None
    for text in texts:
        t_bare += bare(model, text)
        start = time.perf_counter()
        one = atlas.reduce(model, [text])
        partial = one if partial is None else atlas.merge(partial, one)
        t_atlas += time.perf_counter() - start
    start = time.perf_counter()
    maps = atlas_map.pca_all(partial)
    return t_bare, t_atlas + time.perf_counter() - start, partial, maps


def head_points(model, texts, layer: int, head: int, n: int) -> np.ndarray:
    """n queries and n keys of one head over the texts, after RoPE, made joint."""
    q, k = [], []
    for text in texts:
        t = model.run(text).trace(layer)
        q.append(t.q_rotated[head])
        k.append(t.k_rotated[head])
    q, k = np.concatenate(q)[:n], np.concatenate(k)[:n]
    return np.concatenate(atlas_map.joint(q, k))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="smollm2")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--skip-pool", action="store_true")
    parser.add_argument("--skip-tsne", action="store_true")
    args = parser.parse_args()
    print(f"# load average before: {load()}")
    model = atlas_runners.load_model(args.model)
    texts = atlas_corpus.texts("all")
    tokens = sum(min(len(model.encode(t)), model.max_tokens) for t in texts)
    interleaved(model, texts[:2])                                   # warm-up
    runs = [interleaved(model, texts) for _ in range(args.repeats)]
    b, a, partial, maps = min(runs, key=lambda r: r[1] / r[0])
    print("ratios of the runs: " + ", ".join(f"{r[1] / r[0]:.2f}" for r in runs))
    print(f"{model.model_name}, {len(texts)} texts, {tokens} tokens, "
          f"{partial.shape[0] * partial.shape[1]} heads")
    print(f"bare forward passes {b:.2f} s; metrics + PCA maps {a:.2f} s; ratio {a / b:.2f} "
          f"(budget 1.3)")
    print(f"one core: {tokens / a:.0f} tokens/s with the atlas, {tokens / b:.0f} bare")
    print(f"atlas: {partial.nbytes / 1e6:.1f} MB ({len(partial.sample_pos)} q/k samples, "
          f"{len(partial.corpus)} texts kept); PCA maps {maps.nbytes / 1e6:.1f} MB")
    if not args.skip_pool:
        walls = {}
        for workers in (1, 2):
            start = time.perf_counter()
            pooled = atlas_runners.run_pool(args.model, texts, workers=workers)
            walls[workers] = time.perf_counter() - start
            assert (pooled.counts == partial.counts).all()
        print(f"pool: 1 worker {walls[1]:.2f} s, 2 workers {walls[2]:.2f} s; ratio "
              f"{walls[2] / walls[1]:.2f} (budget 0.65); 2 workers: "
              f"{tokens / walls[2] / 2:.0f} tokens/s per core, spawn and load included")
    if not args.skip_tsne:
        points = head_points(model, texts, layer=3, head=0, n=5000)
        start = time.perf_counter()
        atlas_map.tsne(points, seed=0)
        print(f"t-SNE of {len(points)} points: {time.perf_counter() - start:.1f} s (budget 30)")
    print(f"# load average after: {load()}")


if __name__ == "__main__":
    main()
