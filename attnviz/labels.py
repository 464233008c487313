"""How the pages, figures and files label rows and columns: one place for every rule.

Queries and keys are labelled by their tokens (default ``q1, q2, …`` and ``k1, k2, …``, the
same in charts, tables and files); features by ``d0, d1, …`` (or ``q0 …`` for a projection's
columns); a repeated label made unique by its 1-based position.
"""

from __future__ import annotations

from .errors import AttnvizInputError


def trace_tokens(trace, tokens_q=None, tokens_k=None) -> tuple[list[str], list[str]]:
    """Raw (unescaped) query and key labels, checked against the trace's n_q and n_k.
    Self-attention with only `tokens_q` given labels the keys with the same tokens."""
    self_attention = trace.context is None and trace.n_k == trace.n_q
    if tokens_q is None:
        tokens_q = [f"q{i + 1}" for i in range(trace.n_q)]
    elif tokens_k is None and self_attention:
        tokens_k = tokens_q
    if tokens_k is None:
        tokens_k = [f"k{j + 1}" for j in range(trace.n_k)]
    for name, tokens, n in (("tokens_q", tokens_q, trace.n_q), ("tokens_k", tokens_k, trace.n_k)):
        if isinstance(tokens, str) or len(tokens) != n:
            raise AttnvizInputError(
                f"{name} must have one label per position ({n}), not {len(tokens)}"
                if not isinstance(tokens, str) else f"{name} must be a list of {n} labels")
    return [str(s) for s in tokens_q], [str(s) for s in tokens_k]


def feature_labels(n: int, prefix: str = "d") -> list[str]:
    """Feature columns: d0, d1, … (a projection's own columns: q0 …, k0 …, v0 …)."""
    return [f"{prefix}{j}" for j in range(n)]


def unique(labels) -> list[str]:
    """Labels made unique for table headers: a repeated token gets its 1-based position."""
    labels = [str(t) for t in labels]
    counts = {t: labels.count(t) for t in set(labels)}
    return [f"{t} ({i + 1})" if counts[t] > 1 else t for i, t in enumerate(labels)]


def concat_labels(num_heads: int, d_v: int) -> list[str]:
    """The columns of the concatenation (rows of W_O): h0·d0 … h0·d(d_v−1), h1·d0, …"""
    return [f"h{h}·d{j}" for h in range(num_heads) for j in range(d_v)]


def matrix_labels(name: str, shape: tuple[int, int], tokens, num_heads: int,
                  d_v: int) -> tuple[list[str], list[str]]:
    """Row and column labels of one shown slice of an editable matrix (see attnviz.edits):
    X by token and feature; W_Q/W_K/W_V by input feature and q/k/v feature; W_O by
    concatenation column and output feature; a bias is one row."""
    n_rows, n_cols = shape
    prefix = {"w_q": "q", "w_k": "k", "w_v": "v", "b_q": "q", "b_k": "k", "b_v": "v"}
    if name == "x":
        rows = list(tokens)
    elif name.startswith("b_"):
        rows = ["bias"]
    elif name == "w_o":
        rows = concat_labels(num_heads, d_v)
    else:
        rows = feature_labels(n_rows)
    return rows, feature_labels(n_cols, prefix.get(name, "d"))
