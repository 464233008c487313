"""Reading a model's attention beyond "here are the weights": rollout through the layers, the
size of what each weight moves (value norms), and a few statistics per head.

Input is a stack of softmax weights, axis order (layer, head, query, key), as
``PretrainedModel.run(text).attentions`` gives it: (layers, heads, n, n), each row summing to 1.
Plain numpy (pandas for the statistics table); no model is needed.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence

from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike

from attnviz.core.arrays import as_matrix
from attnviz.i18n import Message
from attnviz.core.errors import AttnvizInputError

if TYPE_CHECKING:                     # pandas only inside head_stats
    import pandas as pd

ROW_SUM_TOLERANCE = 1e-3      # how far a row's sum may be from 1 (rounded or float32 weights)
CLS, SEP = "[CLS]", "[SEP]"   # BERT's special tokens, as the model's tokenizer writes them

DETECTORS = ("previous_token", "duplicate_token", "induction")   # TransformerLens's head kinds

__all__ = ["DETECTORS", "ROW_METRICS", "attention_rollout", "causal_head_stats",
           "detection_cells", "detection_pattern", "detection_scores", "detection_sums",
           "head_stats", "is_punctuation", "row_metrics", "shares_on_keys", "sink_share",
           "value_norms"]


# ---- rollout (Abnar & Zuidema 2020) ----------------------------------------------------------

def attention_rollout(attentions: ArrayLike, residual: bool = True) -> np.ndarray:
    """How much of each token's representation after layer l comes from each input token, if
    information flowed only along the attention weights. (layers, n, n), row i of layer l sums
    to 1: entry [l, i, j] is the share of token j (an input token) in token i after layer l.

        Â_l = ½ mean_h(A_l) + ½ I, rows renormalised    (residual=True: the skip connection)
        Â_l = mean_h(A_l)                               (residual=False)
        R_0 = Â_0,   R_l = Â_l R_{l−1}

    attentions (layers, heads, n, n): softmax weights, each row summing to 1.
    Computed in float64, returned in the attentions' float dtype.
    """
    a = _check_attentions(attentions)                           # (L, H, n, n)
    mixed = a.mean(axis=1, dtype=np.float64)                    # (L, n, n) mean over heads
    if residual:
        mixed = 0.5 * mixed + 0.5 * np.eye(a.shape[-1])
        mixed /= mixed.sum(axis=-1, keepdims=True)
    rollout = np.empty_like(mixed)                              # (L, n, n)
    rollout[0] = mixed[0]
    for layer in range(1, len(mixed)):
        rollout[layer] = mixed[layer] @ rollout[layer - 1]
    return rollout.astype(a.dtype, copy=False)


# ---- value norms (Kobayashi et al. 2020) -------------------------------------------------------

def value_norms(weights, v, w_o) -> np.ndarray:
    """‖α_ij · f_h(v_j)‖₂ for every head, query i and key j: how much key j actually moves
    query i's output through head h, not only how much it is attended to.

    f_h(v_j) = v_j W_O,h is value vector j (bias included: v_j = x_j W_V,h + b_V,h) carried
    through W_O,h, the rows of W_O that head h's output meets in the concatenation.
    weights (H, n_q, n_k), v (H, n_k, d_v), w_o (H·d_v, d_out) → (H, n_q, n_k).
    Weights are never negative, so ‖α f‖ = α ‖f‖.
    """
    h, n_k, d_v = v.shape
    w_o_heads = np.asarray(w_o).reshape(h, d_v, -1)             # (H, d_v, d_out): W_O,h
    moved = np.matmul(v, w_o_heads)                             # (H, n_k, d_out): f_h(v_j)
    sizes = np.linalg.norm(moved, axis=-1)                      # (H, n_k)
    return weights * sizes[:, None, :]                          # (H, n_q, n_k)


# ---- statistics per head ---------------------------------------------------------------------

def head_stats(attentions: ArrayLike, tokens: Sequence[str]) -> pd.DataFrame:
    """A pandas DataFrame, one row per (layer, head) in layer-major order (layer 0 head 0,
    layer 0 head 1, …), with the columns

    - ``layer``, ``head``: from 0;
    - ``entropy``: each query row's entropy −Σ_j a_ij log₂ a_ij in bits (0 log 0 = 0),
      averaged over queries: 0 = every query looks at one key, log₂ n = uniform;
    - ``max_weight``: each row's largest weight, averaged over queries;
    - ``on_cls``, ``on_sep``: the share of each query's weight on the [CLS] (resp. [SEP])
      tokens — every position whose token is exactly that string; 0 where there is none;
    - ``on_self``: the weight each query puts on its own position;
    - ``on_prev``, ``on_next``: the weight on the position just before (after) the query,
      averaged over the queries that have one: the first query has no previous token and the
      last no next one, so they are left out of that mean (not counted as 0); NaN when n = 1.

    Every share is averaged over queries. attentions (layers, heads, n, n), rows summing to 1;
    tokens: n strings, one per position.
    """
    import pandas as pd

    a = _check_attentions(attentions).astype(np.float64, copy=False)  # (L, H, n, n)
    layers, heads, n, _ = a.shape
    tokens = _check_tokens(tokens, n)
    per_head = {                                                 # each (L, H)
        "entropy": _row_entropy(a).mean(axis=-1),
        "max_weight": a.max(axis=-1).mean(axis=-1),
        "on_cls": _share_on(a, tokens, CLS),
        "on_sep": _share_on(a, tokens, SEP),
        "on_self": _mean_diagonal(a, 0),
        "on_prev": _mean_diagonal(a, -1),                        # a[i, i−1], i = 1 … n−1
        "on_next": _mean_diagonal(a, 1),                         # a[i, i+1], i = 0 … n−2
    }
    table = {"layer": np.repeat(np.arange(layers), heads),
             "head": np.tile(np.arange(heads), layers)}
    table.update((name, values.ravel()) for name, values in per_head.items())
    return pd.DataFrame(table)


def _row_entropy(a: np.ndarray) -> np.ndarray:
    """(…, n_q): −Σ_j a_ij log₂ a_ij of each row, with 0 log 0 = 0."""
    logs = np.log2(a, where=a > 0, out=np.zeros_like(a))
    return -(a * logs).sum(axis=-1)


def _share_on(a: np.ndarray, tokens: list[str], token: str) -> np.ndarray:
    """(L, H): the weight each query puts on every position holding `token`, mean over queries."""
    columns = [j for j, t in enumerate(tokens) if t == token]
    return a[..., columns].sum(axis=-1).mean(axis=-1)            # no such token: 0


def _mean_diagonal(a: np.ndarray, offset: int) -> np.ndarray:
    """(L, H): mean of a[…, i, i + offset] over the queries i that have such a key."""
    if a.shape[-1] <= abs(offset):
        return np.full(a.shape[:2], np.nan)
    return np.diagonal(a, offset=offset, axis1=-2, axis2=-1).mean(axis=-1)


# ---- a decoder's heads (causal attention) ------------------------------------------------------

def sink_share(attentions) -> np.ndarray:
    """(layers, heads): the weight each query puts on the first token (position 0), averaged
    over the queries — the "attention sink" of a causal model (its first query can look
    nowhere else, so it counts 1). attentions (layers, heads, n, n), rows summing to 1."""
    a = _check_attentions(attentions)
    return a[..., 0].mean(axis=-1, dtype=np.float64)


def causal_head_stats(attentions):
    """A pandas DataFrame like :func:`head_stats` for a decoder's causal attention, one row per
    (layer, head), layer-major: ``layer``, ``head``, ``entropy`` (bits, mean over queries;
    query i can reach only i + 1 keys), ``max_weight``, ``sink`` (:func:`sink_share`),
    ``on_self`` and ``on_prev`` (as in head_stats). No [CLS]/[SEP] and no next token: a
    causal query never sees the token after it."""
    import pandas as pd

    a = _check_attentions(attentions).astype(np.float64, copy=False)   # (L, H, n, n)
    layers, heads = a.shape[:2]
    per_head = {"entropy": _row_entropy(a).mean(axis=-1),
                "max_weight": a.max(axis=-1).mean(axis=-1),
                "sink": a[..., 0].mean(axis=-1),
                "on_self": _mean_diagonal(a, 0),
                "on_prev": _mean_diagonal(a, -1)}
    table = {"layer": np.repeat(np.arange(layers), heads),
             "head": np.tile(np.arange(heads), layers)}
    table.update((name, values.ravel()) for name, values in per_head.items())
    return pd.DataFrame(table)


def detection_pattern(ids, name: str) -> np.ndarray:
    """(n, n) of 0 and 1, lower triangular: where a head of the kind `name` should look, as
    TransformerLens's head detector (``transformer_lens.head_detector``) defines it on the
    token ids `ids` (n,):

    - ``previous_token``: P[i, i−1] = 1;
    - ``duplicate_token``: P[i, j] = 1 for every earlier j < i holding the same token as i;
    - ``induction``: P[i, j] = 1 where the token before j, at j − 1, is a duplicate of i
      (j − 1 < i, j ≤ i): the token that followed the last time i's token appeared."""
    ids = np.asarray(ids)
    if name not in DETECTORS:
        raise AttnvizInputError("error.detector.unknown", name=name, known=", ".join(DETECTORS))
    if ids.ndim != 1 or len(ids) < 2:
        raise AttnvizInputError("error.detector.ids", shape=ids.shape)
    n = len(ids)
    if name == "previous_token":
        return np.eye(n, k=-1)
    duplicate = np.tril(ids[:, None] == ids[None, :], k=-1).astype(np.float64)
    if name == "duplicate_token":
        return duplicate
    induction = np.zeros((n, n))
    induction[:, 1:] = duplicate[:, :-1]                      # shifted one key to the right
    return np.tril(induction)


