"""Session state: the settings (widget keys named as the Settings fields), the user's edits, and
the View every page draws. Pages call `current_view()`; they work from seeded state alone. The
data editor's own state (what it was mounted on) is the editor's (attnviz.app.inputs.editor)."""

from __future__ import annotations

import numpy as np
import streamlit as st

from attnviz.app import keys
from attnviz.app.shared import language, links, text
from attnviz.session.edits import make_edit
from attnviz.session.build import build_view
from attnviz.session.settings import TOY_MODE, Settings, ToyChoice, weights_signature
from attnviz.session.view import View


def init() -> None:
    """Give every setting its default unless the session (or a test, or the URL) set it."""
    links.read_once()
    for name, default in Settings().__dict__.items():
        if name not in st.session_state:
            st.session_state[name] = language.default(name, default)
    for name, limit in text.SETTINGS_LIMITS.items():   # before the sidebar's boxes are drawn
        text.bound(name, limit)
    st.session_state.setdefault(keys.EDITS, {})
    st.session_state.setdefault(keys.MATRICES_VERSION, 0)


def settings() -> Settings:
    return Settings.from_mapping(st.session_state)


def current_view() -> View:
    """The trace for the current settings and edits (built once per run)."""
    return build_view(*recipe())


def toy_choice() -> ToyChoice | None:
    """The session's trained toy run with the checkpoint and held-out sequence the pages show
    (the last checkpoint and the first sequence unless chosen); None before any training.
    The run lives in the session only: it is handed to build_view, never put in Settings."""
    run = st.session_state.get(keys.TOY_RUN)
    if run is None:
        return None
    # loaded already: a run exists (torch is not loaded for none)
    from attnviz.models.trainer.toy import ToyRun

    if not isinstance(run, ToyRun):
        return None
    step = st.session_state.get(keys.TOY_VIEW_STEP)
    if step not in run.checkpoint_steps or isinstance(step, bool):
        step = run.steps
    example = st.session_state.get(keys.TOY_VIEW_EXAMPLE)
    if isinstance(example, bool) or not isinstance(example, int) \
            or not 0 <= example < len(run.test_inputs):
        example = 0
    return ToyChoice(run, step, example)


def _edits_for(s: Settings, toy: ToyChoice | None) -> dict:
    return st.session_state[keys.EDITS].get(weights_signature(s, toy), {})


def recipe() -> tuple[Settings, dict, ToyChoice | None]:
    """What rebuilds the current view with `build_view`: the settings, a copy of their edits
    (each edit is a new array, never changed in place) and, for the Toy model input, the run
    it shows. Small: no intermediate arrays, so it may be kept in the session where a trace
    must not be."""
    init()
    s = settings()
    toy = toy_choice() if s.mode == TOY_MODE else None
    return s, dict(_edits_for(s, toy)), toy


def edits(view: View) -> dict:
    """The (mutable) edits of the view's configuration."""
    return st.session_state[keys.EDITS].setdefault(view.signature, {})


def set_matrix(signature: str, name: str, array: np.ndarray, tokens) -> None:
    """Store an edited matrix (its full array) for the configuration with this signature (and
    these tokens), from elsewhere than the data editor (a paste, an upload): the editor is
    mounted anew on it."""
    st.session_state[keys.EDITS].setdefault(signature, {})[name] = make_edit(name, array, tokens)
    bump_editor_version()


def reset_edits(signature: str) -> None:
    """Drop the edits of the configuration with this weights signature (a button's callback:
    it gets the signature, not the view, which the session would keep with its trace)."""
    st.session_state[keys.EDITS].pop(signature, None)
    bump_editor_version()


def bump_editor_version() -> None:
    """Mount the data editor anew at the next run, on the matrix as stored then: for a change
    made elsewhere (reset, randomise, paste, pin), or when the page above it moves."""
    st.session_state[keys.MATRICES_VERSION] = st.session_state.get(keys.MATRICES_VERSION, 0) + 1
