"""The colour scale of the weights heatmaps: one choice, shared by every page that draws them."""

from __future__ import annotations

import streamlit as st

from attnviz.i18n import t
from attnviz.plot.colour_scales import WEIGHT_SCALES, default_weight_scale
from attnviz.app import keys


def weight_scale_picker(n_keys: int) -> str:
    """A "Colour scale" control to put beside a weights heatmap: "fixed", "head" or "row", for
    the figure builders' `weight_scale`. Until the user picks one it follows the input's length
    (`default_weight_scale`: fixed 0–1 for short inputs, each row's max for long ones, whose
    weights ≈ 1/n would all look white); once they pick, their choice holds on every page."""
    chosen = st.session_state.get(keys.WEIGHT_SCALE_CHOSEN)
    if not chosen or st.session_state.get(keys.WEIGHT_SCALE) not in WEIGHT_SCALES:
        st.session_state[keys.WEIGHT_SCALE] = default_weight_scale(n_keys)
    choice = st.segmented_control(
        t("scales.label"), list(WEIGHT_SCALES), key=keys.WEIGHT_SCALE, persist_state="session",
        required=True,
        format_func=lambda scale: t(f"figure.weight_scale.{scale}"), on_change=_chosen,
        help=t("scales.help"))
    return choice if choice in WEIGHT_SCALES else default_weight_scale(n_keys)


def current(n_keys: int) -> str:
    """The scale a weights heatmap drawn below another one's picker uses (no second control:
    one per page run): the user's choice once made, else the default for `n_keys`."""
    choice = st.session_state.get(keys.WEIGHT_SCALE)
    if st.session_state.get(keys.WEIGHT_SCALE_CHOSEN) and choice in WEIGHT_SCALES:
        return choice
    return default_weight_scale(n_keys)


def _chosen() -> None:
    st.session_state[keys.WEIGHT_SCALE_CHOSEN] = True
