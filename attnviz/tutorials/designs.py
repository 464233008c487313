"""The Experiments page's lessons on a modern decoder's attention designs (issue 38), live on
the models: the sliding window (a local layer puts exactly 0 on keys `window` or more positions
back, a global layer does not; how far back each layer can see through the stack), QK-norm (the
scores' range with and without it, beside Gemma 2's soft-capping) and the KV cache of
multi-query, grouped-query and multi-head attention.

`model` is a DecoderModel (``config``, ``encode``, ``token_embeddings``, ``run_layers`` with a
reading hook, ``run``), `config` its DecoderConfig: this module reads them without importing
``models`` (numbers a test checks against an independent computation)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from attnviz.core.arrays import readonly
from attnviz.core.errors import AttnvizInputError
from attnviz.core.rotary import apply_rope, cos_sin

WINDOW_TOKENS = 600          # the sliding-window experiment's text: past Gemma 3's 512
SOFTCAP = 50.0               # Gemma 2's attention soft-cap: scores → 50 · tanh(scores / 50)
CACHE_LENGTHS = (1024, 32768)   # the KV cache's sizes, in tokens
FLOAT32_BYTES = 4            # attnviz keeps its KV cache in float32


# ---- the sliding window ------------------------------------------------------------------------

@dataclass(frozen=True)
class SlidingWindow:
    """One text of `n` tokens through the layers up to `global_layer`: the last query's weights
    (heads, n) on a local layer and on a global one, and each layer's reach."""

    n: int
    window: int | None                 # keys a query on a local layer sees, itself included
    local_layer: int | None            # None: the model has no local layer
    global_layer: int
    local_weights: np.ndarray | None   # (H, n): the last query's weights on the local layer
    global_weights: np.ndarray         # (H, n): on the global layer
    reach: tuple[float, ...]           # per layer: positions back a token's information can
                                       # come from after it (math.inf: every earlier one)

    @property
    def beyond(self) -> np.ndarray:
        """(n,) bool: the keys `window` or more positions before the last query."""
        back = self.n - 1 - np.arange(self.n)
        return back >= (self.window if self.window is not None else self.n + 1)

    @property
    def local_beyond(self) -> float:
        """The local layer's largest weight on those keys (exactly 0: masked)."""
        if self.local_weights is None or not self.beyond.any():
            return 0.0
        return float(self.local_weights[:, self.beyond].max())

    @property
    def global_beyond(self) -> float:
        """The global layer's weight on those keys, summed and averaged over its heads."""
        if not self.beyond.any():
            return 0.0
        return float(self.global_weights[:, self.beyond].sum(axis=1).mean())


def layer_reach(config) -> tuple[float, ...]:
    """How many positions back a token's information can come from after each layer: a local
    layer adds window − 1 to the reach before it (each hop reads window − 1 keys back), a
    global layer reaches every earlier position (math.inf)."""
    reach, total = [], 0.0
    for layer in range(config.num_layers):
        window = config.window_of(layer)
        total = math.inf if window is None else total + (window - 1)
        reach.append(total)
    return tuple(reach)


