"""The Inputs & weights page's editor, in one module: which matrices can be edited, the data
editor and its own state (`EditorMount`: what it was mounted on, what it has stored), paste and
upload, the matrix's heatmap. The edits themselves are kept by attnviz.app.shared.state, per
configuration; what an edit is and how typed cells apply is attnviz.session.edits."""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass

import numpy as np
import pandas as pd
import streamlit as st

from attnviz.i18n import t
from attnviz.core.modes import Mode

from attnviz.app import keys
from attnviz.session import edits
from attnviz.session.edits import make_edit, typed_cells, with_matrix
from attnviz.plot import figures
from attnviz.core.errors import AttnvizInputError
from attnviz.core.matrix_text import parse_matrix_with_notes
from attnviz.describe.labels import matrix_labels, unique
from attnviz.session.settings import TOY_MODE
from attnviz.session.view import View, current_matrices
from attnviz.app.shared import baseline, links, state, widgets
from attnviz.io import matrix_files
from attnviz.app.shared.text import MAX_MATRIX_CHARS, at_limit, literal

EDITOR_MAX_CELLS = 20_000


def label_of(name: str) -> str:
    return edits.entry(name).shown


def per_head(name: str) -> bool:
    return edits.entry(name).per_head


def axes_of(name: str) -> tuple[str, str]:
    """The (rows, columns) axis titles of `name`'s heatmap, in the active language."""
    return tuple(t("edit.axis." + a.replace(" ", "_")) for a in edits.entry(name).axes)


def editable_names(view: View) -> list[str]:
    return list(current_matrices(view))


def matrix_with_labels(view: View, name: str, head: int | None):
    """The 2-D slice a page shows for `name` (one head's, if per head), with its labels."""
    a = current_matrices(view)[name]
    a = np.atleast_2d(a if head is None else a[head])
    w = view.params
    rows, cols = matrix_labels(name, a.shape, view.tokens_q, w.num_heads, w.d_v)
    return a, rows, cols


def actions(view: View) -> None:
    s = view.settings
    cols = st.columns([2, 2, 3, 2])       # the pin button widest: whole at 1024 px
    widgets.action_button(":material/casino: " + t("edit.randomise"), _randomise,
                          key=keys.RANDOMISE, where=cols[0],
                          disabled=s.mode in (Mode.PRESET, Mode.TOY),
                          help=t("edit.randomise.help"))
    widgets.action_button(":material/restart_alt: " + t("widgets.reset_edits"), state.reset_edits,
                          (view.signature,), key=keys.RESET_EDITS, where=cols[1],
                          disabled=not state.edits(view), help=t("widgets.reset_edits.help"))
    baseline.buttons(cols[2:], key=keys.INPUTS_BASELINE)
    # always one line, so the editor below does not move when the first cell is typed
    st.caption(t("edit.edited", names=", ".join(label_of(n) for n in state.edits(view)))
               if state.edits(view) else t("edit.no_edits"))
    if view.ok:
        baseline.status(baseline.compare(view))


def _randomise() -> None:
    st.session_state[keys.SEED] = random.randrange(0, 2**31 - 1)
    state.bump_editor_version()


def editing(view: View, name: str, head: int | None) -> None:
    """The editor of `name` (one head's slice), its paste box and its heatmap. They are a
    fragment: a typed cell reruns only them (and writes the link), not the whole page with its
    sidebar, so the heatmap repaints about as soon as on a bare page. The page runs whole when
    a typed cell changes what else it shows (page_changed): the first edit, an overflow
    coming or going, the Toy model's answer."""
    a, rows, cols = matrix_with_labels(view, name, head)
    mount = editor_mount(view, name, head, a, rows, cols)
    mount.page, mount.typed = page_status(view), False
    _editing()                     # no arguments: a fragment keeps its arguments for reruns


@st.fragment
def _editing() -> None:
    mount = mounted()
    if mount.typed:                # this run is the fragment's own, after a typed cell
        mount.typed = False
        links.write()
        if page_changed(mount):
            st.rerun(scope="app")
    _editor(mount)
    _paste_or_upload(mount)
    shown = mount.shown
    title = label_of(mount.name) if mount.head is None else \
        t("figure.title.head", title=label_of(mount.name), head=mount.head)
    rows, cols = axes_of(mount.name)
    widgets.chart(figures.heatmap(shown, row_labels=mount.rows, col_labels=mount.cols,
                                  title=title, row_title=rows, col_title=cols),
                  key=keys.EDIT_HEATMAP)


