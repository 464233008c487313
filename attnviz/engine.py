"""Multi-head attention with every intermediate kept, named and shaped for display.

    Attention(Q, K, V) = softmax(Q Kᵀ / √d_k) V        (one head)
    MultiHead(X)       = Concat(Z_1 … Z_H) W_O + b_O
                         with Z_h = Attention(X W_Q,h, C W_K,h, C W_V,h)

Axis order everywhere: (head, query, key, feature). Row-vector convention: ``Q = X @ W_Q``.
"""

from __future__ import annotations

import math
import os
from concurrent.futures import ThreadPoolExecutor
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from .arrays import as_matrix, float_dtype, readonly
from .errors import AttnvizInputError
from .weights import MultiHeadWeights


@dataclass(frozen=True)
class Step:
    """One step of the computation, as the pages show it.

    axes names the array's axes, e.g. ("head", "query", "key"); "head" first means one slice per
    head. A step computed on demand (weighted values) stores nothing: its `array` is computed
    at each access, for all heads; pages take one head with ``trace.step_array(name, head)``.
    """

    name: str
    title: str
    formula: str          # LaTeX
    explanation: str      # one sentence
    stored: np.ndarray | None
    axes: tuple[str, ...]
    compute: Callable[[], np.ndarray] | None = field(default=None, repr=False, compare=False)

    @property
    def array(self) -> np.ndarray:
        """The step's numbers; for an on-demand step, computed now (never kept)."""
        return self.stored if self.compute is None else self.compute()

    @property
    def on_demand(self) -> bool:
        return self.compute is not None

    @property
    def per_head(self) -> bool:
        return self.axes[0] == "head"


@dataclass(frozen=True, eq=False)
class AttentionTrace:
    """Every intermediate of one attention call. Shapes: H heads, n_q queries, n_k keys."""

    x: np.ndarray | None              # (n_q, d_model)
    context: np.ndarray | None        # (n_k, d_context)
    q: np.ndarray                     # (H, n_q, d_k)
    k: np.ndarray                     # (H, n_k, d_k)
    v: np.ndarray                     # (H, n_k, d_v)
    scores: np.ndarray                # (H, n_q, n_k)  Q Kᵀ
    scaled_scores: np.ndarray         # (H, n_q, n_k)  scores × scale
    masked_scores: np.ndarray         # (H, n_q, n_k)  −inf where masked, float mask added
    weights: np.ndarray               # (H, n_q, n_k)  softmax over keys
    z: np.ndarray                     # (H, n_q, d_v)  weights @ V
    concat: np.ndarray                # (n_q, H*d_v)
    output: np.ndarray                # (n_q, d_out)
    scale: float
    mask: np.ndarray | None           # bool (H, n_q, n_k), True = masked (−inf); None = no mask
    attn_weights: MultiHeadWeights | None = None
    weights_given: str | None = None  # why the weights are given, not softmax (see with_weights)
    warnings: list[str] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)

    @property
    def num_heads(self) -> int:
        return self.q.shape[0]

    @property
    def n_q(self) -> int:
        return self.q.shape[1]

    @property
    def n_k(self) -> int:
        return self.k.shape[1]

    @property
    def d_k(self) -> int:
        return self.q.shape[2]

    @property
    def d_v(self) -> int:
        return self.v.shape[2]

    def weighted_values(self, head: int) -> np.ndarray:
        """(n_q, n_k, d_v): weights[head, i, j] · v[head, j], each value vector scaled by its
        weight before the sum over keys (the tutorials' "weighted values")."""
        head = self._check_head(head)
        return self.weights[head][:, :, None] * self.v[head][None, :, :]

    def step(self, name: str) -> Step:
        for s in self.steps:
            if s.name == name:
                return s
        raise AttnvizInputError(
            f"no step named {name!r}; the steps are {', '.join(s.name for s in self.steps)}")

    def step_array(self, name: str, head: int = 0) -> np.ndarray:
        """The array a page draws for step `name`: one head's slice of per-head steps."""
        s = self.step(name)
        if s.on_demand:
            return self.weighted_values(head)
        return s.array[self._check_head(head)] if s.per_head else s.array

    # ---- taking it out (attnviz.export) -------------------------------------------------------
    def to_npz(self, file, tokens_q=None, tokens_k=None) -> None:
        """Every intermediate by field name, the token labels, W_Q … W_O and biases, and the
        settings, to a .npz path or binary file object (``MultiHeadWeights.from_npz`` reads the
        weights back)."""
        from .export import to_npz

        to_npz(self, file, tokens_q, tokens_k)

    def to_csv_zip(self, file, tokens_q=None, tokens_k=None) -> None:
        """A zip with one CSV per array (per head), token labels as row/column headers."""
        from .export import to_csv_zip

        to_csv_zip(self, file, tokens_q, tokens_k)

    def to_json(self, tokens_q=None, tokens_k=None) -> str:
        """Every intermediate and parameter as nested lists (−∞ as null), the token labels, the
        settings and the steps' texts."""
        from .export import to_json

        return to_json(self, tokens_q, tokens_k)

    def figure(self, step_name: str, head: int = 0, *, tokens_q=None, tokens_k=None,
               query: int | None = None):
        """The plotly heatmap of one step (see attnviz.figures.step_figure)."""
        from .figures import step_figure

        return step_figure(self, step_name, head=head, tokens_q=tokens_q, tokens_k=tokens_k,
                           query=query)

    def _check_head(self, head) -> int:
        if isinstance(head, bool) or not isinstance(head, (int, np.integer)) \
                or not 0 <= head < self.num_heads:
            raise AttnvizInputError(
                f"head must be a whole number from 0 to {self.num_heads - 1}, not {head!r}")
        return int(head)


