"""Session state: the settings (widget keys named as the Settings fields), the user's edits, and
the View every page draws. Pages call `current_view()`; they work from seeded state alone."""

from __future__ import annotations

import numpy as np
import streamlit as st

from ..errors import AttnvizInputError
from . import links
from ..inputs import cell_name, number_at
from ..model import Settings, View, build_view, matrix_of, weights_signature

EDITS_KEY = "edits"           # signature → {matrix name → array, "x" → (tokens, array)}
EDITOR_VERSION_KEY = "editor_version"


def init() -> None:
    """Give every setting its default unless the session (or a test, or the URL) set it."""
    _leave_folder_mode()
    links.read_once()
    for name, default in Settings().__dict__.items():
        if name not in st.session_state:
            st.session_state[name] = default
    st.session_state.setdefault(EDITS_KEY, {})
    st.session_state.setdefault(EDITOR_VERSION_KEY, 0)


def _leave_folder_mode() -> None:
    """When a fresh server's very first request is a sub-page (a shared link), Streamlit runs
    pages/*.py alone, in its old folder-based multipage mode, without app.py's sidebar and
    navigation; app.py's st.navigation would switch that mode off, but it has not run yet.
    Switch it off here and rerun: the same page then runs inside app.py. Only at a session's
    first run (AppTest runs switched pages in that mode on purpose, widgets and all)."""
    from streamlit.runtime.pages_manager import PagesManager

    if PagesManager.uses_pages_directory and links.READ_KEY not in st.session_state:
        PagesManager.uses_pages_directory = False
        st.rerun()


def settings() -> Settings:
    return Settings.from_mapping(st.session_state)


def current_view() -> View:
    """The trace for the current settings and edits (built once per run)."""
    init()
    s = settings()
    return build_view(s, _edits_for(s))


def _edits_for(s: Settings) -> dict:
    return st.session_state[EDITS_KEY].get(weights_signature(s), {})


def edits(view: View) -> dict:
    """The (mutable) edits of the view's configuration."""
    return st.session_state[EDITS_KEY].setdefault(view.signature, {})


def set_matrix(view: View, name: str, array: np.ndarray) -> None:
    """Store an edited matrix for the view's configuration (x is stored with its tokens)."""
    store = edits(view)
    store[name] = (tuple(view.tokens_q), array) if name == "x" else array
    bump_editor_version()


def reset_edits(view: View) -> None:
    st.session_state[EDITS_KEY].pop(view.signature, None)
    bump_editor_version()


def bump_editor_version() -> None:
    """Editors are keyed with this number: a new one after each applied edit starts from the
    stored matrix, so an editor's own edits are never applied twice (streamlit#7749)."""
    st.session_state[EDITOR_VERSION_KEY] = st.session_state.get(EDITOR_VERSION_KEY, 0) + 1


def apply_editor_changes(view: View, name: str, head: int | None, editor_key: str,
                         error_key: str, shown: str, rows: list[str], cols: list[str]) -> None:
    """on_change of a data editor: apply its edited_rows (text, as typed) to the stored matrix,
    or keep the matrix and record an error naming the cell as the page labels it (`shown`,
    e.g. "W_Q of head 0", and the editor's row and column labels)."""
    changes = st.session_state.get(editor_key, {}).get("edited_rows", {})
    current = matrix_of(view, name)
    if current is None or not changes:
        return
    new = np.array(current, dtype=np.float64, copy=True)
    target = new if head is None else new[head]              # a view: writes go into `new`
    vector = target.ndim == 1                                # a bias: one row on screen
    try:
        for row, cells in changes.items():
            row = int(row)
            for col_label, value in cells.items():
                if str(col_label) not in cols:
                    raise AttnvizInputError(f"{shown}: only the numbers can be edited, not "
                                            "the row labels")
                col = cols.index(str(col_label))
                where = cell_name(shown, row + 1, col + 1, rows[row], cols[col])
                number = number_at("" if value is None else value, where)
                target[(col,) if vector else (row, col)] = number
    except AttnvizInputError as exc:
        st.session_state[error_key] = str(exc)
        bump_editor_version()
        return
    st.session_state.pop(error_key, None)
    set_matrix(view, name, new)
