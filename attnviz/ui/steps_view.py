"""Pieces of the Step by step page: step navigation and the one-query vector view."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import streamlit as st

from .. import figures
from ..engine import Step
from ..model import View
from . import widgets


def keep_step_in_range(names: list[str]) -> None:
    if st.session_state.get("step") not in names:
        st.session_state["step"] = names[0]


def move_step(names: list[str], delta: int) -> None:
    i = names.index(st.session_state.get("step", names[0])) + delta
    st.session_state["step"] = names[max(0, min(len(names) - 1, i))]


def query_picker(view: View, key: str = "query") -> int:
    """Which query token to follow (index into tokens_q)."""
    n = len(view.tokens_q)
    current = st.session_state.get(key)
    if not isinstance(current, int) or not 0 <= current < n:
        st.session_state[key] = 0
    labels = widgets.unique(view.tokens_q)
    return st.selectbox("Query token", list(range(n)), persist_state="session", key=key,
                        format_func=lambda i: f"{i}: {labels[i]}")


def table_of(view: View, step: Step, head: int, query: int | None):
    """The step's numbers with row and column labels, as the heatmap shows them."""
    t = view.trace
    a = t.step_array(step.name, head)
    axes = step.axes[1:] if step.per_head else step.axes
    if a.ndim == 3:                                   # weighted values: one query's (n_k, d_v)
        a, axes = a[query or 0], axes[1:]
    names = {"query": view.tokens_q, "key": view.tokens_k}
    rows, cols = (names.get(ax) or widgets.feature_labels(n) for ax, n in zip(axes, a.shape))
    return a, rows, cols


def vector_view(view: View, head: int) -> None:
    """Tutorials 000/003: one query's q·k for each key, ÷√d_k, softmax, × v, and the sum."""
    t = view.trace
    st.subheader("Follow one token")
    st.caption("The same computation for one query, as the tutorials write it out: its dot "
               "product with every key, scaled, turned into weights by softmax; each value "
               "vector times its weight; their sum is this token's row of Z.")
    i = query_picker(view, key="vector_query")
    label = widgets.unique(view.tokens_q)[i]
    keys = widgets.unique(view.tokens_k)
    scale_name = "× scale" if not math.isclose(t.scale, 1 / math.sqrt(t.d_k)) \
        else f"÷ √d_k (= ÷ {math.sqrt(t.d_k):.4g})"
    rows = {"q · k": t.scores[head, i], scale_name: t.scaled_scores[head, i]}
    if t.has_mask:
        rows["after mask"] = t.masked_scores[head, i]
    rows["softmax weight"] = t.weights[head, i]
    frame = pd.DataFrame(rows, index=keys)
    st.dataframe(frame.T, width="stretch")
    st.caption(f"The weights of “{label}” sum to {t.weights[head, i].sum():.6f}.")
    widgets.chart(figures.query_vector_figure(t, i, head=head, tokens_q=view.tokens_q,
                                              tokens_k=view.tokens_k), key="vector_bars")
    weighted = t.weighted_values(head)[i]                                      # (n_k, d_v)
    features = widgets.feature_labels(t.d_v)
    st.markdown("**Each value vector × its weight** (rows: keys), and their sum:")
    widgets.chart(figures.heatmap(weighted, row_labels=view.tokens_k, col_labels=features,
                                  title="weight × value, for each key", row_title="key",
                                  col_title="feature"), key="vector_weighted")
    table = np.vstack([weighted, weighted.sum(axis=0), t.z[head, i]])
    widgets.table(table, keys + ["Σ (sum)", "z row of Z"], features, key="vector_sum")