def detection_scores(attentions, pattern) -> np.ndarray:
    """(layers, heads): how much of each head's attention falls where `pattern` (n, n) of 0/1
    says, Σ_ij a_ij P_ij / Σ_ij a_ij — TransformerLens's detect_head score with its default
    error measure "mul" (nothing excluded). Rows sum to 1, so this is the weight on the
    pattern's keys averaged over all n queries (a query with none counts 0)."""
    a = _check_attentions(attentions).astype(np.float64, copy=False)
    p = np.asarray(pattern, dtype=np.float64)
    if p.shape != a.shape[-2:]:
        raise AttnvizInputError("error.detector.pattern_shape", shape=p.shape,
                                positions=a.shape[-1])
    return (a * p).sum(axis=(-2, -1)) / a.sum(axis=(-2, -1))


# ---- every query row's numbers (the head atlas sums them over a corpus) --------------------

# the per-row numbers of a causal head, in this order (row_metrics' first axis)
ROW_METRICS = ("entropy", "sparsity", "sink", "distance", "punctuation", "max_weight")
SPARSITY_SHARE = 0.9          # sparsity: how many keys hold this share of a row's weight
_SORT_ROWS = 32               # row_metrics sorts this many rows at a time, over the keys they see


def row_metrics(weights: np.ndarray, punctuation: np.ndarray) -> np.ndarray:
    """(len(ROW_METRICS), H, n) float64: each query row's numbers for one layer's causal
    softmax weights (H, n, n), rows summing to 1, every weight above the diagonal an exact 0
    (a causal softmax's), no checks (a run's own weights; the checked readers are
    :func:`causal_head_stats` and :func:`detection_scores`, whose per-head means over the rows
    these are, a test holds them equal):

    - ``entropy``: −Σ_j a_ij log₂ a_ij in bits (0 log 0 = 0), as head_stats;
    - ``sparsity``: the fewest keys whose weights add up to at least 90 % of the row's: n
      minus the most of its smallest weights that add up to at most 10 % (the same count);
    - ``sink``: a_i0, the weight on the first token;
    - ``distance``: Σ_j a_ij (i − j), how far back the row looks on average, in tokens;
    - ``punctuation``: Σ_j a_ij over the keys whose token is punctuation (`punctuation` (n,)
      bool, :func:`is_punctuation`);
    - ``max_weight``: the row's largest weight (how concentrated it is).

    The same numbers as the plain reading — log₂ of every weight, each row sorted over all n
    keys and np.cumsum along it (tests/test_reading.py holds them equal) — faster: each block
    of rows read over the keys it sees only (the zeros above the diagonal add nothing to a sum
    and come first in a sorted row anyway), the log of the weights that are not 0 only; the
    running sums in the weights' dtype one rank at a time over every row at once (numpy's
    cumsum along short rows pays per row): the same additions in the same order, so the same
    counts."""
    a = np.asarray(weights)                                         # (H, n, n)
    h, n, _ = a.shape
    out = np.empty((len(ROW_METRICS), h, n))
    held = np.zeros((n, h, n), a.dtype)                             # (key rank, H, query)
    for start in range(0, n, _SORT_ROWS):                           # rows start … stop − 1
        stop = min(start + _SORT_ROWS, n)                           # see keys 0 … stop − 1
        seen = a[:, start:stop, :stop]                              # (H, rows, stop)
        logs = np.log2(seen, where=seen > 0, out=np.zeros(seen.shape, a.dtype))  # 0 log 0 = 0
        out[0, :, start:stop] = -np.einsum("hij,hij->hi", seen, logs, dtype=np.float64)
        # each row's weights smallest first, after the n − stop zeros it does not see
        held[n - stop:, :, start:stop] = np.sort(seen, axis=-1).transpose(2, 0, 1)
    out[5] = held[-1]
    for rank in range(1, n):                                        # the rank + 1 smallest
        np.add(held[rank - 1], held[rank], out=held[rank])
    out[1] = n - (held <= (1 - SPARSITY_SHARE) * held[-1]).sum(axis=0, dtype=np.int32)
    out[2] = a[..., 0]
    wide = a.astype(np.float64)                                     # (H, n, n), cast once
    out[3] = np.arange(n) - wide @ np.arange(n, dtype=np.float64)
    out[4] = wide @ np.asarray(punctuation, dtype=np.float64)
    return out


