"""The user's edited matrices, streamlit-free: what can be edited, how an edit is applied, and
how edits travel in a link.

The catalogue lists every editable matrix once: its name in the trace (``w_q``), as the page
shows it (``W_Q``), the axes of one shown slice, and whether it has one slice per head. X is an
entry like the others; its rows are tokens, so an edit of X is kept with the tokens it was made
for and applies only while the input has the same tokens.

An edit store is ``{name: Edit}`` for one configuration (see
``attnviz.session.settings.weights_signature``).
Both ways of editing, cells typed in an editor and a whole matrix pasted or uploaded, go
through `typed_cells` (or `with_cells`) / `with_matrix` and give a new array; nothing is changed
in place.
"""

from __future__ import annotations

import base64
import binascii
import json
import zlib
from dataclasses import dataclass

import numpy as np

from attnviz.core.errors import AttnvizInputError
from attnviz.i18n import Message
from attnviz.core.matrix_text import cell_name, number_at


@dataclass(frozen=True)
class Editable:
    name: str                    # the field: "w_q"
    shown: str                   # as the page names it: "W_Q"
    axes: tuple[str, str]        # (rows, columns) of one shown slice
    per_head: bool               # one slice per head (the first axis)
    rows_are_tokens: bool = False


CATALOGUE = {e.name: e for e in (
    Editable("x", "X", ("token", "feature"), False, rows_are_tokens=True),
    Editable("w_q", "W_Q", ("input feature", "q feature"), True),
    Editable("w_k", "W_K", ("input feature", "k feature"), True),
    Editable("w_v", "W_V", ("input feature", "v feature"), True),
    Editable("w_o", "W_O", ("concat feature", "output feature"), False),
    Editable("b_q", "b_Q", ("bias", "q feature"), True),
    Editable("b_k", "b_K", ("bias", "k feature"), True),
    Editable("b_v", "b_V", ("bias", "v feature"), True),
    Editable("b_o", "b_O", ("bias", "output feature"), False),
)}
CELL_DIGITS = 4                  # significant digits an editor's cell shows (its heatmap: 3)
MAX_ENCODED_CHARS = 100_000      # longer link text is refused before it is decoded
MAX_DECODED_BYTES = 4 << 20      # nor is more than this inflated from it (no zip bomb)


@dataclass(frozen=True)
class Edit:
    """One edited matrix: the full array, and for a matrix whose rows are tokens, the tokens
    it was made for (None otherwise)."""

    array: np.ndarray
    tokens: tuple[str, ...] | None = None

    def applies_to(self, tokens) -> bool:
        return self.tokens is None or tuple(self.tokens) == tuple(tokens)


def entry(name: str) -> Editable:
    if name not in CATALOGUE:
        raise AttnvizInputError("error.edits.not_editable", name=repr(name),
                                names=", ".join(CATALOGUE))
    return CATALOGUE[name]


def shown_name(name: str, head: int | None = None) -> str:
    """The matrix as the page names it: "W_Q of head 0", "W_O", "X" (the active language)."""
    return str(matrix_name(name, head))


def matrix_name(name: str, head: int | None = None) -> str | Message:
    """`shown_name` as a Message, rendered when shown (an error's matrix, named in the language
    of whoever reads it)."""
    return entry(name).shown if head is None else \
        Message("edit.of_head", matrix=entry(name).shown, head=head)


def make_edit(name: str, array: np.ndarray, tokens) -> Edit:
    """An Edit of `name`, carrying the tokens when its rows are tokens."""
    return Edit(np.asarray(array, dtype=np.float64),
                tuple(tokens) if entry(name).rows_are_tokens else None)


def with_cells(current: np.ndarray, name: str, head: int | None, changes: dict,
               rows: list[str], cols: list[str]) -> np.ndarray:
    """A copy of `current` (the full array of `name`) with typed cells set.

    `changes` is a data editor's edited_rows: {row index: {column label: text}}, for the slice
    of `head` (or the whole matrix) whose shown labels are `rows` and `cols`. Each text is
    stored exactly as written or refused with AttnvizInputError naming the cell."""
    new = np.array(current, dtype=np.float64, copy=True)
    target = new if head is None else new[head]              # a view: writes go into `new`
    shown = matrix_name(name, head)
    for row, cells in changes.items():
        row = int(row)
        for col_label, value in cells.items():
            if str(col_label) not in cols:
                raise AttnvizInputError("error.edits.row_labels", matrix=shown)
            col = cols.index(str(col_label))
            where = cell_name(shown, row + 1, col + 1, rows[row], cols[col])
            number = number_at("" if value is None else value, where)
            target[(col,) if target.ndim == 1 else (row, col)] = number
    return new


def cell_text(value: float) -> str:
    """An editor cell's text: `value` to CELL_DIGITS significant digits, as short as it goes
    (1, 0.25, -9.023e-05). The cell keeps the exact value until another is typed into it
    (typed_cells); the paste box and the exports have every digit."""
    return f"{value:.{CELL_DIGITS}g}"


