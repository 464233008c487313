"""One Llama decoder layer in numpy float32, as transformers' ``LlamaDecoderLayer`` computes it,
written once for every caller: ``DecoderModel.run`` (the attention traced by the engine, for the
pages' step views), generation and ``next_token_logprobs`` (a KV cache), the head-ablation
ranking (a batch of head masks, ``decoder_reading``) and the readers that read or patch what a
layer computes (``DecoderModel.run_layers`` with a hook).

    resid_pre  = h                                         (B, n, d_model)
    x          = RMSNorm(h) · g_attn
    q, k, v    = x W_Q, x W_K, x W_V                       (B, H, n, d_k), (B, H_kv, n, d_k)
    q, k       = apply_rope(q), apply_rope(k)              positions start … start + n − 1
    k, v       = the cache's keys and values, then these    (B, H_kv, n_k, d_k), n_k = start + n
    pattern    = softmax(q kᵀ / √d_k + causal mask)         (B, H, n, n_k): query head h reads
                                                             key/value head h // (H / H_kv)
    z          = pattern v, · head_mask                     (B, H, n, d_v)
    attn_out   = Concat(z) W_O                             (B, n, d_model)
    resid_mid  = h + attn_out
    mlp_out    = W_down(SiLU(y W_gate) ⊙ y W_up),  y = RMSNorm(resid_mid) · g_mlp
    resid_post = resid_mid + mlp_out

Axis order: (batch, head, position, feature), transformers' after its ``transpose(1, 2)``; the
engine's trace drops the batch. The names are modeling_llama.py's: ``rotate_half`` and
``apply_rope`` (its ``apply_rotary_pos_emb``, ``core.rotary``) with cos and sin computed once per
forward pass (its ``position_embeddings``), and the query heads grouped by the key/value head
they share (``core.grouped_query.group_heads``: its ``repeat_kv``, as a view instead of a
copy).

A hook, ``hook(layer, name, value)``, is called at each name of HOOK_POINTS with that
activation (a read-only view, shaped as above; "v" is every key's value, the cache's included):
it returns None to read it, or an array of the same shape that the layer uses instead — a patch
(activation patching). "v" and "pattern" can only be read. The finite check (one per layer, on
resid_post) runs before the resid_post hook, so an error names the layer's own step.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from attnviz.core.engine import AttentionTrace, attention, trace_attention
from attnviz.core.errors import AttnvizInputError
from attnviz.core.grouped_query import group_heads
from attnviz.core.rotary import apply_rope, cos_sin
from attnviz.core.weights import MultiHeadWeights
from attnviz.models.finite import all_finite, first_not_finite, from_engine, not_finite

__all__ = ["HOOK_POINTS", "READ_ONLY", "Hook", "KVCache", "LayerOutput", "LayerWeights",
           "Positions", "WindowedKVCache", "causal_mask", "sliding_mask", "llama_attention",
           "layer_attention_trace", "llama_layer", "llama_mlp", "llama_step", "project",
           "rms_norm", "rotary_embedding", "split_qkv", "trace_layer_attention"]

# where a hook is called, in the order the layer computes them
HOOK_POINTS = ("resid_pre", "v", "pattern", "z", "attn_out", "resid_mid", "mlp_out",
               "resid_post")
READ_ONLY = ("v", "pattern")
Hook = Callable[[int, str, np.ndarray], "np.ndarray | None"]
_DTYPE = np.float32


@dataclass(frozen=True, eq=False)
class LayerWeights:
    """One decoder layer's weights: attention and everything around it."""

    attention: MultiHeadWeights        # w_q (H, d, d_k), w_k/w_v (H_kv, d, d_k), w_o: the engine's
    w_qkv: np.ndarray                  # (d_model, (H + 2 H_kv) d_k): the same, side by side
    attn_norm: np.ndarray              # (d_model,) RMSNorm gain before attention
    mlp_norm: np.ndarray               # (d_model,) RMSNorm gain before the MLP
    gate_up: np.ndarray                # (d_model, 2 d_ff): W_gate | W_up
    down: np.ndarray                   # (d_ff, d_model)
    # a family's own, None where it has none (gguf_llama.FAMILIES)
    qkv_bias: np.ndarray | None = None         # ((H + 2 H_kv) d_k,) the biases of W_Q | W_K | W_V
    q_norm: np.ndarray | None = None           # (d_k,) RMSNorm gain of each head's q (QK-norm)
    k_norm: np.ndarray | None = None           # (d_k,) … and of its k
    post_attn_norm: np.ndarray | None = None   # (d_model,) RMSNorm gain after attention
    post_mlp_norm: np.ndarray | None = None    # (d_model,) … after the MLP


