"""Weight sets of multi-head attention: per-head W_Q, W_K, W_V, the output W_O, optional biases.

Row-vector convention, as in the tutorials: ``Q_h = X @ w_q[h] + b_q[h]``.
Axis order everywhere: ``(head, input feature, output feature)``.

Grouped-query attention (as in Llama, Mistral, SmolLM2): W_K and W_V may have fewer heads,
H_kv, than W_Q's H, H_kv dividing H; query head h reads key/value head h // (H / H_kv), what
transformers' ``repeat_kv`` spells out. H_kv = H is ordinary multi-head attention.
"""

from __future__ import annotations

import math
import os
import zipfile
from typing import IO, TYPE_CHECKING
from dataclasses import dataclass
from functools import cached_property

import numpy as np
from numpy.typing import ArrayLike, DTypeLike

from attnviz.core.arrays import as_matrix, float_dtype, readonly, whole_number
from attnviz.core.errors import AttnvizInputError
from attnviz.core.grouped_query import kv_head
from attnviz.core.inputs import MAX_HEADS

if TYPE_CHECKING:                     # torch only inside from_torch / to_torch
    import torch

INIT_SCHEMES = ("gaussian", "xavier", "kaiming", "identity")
PARAMETERS = ("w_q", "w_k", "w_v", "w_o", "b_q", "b_k", "b_v", "b_o")   # the fields, in order

MAX_DIM = 4096


