"""Multi-head attention with every intermediate kept, named and shaped for display.

    Attention(Q, K, V) = softmax(Q Kᵀ / √d_k) V        (one head)
    MultiHead(X)       = Concat(Z_1 … Z_H) W_O + b_O
                         with Z_h = Attention(X W_Q,h, C W_K,h, C W_V,h)

Axis order everywhere: (head, query, key, feature). Row-vector convention: ``Q = X @ W_Q``.

Two things every modern decoder adds, both optional:
- grouped-query attention: W_K, W_V with H_kv heads (a divisor of H); query head h reads
  key/value head h // (H / H_kv) (``core.grouped_query``). The trace's k and v are as each
  query head reads them, (H, n, d) (transformers' ``repeat_kv``); ``t.k_shared``,
  ``t.v_shared`` are the H_kv heads.
- rotary positions (RoPE, ``rope=base``): after projection, Q and K are rotated in the
  half-split layout of transformers' Llama (``core.rotary.apply_rope``,
  ``q * cos + rotate_half(q) * sin``); the scores use the rotated ``t.q_rotated``,
  ``t.k_rotated``, and the unrotated ``t.q``, ``t.k`` stay.
- QK-norm (``qk_norm=(g_q, g_k, eps)``, Qwen3 and Gemma 3): each head's q and k, once
  projected, are RMS-normed over their d_k features and scaled by a gain before RoPE
  (``t.q_normed``, ``t.k_normed``); RoPE and the scores take the normed ones.
"""

from __future__ import annotations

import functools
import math
import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from numpy.typing import ArrayLike

from attnviz.core.arrays import as_matrix, float_dtype, readonly
from attnviz.core.errors import AttnvizInputError, OverflowInStep
from attnviz.core.grouped_query import group_size, repeat_kv
from attnviz.core.rotary import apply_rope, cos_sin, rope_angles, rotate_half
from attnviz.core.trace import AttentionTrace, LayerDesign, Step, steps_of
from attnviz.core.weights import MultiHeadWeights
from attnviz.i18n import Message

# a position argument: None (0 … n−1), a first position p (p … p+n−1), or n positions
Positions = int | ArrayLike | None

__all__ = ["AttentionTrace", "LayerDesign", "Step", "apply_rope", "attention", "log_softmax",
           "rope_angles", "rotate_half", "softmax", "trace_attention", "trace_qkv",
           "with_design", "with_weights"]


# ---- the computation ------------------------------------------------------------------------

def _quiet(compute):
    """Run `compute` without numpy's overflow warnings: every overflow the engine can meet
    is checked and reported as an AttnvizInputError naming the step (`_check_finite`)."""
    @functools.wraps(compute)
    def quiet(*args, **kwargs):
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            return compute(*args, **kwargs)

    return quiet


