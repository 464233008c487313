"""The sidebar of a page that runs the pretrained model on the sentence (Pretrained model, Read
the model, Trace the answer): the model's choice, the sentence and the token limit, its own
sizes and settings shown fixed with the reason."""

from __future__ import annotations

import streamlit as st

from attnviz.i18n import t
from attnviz.core.modes import Mode
from attnviz.session.settings import BOUNDS, MODES, Settings
from attnviz.models.catalogue import registry
from attnviz.app import keys
from attnviz.app.shared import text
from attnviz.app.shared.model_words import rope_words
from attnviz.app.sidebar.fixed import show_fixed, show_fixed_number
from attnviz.app.sidebar.input_source import mode_name
from attnviz.app.sidebar.model_choice import compare_choices, model_choice


def real_model_controls() -> None:
    """The sidebar of a page that runs the pretrained model on the sentence (Pretrained model,
    Read the model): the sentence and the token limit are used; the input choice, the sizes,
    the weights' initialisation and seed and the options are the model's own, shown disabled
    with the reason. The user's own settings stay under their keys for the other pages."""
    model_choice()
    entry = Settings.from_mapping(st.session_state).model_entry
    if entry.causal:                      # the caption, the helps and the sizes: its own
        _decoder_controls(entry)
    else:
        _encoder_controls(entry)


def _encoder_controls(entry: registry.ModelEntry) -> None:
    """real_model_controls for an encoder (all-MiniLM-L6-v2): its sizes, its biases, its
    mask (none) and its learned positions, shown disabled with the reason."""
    c = _sizes(entry)                    # the config's own sizes: the model loads on the page
    d_model, heads, d_k = (c.d_model, c.num_heads, c.d_k) if c else (None,) * 3
    name = entry.shown
    _fixed_model_panel(
        name, t("sidebar.real.sentence.help"), t("sidebar.real.caption", model=name),
        [(keys.D_MODEL, d_model), (keys.NUM_HEADS, heads), (keys.D_K, d_k)],
        {keys.BIAS: (True, t("sidebar.real.bias_fixed", model=name)),
         keys.SCALED: (True, t("sidebar.real.scaled_fixed", model=name)),
         keys.CAUSAL: (False, t("sidebar.real.causal_fixed", model=name)),
         keys.POSITIONAL: (False, t("sidebar.real.positional_fixed", model=name))},
        t("sidebar.real.max_tokens.help"))


def _sizes(entry: registry.ModelEntry) -> registry.ModelSizes | None:
    """The model's sizes from its config (the model loads on the page, below its title); None
    when they cannot be read (not installed: the page itself says so)."""
    from attnviz.core.errors import AttnvizInputError

    try:
        return entry.sizes()
    except AttnvizInputError:
        return None


def _fixed_model_panel(name: str, sentence_help: str, caption: str,
                       sizes: list[tuple[str, int | None]], switches: dict, max_tokens_help: str,
                       rope_base: int | None = None) -> None:
    """The sidebar of a pretrained model `name`: the sentence and the token limit are used;
    the input choice, the `sizes` ((setting, value) shown as numbers), the weights and the
    `switches` ({setting: (value, why)}, bias first, options after) are the model's own, shown
    disabled with the reason; with `switches` holding keys.ROPE, `rope_base` after it."""
    show_fixed(st.radio, keys.MODE, Mode.SENTENCE.value, t("sidebar.real.mode_fixed", model=name),
           options=MODES, horizontal=True, format_func=mode_name)
    st.text_input(t("sidebar.sentence.label"), persist_state="session", key=keys.SENTENCE,
                  max_chars=text.MAX_TEXT_CHARS, help=sentence_help)
    text.at_limit(st.session_state[keys.SENTENCE], text.MAX_TEXT_CHARS)
    sizes_why = t("sidebar.real.sizes_fixed", model=name)
    trained = t("sidebar.real.trained_fixed", model=name)
    with st.expander(t("sidebar.model.label"), expanded=True):
        st.caption(caption)
        for setting, value in sizes:
            show_fixed_number(setting, value, sizes_why)
        show_fixed(st.selectbox, keys.INIT, "trained", trained, options=["trained"],
               format_func=lambda _: t("sidebar.init.trained"))
        show_fixed(st.number_input, keys.SEED, None, trained, step=1,
               placeholder=t("sidebar.seed.none_trained"))
        show_fixed(st.checkbox, keys.BIAS, *switches[keys.BIAS])
    with st.expander(t("sidebar.options.label"), expanded=True):
        for setting in (keys.SCALED, keys.CAUSAL, keys.POSITIONAL, keys.ROPE):
            if setting in switches:
                show_fixed(st.toggle if setting == keys.ROPE else st.checkbox, setting,
                       *switches[setting])
        if keys.ROPE in switches:
            show_fixed_number(keys.ROPE_BASE, rope_base, switches[keys.ROPE][1])
        st.number_input(t("sidebar.max_tokens.label"), *BOUNDS["max_tokens"],
                        persist_state="session", key=keys.MAX_TOKENS, step=1,
                        help=max_tokens_help)


