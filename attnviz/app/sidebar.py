"""The sidebar shared by every page: where the input comes from, the model's sizes, options.

Every widget's key is a Settings field, so `state.settings()` reads them all back.
"""

from __future__ import annotations

import numpy as np
import streamlit as st

from attnviz.i18n import t
from attnviz.core.modes import Mode
from attnviz.session.in_use import InUse, in_use
from attnviz.session.settings import (BOUNDS, MODES, ROPE_BASES, TOY_MODE, Settings, ToyChoice,
                                      kv_head_counts, layer_bounds)
from attnviz.models import registry
from attnviz.tutorials.presets import PRESET_NAMES, load_preset
from attnviz.core.weights import INIT_SCHEMES
from attnviz.app import keys
from attnviz.app.shared import language, links, state, text, uploads, widgets
from attnviz.models.toy_tasks import task_name

# the shown name of each input mode (the stored value, in state and links, stays the English one)
MODE_IDS = {m.value: m.id for m in Mode}


def mode_name(mode: str) -> str:
    return t(f"sidebar.mode.option.{MODE_IDS[mode]}")


def preset_title(name: str) -> str:
    return t(f"preset.{name}.title")


def preset_short(name: str) -> str:
    """A preset's name short enough for the sidebar's box (its full title is said below it)."""
    return t(f"preset.{name}.short")


def render(inputs: bool = True, real_model: bool = False) -> None:
    """The sidebar; without `inputs` (a page with its own settings) only a line saying so; with
    `real_model` (a page that runs the pretrained model on the sentence) the sentence and the
    token limit, every other setting shown disabled with the reason."""
    state.init()
    with st.sidebar:
        language.switch()
    if not inputs:
        st.sidebar.caption(t("sidebar.own_settings"))
        links.write()                       # the page's own picks (Generate's prompt…)
        with st.sidebar:
            links.show_link_notices()       # a link that opened this page: said here
        return
    if real_model:
        with st.sidebar:
            _real_model_controls()
            links.write()
            links.show_notices()
        return
    with st.sidebar:
        st.radio(t("sidebar.mode.label"), MODES, persist_state="session", key=keys.MODE,
                 horizontal=True, format_func=mode_name, help=t("sidebar.mode.help"))
        mode = st.session_state[keys.MODE]
        if mode in (Mode.SENTENCE, Mode.PRETRAINED):
            st.text_input(t("sidebar.sentence.label"), persist_state="session", key=keys.SENTENCE,
                          on_change=text.drop_invisible, args=(keys.SENTENCE,),
                          max_chars=text.MAX_TEXT_CHARS, help=t("sidebar.sentence.help"))
            text.invisible_notice(keys.SENTENCE)
            text.at_limit(st.session_state[keys.SENTENCE], text.MAX_TEXT_CHARS)
        elif mode == Mode.PRESET:
            st.selectbox(t("sidebar.preset.label"), PRESET_NAMES, persist_state="session",
                         key=keys.PRESET, format_func=preset_short)
            name = st.session_state[keys.PRESET]
            st.caption(t("sidebar.preset.about", title=preset_title(name),
                         description=t(f"preset.{name}.description")))
        elif mode == Mode.MATRIX_X:
            st.text_area(t("sidebar.x_text.label"), persist_state="session", key=keys.X_TEXT,
                         height=120, max_chars=text.MAX_MATRIX_CHARS, help=t("sidebar.x_text.help"))
            text.at_limit(st.session_state[keys.X_TEXT], text.MAX_MATRIX_CHARS)
            uploads.matrix_uploader(keys.X_TEXT, t("sidebar.x_text.upload"))
        elif mode == Mode.QKV:
            for name, key in (("q", keys.Q_TEXT), ("k", keys.K_TEXT), ("v", keys.V_TEXT)):
                st.text_area(t(f"sidebar.{name}_text.label"), persist_state="session",
                             key=key, height=80, max_chars=text.MAX_MATRIX_CHARS)
                text.at_limit(st.session_state[key], text.MAX_MATRIX_CHARS)
        if mode == Mode.PRETRAINED:
            model_choice()
            layer_input()
        toy = _toy_controls() if mode == TOY_MODE else None
        use = in_use(state.settings(), toy)     # the sizes and scaling the trace will use
        if mode != Mode.PRETRAINED:
            _model_controls(mode, use)
        _options(mode, use)
        links.write()
        links.show_notices()