def window_ids(model, text: str, n: int = WINDOW_TOKENS) -> np.ndarray:
    """(n,) token ids: `text`'s, repeated until there are n (its BOS, if the model puts one,
    once at the start)."""
    if not isinstance(text, str) or not text.strip():
        raise AttnvizInputError("error.experiment.sink.empty")
    ids = np.asarray(model.encode(text))
    bos = model.config.add_bos and len(ids) and ids[0] == model.config.bos_id
    head, body = (ids[:1], ids[1:]) if bos else (ids[:0], ids)
    if not len(body):
        raise AttnvizInputError("error.experiment.sink.too_short")
    repeats = -(-(n - len(head)) // len(body))
    return np.concatenate([head, np.tile(body, repeats)])[:n]


def sliding_window(model, ids: np.ndarray) -> SlidingWindow:
    """The last query's weights on the model's first local layer and its first global layer
    (the layers up to that one run, with the model's own masks: ``run_layers`` on the scaled
    embeddings, reading each layer's pattern)."""
    c = model.config
    kinds = [c.window_of(layer) for layer in range(c.num_layers)]
    local = next((i for i, w in enumerate(kinds) if w is not None), None)
    full = next(i for i, w in enumerate(kinds) if w is None)
    wanted = {full} | ({local} if local is not None else set())
    seen: dict[int, np.ndarray] = {}

    def read(layer: int, name: str, value: np.ndarray) -> None:
        if name == "pattern" and layer in wanted:
            seen[layer] = np.array(value[0, :, -1, :], dtype=np.float64)     # (H, n)

    model.run_layers(model.token_embeddings(ids), 0, max(wanted) + 1, hook=read)
    return SlidingWindow(n=len(ids), window=c.sliding_window if local is not None else None,
                         local_layer=local, global_layer=full,
                         local_weights=None if local is None else readonly(seen[local]),
                         global_weights=readonly(seen[full]), reach=layer_reach(c))


# ---- QK-norm --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ScoreRange:
    """Per layer, the largest |scaled score| of the model as it is and of the same layer the
    other way (QK-norm taken out where the model has it; put in, with gain 1, where it has
    not), on one text; and how much Gemma 2's soft-cap at 50 would move each."""

    qk_norm: bool                      # the model has QK-norm
    actual: np.ndarray                 # (layers,) max |scaled score|, the model's own
    other: np.ndarray                  # (layers,) the other way
    softcap_change: np.ndarray         # (layers,) max |s − 50 tanh(s/50)| on the model's own

    @property
    def with_norm(self) -> np.ndarray:
        return self.actual if self.qk_norm else self.other

    @property
    def without_norm(self) -> np.ndarray:
        return self.other if self.qk_norm else self.actual


def _rms_normed(a: np.ndarray) -> np.ndarray:
    return a / np.sqrt(np.mean(a * a, axis=-1, keepdims=True) + 1e-6)


def score_range(model, run) -> ScoreRange:
    """Every layer of `run` (a DecoderRun of `model`): the scaled scores' largest magnitude
    as the model computes them (the engine's trace) and recomputed from the same layer's
    projected q and k with QK-norm the other way (RMS-normed with gain 1, or not normed), rotated
    by the layer's own base and scaled by the model's scale."""
    c = model.config
    actual, other, change = [], [], []
    n = len(run.ids)
    for layer in range(c.num_layers):
        tr = run.trace(layer)
        s = tr.scaled_scores.astype(np.float64)[:, ~np.triu(np.ones((n, n), bool), 1)]
        actual.append(np.abs(s).max())
        change.append(np.abs(s - SOFTCAP * np.tanh(s / SOFTCAP)).max())
        q, k = tr.q.astype(np.float64), tr.k.astype(np.float64)       # as projected
        if not c.qk_norm:
            q, k = _rms_normed(q), _rms_normed(k)
        cos, sin = cos_sin(np.arange(n), c.d_k, c.rope_base_of(layer), np.float64)
        scores = apply_rope(q, cos=cos, sin=sin) @ \
            np.swapaxes(apply_rope(k, cos=cos, sin=sin), -1, -2) * c.scale
        other.append(np.abs(scores[:, ~np.triu(np.ones((n, n), bool), 1)]).max())
    return ScoreRange(qk_norm=bool(c.qk_norm), actual=readonly(np.array(actual)),
                      other=readonly(np.array(other)), softcap_change=readonly(np.array(change)))


# ---- the KV cache: MQA, GQA, MHA ---------------------------------------------------------------

@dataclass(frozen=True)
class CacheSize:
    """One model's KV cache per token: its own design and a full multi-head model of the
    same widths (as many K/V heads as query heads)."""

    name: str
    num_layers: int
    num_heads: int
    num_kv_heads: int
    d_k: int
    window: int | None                 # local layers keep only this many positions
    local_layers: int                  # how many layers are local

    def bytes_per_token(self, kv_heads: int | None = None,
                        value_bytes: int = FLOAT32_BYTES) -> int:
        """K and V of every layer for one token: 2 · layers · kv_heads · d_k · value_bytes."""
        heads = self.num_kv_heads if kv_heads is None else kv_heads
        return 2 * self.num_layers * heads * self.d_k * value_bytes

    def bytes_at(self, tokens: int, kv_heads: int | None = None, *, windowed: bool = False,
                 value_bytes: int = FLOAT32_BYTES) -> int:
        """The whole cache at `tokens` tokens; `windowed`: the local layers keep only the last
        `window` positions."""
        per_layer = self.bytes_per_token(kv_heads, value_bytes) // self.num_layers
        if not windowed or self.window is None:
            return per_layer * self.num_layers * tokens
        local = self.local_layers * min(tokens, self.window)
        return per_layer * (local + (self.num_layers - self.local_layers) * tokens)

    @property
    def design(self) -> str:
        """"mqa" (one K/V head), "gqa" (fewer than the query heads) or "mha"."""
        if self.num_kv_heads == 1:
            return "mqa"
        return "gqa" if self.num_kv_heads < self.num_heads else "mha"


def cache_size(name: str, config) -> CacheSize:
    """`config` (a DecoderConfig, read without the weights) as a CacheSize."""
    local = sum(config.window_of(layer) is not None for layer in range(config.num_layers))
    return CacheSize(name=name, num_layers=config.num_layers, num_heads=config.num_heads,
                     num_kv_heads=config.num_kv_heads, d_k=config.d_k,
                     window=config.sliding_window if local else None, local_layers=local)