def typed_cells(base: np.ndarray, previous: np.ndarray, name: str, head: int | None,
                changes: dict, rows: list[str], cols: list[str]) -> tuple[np.ndarray, list[str]]:
    """The 2-D slice an editor holds after every cell typed into it: a copy of `base` (the slice
    the editor was opened on) with each cell of `changes` (its edited_rows, {row index:
    {column label: text}}, all its edits so far) set exactly as written. A cell given back its
    own shown text (cell_text: a cell opened and closed unchanged) keeps its exact value. A
    cell whose text is refused keeps its value in `previous` (the slice as stored before this
    change) and its problem, naming the cell, is listed; the other cells still land.
    Returns (new slice, problems)."""
    new = np.array(base, dtype=np.float64, copy=True)          # (rows, cols)
    shown, problems = matrix_name(name, head), []
    for row, cells in changes.items():
        row = int(row)
        for col_label, value in cells.items():
            if str(col_label) not in cols:
                problems.append(str(AttnvizInputError("error.edits.row_labels",
                                                      matrix=shown)))
                continue
            col = cols.index(str(col_label))
            if value == cell_text(base[row, col]):
                continue
            where = cell_name(shown, row + 1, col + 1, rows[row], cols[col])
            try:
                new[row, col] = number_at("" if value is None else value, where)
            except AttnvizInputError as exc:
                new[row, col] = previous[row, col]
                problems.append(str(exc))
    return new, problems


def with_matrix(current: np.ndarray, name: str, head: int | None,
                matrix: np.ndarray) -> np.ndarray:
    """A copy of `current` with the slice of `head` (or all of it) replaced by `matrix`, a
    pasted or uploaded matrix that must have the slice's shape (a bias: one row)."""
    new = np.array(current, dtype=np.float64, copy=True)
    target = new if head is None else new[head]
    matrix = np.asarray(matrix, dtype=np.float64)
    if target.ndim == 1 and matrix.ndim == 2 and matrix.shape[0] == 1:
        matrix = matrix.reshape(-1)
    if matrix.shape != target.shape:
        raise AttnvizInputError("error.edits.shape", matrix=matrix_name(name, head),
                                want=" × ".join(map(str, target.shape)),
                                shape=" × ".join(map(str, matrix.shape)))
    target[...] = matrix
    return new


# ---- in a link ---------------------------------------------------------------------------------

def encode(edits: dict[str, Edit], generated: dict[str, np.ndarray] | None = None) -> str:
    """Edits as compact URL-safe text (JSON, deflated, base64). With the `generated` matrices
    (by name, as the settings make them), a matrix of which only some cells were typed is
    written as those cells alone (``"cells": [[flat index, value], …]``), so a few typed
    numbers fit in a link whatever the matrix's size."""
    doc = {}
    for name, e in edits.items():
        item = {} if e.tokens is None else {"tokens": list(e.tokens)}
        base = None if generated is None else generated.get(name)
        if base is not None and base.shape == e.array.shape:
            changed = np.flatnonzero(e.array.reshape(-1) != base.reshape(-1))
            if 3 * changed.size < e.array.size:
                item["shape"] = list(e.array.shape)
                item["cells"] = [[int(i), float(e.array.reshape(-1)[i])] for i in changed]
                doc[name] = item
                continue
        item["values"] = e.array.tolist()
        doc[name] = item
    raw = zlib.compress(json.dumps(doc, separators=(",", ":")).encode("utf-8"), 9)
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def decode(text: str, generated=None) -> dict[str, Edit]:
    """The edits of `encode`; AttnvizInputError for anything else. `generated`: a function
    giving the matrices the settings make (by name), for edits written as typed cells alone;
    called only if there are such edits."""
    if len(text) > MAX_ENCODED_CHARS:
        raise AttnvizInputError("error.edits.link_too_long")
    try:
        inflate = zlib.decompressobj()
        raw = inflate.decompress(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)),
                                 MAX_DECODED_BYTES)
        if inflate.unconsumed_tail:
            raise AttnvizInputError("error.edits.too_large")
        doc = json.loads(raw.decode("utf-8"))
    except (ValueError, zlib.error, binascii.Error, UnicodeDecodeError, RecursionError):
        raise AttnvizInputError("error.edits.unreadable") from None
    if not isinstance(doc, dict):
        raise AttnvizInputError("error.edits.unreadable")
    edits, made = {}, []

    def generated_once() -> dict:
        if not made:
            made.append(generated() if generated is not None else {})
        return made[0]

    for name, value in doc.items():
        if name not in CATALOGUE or not isinstance(value, dict):
            raise AttnvizInputError("error.edits.not_editable_short", name=repr(str(name)[:20]))
        try:
            if "cells" in value:
                array = _from_cells(name, value, generated_once)
            else:
                array = np.array(value.get("values"), dtype=np.float64)
        except AttnvizInputError:
            raise
        except (TypeError, ValueError, IndexError, OverflowError):
            raise AttnvizInputError("error.edits.not_numbers", matrix=matrix_name(name)) \
                from None
        if array.ndim == 0 or not np.isfinite(array).all():
            raise AttnvizInputError("error.edits.not_finite", matrix=matrix_name(name))
        tokens = value.get("tokens")
        if entry(name).rows_are_tokens and not isinstance(tokens, list):
            raise AttnvizInputError("error.edits.no_tokens", matrix=matrix_name(name))
        edits[name] = make_edit(name, array, [str(token) for token in tokens or []])
    return edits


def _from_cells(name: str, value: dict, generated) -> np.ndarray:
    """A matrix written as its typed cells: the generated matrix with those cells set."""
    shape = tuple(int(n) for n in value.get("shape", ()))
    base = generated().get(name)
    if base is None or base.shape != shape:
        raise AttnvizInputError("error.edits.other_settings", matrix=matrix_name(name))
    array = np.array(base, dtype=np.float64).reshape(-1)
    cells = value["cells"]
    if not isinstance(cells, list) or len(cells) > array.size:
        raise ValueError("cells")
    for index, number in cells:
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < array.size:
            raise IndexError(index)
        array[index] = float(number)
    return array.reshape(shape)
