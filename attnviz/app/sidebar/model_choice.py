"""The pretrained model in the sidebar (MiniLM encoder / SmolLM2 decoder) and the layer of it
the step pages show, kept within the chosen model's layers."""

from __future__ import annotations

import streamlit as st

from attnviz.i18n import t
from attnviz.session.settings import Settings, layer_bounds
from attnviz.models.catalogue import registry
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


def language_model() -> registry.ModelEntry:
    """The language model a page that needs one uses (Generate): the sidebar's model where it
    has a language-model head, else the first that has one (MiniLM chosen: SmolLM2). A link
    carries it as ``model``; a link without one opens the first."""
    return Settings.from_mapping(st.session_state).language_model_entry


def _pick_language_model() -> None:
    st.session_state[keys.MODEL] = st.session_state[keys.LM_PICK]


def language_model_choice() -> registry.ModelEntry:
    """The sidebar's choice among the language models (widget key keys.LM_PICK): it shows the
    one :func:`language_model` gives and a pick becomes the sidebar's model on every page."""
    names = [e.name for e in registry.ENTRIES if e.lm_head]
    st.session_state[keys.LM_PICK] = language_model().name
    st.selectbox(t("sidebar.lm_choice.label"), names, key=keys.LM_PICK, format_func=model_name,
                 on_change=_pick_language_model, help=t("sidebar.lm_choice.help"))
    return language_model()


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


# ---- Compare models: two language models -------------------------------------------------------

def language_models() -> list[str]:
    """The registry's language models (built-in and the server's own GGUF files)."""
    return [e.name for e in registry.ENTRIES if e.lm_head]


def _compare_key(side: str) -> str:
    return keys.CMP_A if side == "a" else keys.CMP_B


def _compare_default(side: str) -> str:
    """Column a: the first language model (SmolLM2); b: the next one (Gemma 3), or the first
    again when the registry has only one."""
    names = language_models()
    return names[0] if side == "a" or len(names) == 1 else names[1]


def compared(side: str) -> registry.ModelEntry:
    """The model of Compare models' column `side` ("a" or "b"): the sidebar's choice, kept
    among the language models (a link's unknown name: the column's default)."""
    key = _compare_key(side)
    if st.session_state.get(key) not in language_models():
        st.session_state[key] = _compare_default(side)
    return registry.get(st.session_state[key])


def compare_choices() -> None:
    """The two models Compare models shows side by side (widget keys keys.CMP_A, CMP_B)."""
    for side in ("a", "b"):
        compared(side)
        st.selectbox(t(f"sidebar.compare.{side}.label"), language_models(),
                     key=_compare_key(side), persist_state="session", format_func=model_name,
                     help=t("sidebar.compare.help", command="attnviz app --model"))
