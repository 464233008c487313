"""The model's sizes and weights in the sidebar: d_model, the heads (and the fixes offered while
d_model does not divide by them), d_k, the K/V heads, the weights' initialisation, seed and
biases. Each shows the value the computation uses; what the input fixes is shown disabled."""

from __future__ import annotations

import numpy as np
import streamlit as st

from attnviz.i18n import t
from attnviz.core.modes import Mode
from attnviz.core.weights import INIT_SCHEMES
from attnviz.session.in_use import InUse
from attnviz.session.settings import BOUNDS, TOY_MODE, kv_head_counts
from attnviz.app import keys
from attnviz.app.sidebar.fixed import show_fixed_number


def model_controls(mode: str, use: InUse) -> None:
    """Sizes and weights. Each control shows the value the computation uses; where the mode
    fixes it (a preset's own sizes, X's columns), it is shown disabled with the reason. While
    d_k is d_model / heads, the steppers and the heads offered keep that a whole number."""
    own_weights = mode in (Mode.SENTENCE, Mode.MATRIX_X)
    derived = st.session_state.get(keys.D_K) == 0          # d_k = d_model / heads
    heads = st.session_state.get(keys.NUM_HEADS)
    step = heads if derived and not use.heads_fixed and is_whole(heads) and heads > 1 else 1
    with st.expander(t("sidebar.model.label"), expanded=True):
        if use.d_model_fixed:
            show_fixed_number(keys.D_MODEL, use.d_model, use.d_model_fixed)
        else:
            st.number_input("d_model", *BOUNDS["d_model"], persist_state="session",
                            key=keys.D_MODEL, step=step,
                            help=t("sidebar.d_model.help_step", step=step) if step > 1 else
                            t("sidebar.d_model.help"))
        if use.heads_fixed:
            show_fixed_number(keys.NUM_HEADS, use.num_heads, use.heads_fixed)
            show_fixed_number(keys.D_K, use.d_k, use.heads_fixed)
        else:
            if derived:
                _size_fixes(use)
            _heads_control(use.d_model if derived else None)
            _d_k_controls(use)
        kv_heads_control(use)
        if own_weights:
            st.selectbox(t("sidebar.init.label"), INIT_SCHEMES, persist_state="session",
                         key=keys.INIT, format_func=lambda s: t(f"sidebar.init.option.{s}"))
            st.number_input(t("sidebar.seed.label"), *BOUNDS["seed"], persist_state="session",
                            key=keys.SEED, step=1, help=t("sidebar.seed.help"))
            st.checkbox(t("sidebar.bias.label"), persist_state="session", key=keys.BIAS)
        else:
            st.caption(t({Mode.PRESET: "sidebar.weights.preset_own",
                          TOY_MODE: "sidebar.weights.toy_own"}.get(mode,
                                                                   "sidebar.weights.none")))


def is_whole(n) -> bool:
    return isinstance(n, (int, np.integer)) and not isinstance(n, bool)


def head_counts(d_model: int | None) -> list[int]:
    """The numbers of heads the Heads control offers: those that divide `d_model` (so d_k =
    d_model / heads is whole), up to the largest allowed; every count when d_model is None
    (d_k chosen by hand, or no readable X)."""
    low, high = BOUNDS["num_heads"]
    return [h for h in range(low, high + 1) if d_model is None or d_model % h == 0]


def nearest_d_models(d_model: int, heads: int) -> list[int]:
    """The multiples of `heads` just below and just above `d_model` that are allowed (one or
    two of them, nearest first)."""
    low, high = BOUNDS["d_model"]
    below, above = d_model - d_model % heads, d_model - d_model % heads + heads
    found = [d for d in (below, above) if low <= d <= high]
    return sorted(found, key=lambda d: (abs(d - d_model), d))


def nearest_head_count(d_model: int, heads: int) -> int:
    """The count of heads that divides `d_model` nearest to `heads` (the larger on a tie)."""
    return min(head_counts(d_model), key=lambda h: (abs(h - heads), -h))


def _heads_control(d_model: int | None) -> None:
    """Heads: a choice among the counts that divide d_model (every count while d_k is set by
    hand). A count that does not divide it (typed d_model, a link, a new X) stays selected until
    the user picks another or a fix above (`_size_fixes`, which says so): never changed
    silently. The options are plain numbers: a label that changed with d_model would stay
    stale in the browser, which keeps the label of the value it shows."""
    options = head_counts(d_model)
    current = st.session_state.get(keys.NUM_HEADS)
    if is_whole(current) and current not in options:
        options = sorted([*options, int(current)])
    st.selectbox(t("sidebar.heads.label"), options, persist_state="session", key=keys.NUM_HEADS,
                 help=t("sidebar.heads.help_dividing") if d_model is not None else
                 t("sidebar.heads.help_any"))


def _size_fixes(use: InUse) -> None:
    """While d_model does not divide by the heads: say so, with one-click fixes (the nearest
    d_model that does, when d_model is the user's; the nearest count of heads that does)."""
    d_model, heads = use.d_model, st.session_state.get(keys.NUM_HEADS)
    if d_model is None or not is_whole(heads) or heads < 1 or d_model % heads == 0:
        return
    st.warning(t("sidebar.size_fix.warning", d_model=d_model, heads=heads))
    fixes = [] if use.d_model_fixed else [(keys.D_MODEL, d, f"d_model {d}")
                                          for d in nearest_d_models(d_model, heads)]
    h = nearest_head_count(d_model, heads)
    fixes.append((keys.NUM_HEADS, h, t("sidebar.size_fix.heads", count=h)))
    for key, value, label in fixes:
        st.button(label, key=keys.FIX(key, value), on_click=_set, args=(key, value),
                  width="stretch")


def _set(key: str, value: int) -> None:
    st.session_state[key] = value


def _d_k_controls(use: InUse) -> None:
    """d_k follows d_model / heads (shown, not editable) unless the user unticks that."""
    st.session_state[keys.D_K_AUTO] = st.session_state.get(keys.D_K) == 0
    st.checkbox(t("sidebar.d_k_auto.label"), key=keys.D_K_AUTO, on_change=_toggle_d_k,
                args=(use.d_k,), help=t("sidebar.d_k_auto.help"))
    if st.session_state[keys.D_K_AUTO]:
        show_fixed_number(keys.D_K, use.d_k, t("sidebar.d_k.derived") if use.d_k else
                      t("sidebar.d_k.not_whole"))
    else:
        st.number_input("d_k", 1, BOUNDS["d_k"][1], persist_state="session", key=keys.D_K, step=1)


def _toggle_d_k(derived: int | None) -> None:
    st.session_state[keys.D_K] = 0 if st.session_state[keys.D_K_AUTO] else (derived or 1)


def kv_heads_control(use: InUse) -> None:
    """K-V heads (grouped-query attention): a divisor of Heads; 0 = as many as heads."""
    if use.kv_fixed:
        show_fixed_number(keys.KV_HEADS, use.kv_heads, use.kv_fixed)
        return
    heads = st.session_state.get(keys.NUM_HEADS)
    options = [0, *[d for d in kv_head_counts(heads) if d != heads]] if is_whole(heads) else [0]
    current = st.session_state.get(keys.KV_HEADS)
    if is_whole(current) and current not in options:
        options = sorted([*options, int(current)])       # not dividing: the page says so
    st.selectbox(t("sidebar.kv_heads.label"), options, persist_state="session", key=keys.KV_HEADS,
                 format_func=_kv_name, help=t("sidebar.kv_heads.help"))


def _kv_name(kv: int) -> str:
    return t("sidebar.kv_heads.option.all") if kv == 0 else str(kv)
