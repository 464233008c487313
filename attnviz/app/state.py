"""Session state: the settings (widget keys named as the Settings fields), the user's edits, and
the View every page draws. Pages call `current_view()`; they work from seeded state alone."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import streamlit as st

from attnviz.app import keys, links, text
from attnviz.session.edits import make_edit, typed_cells, with_matrix
from attnviz.describe.labels import unique
from attnviz.session.build import build_view
from attnviz.session.settings import TOY_MODE, Settings, ToyChoice, weights_signature
from attnviz.session.view import View, current_matrices


def init() -> None:
    """Give every setting its default unless the session (or a test, or the URL) set it."""
    links.read_once()
    for name, default in Settings().__dict__.items():
        if name not in st.session_state:
            st.session_state[name] = default
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
    from attnviz.models.toy import ToyRun

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


# ---- the data editor ---------------------------------------------------------------------------
# A data editor keeps its own edits (edited_rows, every cell typed since it was mounted) while
# its key and the data passed to it stay the same; a new key or new data mounts a new grid in
# the browser, which loses the selection (and a cell typed while it happens). So the editor is
# passed the same frame, its "base", on every run, and each change stores base + all its
# edits; it is mounted anew (a new key) only when the stored matrix changes from elsewhere.

@dataclass
class EditorMount:
    """The data editor on the page: what it was mounted on and what it has stored."""

    key: str                  # its widget key
    of: tuple                 # (signature, name, head, editor version) it shows
    base: np.ndarray          # (rows, cols) the slice it was mounted on: its data, every run
    full: np.ndarray          # the full matrix as stored now: base with the editor's edits
    tokens: tuple             # the view's tokens (an edit of X keeps them)
    rows: list[str]           # the slice's labels, as matrix_labels gives them
    cols: list[str]
    problems: tuple = ()      # the typed texts refused, each naming its cell
    typed: bool = False       # a typed cell was stored since the page last ran whole
    page: tuple = ()          # page_status() when the page last ran whole

    @property
    def signature(self) -> str:
        return self.of[0]

    @property
    def name(self) -> str:
        return self.of[1]

    @property
    def head(self) -> int | None:
        return self.of[2]

    @property
    def shown(self) -> np.ndarray:
        """(rows, cols) the slice as stored now."""
        return np.atleast_2d(self.full if self.head is None else self.full[self.head])


def mounted() -> EditorMount | None:
    mount = st.session_state.get(keys.WEIGHT_EDITOR)
    return mount if isinstance(mount, EditorMount) else None


def page_status(view: View) -> tuple:
    """What the Inputs page shows around its editor that a typed cell can change: the error
    (an overflow naming the cell), which matrices are edited (the caption, Reset edits) and
    the link's note on edits too large for it."""
    return view.error, tuple(edits(view)), st.session_state.get(keys.LINK_HAS_EDITS)


def page_changed(mount: EditorMount) -> bool:
    """After a typed cell: does the page around the editor show something else now? Always
    in the Toy model mode, whose answer with the edits is shown above the editor."""
    view = current_view()
    return view.settings.mode == TOY_MODE or page_status(view) != mount.page


def editor_mount(view: View, name: str, head: int | None, shown: np.ndarray, rows: list[str],
                 cols: list[str]) -> EditorMount:
    """The mount of the editor of `name` (one head's slice `shown`, (rows, cols)): the one on
    the page while it still holds what is stored, else a new one on the stored matrix."""
    full = current_matrices(view)[name]
    of = (view.signature, name, head, st.session_state.get(keys.MATRICES_VERSION, 0))
    mount = mounted()
    if (mount is not None and mount.of == of and mount.key in st.session_state
            and mount.rows == rows and mount.cols == cols
            and mount.full.shape == full.shape and np.array_equal(mount.full, full)):
        return mount
    number = int(mount.key.rsplit("_", 1)[1]) + 1 if mount is not None else 0
    mount = EditorMount(keys.EDITOR(name, head, number), of, np.array(shown, dtype=np.float64),
                        np.array(full), tuple(view.tokens_q), list(rows), list(cols))
    st.session_state[keys.WEIGHT_EDITOR] = mount
    return mount


def apply_editor_changes(editor_key: str) -> None:
    """on_change of the data editor: store its base with every cell typed so far (as
    written), without building the view; a refused cell keeps its stored value and leaves
    an error naming it, while the other cells land."""
    mount = mounted()
    if mount is None or mount.key != editor_key:
        return
    changes = st.session_state.get(editor_key, {}).get("edited_rows", {})
    new, problems = typed_cells(mount.base, mount.shown, mount.name, mount.head, changes,
                                unique(mount.rows), unique(mount.cols))
    mount.problems = tuple(problems)
    full = with_matrix(mount.full, mount.name, mount.head, new)
    if not np.array_equal(full, mount.full):
        st.session_state[keys.EDITS].setdefault(mount.signature, {})[mount.name] = \
            make_edit(mount.name, full, mount.tokens)
        mount.full = full
        mount.typed = True
