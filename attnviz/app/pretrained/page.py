"""Pretrained model: a real model's attention on the sidebar's sentence — the encoder
all-MiniLM-L6-v2 or the decoder SmolLM2-135M-Instruct (the sidebar's model choice). Every layer
and head at a glance (model view), one head opened as a heatmap or step by step, and one layer's
heads as lines between tokens (head view, after BertViz)."""

import streamlit as st

from attnviz.i18n import t
from attnviz.plot import model_figures
from attnviz.session.settings import Settings
from attnviz.session import model_views
from attnviz.app.shared.text import literal
from attnviz.app import keys
from attnviz.app.pretrained import decoder_page, pretrained_view
from attnviz.app.shared import scales, state, widgets
from attnviz.app.shared.model_words import entry_text

# the page's three views (tabs, only the open one drawn), by message id: one heatmap first,
# it shows soonest
TABS = ["pretrained.tab.one_head", "pretrained.tab.model_view", "pretrained.tab.head_view"]


def render() -> None:
    """The page (its file in pages/ calls this; `attnviz app` registers it)."""
    state.init()
    st.title(t("pretrained.title"))
    entry = Settings.from_mapping(st.session_state).model_entry
    if entry.causal:                     # a causal model's tokens, mask and K/V heads
        decoder_page.render(entry, TABS)
        return
    st.caption(entry_text("pretrained.caption", entry))

    run = pretrained_view.load()
    if run.notice:
        st.info(literal(run.notice))

    st.subheader(t("pretrained.tokens", count=len(run.tokens)))
    pretrained_view.token_list(run)
    hide = pretrained_view.hide_special_checkbox()
    view = pretrained_view.shown(hide)
    if hide:
        st.caption(t("pretrained.hidden_special"))
    layers, heads = view.attentions.shape[:2]


    def model_view_tab() -> None:
        scale = scales.weight_scale_picker(len(view.tokens))
        st.caption(t("pretrained.model_view.caption",
                     scale=t(f"figure.weight_scale.{scale}"))
                   + (" " + t("pretrained.model_view.pooled",
                              side=model_figures.MODEL_VIEW_MAX_SIDE)
                      if len(view.tokens) > model_figures.MODEL_VIEW_MAX_SIDE else ""))
        fig = pretrained_view.shared_figure(
            "model_view", lambda: model_figures.model_view(view.attentions, start=view.start,
                                                           weight_scale=scale), hide, scale)
        widgets.chart(fig, key=keys.PT_MODEL_VIEW)


    def one_head_tab() -> None:
        layer = pretrained_view.pick_number("layer", layers, keys.PT_LAYER,
                                            default=st.session_state.get(keys.LAYER, 0))
        head = pretrained_view.pick_number("head", heads, keys.PT_HEAD,
                                           default=st.session_state.get(keys.HEAD, 0))
        scale = scales.weight_scale_picker(len(view.tokens))
        fig = pretrained_view.one_head_heatmap(view, layer, head, scale)
        widgets.chart(fig, key=keys.PT_HEAD_HEATMAP)
        pretrained_view.step_through_button(layer, head)
        if model_views.offers(entry, model_views.COMPARE):
            pretrained_view.second_sentence(layer, head, view, hide, scale, above=fig)


    def head_view_tab() -> None:
        st.caption(t("pretrained.head_view.caption",
                     min_weight=model_figures.HEAD_VIEW_MIN_WEIGHT))
        pretrained_view.keep_in_range(keys.PT_HV_LAYER, layers)
        controls = st.columns(2)
        with controls[0]:
            hv_layer = st.selectbox(t("pretrained.pick.layer"), list(range(layers)),
                                    persist_state="session", key=keys.PT_HV_LAYER,
                                    format_func=lambda i: t("pretrained.pick.layer.option",
                                                            number=i))
        with controls[1]:
            token = pretrained_view.pick_token(view, keys.PT_HV_TOKEN)
        shown_heads = pretrained_view.pick_heads(heads, keys.PT_HV_HEADS)
        if not shown_heads:
            st.info(t("pretrained.head_view.no_heads"))
        else:
            fig = pretrained_view.shared_figure(
                "head_view", lambda: model_figures.head_view(view.attentions[hv_layer], view.tokens,
                                                             heads=shown_heads, highlight=token),
                hide, hv_layer, tuple(shown_heads), token)
            pretrained_view.head_view_chart(fig, view, keys.PT_HV_TOKEN,
                                            key=keys.PT_HEAD_VIEW)


    pretrained_view.keep_tab(keys.PT_VIEW, TABS)
    draws = [one_head_tab, model_view_tab, head_view_tab]
    # only the open tab is drawn: every chart on a page is drawn before the first one shows
    for tab, draw in zip(st.tabs([t(i) for i in TABS], key=keys.PT_VIEW, on_change="rerun"), draws):
        if tab.open:
            with tab:
                draw()