# ---- the computation ------------------------------------------------------------------------

def trace_attention(x, w: MultiHeadWeights, *, context=None, value=None, causal: bool = False,
                    key_padding_mask=None, attn_mask=None, scale=None) -> AttentionTrace:
    """Run multi-head attention of queries from `x` over keys and values from `context`.

    x (n_q, d_model); context (n_k, d_context), default x (self-attention); value
    (n_k, d_value_in) only where values come from a different input than keys (torch's vdim).
    key_padding_mask bool (n_k,), True = ignore that key; attn_mask bool (n_q, n_k), True = not
    allowed, or float (n_q, n_k) added to the scaled scores (either may also be (H, n_q, n_k));
    scale None = 1/√d_k, else that factor (1.0 = no scaling).
    """
    if not isinstance(w, MultiHeadWeights):
        raise AttnvizInputError(f"w must be a MultiHeadWeights, not {type(w).__name__}")
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
            raise AttnvizInputError(
                f"value must have one row per key ({context.shape[0]}), not {value.shape[0]}")
    _check_width(value, w.d_value_in, "value" if value is not context else "context",
                 "w_v's second axis")

    if context is x and value is x:
        q, k, v = _project_self(x, w, dtype)
        if w.qk_tied:
            k = q        # W_K = W_Q on the same input: K is Q, and the scores are symmetric
    else:
        q = _project(x, w, "q", dtype)
        k = _project(context, w, "k", dtype)
        v = _project(value, w, "v", dtype)
    z, parts = _attend(q, k, v, causal, key_padding_mask, attn_mask, scale)
    concat = _concat_heads(z)
    w_o = w.w_o.astype(dtype, copy=False)
    output = concat @ w_o                                    # (n_q, d_out)
    if w.b_o is not None:
        output += w.b_o.astype(dtype, copy=False)
    fields = dict(x=x, context=None if context is x else context, q=q, k=k, v=v, z=z,
                  concat=concat, output=output, attn_weights=w, **parts)
    return _finish(fields, has_x=True, cross=context is not x, has_wo=True,
                   biased=w.has_bias)


