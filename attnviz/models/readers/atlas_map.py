"""The joint query/key map of one head (AttentionViz, Yeh et al. 2023): its sampled queries and
keys in one 2-D picture.

A head's weights are softmax_j(q_i · k_j · scale). Two changes leave every row unchanged, and
the map makes both so that queries and keys share one cloud:

- keys translated by c = mean(q) − mean(k): q_i · (k_j + c) adds q_i · c to every key of row i,
  a constant a softmax ignores;
- queries times α and keys divided by α, α = √(mean ‖k‖ / mean ‖q‖) (after the translation):
  every product q_i · k_j is kept, and both then have the same mean norm.

Then PCA of the queries and keys together for every head (``pca``: the centred matrix's first
two right singular vectors, the sign fixed so each component's largest loading is positive),
and t-SNE for one (``tsne``, scikit-learn). Its settings: scikit-learn's default objective
(perplexity 30, Barnes-Hut), optimised for 600 iterations without early exaggeration at angle
0.8, so that one head's 10,000 points take ~20 s on one thread (budget 30 s), not the 75 s to
4 minutes of the defaults: the exaggerated first phase is where their time goes, and from a PCA
start the map does not need it — its KL divergence stays within 2-3 % of the defaults' (the
measurements and the reasons are at ``TSNE_SETTINGS``).
"""

from __future__ import annotations

import numpy as np

from attnviz.core.grouped_query import kv_head

__all__ = ["TSNE_SETTINGS", "head_clusters", "head_points", "joint", "pca", "pca_all",
           "related_heads", "tsne", "tsne_estimator"]


def joint(q: np.ndarray, k: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(q', k'): queries (n_q, d) and keys (n_k, d) made to share one cloud — keys translated
    so their centroid is the queries', then queries × α and keys ÷ α so both have the same
    mean norm. float64. Every softmax row over these keys is unchanged (module docstring)."""
    q = np.asarray(q, np.float64)
    k = np.asarray(k, np.float64)
    k = k + (q.mean(axis=0) - k.mean(axis=0))                 # centroid on the queries'
    alpha = np.sqrt(np.linalg.norm(k, axis=-1).mean() / np.linalg.norm(q, axis=-1).mean())
    return q * alpha, k / alpha


def pca(points: np.ndarray, components: int = 2) -> np.ndarray:
    """(n, components): `points` (n, d) centred and projected on their first principal axes
    (the right singular vectors of the centred matrix), each axis's sign chosen so that its
    largest loading is positive."""
    x = np.asarray(points, np.float64)
    x = x - x.mean(axis=0)
    _, _, vt = np.linalg.svd(x, full_matrices=False)           # (min(n, d), d)
    axes = vt[:components]
    signs = np.sign(axes[np.arange(len(axes)), np.abs(axes).argmax(axis=1)])
    return x @ (axes * signs[:, None]).T


def head_points(partial, layer: int, head: int, rotated: bool = True,
                q_all: np.ndarray | None = None, k_all: np.ndarray | None = None
                ) -> np.ndarray:
    """(2S, d_k): head (layer, head)'s sampled queries then its keys (those of the key/value
    head it reads), made joint (``joint``); after RoPE when `rotated`. q_all, k_all: the
    sample's rotated arrays when already computed (``Partial.rotated``)."""
    if q_all is None:
        q_all = partial.rotated("q") if rotated else partial.sample_q
        k_all = partial.rotated("k") if rotated else partial.sample_k
    heads, kv_heads = q_all.shape[2], k_all.shape[2]
    q, k = joint(q_all[:, layer, head], k_all[:, layer, kv_head(head, heads, kv_heads)])
    return np.concatenate([q, k])


def pca_all(partial, rotated: bool = True) -> np.ndarray:
    """(L, H, 2S, 2) float32: every head's joint map by PCA (queries first, then keys)."""
    q_all = partial.rotated("q") if rotated else partial.sample_q
    k_all = partial.rotated("k") if rotated else partial.sample_k
    layers, heads = q_all.shape[1:3]
    out = np.empty((layers, heads, 2 * len(q_all), 2), np.float32)
    if not len(q_all):                                  # nothing drawn: an empty map each
        return out
    for layer in range(layers):
        for head in range(heads):
            out[layer, head] = pca(head_points(partial, layer, head, q_all=q_all, k_all=k_all))
    return out


