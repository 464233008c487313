"""Inputs & weights: see and edit X, W_Q, W_K, W_V per head, W_O and the biases."""

import streamlit as st

from attnviz.app import keys
from attnviz.app.inputs import editor
from attnviz.app.shared import decoder_view, state, toy_view, widgets
from attnviz.i18n import t


def render() -> None:
    """The page (its file in pages/ calls this; `attnviz app` registers it)."""
    state.init()
    st.title(t("inputs.title"))
    st.caption(t("inputs.caption"))
    # one container for what comes and goes above the editor (notices, an error, the baseline):
    # the editor keeps its place in the page, and its grid stays mounted while cells are typed
    with st.container():
        # an edited cell that overflows a step: the error names it, the editor stays to fix it
        view = widgets.view_or_stop(editor=True)
        if view.ok:
            toy_view.prediction(view)      # Toy model input: its answer, trained and with the edits

    names = editor.editable_names(view)
    if not names:
        st.info(t("inputs.no_weights"))
        st.stop()

    with st.container():
        editor.actions(view)
    name = st.segmented_control(t("inputs.matrix"), names, persist_state="session", key=keys.MATRIX,
                                required=True, format_func=editor.label_of)
    name = name if name in names else names[0]
    head = widgets.head_picker(view, key=keys.EDIT_HEAD) if editor.per_head(name) else None
    head = decoder_view.matrix_head(view, name, head)   # W_K, W_V: the K/V head it reads
    editor.editing(view, name, head)            # the editor, paste box and heatmap
