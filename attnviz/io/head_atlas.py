"""The head atlas as SPEC names it: ``attnviz.head_atlas(texts, …)`` → :class:`HeadAtlas`, every
head of a decoder over a corpus, whatever the engine, the workers and the split of the texts.

    atlas = attnviz.head_atlas(texts, model="smollm2", workers=2)     # a process pool
    atlas.metrics                          # pandas: one row per (layer, head)
    atlas.top_examples(3, 1, k=5)          # [(text, position, score)], most concentrated first
    atlas.embedding(3, 1)                  # (2S, 2): its sampled queries, then its keys
    atlas.related(3, 1)                    # [(layer, head, similarity)]
    atlas.save("atlas.npz"); attnviz.HeadAtlas.load("atlas.npz")

It wraps the reduction (``attnviz.models.readers.atlas``: a ``Partial`` and ``merge``), the runners
(``atlas_runners``: one process, a process pool, Ray) and the maps (``atlas_map``); the file is
``io.atlas_files``'s .npz (no pickling).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from attnviz.core.arrays import whole_number
from attnviz.core.errors import AttnvizInputError
from attnviz.io.atlas_files import read_atlas, write_atlas
from attnviz.models.readers import atlas as _atlas
from attnviz.models.catalogue import builtin
from attnviz.models.readers import atlas_map, atlas_runners
from attnviz.models.readers.atlas import Partial

# SPEC's column → the reduction's metric (core.reading's ROW_METRICS and DETECTORS)
COLUMNS = {"entropy": "entropy", "sink": "sink", "distance": "distance",
           "sparsity": "sparsity", "prev_token": "previous_token",
           "duplicate": "duplicate_token", "induction": "induction",
           "punctuation": "punctuation", "max_weight": "max_weight"}
ENGINES = ("process", "ray")

__all__ = ["COLUMNS", "HeadAtlas", "head_atlas"]


@dataclass
class HeadAtlas:
    """Every head of one model over a corpus (a ``Partial`` of all its texts)."""

    partial: Partial
    maps: np.ndarray | None = field(default=None, repr=False)   # (L, H, 2S, 2) PCA, or None

    @property
    def model(self) -> str:
        return self.partial.model

    @property
    def metrics(self) -> "pandas.DataFrame":  # noqa: F821 (pandas: imported when read)
        """pandas DataFrame, one row per (layer, head), layer-major: ``layer``, ``head`` and
        each metric's mean over every query position of every text (entropy −Σ α ln α in nats;
        sink the weight on position 0; distance Σ α_qk (q − k); sparsity the keys holding 90 %
        of a row's weight; prev_token, duplicate, induction TransformerLens's scores;
        punctuation the weight on punctuation; max_weight the row's largest weight). NaN: a
        head that read no row."""
        import pandas as pd

        means = self.partial.means()
        layers, heads = self.partial.shape
        layer, head = np.divmod(np.arange(layers * heads), heads)
        table = {"layer": layer, "head": head}
        table.update({column: means[name].ravel() for column, name in COLUMNS.items()})
        table["entropy"] = table["entropy"] * np.log(2)    # the reduction's bits, in nats
        return pd.DataFrame(table)

    def top_examples(self, layer: int, head: int, k: int = 10) -> list[tuple[str, int, float]]:
        """The k rows where the head's attention is most concentrated (its largest weight),
        most first: (the text, the query position, that weight); only queries that see at
        least the settings' min_keys keys (positions min_keys − 1 on) count."""
        self._check(layer, head)
        p = self.partial
        out = []
        for score, text, pos in zip(p.top_score[layer, head], p.top_text[layer, head],
                                    p.top_pos[layer, head]):
            if pos >= 0 and len(out) < k:
                out.append((p.corpus[np.uint64(text)], int(pos), float(score)))
        return out

    def embedding(self, layer: int, head: int, method: str = "pca") -> np.ndarray:
        """(2S, 2): the head's sampled queries, then its keys (those of the key/value head it
        reads), after RoPE, in one joint map (keys translated onto the queries' centroid, both
        scaled to one mean norm: every softmax row unchanged), by PCA or t-SNE
        (scikit-learn)."""
        self._check(layer, head)
        if method == "pca":
            if self.maps is not None:
                return np.asarray(self.maps[layer, head], np.float64)
            return atlas_map.pca(atlas_map.head_points(self.partial, layer, head))
        if method == "tsne":
            return atlas_map.tsne(atlas_map.head_points(self.partial, layer, head))
        raise AttnvizInputError("error.figure.one_of", name="method", value=repr(method),
                                allowed="pca, tsne")

    def related(self, layer: int, head: int, k: int = 5) -> list[tuple[int, int, float]]:
        """The k heads whose mean patterns over the corpus are most alike this one's (cosine
        similarity), most alike first: (layer, head, similarity)."""
        self._check(layer, head)
        nearest, similarity = atlas_map.related_heads(self.partial, k)
        heads = self.partial.shape[1]
        row = layer * heads + head
        return [(int(i) // heads, int(i) % heads, float(s))
                for i, s in zip(nearest[row], similarity[row])]

    def save(self, path: str | Path) -> None:
        """The atlas as one .npz (``HeadAtlas.load`` reads it; so does the page)."""
        write_atlas(path, self.partial, self.maps)

    @classmethod
    def load(cls, path: str | Path) -> "HeadAtlas":
        partial, maps = read_atlas(path)
        return cls(partial, maps)

    def _check(self, layer: int, head: int) -> None:
        layers, heads = self.partial.shape
        whole_number(layer, "layer", low=0, high=layers - 1)
        whole_number(head, "head", low=0, high=heads - 1)


def head_atlas(texts: Sequence[str], *, model: str = builtin.SMOLLM2, workers: int = 2,
               engine: str = "process", address: str | None = None,
               progress: Callable[[int], bool | None] | None = None) -> HeadAtlas:
    """Every head of `model` (a built-in decoder's name or a GGUF path) over `texts` (each cut
    to the model's window): engine "process" — in this process with workers=1 (`progress(done)`
    told after each text; returning False stops, the atlas of the texts read so far), else a
    pool of `workers` processes — or "ray" (`address`: a cluster's, or None / "local" for one
    started here). The same atlas whatever the engine, the workers and the split."""
    texts = list(texts)
    if engine not in ENGINES:
        raise AttnvizInputError("error.figure.one_of", name="engine", value=repr(engine),
                                allowed=", ".join(ENGINES))
    workers = whole_number(workers, "workers")
    if engine == "ray":
        partial = atlas_runners.run_ray(model, texts, address, workers)
    elif workers == 1 or progress is not None:
        partial = _atlas.reduce(atlas_runners.load_model(model), texts, progress=progress)
    else:
        partial = atlas_runners.run_pool(model, texts, workers)
    return HeadAtlas(partial)