def trace_qkv(q, k, v, *, causal: bool = False, key_padding_mask=None, attn_mask=None,
              scale=None) -> AttentionTrace:
    """Attention on Q, K, V entered directly: 2-D arrays are one head, 3-D arrays (H, n, d).

    No projections and no W_O: ``t.output`` is ``t.concat``.
    """
    arrays = {name: as_matrix(a, name, ndim=(2, 3))
              for name, a in (("q", q), ("k", k), ("v", v))}
    dtype = float_dtype(*arrays.values())
    q, k, v = (a.astype(dtype, copy=False) for a in arrays.values())
    if len({a.ndim for a in (q, k, v)}) != 1:
        raise AttnvizInputError("q, k and v must all be 2-D (one head) or all 3-D (H, n, d)")
    if q.ndim == 2:
        q, k, v = q[None], k[None], v[None]
    if not q.shape[0] == k.shape[0] == v.shape[0]:
        raise AttnvizInputError(
            f"q, k and v must have the same number of heads, not "
            f"{q.shape[0]}, {k.shape[0]} and {v.shape[0]}")
    if q.shape[2] != k.shape[2]:
        raise AttnvizInputError(
            f"each query and key must have the same length d_k to take their dot product, "
            f"but q rows have {q.shape[2]} numbers and k rows have {k.shape[2]}")
    if k.shape[1] != v.shape[1]:
        raise AttnvizInputError(
            f"k and v must have one row per key each, but k has {k.shape[1]} rows "
            f"and v has {v.shape[1]}")
    q, k, v = (readonly(np.ascontiguousarray(a)) for a in (q, k, v))
    z, parts = _attend(q, k, v, causal, key_padding_mask, attn_mask, scale)
    concat = _concat_heads(z)
    fields = dict(x=None, context=None, q=q, k=k, v=v, z=z, concat=concat, output=concat,
                  attn_weights=None, **parts)
    return _finish(fields, has_x=False, cross=False, has_wo=False, biased=False)


def with_weights(t: AttentionTrace, weights, *, why: str) -> AttentionTrace:
    """The trace `t` with its attention weights replaced by `weights` (H, n_q, n_k) and every
    later step (weighted values, Z, concatenation, output) recomputed from them; the weights
    step says `why` they are not the softmax (e.g. a tutorial's rounded weights)."""
    weights = np.array(weights, dtype=t.weights.dtype)
    if weights.ndim == 2:
        weights = weights[None]
    if weights.shape != t.weights.shape:
        raise AttnvizInputError(f"the weights must have shape {t.weights.shape}, "
                                f"not {weights.shape}")
    z = readonly(weights @ t.v)                              # (H, n_q, d_v)
    concat = _concat_heads(z)
    w = t.attn_weights
    output = concat if w is None else concat @ w.w_o.astype(concat.dtype, copy=False)
    if w is not None and w.b_o is not None:
        output = output + w.b_o.astype(concat.dtype, copy=False)
    fields = {name: getattr(t, name) for name in t.__dataclass_fields__ if name != "steps"}
    fields.update(weights=readonly(weights), z=z, concat=concat, output=output,
                  weights_given=why)
    return _finish(fields, has_x=t.x is not None, cross=t.context is not None,
                   has_wo=w is not None, biased=w is not None and w.has_bias)


def softmax(s: np.ndarray, axis: int = -1, out: np.ndarray | None = None) -> np.ndarray:
    """Numerically stable softmax: subtract the row maximum before exp, so huge scores give
    finite weights. A row that is entirely −inf gives zeros (not NaN)."""
    s = np.asarray(s)
    m = np.max(s, axis=axis, keepdims=True)
    m[~np.isfinite(m)] = 0.0
    e = np.subtract(s, m, out=out)
    np.exp(e, out=e)
    total = np.sum(e, axis=axis, keepdims=True)
    total[total == 0] = 1.0
    e /= total
    return e


# ---- helpers ----------------------------------------------------------------------------------

def _check_width(arr: np.ndarray, width: int, name: str, what: str) -> None:
    if arr.shape[1] != width:
        raise AttnvizInputError(
            f"{name} has {arr.shape[1]} columns, but the weights expect {width} = {what}")


