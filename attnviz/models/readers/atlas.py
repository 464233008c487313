"""The head atlas: every head of a decoder over a corpus of texts, as a reduction.

Storing every pattern is impossible at corpus scale (10,000 texts × 300 tokens of SmolLM2 is
~490 GB of float32 weights), so each shard of texts gives a small :class:`Partial` and partials
merge, in any order and any grouping, to the same atlas:

    reduce(model, texts) -> Partial        one process, one shard (each text alone)
    merge(a, b) -> Partial                 associative and commutative

A partial holds, per head (layer, head):

- ``sums`` / ``counts`` (metric, layer, head): every query row's numbers
  (``core.reading.ROW_METRICS``: entropy, sparsity, sink, distance, punctuation, max weight)
  summed, and the detectors' (``core.reading.DETECTORS``: previous-token, duplicate-token,
  induction) weight on their patterns, with the rows counted: ``means()`` divides;
- ``hist`` (metric, layer, head, bin): the rows' values in fixed bins (``EDGES``);
- ``offsets`` (layer, head, 17): the weight summed at each offset 0–15 behind the query and on
  the first token beyond them (``mean_pattern``: each head's mean pattern);
- ``top_*`` (layer, head, k): the k most concentrated rows (largest max weight) as (score,
  text, position), ties broken by text then position — only queries that see at least
  ``min_keys`` keys (position ≥ min_keys − 1): query i sees i + 1 keys, so its largest weight
  is at least 1 / (i + 1), and without the bound every head's "most concentrated" rows would
  be the first positions of the texts;
- ``res_*`` (layer, head, decile, r): a sample of r rows from each decile of the max weight
  (0–0.1, …, 0.9–1), the r of smallest seeded priority (a bottom-r sketch: the same rows
  whatever the split), of the same queries as the top rows;
- ``sample_*``: query and key vectors of every head at a sample of (text, position) — each
  position drawn when its seeded priority is below ``sample_rate``, the ``sample_size`` of
  smallest priority kept — before RoPE (after QK-norm where the model has it); ``rotated``
  turns them at their positions, as the model does.

Texts are named by a 64-bit hash of their content (``text_id``); a partial keeps the texts its
examples and samples point at. Counts, top-k, reservoirs and samples are exact whatever the
split and order; sums agree to rounding (float64, ≤ 1e-9 relative).
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from attnviz.core.errors import AttnvizInputError
from attnviz.core.reading import (DETECTORS, ROW_METRICS, detection_cells, detection_sums,
                                  is_punctuation, row_metrics)
from attnviz.core.rotary import apply_rope

__all__ = ["DETECTORS", "EDGES", "METRICS", "OFFSETS", "Partial", "Settings", "merge", "merge_all",
           "priority", "reduce", "text_id"]

METRICS = ROW_METRICS + DETECTORS          # the sums' first axis
DECILES = 10
OFFSETS = 16                               # a head's mean pattern: its weight at offsets 0–15
_EMPTY = np.iinfo(np.uint64).max           # an empty slot's priority: after every real one
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_TEXT_POSITION = 2 ** 32                   # the text's own draw: a position no text reaches


@dataclass(frozen=True)
class Settings:
    """How much a partial keeps: k top rows and r rows a decile per head, bins per histogram,
    the q/k sample (its size; the share of positions drawn, from a share `sample_texts` of the
    texts, so that the layers are traced again for those texts only), the seed of every
    draw, and the fewest keys a query sees to count among the top rows and the reservoirs
    (`min_keys`: positions min_keys − 1 on; 2 leaves out query 0 only)."""

    top_k: int = 8
    reservoir: int = 3
    bins: int = 32
    sample_size: int = 384
    sample_rate: float = 1 / 16
    sample_texts: float = 1 / 4
    seed: int = 0
    min_keys: int = 8

    def __post_init__(self):
        if self.min_keys < 2:                       # query 0 sees one key: weight 1, always
            raise AttnvizInputError("error.atlas.min_keys", value=self.min_keys)


# an atlas file's settings end where that file's version of Settings ended: a field added since
# is read as the value the file was made with (files before min_keys left out query 0 only)
_BEFORE = {"min_keys": 2}


def _edges(bins: int) -> dict[str, np.ndarray]:
    """Fixed bin edges of each row metric (a value past the last edge counts in the last bin)."""
    return {"entropy": np.linspace(0, 9, bins + 1),           # bits: log2 512 = 9
            "sparsity": np.linspace(0, 512, bins + 1),        # keys
            "sink": np.linspace(0, 1, bins + 1),
            "distance": np.linspace(0, 512, bins + 1),        # tokens
            "punctuation": np.linspace(0, 1, bins + 1),
            "max_weight": np.linspace(0, 1, bins + 1)}


EDGES = _edges(Settings.bins)


# ---- names and draws ---------------------------------------------------------------------------

def text_id(text: str) -> np.uint64:
    """A text's name: the first 8 bytes of its BLAKE2b hash, as an unsigned 64-bit number."""
    return np.uint64(int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8)
                                    .digest(), "little"))


