"""Which sidebar a page gets: the language switch, then the settings (the step pages), the real
model's panel (the pages that run the pretrained model on the sentence) or a line saying the
page has its own settings; the link written after them."""

from __future__ import annotations

import streamlit as st

from attnviz.i18n import t
from attnviz.core.modes import Mode
from attnviz.session.in_use import in_use
from attnviz.session.settings import TOY_MODE
from attnviz.app.shared import language, links, state
from attnviz.app.sidebar.input_source import input_controls, toy_controls
from attnviz.app.sidebar.model_choice import language_model_choice
from attnviz.app.sidebar.options import option_controls
from attnviz.app.sidebar.real_model import compare_controls, real_model_controls
from attnviz.app.sidebar.sizes import model_controls


def render(inputs: bool = True, real_model: bool = False, language_model: bool = False,
           compare: bool = False) -> None:
    """The sidebar; without `inputs` (a page with its own settings) only a line saying so, after
    the choice of language model where the page runs one (`language_model`: Generate); with
    `real_model` (a page that runs the pretrained model on the sentence) the sentence and the
    token limit, every other setting shown disabled with the reason; with `compare` (Compare
    models) its two models, the sentence and the token limit."""
    state.init()
    with st.sidebar:
        language.switch()
    if not inputs:
        if language_model:
            with st.sidebar:
                language_model_choice()
        st.sidebar.caption(t("sidebar.own_settings"))
        links.write()                       # the page's own picks (Generate's prompt…)
        with st.sidebar:
            links.show_link_notices()       # a link that opened this page: said here
        return
    if real_model or compare:
        with st.sidebar:
            compare_controls() if compare else real_model_controls()
            links.write()
            links.show_notices()
        return
    with st.sidebar:
        mode = input_controls()
        toy = toy_controls() if mode == TOY_MODE else None
        use = in_use(state.settings(), toy)     # the sizes and scaling the trace will use
        if mode != Mode.PRETRAINED:
            model_controls(mode, use)
        option_controls(mode, use)
        links.write()
        links.show_notices()
