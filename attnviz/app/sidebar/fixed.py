"""A setting the input or the model fixes, shown disabled beside the user's own (kept under its
key), with the reason as its help."""

from __future__ import annotations

import streamlit as st

from attnviz.i18n import t
from attnviz.app import keys

# the label of each setting shown disabled (d_model and d_k are written as they are)
SHOWN_LABELS = {keys.MODE: "sidebar.mode.label", keys.NUM_HEADS: "sidebar.heads.label",
                keys.INIT: "sidebar.init.label", keys.SEED: "sidebar.seed.label",
                keys.BIAS: "sidebar.bias.label", keys.SCALED: "sidebar.scaled.label",
                keys.CAUSAL: "sidebar.causal.label", keys.POSITIONAL: "sidebar.positional.label",
                keys.KV_HEADS: "sidebar.kv_heads.label", keys.ROPE: "sidebar.rope.label",
                keys.ROPE_BASE: "sidebar.rope_base.label"}


def show_fixed(widget, setting: str, value, why, **options) -> None:
    """A disabled `widget` (st.number_input, st.checkbox) showing the value in use of
    `setting`, beside the user's own setting (kept under its key); its help says `why` (a text
    or a Message) it is fixed."""
    key = keys.SHOWN_SETTING(setting)
    st.session_state[key] = value
    label = t(SHOWN_LABELS[setting]) if setting in SHOWN_LABELS else setting
    widget(label, key=key, disabled=True, help=str(why), **options)


def show_fixed_number(setting: str, value: int | None, why) -> None:
    show_fixed(st.number_input, setting, value, why, step=1)