def priority(text: np.uint64, positions: np.ndarray, seed: int) -> np.ndarray:
    """(n,) uint64: a seeded pseudo-random number for each (text, position), SplitMix64's
    finaliser of text ⊕ (position + 1)·φ ⊕ seed·φ²: the same draw in any process."""
    with np.errstate(over="ignore"):
        x = (np.uint64(text) ^ (np.asarray(positions, np.uint64) + np.uint64(1)) * _GOLDEN
             ^ np.uint64(seed) * _GOLDEN * _GOLDEN)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


# ---- the partial -------------------------------------------------------------------------------

@dataclass(eq=False)
class Partial:
    """What a shard of texts gives (see the module's docstring). Arrays only, so it pickles
    cheaply and is written as one .npz (``to_arrays`` / ``from_arrays``)."""

    model: str
    settings: Settings
    rope_bases: np.ndarray                   # (L,) each layer's RoPE base, for ``rotated``
    texts: int = 0                           # texts read (each cut to the model's window)
    tokens: int = 0                          # tokens read
    skipped: int = 0                         # texts of fewer than 2 tokens, not read
    sums: np.ndarray = field(default=None, repr=False)        # (M, L, H) float64
    counts: np.ndarray = field(default=None, repr=False)      # (M, L, H) int64
    hist: np.ndarray = field(default=None, repr=False)        # (len(ROW_METRICS), L, H, B)
    offsets: np.ndarray = field(default=None, repr=False)     # (L, H, OFFSETS + 1) float64
    top_score: np.ndarray = field(default=None, repr=False)   # (L, H, k) float64, −inf empty
    top_text: np.ndarray = field(default=None, repr=False)    # (L, H, k) uint64
    top_pos: np.ndarray = field(default=None, repr=False)     # (L, H, k) int64, −1 empty
    res_priority: np.ndarray = field(default=None, repr=False)   # (L, H, 10, r) uint64
    res_score: np.ndarray = field(default=None, repr=False)      # (L, H, 10, r) float64
    res_text: np.ndarray = field(default=None, repr=False)       # (L, H, 10, r) uint64
    res_pos: np.ndarray = field(default=None, repr=False)        # (L, H, 10, r) int64
    sample_priority: np.ndarray = field(default=None, repr=False)  # (S,) uint64, sorted
    sample_text: np.ndarray = field(default=None, repr=False)      # (S,) uint64
    sample_pos: np.ndarray = field(default=None, repr=False)       # (S,) int64
    sample_token: np.ndarray = field(default=None, repr=False)     # (S,) str
    sample_q: np.ndarray = field(default=None, repr=False)   # (S, L, H, d_k) float32, pre-RoPE
    sample_k: np.ndarray = field(default=None, repr=False)   # (S, L, H_kv, d_k) float32
    corpus: dict = field(default_factory=dict, repr=False)   # text id → text, those pointed at

    @classmethod
    def empty(cls, model: str, layers: int, heads: int, kv_heads: int, d_k: int,
              rope_bases: Sequence[float], settings: Settings = Settings()) -> "Partial":
        s, m, L, H = settings, len(METRICS), layers, heads
        return cls(model=model, settings=s, rope_bases=np.asarray(rope_bases, np.float64),
                   sums=np.zeros((m, L, H)), counts=np.zeros((m, L, H), np.int64),
                   hist=np.zeros((len(ROW_METRICS), L, H, s.bins), np.int64),
                   offsets=np.zeros((L, H, OFFSETS + 1)),
                   top_score=np.full((L, H, s.top_k), -np.inf),
                   top_text=np.zeros((L, H, s.top_k), np.uint64),
                   top_pos=np.full((L, H, s.top_k), -1, np.int64),
                   res_priority=np.full((L, H, DECILES, s.reservoir), _EMPTY, np.uint64),
                   res_score=np.full((L, H, DECILES, s.reservoir), np.nan),
                   res_text=np.zeros((L, H, DECILES, s.reservoir), np.uint64),
                   res_pos=np.full((L, H, DECILES, s.reservoir), -1, np.int64),
                   sample_priority=np.zeros(0, np.uint64), sample_text=np.zeros(0, np.uint64),
                   sample_pos=np.zeros(0, np.int64), sample_token=np.zeros(0, str),
                   sample_q=np.zeros((0, L, H, d_k), np.float32),
                   sample_k=np.zeros((0, L, kv_heads, d_k), np.float32))

    @property
    def shape(self) -> tuple[int, int]:
        """(layers, heads)."""
        return self.sums.shape[1:]

    @property
    def nbytes(self) -> int:
        """Bytes of its arrays and texts."""
        arrays = sum(v.nbytes for v in self.to_arrays().values())
        return arrays + sum(len(t.encode("utf-8")) for t in self.corpus.values())

    def means(self) -> dict[str, np.ndarray]:
        """Each metric's mean over every row read, (layers, heads) float64: NaN for none."""
        with np.errstate(invalid="ignore", divide="ignore"):
            values = self.sums / self.counts
        return {name: values[i] for i, name in enumerate(METRICS)}

    def mean_pattern(self) -> np.ndarray:
        """(L, H, OFFSETS + 1): each head's mean pattern over every row read — the weight a row
        puts at offsets 0 … 15 behind it (0: itself), then on the first token where it lies
        further back — what related heads are compared by (``atlas_map.related_heads``)."""
        rows = self.counts[0][..., None]                      # (L, H, 1): rows read
        with np.errstate(invalid="ignore", divide="ignore"):
            return self.offsets / rows

    def rotated(self, which: str = "q") -> np.ndarray:
        """The sample's queries (S, L, H, d_k) or keys (S, L, H_kv, d_k) after RoPE, each turned
        at its position by its layer's base, as the model turns them."""
        x = self.sample_q if which == "q" else self.sample_k
        out = np.empty_like(x)
        for layer, base in enumerate(self.rope_bases):
            # (S, heads, d_k) seen as (heads, S, d_k): row p at sample_pos[p]
            out[:, layer] = apply_rope(x[:, layer].swapaxes(0, 1), self.sample_pos,
                                       float(base)).swapaxes(0, 1)
        return out

    def to_arrays(self) -> dict[str, np.ndarray]:
        """Every array by name, and the rest as small arrays (no pickling: ``allow_pickle`` off)."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
               if isinstance(getattr(self, f.name), np.ndarray)}
        out["model"] = np.array(self.model)
        out["counters"] = np.array([self.texts, self.tokens, self.skipped], np.int64)
        out["settings"] = np.array([dataclasses.asdict(self.settings)[f.name]
                                    for f in dataclasses.fields(Settings)], np.float64)
        ids = sorted(self.corpus)
        out["corpus_ids"] = np.array(ids, np.uint64)
        out["corpus_texts"] = np.array([self.corpus[i] for i in ids], str)
        return out

    @classmethod
    def from_arrays(cls, arrays) -> "Partial":
        """The partial ``to_arrays`` gave (or an .npz of it)."""
        names = [f.name for f in dataclasses.fields(Settings)]
        kinds = {f.name: f.type for f in dataclasses.fields(Settings)}
        saved = {n: (float(v) if kinds[n] == "float" else int(v))
                 for n, v in zip(names, arrays["settings"])}
        settings = Settings(**{**{n: v for n, v in _BEFORE.items() if n not in saved}, **saved})
        texts, tokens, skipped = (int(v) for v in arrays["counters"])
        skip = {"model", "counters", "settings", "corpus_ids", "corpus_texts"}
        fields = {f.name for f in dataclasses.fields(cls)}
        kept = {k: np.asarray(arrays[k]) for k in arrays.keys() if k not in skip and k in fields}
        corpus = dict(zip((np.uint64(i) for i in arrays["corpus_ids"]),
                          (str(t) for t in arrays["corpus_texts"])))
        return cls(model=str(arrays["model"]), settings=settings, texts=texts, tokens=tokens,
                   skipped=skipped, corpus=corpus, **kept)


# ---- reduce: one text, then a shard --------------------------------------------------------------

def reduce(model, texts: Iterable[str], settings: Settings = Settings(),
           progress: Callable[[int], bool | None] | None = None) -> Partial:
    """The partial of `texts` (each cut to the model's window, each run alone, so a text gives
    the same numbers in any shard). model: a ``DecoderModel``.

    progress(done): called after each text with the count of texts read so far (skipped ones
    included); returning False stops there, and the partial is that of the first `done`
    texts: to resume, merge it with ``reduce(model, texts[done:])`` (the same atlas as one
    uninterrupted reduce)."""
    out = _empty_for(model, settings)
    pending = []                                              # the shard's q/k draws
    for done, text in enumerate(texts, start=1):
        pending.append(_add_text(out, model, text))
        if progress is not None and progress(done) is False:
            break
    _keep_sample(out, [p for p in pending if p is not None])
    _prune_corpus(out)
    return out


def _empty_for(model, settings: Settings) -> Partial:
    c = model.config
    return Partial.empty(model.model_name, c.num_layers, c.num_heads, c.num_kv_heads, c.d_k,
                         [c.rope_base_of(layer) for layer in range(c.num_layers)], settings)


def _add_text(out: Partial, model, text: str):
    """Add one text's rows to `out` in place; its q/k draws (or None). One pass of the model's
    layers (``run_layers``) whose hook reads each layer's pattern as it is made (nothing of
    the n × n weights is kept) and the residual stream at the drawn positions."""
    s = out.settings
    ids = model.encode(text)[:model.max_tokens]
    n = len(ids)
    if n < 2:
        out.skipped += 1
        return None
    out.texts += 1
    out.tokens += n
    tid = text_id(text)
    out.corpus[tid] = text
    tokens = model.labels(ids)[0]
    punctuation = np.array([is_punctuation(t.strip()) for t in tokens])
    cells = detection_cells(ids)
    prio = priority(tid, np.arange(n), s.seed)                # (n,)
    drawn = _drawn(tid, prio, s)
    streams = []                                              # each layer's input, drawn rows
    layers, rows = out.shape[0], len(ROW_METRICS)
    values = np.empty((rows, layers, out.shape[1], n))        # (rows, L, H, n) each row's numbers

    def read(layer: int, name: str, value: np.ndarray) -> None:
        if name == "resid_pre":
            streams.append(np.array(value[0, drawn]))         # (m, d_model)
            return
        if name != "pattern":
            return
        weights = value[0]                                    # (H, n, n)
        values[:, layer] = row_metrics(weights, punctuation)  # (rows, H, n)
        out.sums[rows:, layer] += detection_sums(weights, cells)
        out.offsets[layer] += _offset_sums(weights)

    model.run_layers(model.token_embeddings(ids), hook=read)
    # the rows' sums, bins and examples of every layer at once (the same numbers as layer by
    # layer, in fewer and larger numpy calls)
    out.sums[:rows] += values.sum(axis=-1)                   # (rows, L, H)
    out.counts += n
    out.hist += _histograms(values, EDGES if s.bins == Settings.bins else _edges(s.bins))
    _add_examples(out, values[ROW_METRICS.index("max_weight")], tid, prio)
    if not len(drawn):
        return None
    return _draw(model, drawn, np.stack(streams), tokens, tid, prio)


def _drawn(tid, prio: np.ndarray, s: Settings) -> np.ndarray:
    """The positions of a text drawn for the q/k sample: none unless the text's own priority
    is below sample_texts; then each position whose priority is below
    sample_rate / sample_texts (so sample_rate of all positions, in expectation)."""
    if not _below(priority(tid, np.array([_TEXT_POSITION]), s.seed)[0], s.sample_texts):
        return np.zeros(0, np.int64)
    return np.flatnonzero(_below(prio, s.sample_rate / s.sample_texts))


def _below(prio, share: float):
    """prio < share · 2⁶⁴: True with probability `share` (every one from 1 on)."""
    if share >= 1:
        return np.ones(np.shape(prio), bool)
    return prio < np.uint64(min(int(share * 2.0 ** 64), int(_EMPTY)))


def _offset_sums(weights: np.ndarray) -> np.ndarray:
    """(H, OFFSETS + 1): Σ over the rows of the weight at each offset d = i − j below OFFSETS
    (d = 0: itself, 1: the token before, …), and on the first token (beyond them) last."""
    h, n, _ = weights.shape
    out = np.zeros((h, OFFSETS + 1))
    for d in range(min(OFFSETS, n)):
        out[:, d] = np.diagonal(weights, offset=-d, axis1=1, axis2=2).sum(axis=-1,
                                                                          dtype=np.float64)
    out[:, OFFSETS] = weights[:, OFFSETS:, 0].sum(axis=-1, dtype=np.float64)
    return out


def _histograms(values: np.ndarray, edges: dict[str, np.ndarray]) -> np.ndarray:
    """(rows, L, H, B) counts of each metric's values (rows, L, H, n) in the bins of its
    `edges` (the ends included: below the first edge counts in the first bin, past the last in
    the last), one bincount for every metric, layer and head.

    The edges are even steps from 0 (``_edges``): a value's bin is guessed by one division,
    at most one bin off, then moved to the last edge at or below it — the bin np.searchsorted
    finds (a test holds them equal), without its search."""
    rows, layers, heads, n = values.shape
    bins = len(edges[ROW_METRICS[0]]) - 1
    index = np.empty((rows, layers, heads, n), np.int64)
    for m, metric in enumerate(ROW_METRICS):
        e, v = edges[metric], values[m]                       # (B + 1,), (L, H, n)
        guess = np.clip((v * (bins / e[-1])).astype(np.int64), 0, bins - 1)
        guess -= v < e[guess]                                 # below its bin: the one before
        guess += v >= e[guess + 1]                            # at or past its end: the next
        index[m] = guess
    np.clip(index, 0, bins - 1, out=index)
    index += bins * np.arange(rows * layers * heads).reshape(rows, layers, heads, 1)
    return np.bincount(index.ravel(), minlength=rows * layers * heads * bins
                       ).reshape(rows, layers, heads, bins)


def _add_examples(out: Partial, concentration: np.ndarray, tid, prio) -> None:
    """The text's rows (L, H, n) of max weight into every layer's top-k and decile reservoirs:
    those of queries that see min_keys keys or more (positions min_keys − 1 on; a row's largest
    weight is at least one over its keys, so earlier rows would crowd out every other).

    Only the text's own k best rows of each head and r first of each decile can enter (one
    text: ties by position), so those alone meet the kept ones: the same rows as all of them."""
    layers, heads, n = concentration.shape
    s = out.settings
    first = s.min_keys - 1
    if n <= first:
        return
    score = concentration[..., first:]                        # (L, H, m)
    m = n - first
    best = np.argsort(-score, axis=-1, kind="stable")[..., :s.top_k]     # (L, H, ≤ k)
    out.top_score, out.top_text, out.top_pos = _top(
        np.concatenate([out.top_score, np.take_along_axis(score, best, -1)], -1),
        np.concatenate([out.top_text, np.full(best.shape, tid, np.uint64)], -1),
        np.concatenate([out.top_pos, best + first], -1), s.top_k)
    # each decile's r rows of smallest priority (then position): the rows by priority, grouped
    # by decile in that order (a stable sort), the first r of each group
    by_priority = np.lexsort((np.arange(m), prio[first:]))   # (m,)
    decile = np.minimum((score[..., by_priority] * DECILES).astype(np.int64), DECILES - 1)
    grouped = by_priority[np.argsort(decile.astype(np.int8), axis=-1, kind="stable")]
    groups = layers * heads                                   # (L, H, m): row indices
    sizes = np.bincount((decile + DECILES * np.arange(groups).reshape(layers, heads, 1)).ravel(),
                        minlength=groups * DECILES).reshape(layers, heads, DECILES)
    slot = np.arange(s.reservoir)
    real = slot < sizes[..., None]                            # (L, H, 10, r)
    at = np.where(real, (np.cumsum(sizes, -1) - sizes)[..., None] + slot, 0)
    row = np.take_along_axis(grouped, at.reshape(layers, heads, -1), -1)  # (L, H, 10·r)
    new = (np.where(real, prio[first:][row].reshape(real.shape), _EMPTY),
           np.where(real, np.take_along_axis(score, row, -1).reshape(real.shape), np.nan),
           np.where(real, tid, np.uint64(0)),
           np.where(real, (row + first).reshape(real.shape), -1))
    kept = (out.res_priority, out.res_score, out.res_text, out.res_pos)    # (L, H, 10, r)
    out.res_priority, out.res_score, out.res_text, out.res_pos = _bottom(
        *(np.concatenate([k, c], -1) for k, c in zip(kept, new)), s.reservoir)


def _top(score, text, pos, k):
    """The k entries of largest score along the last axis, ties by text then position."""
    order = np.lexsort((pos, text, -score), axis=-1)[..., :k]
    return tuple(np.take_along_axis(a, order, -1) for a in (score, text, pos))


def _bottom(prio, score, text, pos, r):
    """The r entries of smallest priority along the last axis, ties by text then position."""
    order = np.lexsort((pos, text, prio), axis=-1)[..., :r]
    return tuple(np.take_along_axis(a, order, -1) for a in (prio, score, text, pos))


def _draw(model, drawn, streams, tokens, tid, prio):
    """The q/k draws at positions `drawn` (m,) from each layer's input there, streams
    (L, m, d_model): each layer's unrotated q and k (after QK-norm) of those rows
    (``DecoderModel.unrotated_qk``), which depend on the row only; ``Partial.rotated`` turns
    them at their own positions."""
    q, k = zip(*(model.unrotated_qk(layer, rows) for layer, rows in enumerate(streams)))
    return (prio[drawn], np.full(len(drawn), tid, np.uint64), drawn.astype(np.int64),
            np.array([tokens[i] for i in drawn], str),
            np.stack(q).transpose(2, 0, 1, 3).astype(np.float32),      # (m, L, H, d_k)
            np.stack(k).transpose(2, 0, 1, 3).astype(np.float32))      # (m, L, H_kv, d_k)


def _keep_sample(out: Partial, draws: list) -> None:
    """The sample_size draws of smallest priority among `out`'s and `draws`, sorted. `out`'s
    own are kept already: with nothing drawn they stay as they are (no copy of the q/k)."""
    draws = [d for d in draws if len(d[0])]
    if not draws:
        return
    mine = (out.sample_priority, out.sample_text, out.sample_pos, out.sample_token,
            out.sample_q, out.sample_k)
    parts = [np.concatenate([a, *(d[i] for d in draws)]) for i, a in enumerate(mine)]
    order = np.lexsort((parts[2], parts[1], parts[0]))[:out.settings.sample_size]
    (out.sample_priority, out.sample_text, out.sample_pos, out.sample_token, out.sample_q,
     out.sample_k) = (a[order] for a in parts)


def _prune_corpus(out: Partial) -> None:
    """Keep only the texts an example or a sample points at."""
    used = set(out.top_text[out.top_pos >= 0].tolist()) | \
        set(out.res_text[out.res_pos >= 0].tolist()) | set(out.sample_text.tolist())
    out.corpus = {k: v for k, v in out.corpus.items() if int(k) in used}


# ---- merge -----------------------------------------------------------------------------------------

def merge(a: Partial, b: Partial) -> Partial:
    """The partial of a's texts and b's together: sums and counts added, top-k, reservoirs and
    samples kept by the same order as one shard keeps them. Associative and commutative
    (sums up to rounding). a and b must come from the same model and settings."""
    if (a.model, a.settings, a.sums.shape) != (b.model, b.settings, b.sums.shape):
        raise AttnvizInputError("error.atlas.mismatch", first=a.model, second=b.model)
    s = a.settings
    out = dataclasses.replace(a, texts=a.texts + b.texts, tokens=a.tokens + b.tokens,
                              skipped=a.skipped + b.skipped, sums=a.sums + b.sums,
                              counts=a.counts + b.counts, hist=a.hist + b.hist,
                              offsets=a.offsets + b.offsets,
                              corpus={**a.corpus, **b.corpus})
    out.top_score, out.top_text, out.top_pos = _top(
        *(np.concatenate([x, y], -1) for x, y in ((a.top_score, b.top_score),
                                                   (a.top_text, b.top_text),
                                                   (a.top_pos, b.top_pos))), s.top_k)
    out.res_priority, out.res_score, out.res_text, out.res_pos = _bottom(
        *(np.concatenate([x, y], -1) for x, y in (
            (a.res_priority, b.res_priority), (a.res_score, b.res_score),
            (a.res_text, b.res_text), (a.res_pos, b.res_pos))), s.reservoir)
    _keep_sample(out, [(b.sample_priority, b.sample_text, b.sample_pos, b.sample_token,
                        b.sample_q, b.sample_k)])
    _prune_corpus(out)
    return out


def merge_all(partials: Iterable[Partial]) -> Partial:
    """Every partial merged, left to right."""
    partials = iter(partials)
    out = next(partials)
    for p in partials:
        out = merge(out, p)
    return out