# t-SNE's settings (scikit-learn's TSNE; benchmarks/bench_atlas.py --only-tsne --tsne-reference
# measures them): the objective is scikit-learn's default one — perplexity 30, the same P and Q,
# Barnes-Hut — and only its optimisation is shorter. On 10,000 points (one SmolLM2 head's
# queries and keys over the bundled corpus; one thread; 2026-11-29, this shared 2-core machine),
# the KL divergence of the map as scikit-learn reports it and computed exactly by the benchmark,
# against scikit-learn's defaults:
#
#   iterations, angle, early exaggeration   time       KL reported     KL exact
#   1000, 0.5, 12 (scikit-learn's defaults)   75 s      1.806           1.815
#    500, 0.8, 12 (before)                    53-81 s    2.070 (+15 %)   –
#   1000, 0.8, 12                             250 s*     1.874 (+3.8 %)  1.901 (+4.7 %)
#   1000, 0.8, 4                              227 s*     1.818 (+0.7 %)  1.844 (+1.6 %)
#   1000, 0.8, 1                               90 s*     1.786 (−1.1 %)  1.816 (+0.1 %)
#    600, 0.8, 1 (these)                       20.3 s    1.841 (+1.9 %)  1.871 (+3.1 %)
#    500, 0.8, 1                               18.2 s    1.870 (+3.5 %)  1.900 (+4.7 %)
#    500, 0.5, 1                               26.7 s    1.851 (+2.5 %)  1.861 (+2.5 %)
#   (* beside another t-SNE run, load average 4-6: the defaults took 153-219 s so;
#   the others alone at load average 1-3)
#
# The time goes to the early-exaggerated phase, scikit-learn's first 250 iterations: P × 12
# packs the points into tight clumps whose Barnes-Hut tree is slow to walk (with the defaults,
# 50 iterations there took 4-43 s, 50 after it 3-4 s). Without exaggeration (1: P as it is)
# every iteration descends the objective itself, with scikit-learn's "auto" learning rate
# (N / early_exaggeration / 4) and momentum schedule, and the PCA start gives the global layout
# that exaggeration helps a random start find (Kobak & Linderman 2021): after 600
# iterations its KL is within 2-3 % of the defaults' after 1,000, and by 1,000 it is theirs.
# Angle 0.8 (coarser Barnes-Hut cells) rather than 0.5 saves a third of the time for ~1 % of KL.
TSNE_SETTINGS = dict(max_iter=600, angle=0.8, early_exaggeration=1.0)


def tsne_estimator(n: int, seed: int = 0, perplexity: float = 30.0, **settings):
    """scikit-learn's TSNE for `n` points as ``tsne`` runs it (TSNE_SETTINGS, then
    `settings`): Barnes-Hut, PCA start, "auto" learning rate, seeded, one thread, the
    perplexity at most (n − 1) / 3 (scikit-learn's bound for few points). Its
    ``kl_divergence_`` after ``fit_transform`` is what the benchmark compares."""
    from sklearn.manifold import TSNE

    perplexity = min(perplexity, max(1.0, (n - 1) / 3))
    return TSNE(n_components=2, perplexity=perplexity, init="pca", learning_rate="auto",
                method="barnes_hut", random_state=seed, n_jobs=1,
                **{**TSNE_SETTINGS, **settings})


def tsne(points: np.ndarray, seed: int = 0, perplexity: float = 30.0) -> np.ndarray:
    """(n, 2): scikit-learn's t-SNE of `points` (n, d) (``tsne_estimator``: its default
    objective, 600 iterations without early exaggeration, angle 0.8 — see TSNE_SETTINGS),
    so that 10,000 points take about 20 s on one thread, not minutes."""
    points = np.asarray(points, np.float64)
    return tsne_estimator(len(points), seed, perplexity).fit_transform(points)


# ---- related heads ---------------------------------------------------------------------------

def related_heads(partial, k: int = 5) -> tuple[np.ndarray, np.ndarray]:
    """(nearest (L·H, k) int, similarity (L·H, k)): for each head (layer-major, index
    layer · H + head) the k other heads whose mean patterns (``Partial.mean_pattern``) are most
    alike by cosine similarity, most alike first (ties: the lower index)."""
    x = _unit_patterns(partial)                                   # (L·H, F)
    sim = x @ x.T
    np.fill_diagonal(sim, -np.inf)                                # never itself
    k = min(k, len(x) - 1)
    order = np.lexsort((np.broadcast_to(np.arange(len(x)), sim.shape), -sim), axis=-1)[:, :k]
    return order, np.take_along_axis(sim, order, axis=-1)


def head_clusters(partial, clusters: int = 8) -> np.ndarray:
    """(L, H) int: every head's cluster, by agglomerative clustering (scikit-learn, average
    linkage, cosine distance) of the mean patterns."""
    from sklearn.cluster import AgglomerativeClustering

    x = _unit_patterns(partial)
    clusters = max(1, min(clusters, len(x)))
    labels = AgglomerativeClustering(n_clusters=clusters, metric="cosine",
                                     linkage="average").fit_predict(x) if clusters > 1 \
        else np.zeros(len(x), int)
    return labels.reshape(partial.shape)


def _unit_patterns(partial) -> np.ndarray:
    """(L·H, F): each head's mean pattern scaled to unit length (NaN, none read: 0)."""
    x = np.nan_to_num(partial.mean_pattern().reshape(-1, partial.offsets.shape[-1]))
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.where(norms > 0, norms, 1)
