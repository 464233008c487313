"""Grouped-query attention: which key/value head a query head reads, said once.

H query heads share H_kv key/value heads in H_kv contiguous groups of g = H / H_kv: query head
h reads K/V head h // g (transformers' ``repeat_kv`` order; SmolLM2: 9 heads, 3 K/V heads,
heads 0–2 read K/V head 0). Every other helper here follows from `kv_head`; the engine, the
Llama layer, the model's readers, the figures and the pages ask these, never ``h // g``.
"""

from __future__ import annotations

import numpy as np

from attnviz.core.arrays import readonly

__all__ = ["group_heads", "group_size", "kv_head", "query_heads", "repeat_kv", "shared_kv"]


def group_size(num_heads: int, num_kv_heads: int) -> int:
    """g = H / H_kv: the query heads that read one key/value head (1 = ordinary multi-head)."""
    return num_heads // num_kv_heads


def kv_head(head, num_heads: int, num_kv_heads: int):
    """The key/value head query head `head` reads: h // (H / H_kv). `head` an int, or an
    array of heads (then an array of the same shape)."""
    return head // group_size(num_heads, num_kv_heads)


def query_heads(kv: int, num_heads: int, num_kv_heads: int) -> range:
    """The query heads that read key/value head `kv` (contiguous: the inverse of `kv_head`)."""
    g = group_size(num_heads, num_kv_heads)
    return range(kv * g, (kv + 1) * g)


def repeat_kv(a: np.ndarray, num_heads: int, axis: int = 0) -> np.ndarray:
    """(…, H_kv, …) → (…, H, …) along `axis`: each key/value head repeated for the query heads
    that read it, so query head h's row is its K/V head's (transformers' ``repeat_kv``)."""
    heads = kv_head(np.arange(num_heads), num_heads, a.shape[axis])
    return readonly(np.take(a, heads, axis=axis))


def shared_kv(a: np.ndarray, num_kv_heads: int, axis: int = 0) -> np.ndarray:
    """(…, H, …) → (…, H_kv, …) along `axis`: `repeat_kv` undone, each K/V head's row once
    (a view: the first query head of each group)."""
    index = [slice(None)] * a.ndim
    index[axis] = slice(None, None, group_size(a.shape[axis], num_kv_heads))
    return a[tuple(index)]


def group_heads(q: np.ndarray, num_kv_heads: int) -> np.ndarray:
    """(B, H, n, d) → (B, H_kv, g, n, d): the query heads grouped by the key/value head they
    read, so (B, H_kv, 1, n_k, d) keys broadcast over each group — ``repeat_kv`` without
    copying the keys and values g times (a view; the contiguous groups of `kv_head`)."""
    b, h, n, d = q.shape
    return q.reshape(b, num_kv_heads, group_size(h, num_kv_heads), n, d)