@dataclass(frozen=True, eq=False)
class MultiHeadWeights:
    """The learnable matrices of one multi-head attention layer.

    w_q (H, d_model, d_k), w_k (H_kv, d_context, d_k), w_v (H_kv, d_value_in, d_v) where
    d_value_in is d_context unless keys and values come from inputs of different widths (torch's
    kdim/vdim) and H_kv (key/value heads) is H, or a divisor of it for grouped-query attention;
    w_o (H*d_v, d_out); biases b_q (H, d_k), b_k (H_kv, d_k), b_v (H_kv, d_v), b_o (d_out,) or
    None. Arrays are stored read-only (copied, unless they can never change: a read-only
    memory map is kept as it is); make a new object to change a weight.
    """

    w_q: np.ndarray
    w_k: np.ndarray
    w_v: np.ndarray
    w_o: np.ndarray
    b_q: np.ndarray | None = None
    b_k: np.ndarray | None = None
    b_v: np.ndarray | None = None
    b_o: np.ndarray | None = None

    def __post_init__(self):
        dtype = float_dtype(self.w_q, self.w_k, self.w_v, self.w_o)
        for name in ("w_q", "w_k", "w_v"):
            self._set(name, as_matrix(getattr(self, name), name, ndim=3, dtype=dtype))
        self._set("w_o", as_matrix(self.w_o, "w_o", ndim=2, dtype=dtype))
        self._check_shapes()
        expected = {"b_q": (self.num_heads, self.d_k), "b_k": (self.num_kv_heads, self.d_k),
                    "b_v": (self.num_kv_heads, self.d_v), "b_o": (self.d_out,)}
        for name, shape in expected.items():
            value = getattr(self, name)
            if value is None:
                continue
            arr = as_matrix(value, name, ndim=len(shape), dtype=dtype)
            if arr.shape != shape:
                raise AttnvizInputError("error.weights.shape", name=name, want=str(shape),
                                        shape=str(arr.shape))
            self._set(name, arr)

    def _set(self, name: str, arr: np.ndarray) -> None:
        kept = arr if _immutable(arr) else readonly(np.array(arr, copy=True))
        object.__setattr__(self, name, kept)

    def _check_shapes(self) -> None:
        h, _, d_k = self.w_q.shape
        h_kv = self.w_k.shape[0]
        if self.w_v.shape[0] != h_kv:
            raise AttnvizInputError("error.weights.kv_heads_differ", k=h_kv,
                                    v=self.w_v.shape[0])
        if h % h_kv:
            raise AttnvizInputError(
                "error.weights.kv_heads_divide", kv=h_kv, heads=h,
                divisors=", ".join(str(d) for d in range(1, h + 1) if h % d == 0))
        if self.w_k.shape[2] != d_k:
            raise AttnvizInputError("error.weights.key_width", d_k=d_k,
                                    width=self.w_k.shape[2])
        if self.w_o.shape[0] != h * self.d_v:
            raise AttnvizInputError("error.weights.w_o_rows", heads=h, d_v=self.d_v,
                                    rows=h * self.d_v, got=self.w_o.shape[0])

    # ---- sizes -------------------------------------------------------------------------
    @property
    def num_heads(self) -> int:
        return self.w_q.shape[0]

    @property
    def num_kv_heads(self) -> int:
        """Key/value heads, H_kv: num_heads, or a divisor of it (grouped-query attention)."""
        return self.w_k.shape[0]

    def kv_head(self, head: int) -> int:
        """The key/value head query head `head` reads (`grouped_query.kv_head`)."""
        return kv_head(int(head), self.num_heads, self.num_kv_heads)

    @property
    def d_model(self) -> int:
        return self.w_q.shape[1]

    @property
    def d_context(self) -> int:
        return self.w_k.shape[1]

    @property
    def d_value_in(self) -> int:
        """Width of the input values are projected from: d_context unless torch's vdim differs."""
        return self.w_v.shape[1]

    @property
    def d_k(self) -> int:
        return self.w_q.shape[2]

    @property
    def d_v(self) -> int:
        return self.w_v.shape[2]

    @property
    def d_out(self) -> int:
        return self.w_o.shape[1]

    @property
    def dtype(self) -> np.dtype:
        return self.w_q.dtype

    @cached_property
    def qk_tied(self) -> bool:
        """W_K equals W_Q (and b_K equals b_Q): queries and keys of one input are the same."""
        same_bias = (self.b_q is None and self.b_k is None) or (
            self.b_q is not None and self.b_k is not None
            and np.array_equal(self.b_q, self.b_k))
        return self.w_q.shape == self.w_k.shape and same_bias \
            and np.array_equal(self.w_q, self.w_k)

    @property
    def has_bias(self) -> bool:
        return any(b is not None for b in (self.b_q, self.b_k, self.b_v, self.b_o))

    # ---- the heads side by side, for one matmul per projection -------------------------
    @cached_property
    def _stacked(self) -> dict:
        """Each projection with its heads side by side: (d_in, H*d_k), biases (H*d_k,) or None."""

        def side_by_side(w):  # (H, d_in, d) -> (d_in, H*d)
            return np.ascontiguousarray(w.transpose(1, 0, 2).reshape(w.shape[1], -1))

        def flat(b):
            return None if b is None else b.reshape(-1)

        return {"q": (side_by_side(self.w_q), flat(self.b_q)),
                "k": (side_by_side(self.w_k), flat(self.b_k)),
                "v": (side_by_side(self.w_v), flat(self.b_v))}

    def stacked(self, which: str, dtype: DTypeLike) -> tuple[np.ndarray, np.ndarray | None]:
        """Projection `which` ('q', 'k', 'v', or 'qkv' for all three side by side) as
        (d_in, heads*d) and its flat bias (or None), in `dtype`; cached per dtype. 'qkv' is
        (d_model, H*d_k + H_kv*(d_k + d_v)): Q's heads, then K's, then V's."""
        key = (which, np.dtype(dtype))
        if key not in self._cast_cache:
            if which == "qkv":
                parts = [self._stacked[c] for c in "qkv"]
                w = np.concatenate([p[0] for p in parts], axis=1)
                b = None if all(p[1] is None for p in parts) else np.concatenate(
                    [np.zeros(p[0].shape[1]) if p[1] is None else p[1] for p in parts])
            else:
                w, b = self._stacked[which]
            self._cast_cache[key] = (readonly(w.astype(dtype)),
                                     None if b is None else readonly(b.astype(dtype)))
        return self._cast_cache[key]

    @cached_property
    def _cast_cache(self) -> dict:
        return {}

    # ---- making weights -----------------------------------------------------------------
    def replace(self, **arrays) -> "MultiHeadWeights":
        """A copy with some arrays replaced, e.g. ``w.replace(w_q=new)``; checked as new."""
        fields = {n: getattr(self, n) for n in PARAMETERS}
        fields.update(arrays)
        return MultiHeadWeights(**fields)

    @classmethod
    def from_qkv(cls, w_qkv: ArrayLike, w_o: ArrayLike, num_heads: int,
                 num_kv_heads: int | None = None, *,
                 b_o: ArrayLike | None = None,
                 b_qkv: ArrayLike | None = None) -> "MultiHeadWeights":
        """Weights from the layout a model keeps: w_qkv (d_model, (H + 2 H_kv)·d_k), the
        projections side by side (Q's H heads, then K's H_kv, then V's H_kv, each d_k wide,
        d_v = d_k), and w_o (H·d_k, d_out). w_q, w_k and w_v are per-head views of w_qkv, and
        w_qkv itself is the fused matrix the engine multiplies by, so a read-only memory map
        (a model's converted weights on disk) is used in place, never copied.
        b_qkv ((H + 2 H_kv)·d_k,): the three projections' biases side by side (Qwen2)."""
        num_kv_heads = num_heads if num_kv_heads is None else num_kv_heads
        w_qkv = as_matrix(w_qkv, "w_qkv")
        d_model, width = w_qkv.shape
        if width % (num_heads + 2 * num_kv_heads):
            raise AttnvizInputError("error.weights.w_qkv_width", width=width,
                                    heads=num_heads, kv_heads=num_kv_heads)
        d_k = width // (num_heads + 2 * num_kv_heads)

        def heads(start: int, count: int):                   # (count, d_model, d_k) views
            block = w_qkv[:, start * d_k:(start + count) * d_k]
            return block.reshape(d_model, count, d_k).transpose(1, 0, 2)

        biases = {}
        if b_qkv is not None:
            b_qkv = as_matrix(b_qkv, "b_qkv", ndim=1)
            if b_qkv.shape != (width,):
                raise AttnvizInputError("error.weights.shape", name="b_qkv", want=str((width,)),
                                        shape=str(b_qkv.shape))
            cuts = np.cumsum([0, num_heads, num_kv_heads, num_kv_heads]) * d_k
            biases = {name: b_qkv[a:b].reshape(-1, d_k)
                      for name, a, b in zip(("b_q", "b_k", "b_v"), cuts, cuts[1:])}
        w = cls(heads(0, num_heads), heads(num_heads, num_kv_heads),
                heads(num_heads + num_kv_heads, num_kv_heads), w_o, b_o=b_o, **biases)
        w._cast_cache[("qkv", w_qkv.dtype)] = (
            w_qkv if _immutable(w_qkv) else readonly(np.array(w_qkv)),
            None if b_qkv is None else readonly(np.array(b_qkv, dtype=w_qkv.dtype)))
        return w

    @classmethod
    def random(cls, d_model: int, num_heads: int, *, d_k: int | None = None,
               d_v: int | None = None, d_context: int | None = None, d_out: int | None = None,
               init: str = "xavier", seed: int = 0, bias: bool = False, tie_qk: bool = False,
               num_kv_heads: int | None = None,
               dtype: DTypeLike = np.float64) -> "MultiHeadWeights":
        """Fresh weights drawn with one of the usual initialisation schemes.

        d_k and d_v default to d_model // num_heads (d_model must then divide by num_heads);
        d_context and d_out default to d_model.
        init:
          "gaussian"  every entry from N(0, 1) (like the tutorials' torch.randn)
          "xavier"    uniform ±sqrt(6 / (fan_in + fan_out)) over each whole projection
                      (d_model → H·d_k), as torch.nn.MultiheadAttention initialises itself
          "kaiming"   N(0, 2 / fan_in)
          "identity"  each head reads its own slice of the input features unchanged
                      (W_O is the identity too), so attention acts on the raw embeddings
        bias: draw biases from N(0, 0.1²) (else no biases); tie_qk: w_k is a copy of w_q.
        num_kv_heads: key/value heads for grouped-query attention, a divisor of num_heads
        (None: num_heads, ordinary multi-head attention, drawn exactly as before).
        """
        d_model = _check_dim(d_model, "d_model")
        num_heads = _check_dim(num_heads, "num_heads", limit=MAX_HEADS)
        d_k = _head_dim(d_k, d_model, num_heads, "d_k")
        d_v = _head_dim(d_v, d_model, num_heads, "d_v")
        d_context = d_model if d_context is None else _check_dim(d_context, "d_context")
        d_out = d_model if d_out is None else _check_dim(d_out, "d_out")
        if init not in INIT_SCHEMES:
            raise AttnvizInputError("error.weights.init", schemes=", ".join(INIT_SCHEMES),
                                    init=repr(init))
        if tie_qk and d_context != d_model:
            raise AttnvizInputError("error.weights.tie_qk_width", d_context=d_context,
                                    d_model=d_model)
        h_kv = num_heads if num_kv_heads is None else \
            _check_dim(num_kv_heads, "num_kv_heads", limit=MAX_HEADS)
        if num_heads % h_kv:
            raise AttnvizInputError("error.weights.num_kv_heads_divide", kv=h_kv,
                                    heads=num_heads)
        if tie_qk and h_kv != num_heads:
            raise AttnvizInputError("error.weights.tie_qk_heads", kv=h_kv, heads=num_heads)
        rng = np.random.default_rng(seed)
        draw = _INITS[init]
        w_q = draw(rng, num_heads, d_model, d_k)
        w_k = w_q.copy() if tie_qk else draw(rng, h_kv, d_context, d_k)
        w_v = draw(rng, h_kv, d_context, d_v)
        w_o = draw(rng, 1, num_heads * d_v, d_out)[0]
        biases = {}
        if bias:
            biases = {"b_q": rng.normal(0, 0.1, (num_heads, d_k)),
                      "b_k": rng.normal(0, 0.1, (h_kv, d_k)),
                      "b_v": rng.normal(0, 0.1, (h_kv, d_v)),
                      "b_o": rng.normal(0, 0.1, (d_out,))}
            if tie_qk:
                biases["b_k"] = biases["b_q"].copy()
        cast = {k: v.astype(dtype) for k, v in biases.items()}
        return cls(w_q.astype(dtype), w_k.astype(dtype), w_v.astype(dtype), w_o.astype(dtype),
                   **cast)

    @classmethod
    def from_npz(cls, file: str | os.PathLike | IO[bytes]) -> "MultiHeadWeights":
        """The weights saved in a .npz by ``AttentionTrace.to_npz`` (keys ``w_q``, ``w_k``, ``w_v``,
        ``w_o`` and any of ``b_q``, ``b_k``, ``b_v``, ``b_o``); `file` is a path or a binary file
        object. Read with pickles refused."""
        unreadable = (OSError, ValueError, EOFError, zipfile.BadZipFile)
        try:
            data = np.load(file, allow_pickle=False)
        except unreadable as exc:
            raise AttnvizInputError("error.npz.unreadable", problem=str(exc)) from None
        if not hasattr(data, "files"):
            raise AttnvizInputError("error.npz.single_array")
        with data:
            missing = [n for n in PARAMETERS[:4] if n not in data.files]   # biases optional
            if missing:
                raise AttnvizInputError("error.npz.no_weights", missing=", ".join(missing))
            try:
                arrays = {n: data[n] for n in PARAMETERS if n in data.files}
            except unreadable as exc:                        # e.g. a pickled object array
                raise AttnvizInputError("error.npz.bad_weights", problem=str(exc)) \
                    from None
        return cls(**arrays)

    @classmethod
    def from_torch(cls, mha: torch.nn.MultiheadAttention) -> "MultiHeadWeights":
        """The weights of a ``torch.nn.MultiheadAttention`` (any kdim/vdim, with or without bias).

        torch keeps (out, in) matrices and computes ``x @ W.T``; here each head's slice of
        those rows becomes one (in, d_k) matrix.
        """
        from attnviz.core.torch_interop import weights_from_torch

        return weights_from_torch(cls, mha)

    def to_torch(self) -> torch.nn.MultiheadAttention:
        """A ``torch.nn.MultiheadAttention`` computing the same thing, where torch's layout allows
        (d_k = d_v = d_model / H, d_out = d_model, keys and values of one width each)."""
        from attnviz.core.torch_interop import weights_to_torch

        return weights_to_torch(self)