def _editor(mount: EditorMount) -> None:
    """The matrix as editable text cells: each shows its number to a few digits
    (edits.cell_text) and keeps it exactly; a typed cell is stored exactly as written, or
    refused with a message naming the cell (a numeric cell editor would silently drop letters:
    1e-3 became −13, so the cells are text, not st.column_config.NumberColumn)."""
    if mount.base.size > EDITOR_MAX_CELLS:
        st.caption(t("edit.too_large", rows=mount.base.shape[0], cols=mount.base.shape[1]))
        return
    rows, cols = unique(mount.rows), unique(mount.cols)
    frame = pd.DataFrame([[edits.cell_text(float(v)) for v in row] for row in mount.base],
                         index=rows, columns=cols)
    st.data_editor(frame, key=mount.key, on_change=apply_editor_changes,
                   args=(mount.key,), disabled=["_index"], width="stretch")
    st.caption(t("edit.cells.digits", digits=edits.CELL_DIGITS))
    if mount.problems:
        st.error(literal("; ".join(map(str, mount.problems))) + t(
            "edit.kept_previous", count=len(mount.problems)))


def _paste_or_upload(mount: EditorMount) -> None:
    a, name, head = mount.shown, mount.name, mount.head
    what = edits.shown_name(name, head)
    with st.expander(t("edit.paste.expander", matrix=what, rows=a.shape[0], cols=a.shape[1])):
        version = st.session_state.get(keys.MATRICES_VERSION, 0)
        # a new box when the matrix changes (a typed cell included): it always starts from
        # the matrix as stored, so applying it never undoes a cell typed above
        digest = hashlib.blake2s(np.ascontiguousarray(a).tobytes(), digest_size=6).hexdigest()
        text_key = keys.PASTE_TEXT(name, head, version, digest)
        # a number takes at least 4 characters with its separator ("0.0, "): a larger matrix
        # is not written out at all
        written = matrix_files.matrix_to_text(a) if 4 * a.size <= MAX_MATRIX_CHARS else None
        if written is None or len(written) > MAX_MATRIX_CHARS:   # more than a box holds
            st.caption(t("edit.paste.too_long", numbers=f"{a.size:,}",
                         limit=f"{MAX_MATRIX_CHARS:,}"))
            written = ""
        # the box and Apply in one form: the text goes with the click. Alone, the box sends
        # its text when it loses focus, a run of its own, and a click on Apply made meanwhile
        # can be lost (streamlit#8725: seen here on a loaded server, the paste never applied)
        with st.form(keys.PASTE_FORM(name, head), border=False):
            # only the browser writes this box: a longer value is cut by Streamlit (max_chars)
            st.text_area(t("edit.paste.text"), value=written, key=text_key, height=150,
                         max_chars=MAX_MATRIX_CHARS, help=t("edit.paste.help"))
            applied = st.form_submit_button(t("edit.paste.apply"), key=keys.APPLY(name, head))
        at_limit(st.session_state[text_key], MAX_MATRIX_CHARS)
        notes_key = keys.PASTE_NOTES(name)       # how an ambiguous text was read (1,5 → 1.5)
        error_key = keys.PASTE_ERROR(name)
        if applied:
            st.session_state.pop(notes_key, None)
            _try_set(mount, lambda: _noted(parse_matrix_with_notes(
                st.session_state[text_key], name=what), notes_key), error_key)
        file = st.file_uploader(t("edit.paste.upload"), type=["csv", "txt", "npy"],
                                key=keys.UPLOAD_MATRIX(name, head, version),
                                max_upload_size=matrix_files.MAX_UPLOAD_MB)
        if file is not None:
            _try_set(mount, lambda: _noted(matrix_files.read_matrix_file_with_notes(
                file.name, file.getvalue()), notes_key), error_key)
        for note in st.session_state.get(notes_key, []):
            st.info(literal(note))
        if st.session_state.get(error_key):
            st.error(literal(st.session_state[error_key]))


def _noted(read: tuple[np.ndarray, list[str]], notes_key: str) -> np.ndarray:
    """The matrix of a (matrix, notes) reading; the notes kept for the page to show."""
    st.session_state[notes_key] = read[1]
    return read[0]


def _try_set(mount: EditorMount, read, error_key: str) -> None:
    """Replace the matrix (or one head's slice) with `read()`, if it parses and fits."""
    try:
        new = edits.with_matrix(mount.full, mount.name, mount.head, read())
    except AttnvizInputError as exc:      # kept as its Message: shown in the language of the run
        st.session_state[error_key] = exc.message or str(exc)
        return
    st.session_state.pop(error_key, None)
    state.set_matrix(mount.signature, mount.name, new, mount.tokens)
    st.rerun(scope="app")


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
    return view.error, tuple(state.edits(view)), st.session_state.get(keys.LINK_HAS_EDITS)


def page_changed(mount: EditorMount) -> bool:
    """After a typed cell: does the page around the editor show something else now? Always
    in the Toy model mode, whose answer with the edits is shown above the editor."""
    view = state.current_view()
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