def detection_cells(ids) -> list[tuple[np.ndarray, np.ndarray]]:
    """Each detector's pattern (:func:`detection_pattern`) on the ids (n ≥ 2) as its cells
    (rows, keys): what :func:`detection_sums` reads, found once for every layer."""
    return [np.nonzero(detection_pattern(ids, name)) for name in DETECTORS]


def detection_sums(weights: np.ndarray, cells) -> np.ndarray:
    """(len(DETECTORS), H): Σ_ij a_ij P_ij for each detector's pattern P on one layer's
    weights (H, n, n), its cells from :func:`detection_cells`, no checks; divided by n,
    :func:`detection_scores` (rows sum to 1). The pattern is sparse: a pass over its few cells,
    not n²."""
    a = np.asarray(weights)
    return np.stack([a[:, rows, cols].sum(axis=-1, dtype=np.float64) for rows, cols in cells])


# ---- checks ------------------------------------------------------------------------------------

def _check_attentions(attentions) -> np.ndarray:
    """attentions as a (layers, heads, n, n) float array of softmax weights, or an
    AttnvizInputError saying what is wrong in a learner's words."""
    try:
        a = np.asarray(attentions)
    except (TypeError, ValueError):
        raise AttnvizInputError("error.attentions.not_numbers") from None
    if a.ndim != 4:
        raise AttnvizInputError("error.attentions.one_layer" if a.ndim == 3 else
                                "error.attentions.not_4d", ndim=a.ndim, shape=a.shape)
    a = as_matrix(a, "attentions", ndim=4)
    if a.shape[-1] != a.shape[-2]:
        raise AttnvizInputError("error.attentions.not_square", queries=a.shape[-2],
                                keys=a.shape[-1])
    if (a < 0).any():
        raise AttnvizInputError("error.attentions.negative",
                                where=_position(np.argwhere(a < 0)[0]))
    sums = a.sum(axis=-1, dtype=np.float64)                          # (L, H, n)
    off = np.abs(sums - 1) > ROW_SUM_TOLERANCE
    if off.any():
        first = tuple(np.argwhere(off)[0])
        raise AttnvizInputError("error.attentions.row_sum", where=_position(first),
                                total=float(sums[first]))
    return a


