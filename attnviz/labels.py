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