def _real_model_controls() -> None:
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
    """_real_model_controls for an encoder (all-MiniLM-L6-v2): its sizes, its biases, its
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
    _shown(st.radio, keys.MODE, Mode.SENTENCE.value, t("sidebar.real.mode_fixed", model=name),
           options=MODES, horizontal=True, format_func=mode_name)
    st.text_input(t("sidebar.sentence.label"), persist_state="session", key=keys.SENTENCE,
                  max_chars=text.MAX_TEXT_CHARS, help=sentence_help)
    text.at_limit(st.session_state[keys.SENTENCE], text.MAX_TEXT_CHARS)
    sizes_why = t("sidebar.real.sizes_fixed", model=name)
    trained = t("sidebar.real.trained_fixed", model=name)
    with st.expander(t("sidebar.model.label"), expanded=True):
        st.caption(caption)
        for setting, value in sizes:
            _shown_number(setting, value, sizes_why)
        _shown(st.selectbox, keys.INIT, "trained", trained, options=["trained"],
               format_func=lambda _: t("sidebar.init.trained"))
        _shown(st.number_input, keys.SEED, None, trained, step=1,
               placeholder=t("sidebar.seed.none_trained"))
        _shown(st.checkbox, keys.BIAS, *switches[keys.BIAS])
    with st.expander(t("sidebar.options.label"), expanded=True):
        for setting in (keys.SCALED, keys.CAUSAL, keys.POSITIONAL, keys.ROPE):
            if setting in switches:
                _shown(st.toggle if setting == keys.ROPE else st.checkbox, setting,
                       *switches[setting])
        if keys.ROPE in switches:
            _shown_number(keys.ROPE_BASE, rope_base, switches[keys.ROPE][1])
        st.number_input(t("sidebar.max_tokens.label"), *BOUNDS["max_tokens"],
                        persist_state="session", key=keys.MAX_TOKENS, step=1,
                        help=max_tokens_help)


def model_name(model: str) -> str:
    return t(f"sidebar.model_choice.option.{model}")


def _clamp_layer() -> None:
    """The layer within the chosen model's (a model with fewer layers chosen, or a link)."""
    found = layer_bounds(st.session_state.get(keys.MODEL, registry.DEFAULT))
    layer = st.session_state.get(keys.LAYER)
    if found is None:                    # the model's layers are unknown: not installed
        return
    low, high = found
    if not _whole(layer) or not low <= layer <= high:
        st.session_state[keys.LAYER] = min(max(layer, low), high) if _whole(layer) else low


def model_choice() -> str:
    """The pretrained model (MiniLM encoder / SmolLM2 decoder): widget key `model`."""
    if st.session_state.get(keys.MODEL) not in registry.NAMES:
        st.session_state[keys.MODEL] = registry.DEFAULT
    _clamp_layer()
    return st.selectbox(t("sidebar.model_choice.label"), registry.NAMES, persist_state="session",
                        key=keys.MODEL, format_func=model_name, on_change=_clamp_layer,
                        help=t("sidebar.model_choice.help"))


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


def _decoder_controls(entry: registry.ModelEntry) -> None:
    """_real_model_controls for a causal model (SmolLM2): its sizes, its K/V heads, its rotary
    base and its causal mask, shown disabled with the reason; the sentence and the token limit
    are used."""
    c = _sizes(entry)                    # the config's own sizes: the model loads on the page
    d_model, heads, kv, d_k = (c.d_model, c.num_heads, c.num_kv_heads, c.d_k) if c else (None,) * 4
    base = int(c.rope_base) if c and c.rope_base is not None else None
    name = entry.shown
    rope_why = t("sidebar.decoder.rope_fixed", model=name)
    _fixed_model_panel(
        name, t("sidebar.decoder.sentence.help", model=name),
        t("sidebar.decoder.caption", model=name),
        [(keys.D_MODEL, d_model), (keys.NUM_HEADS, heads), (keys.KV_HEADS, kv), (keys.D_K, d_k)],
        {keys.BIAS: (False, t("sidebar.decoder.bias_fixed", model=name)),
         keys.SCALED: (True, t("sidebar.real.scaled_fixed", model=name)),
         keys.CAUSAL: (True, t("sidebar.decoder.causal_fixed", model=name)),
         keys.POSITIONAL: (False, t("sidebar.decoder.positional_fixed", model=name)),
         keys.ROPE: (True, rope_why)},
        t("sidebar.decoder.max_tokens.help", model=name), rope_base=base)


