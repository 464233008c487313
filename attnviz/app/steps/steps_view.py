"""Pieces of the Step by step page: step navigation and the one-query vector view."""

from __future__ import annotations


import numpy as np
import pandas as pd
import streamlit as st

from attnviz.plot import figures
from attnviz.core.engine import Step
from attnviz.describe.labels import feature_labels, step_layout, unique
from attnviz.describe.scale import scale_words
from attnviz.session.view import View
from attnviz.app import keys
from attnviz.app.shared import widgets
from attnviz.app.shared.text import literal
from attnviz.i18n import t


def keep_step_in_range(names: list[str]) -> None:
    if st.session_state.get(keys.STEP) not in names:
        st.session_state[keys.STEP] = names[0]


def move_step(names: list[str], delta: int) -> None:
    i = names.index(st.session_state.get(keys.STEP, names[0])) + delta
    st.session_state[keys.STEP] = names[max(0, min(len(names) - 1, i))]


def query_picker(view: View, key: str = keys.QUERY) -> int:
    """Which query token to follow (index into tokens_q)."""
    n = len(view.tokens_q)
    current = st.session_state.get(key)
    if not isinstance(current, int) or not 0 <= current < n:
        st.session_state[key] = 0
    labels = unique(view.tokens_q)
    return st.selectbox(t("steps.query_token"), list(range(n)), persist_state="session", key=key,
                        format_func=lambda i: f"{i}: {labels[i]}")


def table_of(view: View, step: Step, head: int, query: int | None):
    """The step's numbers with row and column labels, as the heatmap shows them."""
    layout = step_layout(view.trace, step.name, head, view.tokens_q, view.tokens_k, query)
    return layout.array, layout.rows, layout.cols


def vector_view(view: View, head: int) -> None:
    """Tutorials 000/003: one query's q·k for each key, ÷√d_k, softmax, × v, and the sum."""
    tr = view.trace
    st.subheader(t("steps.vector.subheader"))
    st.caption(t("steps.vector.caption"))
    # off on arrival: every chart on the page is drawn before the first one shows, and these
    # two (with the step's own) cost a first visit about 0.3 s
    if not st.toggle(t("steps.vector.toggle"), persist_state="session", key=keys.VECTOR_VIEW):
        return
    i = query_picker(view, key=keys.VECTOR_QUERY)
    label = unique(view.tokens_q)[i]
    key_labels = unique(view.tokens_k)
    scale_name = scale_words(tr.scale, tr.d_k, value=True)
    rows = {"q · k": tr.scores[head, i], scale_name: tr.scaled_scores[head, i]}
    if tr.has_mask:
        rows[t("steps.vector.after_mask")] = tr.masked_scores[head, i]
    rows[t("steps.vector.softmax_weight")] = tr.weights[head, i]
    tables = widgets.table_toggle(t("steps.vector.tables"), key=keys.VECTOR)
    if tables:
        st.dataframe(pd.DataFrame(rows, index=key_labels).T, width="stretch")
    st.caption(t("steps.vector.sum", label=literal(label),
                 total=f"{tr.weights[head, i].sum():.6f}"))
    widgets.chart(figures.query_vector_figure(tr, i, head=head, tokens_q=view.tokens_q,
                                              tokens_k=view.tokens_k), key=keys.VECTOR_BARS)
    weighted = tr.weighted_values(head, i)                                     # (n_k, d_v)
    features = feature_labels(tr.d_v)
    st.markdown(t("steps.vector.weighted", sum=figures.sum_label()))
    widgets.chart(figures.weighted_sum_figure(tr, i, head=head, tokens_q=view.tokens_q,
                                              tokens_k=view.tokens_k), key=keys.VECTOR_WEIGHTED)
    if tables:
        table = np.vstack([weighted, weighted.sum(axis=0), tr.z[head, i]])
        widgets.table(table, key_labels + [t("steps.vector.sum_row"), t("steps.vector.z_row")],
                      features, key=keys.VECTOR_SUM)
