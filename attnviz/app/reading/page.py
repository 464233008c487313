"""Read the model: what comes after "here are the weights" for the sidebar's pretrained model
(all-MiniLM-L6-v2 or SmolLM2-135M-Instruct) on the sidebar's sentence — attention rollout
through the layers, value-weighted attention, statistics of every head, and switching heads off
to see what the sentence embedding (or the next token) loses; for a language model, the logit
lens."""

import streamlit as st

from attnviz.app import keys
from attnviz.app.reading import reading_view
from attnviz.app.shared import state
from attnviz.i18n import t
from attnviz.app.shared.model_words import entry_text
from attnviz.models.catalogue import registry


def render() -> None:
    """The page (its file in pages/ calls this; `attnviz app` registers it)."""
    state.init()
    model = reading_view.model_name()
    st.title(t("nav.reading"))
    st.caption(entry_text("reading.caption", registry.get(model)))

    run = reading_view.load()
    reading_view.token_list(run)

    views = {"rollout": reading_view.rollout_tab, "value": reading_view.value_weighted_tab,
             "stats": reading_view.head_stats_tab, "ablation": reading_view.ablation_tab,
             "lens": reading_view.lens_tab}
    # only the open tab is drawn: every chart on a page is drawn before the first one shows
    tabs = st.tabs(reading_view.tab_labels(), key=keys.RD_VIEW, on_change="rerun")
    for tab, draw in zip(tabs, [views[name] for name in reading_view.tab_names()]):
        if tab.open:
            with tab:
                reading_view.draw_tab(draw, run)