def _split_heads(flat: np.ndarray, num_heads: int) -> np.ndarray:
    n, hd = flat.shape
    heads = flat.reshape(n, num_heads, hd // num_heads).transpose(1, 0, 2)  # (H, n, d)
    return readonly(np.ascontiguousarray(heads))


def _project(inp: np.ndarray, w: MultiHeadWeights, which: str, dtype) -> np.ndarray:
    """inp (n, d_in) @ each head's matrix → (H, n, d)."""
    mat, bias = w.stacked(which, dtype)                      # (d_in, H*d), (H*d,)
    flat = inp @ mat                                         # (n, H*d)
    if bias is not None:
        flat += bias
    return _split_heads(flat, w.num_heads)


def _project_self(x: np.ndarray, w: MultiHeadWeights, dtype):
    """Self-attention: Q, K and V from one matmul of x with the three projections side by side."""
    mat, bias = w.stacked("qkv", dtype)                      # (d_model, H*(2 d_k + d_v))
    flat = x @ mat                                           # (n, H*(2 d_k + d_v))
    if bias is not None:
        flat += bias
    h, d_k = w.num_heads, w.d_k
    cuts = (0, h * d_k, 2 * h * d_k, flat.shape[1])
    return tuple(_split_heads(flat[:, a:b], h) for a, b in zip(cuts, cuts[1:]))


def _resolve_scale(scale, d_k: int) -> float:
    if scale is None:
        return 1.0 / math.sqrt(d_k)
    if isinstance(scale, bool) or not isinstance(scale, (int, float, np.integer, np.floating)) \
            or not math.isfinite(scale):
        raise AttnvizInputError(f"scale must be a finite number or None, not {scale!r}")
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
        raise AttnvizInputError(f"{name} must have shape {want}, not {arr.shape}")
    if arr.dtype == bool:
        return arr
    if not (np.issubdtype(arr.dtype, np.floating) or np.issubdtype(arr.dtype, np.integer)):
        raise AttnvizInputError(f"{name} must be bool (True = masked) or float (added), "
                                f"not {arr.dtype}")
    if np.issubdtype(arr.dtype, np.integer):
        raise AttnvizInputError(
            f"{name} holds integers: use bool (True = masked) or float (added to the scores)")
    if np.isnan(arr).any() or np.isposinf(arr).any():
        raise AttnvizInputError(f"{name} may hold −inf (masked) but not NaN or +inf")
    return arr


_BLOCK_BYTES = 1 << 18        # rows of one head processed together stay in L2 cache
_THREADED_ABOVE = 1 << 17     # score cells above which the blocks run on every core
_pool: ThreadPoolExecutor | None = None


def _attend(q, k, v, causal, key_padding_mask, attn_mask, scale):
    """Scores, scaling, masks, softmax and the weighted sum, for all heads.

    The matmuls run batched (BLAS uses every core); the element-wise steps between them run in
    blocks of query rows of one head, small enough to stay in cache, spread over the cores
    (numpy releases the GIL in its loops).
    """
    h, n_q, d_k = q.shape
    n_k, d_v = k.shape[1], v.shape[2]
    dtype = q.dtype
    scale = _resolve_scale(scale, d_k)
    blocked, added = _build_mask(causal, key_padding_mask, attn_mask, (h, n_q, n_k), dtype)
    scores = np.empty((h, n_q, n_k), dtype)                  # (H, n_q, n_k)
    scaled = scores if scale == 1.0 else np.empty_like(scores)
    masked = scaled if blocked is None and added is None else np.empty_like(scores)
    weights = np.empty_like(scores)
    z = np.empty((h, n_q, d_v), dtype)                       # (H, n_q, d_v)
    k_t = k.transpose(0, 2, 1)                               # (H, d_k, n_k)
    factor = dtype.type(scale)
    if blocked is not None:
        blocked = np.broadcast_to(blocked, (h, n_q, n_k))
    if added is not None:
        added = np.broadcast_to(added, (h, n_q, n_k))

    with np.errstate(over="ignore", invalid="ignore"):
        np.matmul(q, k_t, out=scores)                        # BLAS, on every core
    if k is q:
        _mirror_upper(scores)
    _check_no_overflow(scores, q, k, scale)

    def run(block):  # scale, mask and softmax for some rows of one head, in cache
        head, rows = block
        s = scores[head, rows]
        if scaled is not scores:
            s = np.multiply(s, factor, out=scaled[head, rows])
        if masked is not scaled:
            m = masked[head, rows]
            if added is not None:
                np.add(s, added[head, rows], out=m)
            else:
                m[...] = s
            if blocked is not None:
                np.copyto(m, -np.inf, where=blocked[head, rows])
            s = m
        softmax(s, out=weights[head, rows])

    threaded = h * n_q * n_k > _THREADED_ABOVE
    rows_per_block = max(1, _BLOCK_BYTES // (n_k * dtype.itemsize))
    blocks = [(head, slice(r, r + rows_per_block))
              for head in range(h) for r in range(0, n_q, rows_per_block)] if threaded \
        else [(slice(None), slice(None))]                    # small: every head in one go
    _run_blocks(run, blocks, threaded=threaded)
    np.matmul(weights, v, out=z)                             # (H, n_q, d_v)
    parts = dict(scores=scores, scaled_scores=scaled, masked_scores=masked, weights=weights,
                 scale=scale, mask=blocked,
                 warnings=_all_masked_rows(blocked, added, (h, n_q, n_k)))
    for name in ("scores", "scaled_scores", "masked_scores", "weights"):
        readonly(parts[name])
    return readonly(z), parts


def _mirror_upper(scores: np.ndarray) -> None:
    """K is Q, so S = Q Qᵀ is symmetric in exact arithmetic; BLAS may round s_ij and s_ji
    differently. Copy the upper triangle onto the lower so S equals Sᵀ bit for bit."""
    rows, cols = np.triu_indices(scores.shape[1], k=1)
    scores[:, cols, rows] = scores[:, rows, cols]


def _run_blocks(run, blocks: list, *, threaded: bool) -> None:
    global _pool
    workers = os.cpu_count() or 1
    if not threaded or workers == 1:
        for b in blocks:
            run(b)
        return
    if _pool is None:
        _pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="attnviz")
    share = -(-len(blocks) // workers)

    def run_many(part):
        for b in part:
            run(b)

    for f in [_pool.submit(run_many, blocks[i:i + share]) for i in range(0, len(blocks), share)]:
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
        raise AttnvizInputError(
            "the scores Q Kᵀ overflow (some are infinite): the inputs or weights are too large")


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
    which = "every head" if len(heads) == dead.shape[0] else \
        "head" + ("s " if len(heads) > 1 else " ") + ", ".join(map(str, heads))
    return [f"query row{'s' if len(rows) > 1 else ''} {', '.join(map(str, rows))} "
            f"({which}): every key is masked, so its weights are set to 0 and its output is 0"]


def _concat_heads(z: np.ndarray) -> np.ndarray:
    h, n_q, d_v = z.shape
    return readonly(np.ascontiguousarray(z.transpose(1, 0, 2).reshape(n_q, h * d_v)))


def _finish(fields: dict, *, has_x: bool, cross: bool, has_wo: bool, biased: bool):
    fields["output"] = readonly(fields["output"])
    for name in ("x", "context"):
        if fields[name] is not None:
            fields[name] = readonly(np.array(fields[name]))
    t = AttentionTrace(**fields)
    object.__setattr__(t, "steps", _steps(t, has_x=has_x, cross=cross, has_wo=has_wo,
                                          biased=biased))
    return t


@dataclass(frozen=True)
class _Scaling:
    scores: str          # LaTeX of the scaled scores in terms of Q and K
    step_formula: str    # LaTeX of the scaling step
    explanation: str


def _scaling_texts(scale: float, d_k: int) -> _Scaling:
    """The scaling as the formulas write it: ÷√d_k, none (scale 1), or another factor, given
    exactly (its shortest round-trip decimal)."""
    if math.isclose(scale, 1 / math.sqrt(d_k), rel_tol=1e-12):
        return _Scaling(r"\frac{Q_h K_h^{\top}}{\sqrt{d_k}}",
                        rf"\frac{{S_h}}{{\sqrt{{d_k}}}} = \frac{{S_h}}{{\sqrt{{{d_k}}}}}",
                        "Dividing by √d_k keeps the scores' spread near 1 whatever d_k is, so "
                        "softmax does not saturate.")
    if scale == 1.0:
        return _Scaling(r"Q_h K_h^{\top}", r"S_h \;(\text{no scaling})",
                        "Scaling is off: the scores pass through unchanged.")
    return _Scaling(rf"{scale!r}\, Q_h K_h^{{\top}}", rf"{scale!r}\, S_h",
                    f"The scores are multiplied by {scale!r} (not 1/√d_k).")


def _steps(t: AttentionTrace, *, has_x: bool, cross: bool, has_wo: bool,
           biased: bool) -> list[Step]:
    """The steps in the order a learner meets them; formulas follow the tutorials."""
    src = "C" if cross else "X"

    def b(name: str) -> str:  # the bias term of a projection, when there are biases
        return f" + b^{{{name}}}_h" if biased else ""

    s = []
    if has_x:
        s.append(Step("x", "Input X", r"X \in \mathbb{R}^{n \times d_{model}}",
                      "Each row is one token's vector: its embedding (plus position, if on).",
                      t.x, ("query", "feature")))
        if cross:
            s.append(Step("context", "Context C", r"C \in \mathbb{R}^{m \times d_{context}}",
                          "Cross-attention: keys and values come from this second input.",
                          t.context, ("key", "feature")))
        s += [
            Step("q", "Queries Q", rf"Q_h = X W^Q_h{b('Q')}",
                 "What each token is looking for: its row of X times the query weights.",
                 t.q, ("head", "query", "feature")),
            Step("k", "Keys K", rf"K_h = {src} W^K_h{b('K')}",
                 "What each token offers to be found by: its row times the key weights.",
                 t.k, ("head", "key", "feature")),
            Step("v", "Values V", rf"V_h = {src} W^V_h{b('V')}",
                 "What each token passes on when attended to: its row times the value weights.",
                 t.v, ("head", "key", "feature")),
        ]
    else:
        s += [Step(n, f"{title} {n.upper()} (entered)", rf"{n.upper()}_h",
                   f"{title} entered directly, one row per {axis}.", getattr(t, n),
                   ("head", axis, "feature"))
              for n, title, axis in (("q", "Queries", "query"), ("k", "Keys", "key"),
                                     ("v", "Values", "key"))]
    scaling = _scaling_texts(t.scale, t.d_k)
    masked = t.masked_scores is not t.scaled_scores
    s += [
        Step("scores", "Scores Q Kᵀ", r"S_h = Q_h K_h^{\top}",
             "Row i, column j is the dot product q_i · k_j: how well query i matches key j.",
             t.scores, ("head", "query", "key")),
        Step("scaled_scores", "Scaled scores", scaling.step_formula, scaling.explanation,
             t.scaled_scores, ("head", "query", "key")),
    ]
    if masked:
        s.append(Step("masked_scores", "Masked scores",
                      rf"{scaling.scores} + M_h,\; " + (
                          r"M_h[i, j] = -\infty\text{ where masked}" if t.mask is not None
                          else r"M_h = \text{the float mask, added}"),
                      "Masked keys get −∞, so softmax gives them weight 0.",
                      t.masked_scores, ("head", "query", "key")))
    s += [
        Step("weights", "Attention weights (softmax)",
             r"A_h = \mathrm{softmax}_{\text{row}}\left(" + scaling.scores
             + (r" + M_h" if masked else "") + r"\right)",
             "Softmax over each row turns scores into weights that are positive and sum to 1.",
             t.weights, ("head", "query", "key"))
        if t.weights_given is None else
        Step("weights", "Attention weights (given, not the softmax)",
             r"A_h = \text{given weights}", t.weights_given,
             t.weights, ("head", "query", "key")),
        Step("weighted_values", "Weighted values", r"A_h[i, j] \, v_j",
             "Each value vector scaled by how much query i attends to that key.",
             None, ("head", "query", "key", "feature"),
             compute=lambda: t.weights[..., None] * t.v[:, None]),   # (H, n_q, n_k, d_v)
        Step("z", "Head output Z", r"Z_h = A_h V_h = \sum_j A_h[i, j]\, v_j",
             "Summing the weighted values gives each token's new vector for this head.",
             t.z, ("head", "query", "feature")),
        Step("concat", "Concatenation",
             r"\mathrm{Concat}(Z_1, \dots, Z_H) \in \mathbb{R}^{n \times H d_v}",
             "The heads' outputs side by side, one row per token.",
             t.concat, ("query", "feature")),
    ]
    if has_wo:
        s.append(Step("output", "Output (× W_O)",
                      r"\mathrm{MultiHead}(X) = \mathrm{Concat}(Z_1, \dots, Z_H)\, W^O"
                      + (r" + b^O" if biased else ""),
                      "W_O mixes the heads back into one vector per token.",
                      t.output, ("query", "feature")))
    return s