def _immutable(arr: np.ndarray) -> bool:
    """True when nothing can ever change `arr`: it is read-only and so is the buffer under it
    (a read-only memory map, say). Such an array is kept without a copy; anything else is
    copied, since a read-only view of a writable array still changes with it."""
    if arr.flags.writeable:
        return False
    base = arr
    while isinstance(base, np.ndarray) and base.base is not None:
        base = base.base
    if isinstance(base, np.ndarray):
        return False                       # owns its data: its flag could be set back
    try:
        return memoryview(base).readonly
    except TypeError:
        return False


def _check_dim(value, name: str, limit: int = MAX_DIM) -> int:
    return whole_number(value, name, low=1, high=limit)


def _head_dim(value, d_model: int, num_heads: int, name: str) -> int:
    if value is not None:
        return _check_dim(value, name)
    if d_model % num_heads:
        raise AttnvizInputError("error.weights.head_dim", d_model=d_model, heads=num_heads,
                                name=name)
    return d_model // num_heads


def _gaussian(rng, h, d_in, d_out):  # (h, d_in, d_out)
    return rng.standard_normal((h, d_in, d_out))


def _xavier(rng, h, d_in, d_out):
    bound = math.sqrt(6.0 / (d_in + h * d_out))
    return rng.uniform(-bound, bound, (h, d_in, d_out))


def _kaiming(rng, h, d_in, d_out):
    return rng.normal(0.0, math.sqrt(2.0 / d_in), (h, d_in, d_out))


def _identity(rng, h, d_in, d_out):
    # head i's column j reads input feature (i*d_out + j) mod d_in
    w = np.zeros((h, d_in, d_out))
    for head in range(h):
        cols = np.arange(d_out)
        w[head, (head * d_out + cols) % d_in, cols] = 1.0
    return w


_INITS = {"gaussian": _gaussian, "xavier": _xavier, "kaiming": _kaiming, "identity": _identity}
