"""The head atlas's budgets (issue 39), each measured in this one run:

    python benchmarks/bench_atlas.py [--model smollm2] [--skip-pool] [--skip-tsne]
    python benchmarks/bench_atlas.py --only-tsne [--tsne-reference]

- all heads' metrics and PCA maps of the bundled corpus (``atlas_corpus.texts("all")``, 5,033
  tokens of SmolLM2 in 36 texts) against the bare forward passes of those tokens (each text's
  ``run_layers`` on its embeddings, nothing read), one process, one BLAS thread, interleaved
  text by text, the best of `--repeats` runs: budget ≤ 1.3×;
- the process pool (``atlas_runners.run_pool``) with 2 workers against 1, wall time including
  spawning the workers and loading the model in each: budget ≤ 0.65×;
- t-SNE of 10,000 points — one head's queries and keys over the corpus (layer 3, head 0,
  after RoPE, made joint, 5,000 of each) — ``atlas_map.tsne``, one thread: budget ≤ 30 s; its
  KL divergence as scikit-learn reports it and computed exactly here (P: perplexity-30
  affinities of the 90 nearest neighbours, found by bisection; Q over all n² pairs), and with
  ``--tsne-reference`` the same for scikit-learn's default settings on the same points (how
  faithful the faster settings are); ``--only-tsne``: this part alone;
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


def exact_kl(x: np.ndarray, y: np.ndarray, perplexity: float = 30.0) -> float:
    """KL(P ‖ Q) of the map y (n, 2) of x (n, d), computed here: P as scikit-learn's
    Barnes-Hut t-SNE makes it (each row's ⌊3·perplexity + 1⌋ nearest neighbours, Gaussian
    weights whose entropy is log(perplexity), found by bisection; P + Pᵀ normalised), Q the
    Student-t weights over every pair, exactly."""
    from scipy.sparse import csr_matrix
    from sklearn.neighbors import NearestNeighbors

    n = len(x)
    k = min(n - 1, int(3 * perplexity + 1))
    d, j = NearestNeighbors(n_neighbors=k + 1).fit(x).kneighbors(x)
    d, j = d[:, 1:] ** 2 - d[:, 1:2] ** 2, j[:, 1:]      # squared, shifted; each point left out
    low, high, beta = np.zeros(n), np.full(n, np.inf), np.ones(n)
    for _ in range(100):
        w = np.exp(-d * beta[:, None])
        total = w.sum(axis=1)
        p = w / total[:, None]
        entropy = np.log(total) + beta * (p * d).sum(axis=1)
        wider = entropy > np.log(perplexity)             # too flat: a larger beta
        low, high = np.where(wider, beta, low), np.where(wider, high, beta)
        beta = np.where(wider, np.where(np.isinf(high), 2 * beta, (beta + high) / 2),
                        (beta + low) / 2)
    P = csr_matrix((p.ravel(), j.ravel(), np.arange(0, n * k + 1, k)), shape=(n, n))
    P = (P + P.T).tocoo()
    P.data /= P.data.sum()
    z = 0.0
    for start in range(0, n, 500):                       # Σ over pairs i ≠ j of 1 / (1 + d²)
        w = 1 / (1 + ((y[start:start + 500, None] - y[None]) ** 2).sum(-1))
        z += w.sum() - len(w)
    q = 1 / (1 + ((y[P.row] - y[P.col]) ** 2).sum(-1)) / z
    return float((P.data * np.log(P.data / q)).sum())


def tsne_part(model, texts, reference: bool) -> None:
    """The t-SNE budget: atlas_map's settings (and scikit-learn's defaults, with `reference`)
    on one head's 10,000 points, each timed alone, with its KL divergence."""
    points = head_points(model, texts, layer=3, head=0, n=5000)
    runs = [("atlas_map.tsne", atlas_map.TSNE_SETTINGS)]
    if reference:
        runs.append(("scikit-learn's defaults", dict(max_iter=1000, angle=0.5,
                                                     early_exaggeration=12.0)))
    for name, settings in runs:
        estimator = atlas_map.tsne_estimator(len(points), 0, **settings)
        start = time.perf_counter()
        y = estimator.fit_transform(points)
        took = time.perf_counter() - start
        budget = " (budget 30)" if settings is atlas_map.TSNE_SETTINGS else ""
        print(f"t-SNE of {len(points)} points, {name} {settings}: {took:.1f} s{budget}; "
              f"KL reported {estimator.kl_divergence_:.4f}, exact {exact_kl(points, y):.4f} "
              f"(load {load()})")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="smollm2")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--skip-pool", action="store_true")
    parser.add_argument("--skip-tsne", action="store_true")
    parser.add_argument("--only-tsne", action="store_true")
    parser.add_argument("--tsne-reference", action="store_true")
    args = parser.parse_args()
    print(f"# load average before: {load()}")
    model = atlas_runners.load_model(args.model)
    texts = atlas_corpus.texts("all")
    if args.only_tsne:
        tsne_part(model, texts, args.tsne_reference)
        print(f"# load average after: {load()}")
        return
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
        tsne_part(model, texts, args.tsne_reference)
    print(f"# load average after: {load()}")


if __name__ == "__main__":
    main()
