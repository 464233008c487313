"""Trace the answer: from attention to the next token on SmolLM2 — the logit lens, activation
patching and information flow, as three tabs (attnviz.app.trace.trace_view). MiniLM, which has no
language-model head, is said, with a button switching the sidebar's model."""

import streamlit as st

from attnviz.app import keys
from attnviz.app.reading import reading_view
from attnviz.app.trace import trace_view
from attnviz.app.shared import state
from attnviz.i18n import t


def render() -> None:
    """The page (its file in pages/ calls this; `attnviz app` registers it)."""
    state.init()
    st.title(t("nav.trace"))
    st.caption(t("trace.caption"))
    if trace_view.needs_language_model():
        return
    views = {"lens": trace_view.lens_tab, "patching": trace_view.patching_tab,
             "flow": trace_view.flow_tab}
    # only the open tab is drawn (each computes what it shows)
    tabs = st.tabs(trace_view.tab_labels(), key=keys.TR_VIEW, on_change="rerun")
    for tab, name in zip(tabs, trace_view.TABS):
        if tab.open:
            with tab:
                views[name]()