@_quiet
def trace_attention(x: ArrayLike, w: MultiHeadWeights, *, context: ArrayLike | None = None,
                    value: ArrayLike | None = None, causal: bool = False,
                    key_padding_mask: ArrayLike | None = None, attn_mask: ArrayLike | None = None,
                    scale: float | None = None, rope: float | None = None,
                    positions: Positions = None,
                    context_positions: Positions = None,
                    qk_norm: tuple | None = None) -> AttentionTrace:
    """Run multi-head attention of queries from `x` over keys and values from `context`.

    x (n_q, d_model); context (n_k, d_context), default x (self-attention); value
    (n_k, d_value_in) only where values come from a different input than keys (torch's vdim).
    key_padding_mask bool (n_k,), True = ignore that key; attn_mask bool (n_q, n_k), True = not
    allowed, or float (n_q, n_k) added to the scaled scores (either may also be (H, n_q, n_k));
    scale None = 1/√d_k, else that factor (1.0 = no scaling).
    rope: None = no rotary positions; a base (e.g. 10000.0) rotates Q and K after projection
    (and bias), position p's feature pair (i, i + d_k/2) by the angle p · base^(−2i/d_k).
    positions: the queries' positions, None = 0 … n_q−1, an int p = p … p+n_q−1 (tokens after
    a KV cache of p), or n_q ints; in self-attention the keys share them. context_positions:
    the keys' positions in cross-attention (None = 0 … n_k−1): a new token at position p
    attending over the cache and itself is x = its row, context = all n_k = p+1 rows,
    positions=p.
    qk_norm: None, or (g_q (d_k,), g_k (d_k,), eps): every head's q and k RMS-normed
    (q / √(mean(q²) + eps) · g_q over its features) after projection, before RoPE.
    """
    if not isinstance(w, MultiHeadWeights):
        raise AttnvizInputError("error.engine.not_weights", type=type(w).__name__)
    x = as_matrix(x, "x")
    dtype = float_dtype(x)
    x = x.astype(dtype, copy=False)
    _check_width(x, w.d_model, "x", "d_model (w_q's second axis)")
    if context is None:
        context = x
    else:
        context = as_matrix(context, "context", dtype=dtype)
        _check_width(context, w.d_context, "context", "d_context (w_k's second axis)")
    if value is None:
        value = context
    else:
        value = as_matrix(value, "value", dtype=dtype)
        if value.shape[0] != context.shape[0]:
            raise AttnvizInputError("error.engine.value_rows", keys=context.shape[0],
                                    rows=value.shape[0])
    _check_width(value, w.d_value_in, "value" if value is not context else "context",
                 "w_v's second axis")

    self_attention = context is x
    rotary = _rotary(rope, w.d_k, x.shape[0], context.shape[0], positions, context_positions,
                     self_attention)
    if self_attention and value is x:
        q, k, v = _project_self(x, w, dtype)
        if w.qk_tied:
            k = q        # W_K = W_Q on the same input: K is Q, and the scores are symmetric
    else:
        q = _project(x, w, "q", dtype)
        k = _project(context, w, "k", dtype)
        v = _project(value, w, "v", dtype)
    normed = _qk_normed(q, k, qk_norm, w.d_k, dtype)
    fields = _rotate_and_share(*(normed or (q, k)), v, rotary)
    if normed is not None:                   # the projections stay q and k; the normed beside
        fields.update(q_normed=fields["q"], k_normed=fields["k"], q=readonly(q),
                      k=repeat_kv(k, w.num_heads) if k.shape[0] != w.num_heads else k)
    z, parts = _attend(fields["q_used"], fields["k_used"], fields["v"], causal,
                       key_padding_mask, attn_mask, scale)
    concat = _concat_heads(z)
    fields.update(x=x, context=None if self_attention else context, z=z, concat=concat,
                  output=_output(concat, w), params=w, **parts)
    return _finish(fields)


@_quiet
def trace_qkv(q: ArrayLike, k: ArrayLike, v: ArrayLike, *, causal: bool = False,
              key_padding_mask: ArrayLike | None = None, attn_mask: ArrayLike | None = None,
              scale: float | None = None, rope: float | None = None, positions: Positions = None,
              context_positions: Positions = None) -> AttentionTrace:
    """Attention on Q, K, V entered directly: 2-D arrays are one head, 3-D arrays (H, n, d);
    k and v may have H_kv heads, a divisor of q's H (grouped-query attention).

    No projections and no W_O: ``t.output`` is ``t.concat``. rope, positions: as in
    ``trace_attention``, the keys at context_positions (None: the queries' positions when
    there are as many keys as queries, else 0 … n_k−1).
    """
    arrays = {name: as_matrix(a, name, ndim=(2, 3))
              for name, a in (("q", q), ("k", k), ("v", v))}
    dtype = float_dtype(*arrays.values())
    q, k, v = (a.astype(dtype, copy=False) for a in arrays.values())
    if len({a.ndim for a in (q, k, v)}) != 1:
        raise AttnvizInputError("error.engine.qkv_ndim")
    if q.ndim == 2:
        q, k, v = q[None], k[None], v[None]
    if k.shape[0] != v.shape[0] or q.shape[0] % k.shape[0]:
        raise AttnvizInputError("error.engine.qkv_heads", q=q.shape[0], k=k.shape[0],
                                v=v.shape[0])
    if q.shape[2] != k.shape[2]:
        raise AttnvizInputError("error.engine.qk_width", q=q.shape[2], k=k.shape[2])
    if k.shape[1] != v.shape[1]:
        raise AttnvizInputError("error.engine.kv_rows", k=k.shape[1], v=v.shape[1])
    q, k, v = (readonly(np.ascontiguousarray(a)) for a in (q, k, v))
    same_positions = context_positions is None and q.shape[1] == k.shape[1]
    rotary = _rotary(rope, q.shape[2], q.shape[1], k.shape[1], positions, context_positions,
                     same_positions)
    fields = _rotate_and_share(q, k, v, rotary)
    z, parts = _attend(fields["q_used"], fields["k_used"], fields["v"], causal,
                       key_padding_mask, attn_mask, scale)
    concat = _concat_heads(z)
    fields.update(x=None, context=None, z=z, concat=concat, output=_output(concat, None),
                  params=None, **parts)
    return _finish(fields)


