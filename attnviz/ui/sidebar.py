"""The sidebar shared by every page: where the input comes from, the model's sizes, options.

Every widget's key is a Settings field, so `state.settings()` reads them all back.
"""

from __future__ import annotations

import streamlit as st

from ..inputs import MAX_TOKENS
from ..model import MAX_D_MODEL, MAX_HEADS, MODES
from ..presets import PRESET_NAMES, load_preset
from ..weights import INIT_SCHEMES
from . import links, state, uploads


def render() -> None:
    state.init()
    with st.sidebar:
        st.radio("Input", MODES, persist_state="session", key="mode", horizontal=True,
                 help="A sentence (random embeddings), a tutorial's worked example, your own "
                      "matrix X, or Q, K and V entered directly.")
        mode = st.session_state["mode"]
        if mode in ("Sentence", "Pretrained model"):
            st.text_input("Sentence", persist_state="session", key="sentence", max_chars=4000,
                          help="English or Chinese; each word, punctuation mark and Chinese "
                               "character is a token.")
        elif mode == "Preset":
            st.selectbox("Preset", PRESET_NAMES, persist_state="session", key="preset",
                         format_func=lambda n: load_preset(n).title)
            st.caption(load_preset(st.session_state["preset"]).description)
        elif mode == "Matrix X":
            st.text_area("X: one row per token", persist_state="session", key="x_text", height=120,
                         help="Numbers separated by commas, spaces or tabs; or a JSON list of "
                              "lists. Paste from a spreadsheet works.")
            uploads.matrix_uploader("x_text", "Upload X (.csv or .npy)")
        else:
            for name in ("q", "k", "v"):
                st.text_area(f"{name.upper()}: one row per "
                             f"{'query' if name == 'q' else 'key'}",
                             persist_state="session", key=f"{name}_text",
                             height=80)
        if mode == "Pretrained model":
            st.number_input("Layer", 0, 5, persist_state="session", key="layer", step=1,
                            help="all-MiniLM-L6-v2 has 6 layers of 12 heads; the step pages "
                                 "show this layer's real weights and inputs.")
        else:
            _model_controls(mode)
        _options(mode)
        links.show_notices()
    links.write()


def _model_controls(mode: str) -> None:
    projected = mode in ("Sentence", "Matrix X")
    with st.expander("Model", expanded=True):
        st.number_input("d_model", 1, MAX_D_MODEL, persist_state="session", key="d_model", step=1,
                        disabled=mode != "Sentence",
                        help="Width of each token's vector (Matrix X: the number of columns).")
        st.number_input("Heads", 1, MAX_HEADS,
                        persist_state="session", key="num_heads", step=1, disabled=not projected)
        st.number_input("d_k (0 = d_model / heads)", 0, MAX_D_MODEL,
                        persist_state="session", key="d_k", step=1,
                        disabled=not projected)
        st.selectbox("Initialisation", INIT_SCHEMES,
                     persist_state="session", key="init", disabled=not projected)
        st.number_input("Seed", 0, 2**31 - 1,
                        persist_state="session", key="seed", step=1, disabled=not projected,
                        help="Seeds the random weights and the token embeddings.")
        st.checkbox("Biases", persist_state="session", key="bias", disabled=not projected)


def _options(mode: str) -> None:
    with st.expander("Options", expanded=True):
        st.checkbox("Divide scores by √d_k", persist_state="session", key="scaled")
        st.checkbox("Causal mask (no looking ahead)", persist_state="session", key="causal")
        st.checkbox("Sinusoidal positional encoding", persist_state="session", key="positional",
                    disabled=mode not in ("Sentence", "Matrix X"))
        st.number_input("Token limit", 1, MAX_TOKENS,
                        persist_state="session", key="max_tokens", step=1,
                        disabled=mode not in ("Sentence", "Pretrained model"),
                        help="Longer sentences are cut here, with a notice.")
