"""Pieces of the Inputs & weights page: which matrices can be edited, the editor, paste/upload."""

from __future__ import annotations

import random

import numpy as np
import pandas as pd
import streamlit as st

from ..errors import AttnvizInputError
from ..inputs import parse_matrix
from ..model import View, matrix_of
from . import state, uploads, widgets

LABELS = {"x": "X", "w_q": "W_Q", "w_k": "W_K", "w_v": "W_V", "w_o": "W_O", "b_q": "b_Q",
          "b_k": "b_K", "b_v": "b_V", "b_o": "b_O"}
PER_HEAD = ("w_q", "w_k", "w_v", "b_q", "b_k", "b_v")
EDITOR_MAX_CELLS = 20_000


def label_of(name: str) -> str:
    return LABELS.get(name, name)


def per_head(name: str) -> bool:
    return name in PER_HEAD


def editable_names(view: View) -> list[str]:
    if view.weights is None:
        return []
    return [n for n in LABELS if matrix_of(view, n) is not None]


def axes_of(name: str) -> tuple[str, str]:
    if name == "x":
        return "token", "feature"
    if name.startswith("b_"):
        return "bias", "feature"
    if name == "w_o":
        return "concat feature", "output feature"
    return "input feature", f"{name[-1]} feature"


def matrix_with_labels(view: View, name: str, head: int | None):
    """The 2-D slice a page shows for `name` (one head's, if per head), with its labels."""
    a = matrix_of(view, name)
    if head is not None:
        a = a[head]
    a = np.atleast_2d(a)
    if name == "x":
        rows = view.tokens_q
    elif name.startswith("b_"):
        rows = ["bias"]
    elif name == "w_o":
        t = view.trace
        rows = [f"h{h}·d{j}" for h in range(t.num_heads) for j in range(t.d_v)]
    else:
        rows = widgets.feature_labels(a.shape[0])
    prefix = {"w_q": "q", "w_k": "k", "w_v": "v"}.get(name, "d")
    return a, rows, widgets.feature_labels(a.shape[1], prefix)


def actions(view: View) -> None:
    s = view.settings
    cols = st.columns([1, 1, 4])
    cols[0].button(":material/casino: Randomise", on_click=_randomise,
                   disabled=s.mode == "Preset",
                   help="New random weights and embeddings: a new seed (same initialisation "
                        "scheme as in the sidebar).")
    cols[1].button(":material/restart_alt: Reset edits", on_click=state.reset_edits,
                   args=(view,),
                   disabled=not state.edits(view),
                   help="Drop your edits to this configuration's matrices.")
    if state.edits(view):
        cols[2].caption("Edited: " + ", ".join(label_of(n) for n in state.edits(view)))


def _randomise() -> None:
    st.session_state["seed"] = random.randrange(0, 2**31 - 1)
    state.bump_editor_version()


def shown_name(name: str, head: int | None) -> str:
    """The matrix as the page names it: "W_Q of head 0", "W_O", "X"."""
    return label_of(name) + ("" if head is None else f" of head {head}")


def editor(view: View, name: str, head: int | None) -> None:
    """The matrix as editable text cells: each shows its number exactly (shortest round-trip
    decimal) and a typed cell is stored exactly as written, or refused with a message naming
    the cell (a numeric cell editor would silently drop letters: 1e-3 became −13)."""
    a, rows, cols = matrix_with_labels(view, name, head)
    if a.size > EDITOR_MAX_CELLS:
        st.caption(f"{a.shape[0]}×{a.shape[1]} is too large to edit cell by cell here: paste or "
                   "upload the matrix below.")
        return
    rows, cols = widgets.unique(rows), widgets.unique(cols)
    frame = pd.DataFrame([[repr(float(v)) for v in row] for row in a], index=rows, columns=cols)
    version = st.session_state.get(state.EDITOR_VERSION_KEY, 0)
    key = f"editor_{name}_{head}_{version}"
    error_key = f"editor_error_{name}"
    st.data_editor(frame, key=key, on_change=state.apply_editor_changes,
                   args=(view, name, head, key, error_key, shown_name(name, head), rows, cols),
                   disabled=["_index"], width="stretch")
    if st.session_state.get(error_key):
        st.error(st.session_state[error_key] + ". The matrix keeps its previous value.")


def paste_or_upload(view: View, name: str, head: int | None) -> None:
    a, _, _ = matrix_with_labels(view, name, head)
    what = shown_name(name, head)
    with st.expander(f"Paste or upload {what} ({a.shape[0]}×{a.shape[1]})"):
        version = st.session_state.get(state.EDITOR_VERSION_KEY, 0)
        text_key = f"paste_{name}_{head}_{version}"
        st.text_area("Matrix text (rows on lines; commas, spaces or tabs; or JSON)",
                     value=uploads.matrix_to_text(a), key=text_key, height=150)
        if st.button("Apply pasted matrix", key=f"apply_{name}_{head}"):
            _try_set(view, name, head,
                     lambda: parse_matrix(st.session_state[text_key], name=what),
                     f"paste_error_{name}")
        file = st.file_uploader("…or upload a .csv or .npy file", type=["csv", "txt", "npy"],
                                key=f"upload_{name}_{head}_{version}",
                                max_upload_size=uploads.MAX_UPLOAD_MB)
        if file is not None:
            _try_set(view, name, head,
                     lambda: uploads.read_matrix_file(file.name, file.getvalue()),
                     f"paste_error_{name}")
        if st.session_state.get(f"paste_error_{name}"):
            st.error(st.session_state[f"paste_error_{name}"])


def _try_set(view: View, name: str, head: int | None, read, error_key: str) -> None:
    """Replace the matrix (or one head's slice) with `read()`, if it parses and fits."""
    try:
        new = read()
        full = np.array(matrix_of(view, name), dtype=np.float64, copy=True)
        target = full if head is None else full[head]
        if target.ndim == 1:
            new = new.reshape(-1) if new.shape[0] == 1 else new
        if new.shape != target.shape:
            raise AttnvizInputError(
                f"{label_of(name)} must be {' × '.join(map(str, target.shape))}, but the new "
                f"matrix is {' × '.join(map(str, new.shape))}")
        target[...] = new
    except AttnvizInputError as exc:
        st.session_state[error_key] = str(exc)
        return
    st.session_state.pop(error_key, None)
    state.set_matrix(view, name, full)
    st.rerun()