# ---- rotary positions (RoPE) and grouped-query attention -------------------------------------

def _rotary(rope, d_k: int, n_q: int, n_k: int, positions, context_positions,
            shared: bool) -> tuple[float, np.ndarray, np.ndarray] | None:
    """(base, query positions (n_q,), key positions (n_k,)) checked, or None (rope off).
    shared: the keys are the queries' tokens (self-attention), so they share positions."""
    if rope is None:
        if positions is not None or context_positions is not None:
            raise AttnvizInputError("error.engine.positions_without_rope")
        return None
    if isinstance(rope, bool) or not isinstance(rope, (int, float, np.integer, np.floating)) \
            or not math.isfinite(rope) or rope <= 1:
        raise AttnvizInputError("error.engine.rope_base", value=repr(rope))
    if d_k % 2:
        raise AttnvizInputError("error.engine.rope_odd", d_k=d_k)
    q_pos = _positions(positions, n_q, "positions")
    if shared:
        if context_positions is not None:
            raise AttnvizInputError("error.engine.context_positions")
        k_pos = q_pos
    else:
        k_pos = _positions(context_positions, n_k, "context_positions")
    return float(rope), q_pos, k_pos


def _positions(positions, n: int, name: str) -> np.ndarray:
    """(n,) int positions: None = 0 … n−1, an int p = p … p+n−1, or n whole numbers ≥ 0."""
    if positions is None:
        return readonly(np.arange(n))
    if isinstance(positions, (int, np.integer)) and not isinstance(positions, bool):
        if positions < 0:
            raise AttnvizInputError("error.engine.positions_negative", name=name,
                                    value=positions)
        return readonly(np.arange(int(positions), int(positions) + n))
    arr = np.asarray(positions)
    if arr.shape != (n,) or not np.issubdtype(arr.dtype, np.integer) or (arr < 0).any():
        raise AttnvizInputError("error.engine.positions", name=name, n=n,
                                value=repr(positions))
    return readonly(arr.astype(np.intp))


def _qk_normed(q, k, qk_norm, d_k: int, dtype):
    """(q normed, k normed) per head over the features, or None without QK-norm."""
    if qk_norm is None:
        return None
    g_q, g_k, eps = qk_norm
    gains = [as_matrix(g, name, ndim=1, dtype=dtype) for g, name in ((g_q, "g_q"), (g_k, "g_k"))]
    for g, name in zip(gains, ("g_q", "g_k")):
        if g.shape != (d_k,):
            raise AttnvizInputError("error.weights.shape", name=name, want=str((d_k,)),
                                    shape=str(g.shape))
    if isinstance(eps, bool) or not isinstance(eps, (int, float, np.floating)) \
            or not 0 <= eps < math.inf:
        raise AttnvizInputError("error.engine.scale", value=repr(eps))

    def norm(a, g):
        with np.errstate(over="ignore"):
            rms = np.sqrt(np.mean(a * a, axis=-1, keepdims=True) + dtype.type(eps))
        huge = np.isinf(rms)          # a finite vector whose mean square overflows (|a| past
        if huge.any():                # ~1e18): the same root, the vector divided by its largest
            with np.errstate(invalid="ignore"):        # |a| first (an infinite a: its own step
                peak = np.where(huge, np.abs(a).max(axis=-1, keepdims=True), dtype.type(1))
                unit = a / peak                        # says so); eps / peak² < 1e-36 is
                rms = np.where(huge, peak * np.sqrt(np.mean(unit * unit, axis=-1, keepdims=True)),
                               rms)                    # below float32's resolution of ≥ 1/d_k
        return readonly(a / rms * g)

    return norm(q, gains[0]), norm(k, gains[1])


