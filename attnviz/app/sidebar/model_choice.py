"""The pretrained model in the sidebar (MiniLM encoder / SmolLM2 decoder) and the layer of it
the step pages show, kept within the chosen model's layers."""

from __future__ import annotations

import streamlit as st

from attnviz.i18n import t
from attnviz.session.settings import layer_bounds
from attnviz.models import registry
from attnviz.app import keys
from attnviz.app.shared.model_words import entry_text
from attnviz.app.sidebar.sizes import is_whole


def model_name(model: str) -> str:
    return entry_text("sidebar.model_choice.option", registry.get(model))


def _clamp_layer() -> None:
    """The layer within the chosen model's (a model with fewer layers chosen, or a link)."""
    found = layer_bounds(st.session_state.get(keys.MODEL, registry.DEFAULT))
    layer = st.session_state.get(keys.LAYER)
    if found is None:                    # the model's layers are unknown: not installed
        return
    low, high = found
    if not is_whole(layer) or not low <= layer <= high:
        st.session_state[keys.LAYER] = min(max(layer, low), high) if is_whole(layer) else low


def model_choice() -> str:
    """The pretrained model (MiniLM encoder / SmolLM2 decoder): widget key `model`."""
    if st.session_state.get(keys.MODEL) not in registry.NAMES:
        st.session_state[keys.MODEL] = registry.DEFAULT
    _clamp_layer()
    return st.selectbox(t("sidebar.model_choice.label"), registry.NAMES, persist_state="session",
                        key=keys.MODEL, format_func=model_name, on_change=_clamp_layer,
                        help=t("sidebar.model_choice.help"))


def _decoders() -> tuple[str, ...]:
    return tuple(e.name for e in registry.ENTRIES if e.causal)


def _follow_decoder() -> None:
    """The decoder chosen is the sidebar's pretrained model too, where that is a decoder."""
    if registry.get(st.session_state.get(keys.MODEL, registry.DEFAULT)).causal:
        st.session_state[keys.MODEL] = st.session_state[keys.DECODER]
        _clamp_layer()


def decoder_choice() -> registry.ModelEntry:
    """The decoder a page's model experiments run (widget key `decoder`, in the sidebar): the
    sidebar's pretrained model when that is a decoder (the two stay one choice), else the
    first language model until another is chosen."""
    names = _decoders()
    model = st.session_state.get(keys.MODEL)
    if model in names:
        st.session_state[keys.DECODER] = model
    elif st.session_state.get(keys.DECODER) not in names:
        st.session_state[keys.DECODER] = registry.language_model().name
    return registry.get(st.selectbox(t("sidebar.decoder_choice.label"), names,
                                     persist_state="session", key=keys.DECODER,
                                     format_func=model_name, on_change=_follow_decoder,
                                     help=t("sidebar.decoder_choice.help")))


def layer_input() -> None:
    """The layer the step pages show, within the chosen model's layers (none when they are
    unknown: the model is not installed, which the page says)."""
    _clamp_layer()
    entry = registry.get(st.session_state[keys.MODEL])
    found = layer_bounds(entry.name)
    if found is None:
        return
    low, high = found
    st.number_input(t("sidebar.layer.label"), low, high, persist_state="session", key=keys.LAYER,
                    step=1, help=t("sidebar.layer.help_model", layers=high + 1,
                                   model=entry.shown))