class KVCache:
    """Every layer's rotated keys and values so far, (layers, B, H_kv, capacity, d_k): a layer
    writes its new rows after the last (``update``), never recomputes them; the caller moves
    ``length`` on once every layer has written (``advance``). Every layer keeps every position
    (``WindowedKVCache``: a sliding-window layer only its window's)."""

    def __init__(self, layers: int, kv_heads: int, capacity: int, d_k: int, batch: int = 1):
        self.k = np.zeros((layers, batch, kv_heads, capacity, d_k), _DTYPE)
        self.v = np.zeros((layers, batch, kv_heads, capacity, d_k), _DTYPE)
        self.length = 0

    @property
    def shape(self) -> tuple[int, int, int]:
        """(layers, B, capacity): the positions it can hold."""
        return self.k.shape[0], self.k.shape[1], self.k.shape[3]

    def update(self, layer: int, k: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """k, v (B, H_kv, n, d_k) written at positions length … length + n − 1 of `layer`;
        returns that layer's keys and values so far, (B, H_kv, length + n, d_k) views."""
        start, end = self.length, self.length + k.shape[2]
        self.k[layer, :, :, start:end] = k
        self.v[layer, :, :, start:end] = v
        return self.k[layer, :, :, :end], self.v[layer, :, :, :end]

    def reads_from(self, layer: int) -> int:
        """The position of the first key ``update`` returns for `layer` in this pass (0: every
        key kept)."""
        return 0

    def kept_from(self, layer: int) -> int:
        """The first position whose key and value `layer` keeps once ``length`` positions are
        in: what the last query (length − 1) read from."""
        return 0

    def advance(self, n: int) -> None:
        self.length += n

    @property
    def nbytes_used(self) -> int:
        """Bytes of the float32 keys and values every layer keeps (its positions
        kept_from … length − 1)."""
        layers, batch, heads, _, d_k = self.k.shape
        kept = sum(self.length - self.kept_from(layer) for layer in range(layers))
        return 2 * batch * heads * kept * d_k * self.k.itemsize


class WindowedKVCache(KVCache):
    """A KV cache whose sliding-window layers keep only their window's positions, as
    transformers' sliding-window cache does (Gemma 3's local layers: the last 512): the query at
    position p of such a layer reads the keys p − window + 1 … p, so the earlier ones are
    dropped (``kept_from``); the global layers (window None) keep every position.

    windows: per layer, its window or None. A windowed layer's rows live in a buffer of
    window + _SLACK rows (more when one pass writes more): when a pass's new rows do not fit,
    the rows its queries still read move to the front, once every _SLACK tokens of a
    generation. The positions a layer keeps are kept_from(layer) … length − 1: at most
    `window`, the last query's own included."""

    _SLACK = 64

    def __init__(self, layers: int, kv_heads: int, capacity: int, d_k: int, batch: int = 1,
                 windows=None):
        self.windows = tuple(windows) if windows is not None else (None,) * layers
        if len(self.windows) != layers:
            raise ValueError("one window per layer")
        self._shape = (layers, batch, capacity)

        def rows(window):
            return capacity if window is None else min(capacity, window + self._SLACK)

        self.keys = [np.zeros((batch, kv_heads, rows(w), d_k), _DTYPE) for w in self.windows]
        self.values = [np.zeros_like(k) for k in self.keys]
        self.first = [0] * layers            # the position of each layer's row 0
        self.length = 0

    @property
    def shape(self) -> tuple[int, int, int]:
        return self._shape

    def reads_from(self, layer: int) -> int:
        window = self.windows[layer]
        return 0 if window is None else max(0, self.length - window + 1)

    def kept_from(self, layer: int) -> int:
        window = self.windows[layer]
        return 0 if window is None else max(0, self.length - window)

    def update(self, layer: int, k: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """k, v (B, H_kv, n, d_k) written at positions length … length + n − 1 of `layer`;
        returns the keys and values its new queries read, positions reads_from(layer) …
        length + n − 1, (B, H_kv, ·, d_k) views."""
        start, n = self.length, k.shape[2]
        low = self.reads_from(layer)
        keys, values = self.keys[layer], self.values[layer]
        if start + n - self.first[layer] > keys.shape[2]:     # no room: drop what none reads
            kept = slice(low - self.first[layer], start - self.first[layer])
            size = start - low + n
            if size > keys.shape[2]:
                keys, values = (np.zeros(a.shape[:2] + (size + self._SLACK,) + a.shape[3:],
                                         _DTYPE) for a in (keys, values))
            keys[:, :, :start - low] = self.keys[layer][:, :, kept]   # overlap: numpy copies
            values[:, :, :start - low] = self.values[layer][:, :, kept]
            self.keys[layer], self.values[layer], self.first[layer] = keys, values, low
        at = start - self.first[layer]
        keys[:, :, at:at + n] = k
        values[:, :, at:at + n] = v
        read = slice(low - self.first[layer], at + n)
        return keys[:, :, read], values[:, :, read]

    @property
    def nbytes_used(self) -> int:
        batch, heads, _, d_k = self.keys[0].shape
        kept = sum(self.length - self.kept_from(layer) for layer in range(len(self.keys)))
        return 2 * batch * heads * kept * d_k * self.keys[0].itemsize


@dataclass(frozen=True, eq=False)
class LayerOutput:
    """What one layer gives its caller: the residual stream after it, and what its attention
    looked at (the pages draw ``pattern``; ``v`` gives the value norms)."""

    h: np.ndarray                      # (B, n, d_model): resid_post
    pattern: np.ndarray                # (B, H, n, n_k): the softmax weights
    v: np.ndarray                      # (B, H_kv, n_k, d_v): the values attended over
    trace: AttentionTrace | None       # trace=True: the engine's trace of the attention


# ---- the pieces, as modeling_llama.py names them ----------------------------------------------

def rms_norm(h: np.ndarray, gain: np.ndarray, eps: float) -> np.ndarray:
    """h / √(mean(h²) + eps) · gain over each row (…, d_model), as LlamaRMSNorm.

    The mean as ``np.mean`` computes it (the float32 sum, divided by the count as an intp),
    written out: the same bits without np.mean's Python wrapper, which was a third of a
    one-token norm's time (a generated token runs 109 of them on Gemma 3)."""
    normed = _rms_divided(h, eps)
    normed *= gain
    return normed


def _rms_divided(h: np.ndarray, eps: float) -> np.ndarray:
    """h / √(mean(h²) + eps) over each row: ``rms_norm`` before its gain (a new array)."""
    variance = np.add.reduce(h * h, axis=-1, keepdims=True)
    np.true_divide(variance, np.intp(h.shape[-1]), out=variance, casting="unsafe")
    variance += _DTYPE(eps)
    return h / np.sqrt(variance, out=variance)


def rotary_embedding(start: int, n: int, d_k: int, base: float):
    """(cos, sin), each (n, d_k) float32, for positions start … start + n − 1: computed once
    per forward pass and shared by every layer (transformers' LlamaRotaryEmbedding)."""
    return cos_sin(np.arange(start, start + n), d_k, base, _DTYPE)


def causal_mask(n: int, start: int = 0, hidden_keys: np.ndarray | None = None
                ) -> np.ndarray | None:
    """(n, start + n) bool, True = not allowed: new token i (position start + i) sees the keys
    up to its own position (bottom-right causal); None for one new token (it sees them all).
    hidden_keys (n,) bool, start 0 only: True hides that key from every query but its own."""
    mask = None if n == 1 else np.triu(np.ones((n, start + n), dtype=bool), k=start + 1)
    if hidden_keys is not None:
        hide = hidden_keys[None, :] & ~np.eye(n, dtype=bool)             # (n, n)
        mask = hide if mask is None else mask | hide
    return mask


def sliding_mask(n: int, start: int, window: int) -> np.ndarray:
    """(n, start + n) bool, True = not allowed: new token i (position start + i) sees the
    `window` keys up to its own position, itself included (transformers' sliding-window causal
    mask: key j is seen when 0 ≤ start + i − j < window)."""
    back = (start + np.arange(n))[:, None] - np.arange(start + n)[None, :]
    return (back < 0) | (back >= window)


class Positions:
    """What each layer needs to know of the positions of one forward pass: the rotary (cos, sin)
    of its base and its mask (causal, with the layer's sliding window where it has one), each
    made once per pass for every layer that shares it. start: the first new token's position
    (the KV cache's length); n: the new tokens; hidden_keys (n,) bool, start 0 only: True hides
    that key from every query but its own. cache: the pass's KV cache, when its layers return
    only their window's keys (``WindowedKVCache``): each mask's columns are then those keys."""

    def __init__(self, config, start: int, n: int, hidden_keys: np.ndarray | None = None,
                 cache: KVCache | None = None):
        self.config, self.start, self.n, self.hidden_keys = config, start, n, hidden_keys
        self.cache = cache
        self._rotary: dict = {}
        self._masks: dict = {}

    def rotary(self, layer: int):
        base = self.config.rope_base_of(layer)
        if base not in self._rotary:
            self._rotary[base] = rotary_embedding(self.start, self.n, self.config.d_k, base)
        return self._rotary[base]

    def mask(self, layer: int) -> np.ndarray | None:
        """(n, n_k) bool, True = not allowed, over the keys the layer reads (from the cache's
        reads_from on); None when every query sees every key."""
        window = self.config.window_of(layer)
        if window is not None and self.start + self.n <= window:
            window = None                        # the window holds every key: causal alone
        first = 0 if self.cache is None else self.cache.reads_from(layer)
        if (window, first) not in self._masks:
            mask = causal_mask(self.n, self.start, self.hidden_keys)
            if window is not None:
                band = sliding_mask(self.n, self.start, window)
                mask = band if mask is None else mask | band
            if mask is not None and first:
                mask = mask[:, first:]
                mask = mask if mask.any() else None
            self._masks[(window, first)] = mask
        return self._masks[(window, first)]


def split_qkv(qkv: np.ndarray, h: int, h_kv: int, d_k: int):
    """(B, n, (H + 2 H_kv) d_k) → Q (B, H, n, d_k), K and V (B, H_kv, n, d_k) (views)."""
    b, n, _ = qkv.shape
    q = qkv[..., :h * d_k].reshape(b, n, h, d_k).transpose(0, 2, 1, 3)
    k = qkv[..., h * d_k:(h + h_kv) * d_k].reshape(b, n, h_kv, d_k).transpose(0, 2, 1, 3)
    v = qkv[..., (h + h_kv) * d_k:].reshape(b, n, h_kv, d_k).transpose(0, 2, 1, 3)
    return q, k, v


def _normed_and_turned(heads: np.ndarray, w: LayerWeights, config, cos: np.ndarray,
                       sin: np.ndarray) -> tuple[np.ndarray | None, np.ndarray]:
    """The query heads and then the key heads side by side (…, H + H_kv, d_k), each row
    RMS-normed with its gain where the layer has QK-norm, then turned by RoPE (cos and sin
    broadcast over them): (the normed heads, or None without QK-norm; the turned heads). One
    array for both, each row computed as alone."""
    h = config.num_heads
    normed = None
    if w.q_norm is not None:                                         # QK-norm, per head
        normed = _rms_divided(heads, config.rms_eps)
        normed[..., :h, :] *= w.q_norm
        normed[..., h:, :] *= w.k_norm
    return normed, apply_rope(heads if normed is None else normed, cos=cos, sin=sin)


def _by_head(a: np.ndarray) -> np.ndarray:
    """(B, n, heads, d) → (B, heads, n, d), a view."""
    return a.transpose(0, 2, 1, 3)


def project(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """x (B, n, d_in) @ w (d_in, d_out) as one matrix product of the B · n rows: numpy's
    stacked matmul runs one product per sequence and reads the whole weight matrix B times
    (a batch of short sequences was bound by that reading). One sequence: the same product."""
    return (x.reshape(-1, x.shape[-1]) @ w).reshape(x.shape[:-1] + (w.shape[-1],))


def llama_mlp(m: np.ndarray, w: LayerWeights, eps: float, activation: str = "silu"
              ) -> np.ndarray:
    """W_down(act(y W_gate) ⊙ y W_up) with y = RMSNorm(m) · g_mlp: (B, n, d_model); act is
    SiLU (Llama, Qwen) or GELU with the tanh approximation (Gemma)."""
    y = rms_norm(m, w.mlp_norm, eps)
    gate_up = project(y, w.gate_up)                                  # (B, n, 2 d_ff)
    d_ff = gate_up.shape[-1] // 2
    gate = gate_up[..., :d_ff]
    if activation == "gelu_tanh":                                    # torch's approximate="tanh"
        # ½ x (1 + tanh(√(2/π) (x + 0.044715 x³))), in place: x³ as x·x·x (a power is ~10×
        # slower in numpy)
        hidden = gate * gate
        hidden *= gate
        hidden *= _DTYPE(0.044715)
        hidden += gate
        hidden *= _DTYPE(math.sqrt(2.0 / math.pi))
        np.tanh(hidden, out=hidden)
        hidden += _DTYPE(1.0)
        hidden *= gate
        hidden *= _DTYPE(0.5)
    else:
        hidden = gate / (1.0 + np.exp(-gate))                        # SiLU(x) = x σ(x)
    hidden *= gate_up[..., d_ff:]
    return project(hidden, w.down)


# ---- attention ---------------------------------------------------------------------------------

@dataclass(frozen=True, eq=False)
class _Attention:
    """One layer's attention: every step a finite check may name, and what the caller reads."""

    parts: list                        # [(step name, array or a function computing it)]
    pattern: np.ndarray                # (B, H, n, n_k)
    v: np.ndarray                      # (B, H_kv, n_k, d_v)
    z: np.ndarray                      # (B, H, n, d_v)
    output: np.ndarray | None          # (B, n, d_model) Concat(z) W_O when already computed
    trace: AttentionTrace | None


def llama_attention(x: np.ndarray, w: LayerWeights, config, position_embeddings, *,
                    layer: int = 0, cache: KVCache | None = None,
                    mask: np.ndarray | None = None) -> _Attention:
    """The layer's attention without W_O: x (B, n, d_model), already normed → z (B, H, n, d_v)
    and its pattern, written plainly (``engine.attention``, nothing traced): Q, K, V (and their
    biases), each head's q and k RMS-normed (QK-norm), rotated, the scores × config.scale. With a
    cache, the new keys and values are appended to `layer`'s and the queries attend over all
    of them."""
    b, n, _ = x.shape
    h, h_kv, d_k = config.num_heads, config.num_kv_heads, config.d_k
    qkv = project(x, w.w_qkv)                                        # (B, n, (H + 2 H_kv) d_k)
    if w.qkv_bias is not None:
        qkv += w.qkv_bias
    q0, k0, v = split_qkv(qkv, h, h_kv, d_k)                         # (B, H | H_kv, n, d_k)
    parts = [("input", x), ("q", q0), ("k", k0), ("v", v)]
    cos, sin = position_embeddings                                   # (n, d_k)
    heads = qkv[..., :(h + h_kv) * d_k].reshape(b, n, h + h_kv, d_k)  # queries', then keys'
    normed, turned = _normed_and_turned(heads, w, config, cos[:, None], sin[:, None])
    if normed is not None:
        parts += [("q_normed", _by_head(normed[:, :, :h])),
                  ("k_normed", _by_head(normed[:, :, h:]))]
    q, k = _by_head(turned[:, :, :h]), _by_head(turned[:, :, h:])    # (B, H | H_kv, n, d_k)
    keys, values = (k, v) if cache is None else cache.update(layer, k, v)   # (B, H_kv, n_k, d)
    grouped = group_heads(q, h_kv)                                   # (B, H_kv, g, n, d_k)
    z, weights = attention(grouped, keys[:, :, None], values[:, :, None],
                           mask=mask, scale=config.scale)            # (B, H_kv, g, n, ·)
    n_k = keys.shape[2]
    pattern = weights.reshape(b, h, n, n_k)                          # (B, H, n, n_k)
    z = z.reshape(b, h, n, d_k)                                      # (B, H, n, d_v)
    parts += [("q_rotated", q), ("k_rotated", k),
              ("scores", lambda: grouped @ keys[:, :, None].swapaxes(-1, -2)),
              ("weights", weights)]
    return _Attention(parts=parts, pattern=pattern, v=values, z=z, output=None, trace=None)


def layer_attention_trace(x: np.ndarray, attention: MultiHeadWeights, config, *,
                          layer: int = 0, qk_norm_gains: tuple | None = None) -> AttentionTrace:
    """The engine's trace of layer `layer`'s attention on one sequence x (n, d_model), already
    normed, with the weights `attention` (the layer's own, or a learner's edit of them): the
    layer's rotary base, the scale, the causal mask (with the layer's sliding window) and, where
    `qk_norm_gains` = (g_q, g_k) is given, QK-norm with those gains and config.rms_eps. The
    engine's errors as they are (an overflow names its step)."""
    n = x.shape[0]
    window = config.window_of(layer)
    band = sliding_mask(n, 0, window) if window is not None and n > window else None
    qk_norm = None if qk_norm_gains is None else (*qk_norm_gains, config.rms_eps)
    return trace_attention(x, attention, causal=True, rope=config.rope_base_of(layer),
                           scale=config.scale, attn_mask=band, qk_norm=qk_norm)


def trace_layer_attention(x: np.ndarray, w: LayerWeights, config, *, layer: int = 0,
                          model: str = "") -> AttentionTrace:
    """The engine's trace of the layer's attention on one sequence x (n, d_model), already
    normed: ``layer_attention_trace`` with the layer's own W_Q, W_K, W_V (H_kv heads, their
    biases), W_O and QK-norm gains. The engine's overflow error becomes error.model.not_finite
    naming `layer` of `model`."""
    gains = None if w.q_norm is None else (w.q_norm, w.k_norm)
    try:
        return layer_attention_trace(x, w.attention, config, layer=layer, qk_norm_gains=gains)
    except AttnvizInputError as exc:              # an overflow: said with its layer
        raise from_engine(exc, model, layer) from None


def _traced_attention(x: np.ndarray, w: LayerWeights, config, *, layer: int,
                      model: str) -> _Attention:
    assert x.shape[0] == 1                                           # one sequence
    t = trace_layer_attention(x[0], w, config, layer=layer, model=model)
    # the engine checked every step up to its output
    return _Attention(parts=[], pattern=t.weights[None], v=t.v_shared[None], z=t.z[None],
                      output=t.output[None], trace=t)


# ---- the layer ---------------------------------------------------------------------------------

def llama_layer(h: np.ndarray, w: LayerWeights, config, positions: Positions | None = None,
                *, layer: int = 0, model: str = "", cache: KVCache | None = None,
                head_mask: np.ndarray | None = None, hook: Hook | None = None,
                trace: bool = False) -> LayerOutput:
    """One decoder layer on the residual stream h (B, n, d_model) float32 → LayerOutput.

    config: the model's ``DecoderConfig``; positions: the pass's ``Positions`` (the layer's
    rotary (cos, sin) and mask: causal, with its sliding window); cache: a KVCache whose
    ``length`` is the first position (the caller advances it); head_mask (B, H) float32 of
    0/1: 0 zeroes that head's z before W_O; hook: see the module's docstring.
    trace=True (one sequence, no cache): the attention is the engine's ``trace_attention``
    (``LayerOutput.trace``; its weights are ``pattern``), for the pages' step views; a hook or
    head mask then changes what follows the trace, never the trace. A number that is not
    finite raises error.model.not_finite naming `layer` of `model` and its first step that
    holds one. With post-norms (Gemma), attention's and the MLP's outputs are each RMS-normed
    before they join the stream: attn_out and mlp_out are what joins it.
    """
    eps = config.rms_eps
    h = _hooked(hook, layer, "resid_pre", h)                         # (B, n, d_model)
    x = rms_norm(h, w.attn_norm, eps)                                # (B, n, d_model)
    if trace:
        a = _traced_attention(x, w, config, layer=layer, model=model)
    else:
        if positions is None:
            positions = Positions(config, 0 if cache is None else cache.length, h.shape[1])
        a = llama_attention(x, w, config, positions.rotary(layer), layer=layer, cache=cache,
                            mask=positions.mask(layer))
    _hooked(hook, layer, "v", a.v)
    _hooked(hook, layer, "pattern", a.pattern)
    z = a.z if head_mask is None else a.z * head_mask[:, :, None, None]   # (B, H, n, d_v)
    z = _hooked(hook, layer, "z", z)
    if z is a.z and a.output is not None:
        attn_out = a.output                                          # the trace's own
    else:
        b, heads, n, d_v = z.shape
        concat = z.transpose(0, 2, 1, 3).reshape(b, n, heads * d_v)  # (B, n, H d_v)
        attn_out = project(concat, w.attention.w_o)                  # (B, n, d_model)
    if w.post_attn_norm is not None:
        attn_out = rms_norm(attn_out, w.post_attn_norm, eps)
    attn_out = _hooked(hook, layer, "attn_out", attn_out)
    resid_mid = _hooked(hook, layer, "resid_mid", h + attn_out)
    mlp_out = llama_mlp(resid_mid, w, eps, config.activation)
    if w.post_mlp_norm is not None:
        mlp_out = rms_norm(mlp_out, w.post_mlp_norm, eps)
    mlp_out = _hooked(hook, layer, "mlp_out", mlp_out)
    out = resid_mid + mlp_out                                        # (B, n, d_model)
    if not all_finite(out):                             # only then: which step made it
        raise not_finite(model, first_not_finite(a.parts + [("z", z), ("output", attn_out)])
                         or "mlp", layer=layer)
    out = _hooked(hook, layer, "resid_post", out)
    return LayerOutput(h=out, pattern=a.pattern, v=a.v, trace=a.trace)


def llama_step(h: np.ndarray, w: LayerWeights, config, positions: Positions, cache: KVCache,
               *, layer: int = 0, model: str = "") -> tuple[np.ndarray, np.ndarray]:
    """One generated token through the layer: ``llama_layer`` for h (1, d_model), one new token
    of one sequence whose queries read every key `cache.update` returns (no mask), with no
    hook, head mask or trace (positions.mask(layer) is None). The same steps with the same
    functions, in about half its numpy calls: a token of Gemma 3 runs 18 layers between reads
    of ~1 GB of weights, and each call's overhead is paid with cold caches there. Returns
    (resid_post (1, d_model), the pattern (H, n_k)). A number that is not finite: the layer
    runs again as ``llama_layer``, which names the step (it writes the same key and value at
    the same position of the cache)."""
    eps, heads, h_kv, d_k = config.rms_eps, config.num_heads, config.num_kv_heads, config.d_k
    x = rms_norm(h, w.attn_norm, eps)                                # (1, d_model)
    qkv = (x @ w.w_qkv)[0]                                           # ((H + 2 H_kv) d_k,)
    if w.qkv_bias is not None:
        qkv += w.qkv_bias
    cos, sin = positions.rotary(layer)                               # (1, d_k)
    _, qk = _normed_and_turned(qkv[:(heads + h_kv) * d_k].reshape(heads + h_kv, d_k), w, config,
                               cos, sin)                             # (H + H_kv, d_k)
    keys, values = cache.update(layer, qk[None, heads:, None],
                                qkv[(heads + h_kv) * d_k:].reshape(1, h_kv, 1, d_k))
    grouped = qk[:heads].reshape(h_kv, heads // h_kv, d_k)          # (H_kv, g, d_k)
    z, weights = attention(grouped, keys[0], values[0], scale=config.scale)  # (H_kv, g, ·)
    attn_out = z.reshape(1, heads * d_k) @ w.attention.w_o          # (1, d_model)
    if w.post_attn_norm is not None:
        attn_out = rms_norm(attn_out, w.post_attn_norm, eps)
    resid_mid = h + attn_out
    mlp_out = llama_mlp(resid_mid, w, eps, config.activation)
    if w.post_mlp_norm is not None:
        mlp_out = rms_norm(mlp_out, w.post_mlp_norm, eps)
    out = resid_mid + mlp_out
    if not all_finite(out):
        llama_layer(h[None], w, config, positions, layer=layer, model=model, cache=cache)
        raise not_finite(model, "mlp", layer=layer)      # (the same numbers: not reached)
    return out, weights.reshape(heads, -1)


def _hooked(hook: Hook | None, layer: int, name: str, value: np.ndarray) -> np.ndarray:
    """`value`, or what `hook` gives instead (same shape; only read at READ_ONLY names)."""
    if hook is None:
        return value
    shown = value.view()
    shown.flags.writeable = False                # a hook patches by returning, not in place
    new = hook(layer, name, shown)
    if new is None:
        return value
    if name in READ_ONLY:
        raise AttnvizInputError("error.layer.hook_read_only", name=name,
                                names=", ".join(p for p in HOOK_POINTS if p not in READ_ONLY))
    new = np.asarray(new, dtype=value.dtype)
    if new.shape != value.shape:
        raise AttnvizInputError("error.layer.hook_shape", name=name, want=str(value.shape),
                                shape=str(new.shape))
    return new