def _rotate_and_share(q, k, v, rotary) -> dict:
    """The trace's q, k, v fields and, with RoPE, q_rotated and k_rotated; k and v as every
    query head reads them (`grouped_query.repeat_kv`). "q_used" and "k_used" are what the
    scores take: rotated where RoPE is on."""
    h, h_kv = q.shape[0], k.shape[0]
    fields = dict(q=q, k=k, v=v, q_rotated=None, k_rotated=None, rope_base=None,
                  q_positions=None, k_positions=None, kv_group=group_size(h, h_kv))
    q_used, k_used = q, k
    if rotary is not None:
        base, q_pos, k_pos = rotary
        cos, sin = cos_sin(q_pos, q.shape[2], base, q.dtype)     # (n_q, d_k)
        q_used = readonly(apply_rope(q, cos=cos, sin=sin))       # (H, n_q, d_k)
        if k is q and k_pos is q_pos:                           # tied: K̃ is Q̃
            k_used = q_used
        else:                                                    # (H_kv, n_k, d_k)
            if k_pos is not q_pos:
                cos, sin = cos_sin(k_pos, k.shape[2], base, k.dtype)
            k_used = readonly(apply_rope(k, cos=cos, sin=sin))
        fields.update(q_rotated=q_used, rope_base=base, q_positions=q_pos, k_positions=k_pos)
    if h_kv != h:
        fields.update(k=repeat_kv(k, h), v=repeat_kv(v, h))            # (H, n_k, d)
        k_used = repeat_kv(k_used, h)
    if rotary is not None:
        fields["k_rotated"] = k_used
    fields.update(q_used=q_used, k_used=k_used)
    return fields


def attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, mask: np.ndarray | None = None,
              scale: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The formula, plainly: softmax(Q Kᵀ · scale + mask) V for one head or a stack of heads.

    q (…, n_q, d_k), k (…, n_k, d_k), v (…, n_k, d_v); mask bool (True = masked) or float
    (added), broadcastable to (…, n_q, n_k); scale None = 1/√d_k. Returns (Z, weights). The
    engine's fast path (`_attend`) must give the same numbers; a test holds them equal.
    """
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    scores = (q @ np.swapaxes(k, -1, -2)) * scale
    if mask is not None and np.asarray(mask).dtype == bool:
        scores = np.where(mask, -np.inf, scores)
    elif mask is not None:
        scores = scores + mask
    weights = softmax(scores)
    return weights @ v, weights


@_quiet
def with_weights(t: AttentionTrace, weights, *, why: str) -> AttentionTrace:
    """The trace `t` with its attention weights replaced by `weights` (H, n_q, n_k) and every
    later step (weighted values, Z, concatenation, output) recomputed from them; the weights
    step says `why` they are not the softmax (e.g. a tutorial's rounded weights)."""
    weights = np.array(weights, dtype=t.weights.dtype)
    if weights.ndim == 2:
        weights = weights[None]
    if weights.shape != t.weights.shape:
        raise AttnvizInputError("error.engine.weights_shape", want=str(t.weights.shape),
                                shape=str(weights.shape))
    z = readonly(weights @ t.v)                              # (H, n_q, d_v)
    concat = _concat_heads(z)
    fields = {name: getattr(t, name) for name in t.__dataclass_fields__ if name != "steps"}
    fields.update(weights=readonly(weights), z=z, concat=concat,
                  output=_output(concat, t.params), weights_given=why,
                  output_normed=None)            # a decoder layer's post-norm is not redone
    return _finish(fields)


@_quiet
def with_design(t: AttentionTrace, design: LayerDesign, *, embedded: ArrayLike | None = None,
                post_norm: tuple | None = None) -> AttentionTrace:
    """The trace `t` of a real decoder layer's attention with what the layer adds around it
    (Gemma 3's designs, which the step texts then name): `design` (its kind, window, scale's
    source …), `embedded` (n_q, d_model) the token embeddings × design.embed_scale (the stream
    before layer 0), and `post_norm` (gain (d_model,), eps): attention's output RMS-normed,
    output / √(mean(output²) + eps) · gain, before it joins the residual stream
    (``t.output_normed``). Every other step is `t`'s own."""
    fields = {name: getattr(t, name) for name in t.__dataclass_fields__ if name != "steps"}
    dtype = t.output.dtype
    if embedded is not None:
        embedded = readonly(np.array(embedded, dtype=dtype))
        if embedded.shape != (t.n_q, t.output.shape[1]):
            raise AttnvizInputError("error.weights.shape", name="embedded",
                                    want=str((t.n_q, t.output.shape[1])),
                                    shape=str(embedded.shape))
    normed = None
    if post_norm is not None:
        gain, eps = post_norm
        out = t.output                                              # (n_q, d_model)
        rms = np.sqrt(np.mean(out * out, axis=-1, keepdims=True) + dtype.type(eps))
        normed = readonly(out / rms * np.asarray(gain, dtype=dtype))  # (n_q, d_model)
    fields.update(design=design, embedded=embedded, output_normed=normed)
    traced = AttentionTrace(**fields)
    object.__setattr__(traced, "steps", steps_of(traced))
    return traced


def softmax(s: np.ndarray, axis: int = -1, out: np.ndarray | None = None,
            dtype=None) -> np.ndarray:
    """Numerically stable softmax: subtract the row maximum before exp, so huge scores give
    finite weights. A row that is entirely −inf gives zeros (not NaN). dtype: computed in that
    type (float64 for float32 logits: the same numbers as from a float64 copy of them)."""
    s = np.asarray(s)
    m = np.max(s, axis=axis, keepdims=True)
    odd = not np.isfinite(m).all()           # a row all −inf (or holding +inf or NaN)
    if odd:
        m[~np.isfinite(m)] = 0.0
    e = np.subtract(s, m, out=out, dtype=dtype)
    np.exp(e, out=e)
    total = np.sum(e, axis=axis, keepdims=True)
    if odd:                                  # a finite maximum leaves exp(0) = 1 in its row
        total[total == 0] = 1.0
    e /= total
    return e


def log_softmax(s: np.ndarray, axis: int = -1) -> np.ndarray:
    """log softmax(s) = s − max − log Σ exp(s − max) along `axis`, in s's dtype (the
    log-probabilities of logits: the decoder gives them float64)."""
    s = np.asarray(s)
    top = np.max(s, axis=axis, keepdims=True)
    return s - top - np.log(np.exp(s - top).sum(axis=axis, keepdims=True))


# ---- helpers ----------------------------------------------------------------------------------

def _check_width(arr: np.ndarray, width: int, name: str, what: str) -> None:
    if arr.shape[1] != width:
        raise AttnvizInputError("error.engine.width", name=name, cols=arr.shape[1],
                                width=width, what=what)


def _split_heads(flat: np.ndarray, num_heads: int) -> np.ndarray:
    n, hd = flat.shape
    heads = flat.reshape(n, num_heads, hd // num_heads).transpose(1, 0, 2)  # (H, n, d)
    return readonly(np.ascontiguousarray(heads))


def _project(inp: np.ndarray, w: MultiHeadWeights, which: str, dtype) -> np.ndarray:
    """inp (n, d_in) @ each head's matrix → (heads, n, d): H for Q, H_kv for K and V."""
    mat, bias = w.stacked(which, dtype)                      # (d_in, heads*d), (heads*d,)
    flat = inp @ mat                                         # (n, heads*d)
    if bias is not None:
        flat += bias
    return _split_heads(flat, w.num_heads if which == "q" else w.num_kv_heads)


def _project_self(x: np.ndarray, w: MultiHeadWeights, dtype):
    """Self-attention: Q (H, n, d_k), K (H_kv, n, d_k) and V (H_kv, n, d_v) from one matmul of
    x with the three projections side by side."""
    mat, bias = w.stacked("qkv", dtype)                      # (d_model, H d_k + H_kv (d_k + d_v))
    flat = x @ mat                                           # (n, H d_k + H_kv (d_k + d_v))
    if bias is not None:
        flat += bias
    h, h_kv, d_k = w.num_heads, w.num_kv_heads, w.d_k
    cuts = (0, h * d_k, (h + h_kv) * d_k, flat.shape[1])
    return tuple(_split_heads(flat[:, a:b], heads)
                 for a, b, heads in zip(cuts, cuts[1:], (h, h_kv, h_kv)))


def _resolve_scale(scale, d_k: int) -> float:
    if scale is None:
        return 1.0 / math.sqrt(d_k)
    if isinstance(scale, bool) or not isinstance(scale, (int, float, np.integer, np.floating)) \
            or not math.isfinite(scale):
        raise AttnvizInputError("error.engine.scale", value=repr(scale))
    return float(scale)


def _build_mask(causal, key_padding_mask, attn_mask, shape, dtype):
    """Combine the masks into (bool mask or None, float addend or None), broadcastable to shape.

    shape is (H, n_q, n_k). Bool entries True = not allowed (torch's meaning).
    """
    h, n_q, n_k = shape
    blocked = None
    added = None

    def block(m):
        nonlocal blocked
        blocked = m if blocked is None else (blocked | m)

    if causal:
        block(np.triu(np.ones((n_q, n_k), dtype=bool), k=1))
    if key_padding_mask is not None:
        kpm = _mask_array(key_padding_mask, "key_padding_mask", [(n_k,)])
        if kpm.dtype == bool:
            block(np.broadcast_to(kpm[None, :], (n_q, n_k)))
        else:
            added = kpm[None, :].astype(dtype)
    if attn_mask is not None:
        am = _mask_array(attn_mask, "attn_mask", [(n_q, n_k), (h, n_q, n_k)])
        if am.dtype == bool:
            block(am)
        else:
            am = am.astype(dtype)
            added = am if added is None else added + am
    return blocked, added


def _mask_array(mask, name: str, shapes: list[tuple]) -> np.ndarray:
    arr = np.asarray(mask)
    if arr.shape not in shapes:
        want = " or ".join(str(s) for s in shapes)
        raise AttnvizInputError("error.engine.mask_shape", name=name, want=want,
                                shape=str(arr.shape))
    if arr.dtype == bool:
        return arr
    if not (np.issubdtype(arr.dtype, np.floating) or np.issubdtype(arr.dtype, np.integer)):
        raise AttnvizInputError("error.engine.mask_dtype", name=name, dtype=str(arr.dtype))
    if np.issubdtype(arr.dtype, np.integer):
        raise AttnvizInputError("error.engine.mask_integers", name=name)
    if np.isnan(arr).any() or np.isposinf(arr).any():
        raise AttnvizInputError("error.engine.mask_nan", name=name)
    return arr


_BLOCK_BYTES = 1 << 18        # rows of one head processed together stay in L2 cache
_THREADED_ABOVE = 1 << 17     # score cells above which the blocks run on several threads
_threads: int | None = None   # threads for the blocks; None: one per core (see set_threads)


def set_threads(n: int | None) -> int | None:
    """How many threads a large trace's element-wise blocks run on: None (the default, a
    notebook) one per core, 1 none beside the caller's. The app sets its BLAS thread count
    (attnviz.app.runtime.threads). The threads live for one call only: none outlives a trace.
    Returns the previous setting."""
    global _threads
    previous, _threads = _threads, None if n is None else max(1, int(n))
    return previous


def _attend(q, k, v, causal, key_padding_mask, attn_mask, scale):
    """Scores, scaling, masks, softmax and the weighted sum, for all heads (the fast path;
    `attention` below is the same computation written plainly, and a test holds them equal).

    The matmuls run batched (BLAS uses its threads); the element-wise steps between them run in
    blocks of query rows of one head, small enough to stay in cache, spread over the cores
    (numpy releases the GIL in its loops; `set_threads`). With no scaling the scaled scores are the scores
    (one array), and with no mask the masked scores are the scaled scores: `has_mask` and
    `scale` say which, never the arrays' identity.
    """
    h, n_q, _ = q.shape
    n_k = k.shape[1]
    scale = _resolve_scale(scale, q.shape[2])
    shape = (h, n_q, n_k)
    blocked, added = (None if m is None else np.broadcast_to(m, shape)
                      for m in _build_mask(causal, key_padding_mask, attn_mask, shape, q.dtype))
    has_mask = blocked is not None or added is not None
    scores = _scores(q, k)                                   # (H, n_q, n_k)
    _check_no_overflow(scores, q, k, scale)
    scaled = scores if scale == 1.0 else np.empty_like(scores)
    masked = np.empty_like(scores) if has_mask else scaled
    weights = np.empty_like(scores)
    _run_blocks(_row_block_steps(scores, scaled, masked, weights, scale, blocked, added),
                _row_blocks(h, n_q, n_k, q.dtype.itemsize))
    z = np.matmul(weights, v)                                # (H, n_q, d_v)
    parts = dict(scores=scores, scaled_scores=scaled, masked_scores=masked, weights=weights,
                 scale=scale, mask=blocked, has_mask=has_mask,
                 warning_messages=_all_masked_rows(blocked, added, shape))
    for name in ("scores", "scaled_scores", "masked_scores", "weights"):
        readonly(parts[name])
    return readonly(z), parts


def _scores(q: np.ndarray, k: np.ndarray) -> np.ndarray:
    """Q Kᵀ for every head, (H, n_q, n_k); exactly symmetric when K is Q."""
    with np.errstate(over="ignore", invalid="ignore"):
        scores = np.matmul(q, k.transpose(0, 2, 1))          # BLAS, on every core
    if k is q:
        _mirror_upper(scores)
    return scores


def _row_block_steps(scores, scaled, masked, weights, scale, blocked, added):
    """The element-wise steps for one block (head, rows): scale, mask, softmax, written into
    the trace's arrays. Steps that are off (scale 1, no mask) share their input's array."""
    factor = scores.dtype.type(scale)

    def run(block):
        with np.errstate(over="ignore", invalid="ignore"):   # overflow is checked after
            _block_steps(block)

    def _block_steps(block):
        head, rows = block
        s = scores[head, rows]
        if scale != 1.0:
            s = np.multiply(s, factor, out=scaled[head, rows])
        if blocked is not None or added is not None:
            m = masked[head, rows]
            if added is not None:
                np.add(s, added[head, rows], out=m)
            else:
                m[...] = s
            if blocked is not None:
                np.copyto(m, -np.inf, where=blocked[head, rows])
            s = m
        softmax(s, out=weights[head, rows])

    return run


def _row_blocks(h: int, n_q: int, n_k: int, itemsize: int) -> list:
    """(head, rows) blocks that fit in cache; a small trace is one block of every head."""
    if h * n_q * n_k <= _THREADED_ABOVE:
        return [(slice(None), slice(None))]
    rows = max(1, _BLOCK_BYTES // (n_k * itemsize))
    return [(head, slice(r, r + rows)) for head in range(h) for r in range(0, n_q, rows)]


def _mirror_upper(scores: np.ndarray) -> None:
    """K is Q, so S = Q Qᵀ is symmetric in exact arithmetic; BLAS may round s_ij and s_ji
    differently. Copy the upper triangle onto the lower so S equals Sᵀ bit for bit."""
    rows, cols = np.triu_indices(scores.shape[1], k=1)
    scores[:, cols, rows] = scores[:, rows, cols]


def _run_blocks(run, blocks: list) -> None:
    """Run every block; more than one block runs on `set_threads` threads (one per core by
    default), started for this call and joined before it returns: starting two costs well
    under a millisecond, a blocked trace tens of them, and no thread stays in the caller's
    process."""
    workers = min(len(blocks), _threads or os.cpu_count() or 1)
    if workers == 1:
        for b in blocks:
            run(b)
        return
    share = -(-len(blocks) // workers)

    def run_many(part):
        for b in part:
            run(b)

    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="attnviz-blocks") as pool:
        for f in [pool.submit(run_many, blocks[i:i + share])
                  for i in range(0, len(blocks), share)]:
            f.result()


def _check_no_overflow(scores, q, k, scale) -> None:
    """Raise if a score or scaled score overflowed. A bound from the norms (|q·k| ≤ |q| |k|)
    spares the full scan whenever overflow is impossible, which is always for sensible inputs."""
    big = np.finfo(scores.dtype).max / 4
    with np.errstate(over="ignore"):
        bound = (np.sqrt(np.einsum("hnd,hnd->", q, q, dtype=np.float64))
                 * np.sqrt(np.einsum("hnd,hnd->", k, k, dtype=np.float64))
                 * max(1.0, abs(scale)))
    if bound < big:
        return
    with np.errstate(over="ignore", invalid="ignore"):
        ok = np.isfinite(scores).all() and np.isfinite(scores * scores.dtype.type(scale)).all()
    if not ok:
        raise OverflowInStep("scores")


def _all_masked_rows(blocked, added, shape) -> list[str]:
    """Warnings for query rows whose every key is masked (by True or by a −inf float mask).

    Read off the masks, never the scores: scores are finite, so only masks make −inf.
    """
    if blocked is None and added is None:
        return []
    dead = np.zeros(shape, dtype=bool) if blocked is None else blocked
    if added is not None:
        dead = dead | np.isneginf(added)
    dead = dead.all(axis=-1)                                 # (H, n_q)
    if not dead.any():
        return []
    rows = sorted({int(i) + 1 for i in np.nonzero(dead)[1]})
    heads = sorted({int(i) for i in np.nonzero(dead)[0]})
    which = Message("notice.masked_rows.every_head") if len(heads) == dead.shape[0] else \
        Message("notice.masked_rows.heads", count=len(heads), heads=", ".join(map(str, heads)))
    return [Message("notice.masked_rows", count=len(rows), rows=", ".join(map(str, rows)),
                    which=which)]


def _concat_heads(z: np.ndarray) -> np.ndarray:
    h, n_q, d_v = z.shape
    return readonly(np.ascontiguousarray(z.transpose(1, 0, 2).reshape(n_q, h * d_v)))


# Each step that must hold only finite numbers; a learner is told error.overflow.<step>.
_MUST_BE_FINITE = ("q", "k", "q_normed", "k_normed", "q_rotated", "k_rotated", "v", "z",
                   "output")


def _check_finite(fields: dict) -> None:
    """Raise AttnvizInputError naming the first step that holds NaN or ±inf (the masked
    scores' −inf is the mask, not an overflow): a trace never shows a silent NaN. Reductions
    (max, min propagate NaN), not element-wise masks: no (H, n, n) temporaries. The scores
    were checked for overflow already and softmax of finite-or-−∞ rows is finite, so of the
    (H, n, n) arrays only a masked one is scanned (a float mask can add up to +inf)."""
    with np.errstate(invalid="ignore"):
        if fields["has_mask"] and not fields["masked_scores"].max() < np.inf:
            raise OverflowInStep("masked_scores")
        for name in _MUST_BE_FINITE:
            a = fields.get(name)
            if a is None:
                continue
            if a.size and not (np.isfinite(a.max()) and np.isfinite(a.min())):
                raise OverflowInStep(name)


def _output(concat: np.ndarray, w: MultiHeadWeights | None) -> np.ndarray:
    """Concat W_O + b_O, (n_q, d_out); the concatenation itself where there is no W_O."""
    if w is None:
        return concat
    output = concat @ w.w_o.astype(concat.dtype, copy=False)
    if w.b_o is not None:
        output += w.b_o.astype(concat.dtype, copy=False)
    return output


def _finish(fields: dict):
    fields.pop("q_used", None)
    fields.pop("k_used", None)
    _check_finite(fields)
    fields["output"] = readonly(fields["output"])
    for name in ("x", "context"):
        if fields[name] is not None:
            fields[name] = readonly(np.array(fields[name]))
    t = AttentionTrace(**fields)
    object.__setattr__(t, "steps", steps_of(t))
    return t