def _position(index) -> Message:
    """Where in (layer, head, query[, key]) an entry is, in the reader's words."""
    layer, head, query, *key = (int(i) for i in index)
    if key:
        return Message("reading.position.cell", layer=layer, head=head, query=query,
                       key=key[0])
    return Message("reading.position.row", layer=layer, head=head, query=query)


def _check_tokens(tokens, n: int) -> list[str]:
    if isinstance(tokens, str) or not isinstance(tokens, (Sequence, np.ndarray)):
        raise AttnvizInputError("error.tokens.not_a_list", type=type(tokens).__name__)
    if len(tokens) != n:
        raise AttnvizInputError("error.tokens.count", tokens=len(tokens), positions=n)
    if not all(isinstance(t, str) for t in tokens):
        raise AttnvizInputError("error.tokens.not_strings")
    return list(tokens)


# ---- what survives of the weight on a few keys ----------------------------------------------

def is_punctuation(token: str) -> bool:
    """True for a token made only of punctuation marks ("." "," "'" "?!"), not [CLS]/[SEP]."""
    return bool(token) and all(unicodedata.category(c).startswith("P") for c in token)


def shares_on_keys(weights, norms, keys) -> tuple[float, float]:
    """(share of the weight, share of ‖αf(x)‖) that one head's queries put on the key
    positions `keys`, each over the whole matrix: Σ_i Σ_{j∈keys} a_ij / Σ_ij a_ij, and the
    same for the norms. weights, norms (n_q, n_k). A key that takes much of the weight but
    little of the norm (often [SEP]) is attended to without moving much."""
    a = np.asarray(weights, dtype=np.float64)
    v = np.asarray(norms, dtype=np.float64)
    keys = list(keys)
    return float(a[:, keys].sum() / a.sum()), float(v[:, keys].sum() / v.sum())
