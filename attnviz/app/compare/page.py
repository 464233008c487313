"""Compare models: one text, two decoders side by side (attnviz.app.compare.compare_view)."""

import streamlit as st

from attnviz.i18n import t
from attnviz.app.compare import compare_view
from attnviz.app.pretrained.pretrained_view import sentence_and_limit
from attnviz.app.shared import state
from attnviz.app.shared.text import token_notation
from attnviz.app.sidebar.model_choice import compared


def render() -> None:
    """The page (its file in pages/ calls this; `attnviz app` registers it)."""
    state.init()
    st.title(t("nav.compare"))
    st.caption(t("compare.caption"))
    text, limit = sentence_and_limit()
    if not text.strip():
        st.info(t("compare.empty"))
        st.stop()
    limit = min(limit, compare_view.MAX_TOKENS)
    if compared("a").name == compared("b").name:
        st.info(t("compare.same_model"), icon=":material/info:")
    found = {}
    for side, where in zip(compare_view.SIDES, st.columns(2, gap="large")):
        with where:
            found[side] = compare_view.column(side, text, limit)
    if all(f is not None and not f["continuation"] for f in found.values()):
        compare_view.continue_button(text, limit)
    token_notation()
    ready = {side: f for side, f in found.items() if f is not None}
    if ready:
        compare_view.downloads(ready)