def _kv_heads_control(use: InUse) -> None:
    """K-V heads (grouped-query attention): a divisor of Heads; 0 = as many as heads."""
    if use.kv_fixed:
        _shown_number(keys.KV_HEADS, use.kv_heads, use.kv_fixed)
        return
    heads = st.session_state.get(keys.NUM_HEADS)
    options = [0, *[d for d in kv_head_counts(heads) if d != heads]] if _whole(heads) else [0]
    current = st.session_state.get(keys.KV_HEADS)
    if _whole(current) and current not in options:
        options = sorted([*options, int(current)])       # not dividing: the page says so
    st.selectbox(t("sidebar.kv_heads.label"), options, persist_state="session", key=keys.KV_HEADS,
                 format_func=_kv_name, help=t("sidebar.kv_heads.help"))


def _kv_name(kv: int) -> str:
    return t("sidebar.kv_heads.option.all") if kv == 0 else str(kv)


def _rope_controls(use: InUse) -> None:
    """Rotary positions on Q and K, and their base."""
    if use.rope_fixed:
        _shown(st.toggle, keys.ROPE, bool(use.rope), use.rope_fixed)
        if use.rope:
            _shown_number(keys.ROPE_BASE, use.rope_base, use.rope_fixed)
        return
    st.toggle(t("sidebar.rope.label"), persist_state="session", key=keys.ROPE,
              help=t("sidebar.rope.help"))
    if st.session_state.get(keys.ROPE_BASE) not in ROPE_BASES:
        st.session_state[keys.ROPE_BASE] = ROPE_BASES[0]
    st.selectbox(t("sidebar.rope_base.label"), ROPE_BASES, persist_state="session",
                 key=keys.ROPE_BASE, disabled=not st.session_state.get(keys.ROPE),
                 format_func=lambda b: f"{b:,}", help=t("sidebar.rope_base.help"))


def _toy_controls() -> ToyChoice | None:
    """The trained run's layer, checkpoint and held-out sequence (None: no run yet, said)."""
    toy = state.toy_choice()
    if toy is None:
        st.info(t("sidebar.toy.no_run"))
        widgets.page_link("train", t("sidebar.toy.train_link"),
                          ":material/model_training:")
        return None
    run, cfg = toy.run, toy.run.config
    st.caption(t("sidebar.toy.caption", task=task_name(cfg.task), steps=run.steps,
                 accuracy=run.mean_accuracy))
    if not 0 <= st.session_state.get(keys.LAYER, 0) < cfg.layers:
        st.session_state[keys.LAYER] = 0
    st.number_input(t("sidebar.layer.label"), 0, cfg.layers - 1, persist_state="session",
                    key=keys.LAYER, step=1, disabled=cfg.layers == 1,
                    help=t("sidebar.toy.layer.help", count=cfg.layers))
    for key, value in ((keys.TOY_VIEW_STEP, toy.step), (keys.TOY_VIEW_EXAMPLE, toy.example)):
        if st.session_state.get(key) != value:
            st.session_state[key] = value
    st.select_slider(t("sidebar.toy.step.label"), run.checkpoint_steps,
                     persist_state="session", key=keys.TOY_VIEW_STEP,
                     help=t("sidebar.toy.step.help"))
    st.number_input(t("sidebar.toy.example.label"), 0, len(run.test_inputs) - 1,
                    persist_state="session", key=keys.TOY_VIEW_EXAMPLE, step=1,
                    help=t("sidebar.toy.example.help"))
    return toy


def _model_controls(mode: str, use: InUse) -> None:
    """Sizes and weights. Each control shows the value the computation uses; where the mode
    fixes it (a preset's own sizes, X's columns), it is shown disabled with the reason. While
    d_k is d_model / heads, the steppers and the heads offered keep that a whole number."""
    own_weights = mode in (Mode.SENTENCE, Mode.MATRIX_X)
    derived = st.session_state.get(keys.D_K) == 0          # d_k = d_model / heads
    heads = st.session_state.get(keys.NUM_HEADS)
    step = heads if derived and not use.heads_fixed and _whole(heads) and heads > 1 else 1
    with st.expander(t("sidebar.model.label"), expanded=True):
        if use.d_model_fixed:
            _shown_number(keys.D_MODEL, use.d_model, use.d_model_fixed)
        else:
            st.number_input("d_model", *BOUNDS["d_model"], persist_state="session",
                            key=keys.D_MODEL, step=step,
                            help=t("sidebar.d_model.help_step", step=step) if step > 1 else
                            t("sidebar.d_model.help"))
        if use.heads_fixed:
            _shown_number(keys.NUM_HEADS, use.num_heads, use.heads_fixed)
            _shown_number(keys.D_K, use.d_k, use.heads_fixed)
        else:
            if derived:
                _size_fixes(use)
            _heads_control(use.d_model if derived else None)
            _d_k_controls(use)
        _kv_heads_control(use)
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