def _decoder_controls(entry: registry.ModelEntry) -> None:
    """real_model_controls for a causal model (SmolLM2, Gemma 3, a server's own GGUF): its
    sizes, its K/V heads and head size as its config states them, its biases, its scale, its
    rotary base (one per kind of layer where it has two) and its causal mask, shown disabled
    with the reason; the sentence and the token limit are used."""
    c = _sizes(entry)                    # the config's own sizes: the model loads on the page
    d_model, heads, kv, d_k = (c.d_model, c.num_heads, c.num_kv_heads, c.d_k) if c else (None,) * 4
    base = int(c.rope_base) if c and c.rope_base is not None else None
    name = entry.shown
    _fixed_model_panel(
        name, t("sidebar.decoder.sentence.help", model=name),
        t("sidebar.decoder.caption", model=name),
        [(keys.D_MODEL, d_model), (keys.NUM_HEADS, heads), (keys.KV_HEADS, kv), (keys.D_K, d_k)],
        {keys.BIAS: (bool(c and c.qkv_bias), t("sidebar.decoder.bias_qkv" if c and c.qkv_bias
                                               else "sidebar.decoder.bias_fixed", model=name)),
         keys.SCALED: (True, _scale_why(c, name)),
         keys.CAUSAL: (True, t("sidebar.decoder.causal_fixed", model=name)),
         keys.POSITIONAL: (False, t("sidebar.decoder.positional_fixed", model=name)),
         keys.ROPE: (True, _rope_why(c, name))},
        t("sidebar.decoder.max_tokens.help", model=name), rope_base=base)


def _scale_why(c: registry.ModelSizes | None, name: str) -> str:
    """Why the scores are scaled: by 1/√d_k, or by the model's own number where it states one
    that is not (Gemma 3 states 1/√query_pre_attn_scalar, which is 1/16 = 1/√256 on 270M)."""
    if c is None or c.scale is None or abs(c.scale * c.d_k ** 0.5 - 1) < 1e-6:
        return t("sidebar.real.scaled_fixed", model=name)
    return t("sidebar.decoder.scaled_own", model=name, scale=f"{c.scale:.6g}",
             scalar=f"{c.scale ** -2:.6g}")


def _rope_why(c: registry.ModelSizes | None, name: str) -> str:
    """The rotary base said: the model's one, or each kind of layer's where they differ (the
    number shown is the global layers')."""
    return rope_words(c, name, "sidebar.decoder.rope_fixed", "sidebar.decoder.rope_layers")


def compare_controls() -> None:
    """The sidebar of Compare models: its two language models, the sentence both read and the
    token limit (at most 64 here: two runs on one page)."""
    compare_choices()
    st.text_input(t("sidebar.sentence.label"), persist_state="session", key=keys.SENTENCE,
                  max_chars=text.MAX_TEXT_CHARS, help=t("sidebar.compare.sentence.help"))
    text.at_limit(st.session_state[keys.SENTENCE], text.MAX_TEXT_CHARS)
    st.number_input(t("sidebar.max_tokens.label"), *BOUNDS["max_tokens"],
                    persist_state="session", key=keys.MAX_TOKENS, step=1,
                    help=t("sidebar.compare.max_tokens.help"))
