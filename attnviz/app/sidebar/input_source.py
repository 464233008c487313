"""Where the input comes from: the input choice (a sentence, a preset, a typed X, typed Q, K, V,
a pretrained model, the trained toy model) and that input's own boxes."""

from __future__ import annotations

import streamlit as st

from attnviz.i18n import t
from attnviz.core.modes import Mode
from attnviz.session.settings import MODES, ToyChoice
from attnviz.tutorials.presets import PRESET_NAMES
from attnviz.app import keys
from attnviz.app.shared import state, text, uploads, widgets
from attnviz.app.sidebar.model_choice import layer_input, model_choice
from attnviz.models.trainer.toy_tasks import task_name

# the shown name of each input mode (the stored value, in state and links, stays the English one)
MODE_IDS = {m.value: m.id for m in Mode}


def mode_name(mode: str) -> str:
    return t(f"sidebar.mode.option.{MODE_IDS[mode]}")


def preset_title(name: str) -> str:
    return t(f"preset.{name}.title")


def preset_short(name: str) -> str:
    """A preset's name short enough for the sidebar's box (its full title is said below it)."""
    return t(f"preset.{name}.short")


def input_controls() -> str:
    """The input choice and the chosen input's boxes; returns the input mode."""
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
    return mode


def toy_controls() -> ToyChoice | None:
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
