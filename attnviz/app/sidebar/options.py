"""The sidebar's options: scaling, rounding (a preset that has it), the causal mask, sinusoidal
positions, rotary positions and their base, and the token limit."""

from __future__ import annotations

import streamlit as st

from attnviz.i18n import t
from attnviz.core.modes import Mode
from attnviz.session.in_use import InUse
from attnviz.session.settings import BOUNDS, ROPE_BASES
from attnviz.tutorials.presets import load_preset
from attnviz.app import keys
from attnviz.app.sidebar.fixed import show_fixed, show_fixed_number
from attnviz.app.sidebar.sizes import kv_heads_control


def option_controls(mode: str, use: InUse) -> None:
    with st.expander(t("sidebar.options.label"), expanded=True):
        if use.scale_fixed:
            show_fixed(st.checkbox, keys.SCALED, use.scaled, use.scale_fixed)
        else:
            st.checkbox(t("sidebar.scaled.label"), persist_state="session", key=keys.SCALED)
        if mode == Mode.PRESET and "rounded_weights" in load_preset(
                st.session_state[keys.PRESET]).side_notes:
            st.checkbox(t("sidebar.rounded.label"), persist_state="session",
                        key=keys.ROUNDED, help=t("sidebar.rounded.help"))
        if use.causal_fixed:
            show_fixed(st.checkbox, keys.CAUSAL, use.causal, use.causal_fixed)
        else:
            st.checkbox(t("sidebar.causal.label"), persist_state="session", key=keys.CAUSAL)
        if mode in (Mode.SENTENCE, Mode.MATRIX_X):
            st.checkbox(t("sidebar.positional.label"), persist_state="session",
                        key=keys.POSITIONAL)
        else:
            show_fixed(st.checkbox, keys.POSITIONAL, False, t("sidebar.positional.fixed"))
        if mode == Mode.PRETRAINED:                     # no Model expander in this mode
            kv_heads_control(use)
        _rope_controls(use)
        typed = mode in (Mode.SENTENCE, Mode.PRETRAINED)
        st.number_input(t("sidebar.max_tokens.label"), *BOUNDS["max_tokens"],
                        persist_state="session", key=keys.MAX_TOKENS, step=1, disabled=not typed,
                        help=t("sidebar.max_tokens.help") if typed else
                        t("sidebar.max_tokens.help_unused"))


def _rope_controls(use: InUse) -> None:
    """Rotary positions on Q and K, and their base."""
    if use.rope_fixed:
        show_fixed(st.toggle, keys.ROPE, bool(use.rope), use.rope_fixed)
        if use.rope:
            show_fixed_number(keys.ROPE_BASE, use.rope_base, use.rope_fixed)
        return
    st.toggle(t("sidebar.rope.label"), persist_state="session", key=keys.ROPE,
              help=t("sidebar.rope.help"))
    if st.session_state.get(keys.ROPE_BASE) not in ROPE_BASES:
        st.session_state[keys.ROPE_BASE] = ROPE_BASES[0]
    st.selectbox(t("sidebar.rope_base.label"), ROPE_BASES, persist_state="session",
                 key=keys.ROPE_BASE, disabled=not st.session_state.get(keys.ROPE),
                 format_func=lambda b: f"{b:,}", help=t("sidebar.rope_base.help"))
