"""Experiments: the tutorials' "why" questions, each answered by a live computation."""

import streamlit as st

from attnviz import i18n
from attnviz.i18n import t
from attnviz.app import keys
from attnviz.app.experiments import experiments_view as ex
from attnviz.app.shared import widgets


def render() -> None:
    """The page (its file in pages/ calls this; `attnviz app` registers it)."""
    view = widgets.page_view(t("experiments.title"), t("experiments.caption"))

    draw = {
        "scaling": lambda: ex.scaling_tab(),
        "tied": lambda: ex.tied_tab(view),
        "raw": lambda: ex.raw_tab(view),
        "order": lambda: ex.order_tab(view),
        "masks": lambda: ex.masks_tab(view),
        "cross": lambda: ex.cross_tab(view),
        "bug": lambda: ex.bug_tab(view),
        "rope": lambda: ex.rope_tab(),
        "sink": lambda: ex.sink_tab(),
        "window": lambda: ex.window_tab(),
        "qk": lambda: ex.qk_norm_tab(),
        "kv": lambda: ex.kv_cache_tab(),
    }
    labels = ex.tab_labels()
    _keep_the_open_tab(labels)
    # only the open tab is computed and drawn (tabs keep their state under keys.EXPERIMENT)
    tabs = st.tabs([labels[n] for n in ex.TABS], key=keys.EXPERIMENT, on_change="rerun")
    for tab, name in zip(tabs, ex.TABS):
        if tab.open:
            with tab:
                draw[name]()


def _keep_the_open_tab(labels: dict[str, str]) -> None:
    """The tabs' state is the open tab's label: after a language switch (or a link or a test
    naming it in another language) give it again in this language, so the same tab stays
    open."""
    open_label = st.session_state.get(keys.EXPERIMENT)
    if not open_label or open_label in labels.values():
        return
    for lang in i18n.languages():
        for name in ex.TABS:
            if i18n.render(f"experiments.tab.{name}", lang) == open_label:
                st.session_state[keys.EXPERIMENT] = labels[name]
                return