def _whole(n) -> bool:
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
    if _whole(current) and current not in options:
        options = sorted([*options, int(current)])
    st.selectbox(t("sidebar.heads.label"), options, persist_state="session", key=keys.NUM_HEADS,
                 help=t("sidebar.heads.help_dividing") if d_model is not None else
                 t("sidebar.heads.help_any"))


def _size_fixes(use: InUse) -> None:
    """While d_model does not divide by the heads: say so, with one-click fixes (the nearest
    d_model that does, when d_model is the user's; the nearest count of heads that does)."""
    d_model, heads = use.d_model, st.session_state.get(keys.NUM_HEADS)
    if d_model is None or not _whole(heads) or heads < 1 or d_model % heads == 0:
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
        _shown_number(keys.D_K, use.d_k, t("sidebar.d_k.derived") if use.d_k else
                      t("sidebar.d_k.not_whole"))
    else:
        st.number_input("d_k", 1, BOUNDS["d_k"][1], persist_state="session", key=keys.D_K, step=1)


def _toggle_d_k(derived: int | None) -> None:
    st.session_state[keys.D_K] = 0 if st.session_state[keys.D_K_AUTO] else (derived or 1)


# the label of each setting shown disabled (d_model and d_k are written as they are)
SHOWN_LABELS = {keys.MODE: "sidebar.mode.label", keys.NUM_HEADS: "sidebar.heads.label",
                keys.INIT: "sidebar.init.label", keys.SEED: "sidebar.seed.label",
                keys.BIAS: "sidebar.bias.label", keys.SCALED: "sidebar.scaled.label",
                keys.CAUSAL: "sidebar.causal.label", keys.POSITIONAL: "sidebar.positional.label",
                keys.KV_HEADS: "sidebar.kv_heads.label", keys.ROPE: "sidebar.rope.label",
                keys.ROPE_BASE: "sidebar.rope_base.label"}


def _shown(widget, setting: str, value, why, **options) -> None:
    """A disabled `widget` (st.number_input, st.checkbox) showing the value in use of
    `setting`, beside the user's own setting (kept under its key); its help says `why` (a text
    or a Message) it is fixed."""
    key = keys.SHOWN_SETTING(setting)
    st.session_state[key] = value
    label = t(SHOWN_LABELS[setting]) if setting in SHOWN_LABELS else setting
    widget(label, key=key, disabled=True, help=str(why), **options)


def _shown_number(setting: str, value: int | None, why) -> None:
    _shown(st.number_input, setting, value, why, step=1)


def _options(mode: str, use: InUse) -> None:
    with st.expander(t("sidebar.options.label"), expanded=True):
        if use.scale_fixed:
            _shown(st.checkbox, keys.SCALED, use.scaled, use.scale_fixed)
        else:
            st.checkbox(t("sidebar.scaled.label"), persist_state="session", key=keys.SCALED)
        if mode == Mode.PRESET and "rounded_weights" in load_preset(
                st.session_state[keys.PRESET]).side_notes:
            st.checkbox(t("sidebar.rounded.label"), persist_state="session",
                        key=keys.ROUNDED, help=t("sidebar.rounded.help"))
        if use.causal_fixed:
            _shown(st.checkbox, keys.CAUSAL, use.causal, use.causal_fixed)
        else:
            st.checkbox(t("sidebar.causal.label"), persist_state="session", key=keys.CAUSAL)
        if mode in (Mode.SENTENCE, Mode.MATRIX_X):
            st.checkbox(t("sidebar.positional.label"), persist_state="session",
                        key=keys.POSITIONAL)
        else:
            _shown(st.checkbox, keys.POSITIONAL, False, t("sidebar.positional.fixed"))
        if mode == Mode.PRETRAINED:                     # no Model expander in this mode
            _kv_heads_control(use)
        _rope_controls(use)
        typed = mode in (Mode.SENTENCE, Mode.PRETRAINED)
        st.number_input(t("sidebar.max_tokens.label"), *BOUNDS["max_tokens"],
                        persist_state="session", key=keys.MAX_TOKENS, step=1, disabled=not typed,
                        help=t("sidebar.max_tokens.help") if typed else
                        t("sidebar.max_tokens.help_unused"))
