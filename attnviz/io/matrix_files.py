"""Reading a matrix from a CSV or .npy file's bytes (pickles refused), its size judged before a
number is read. The app's uploader (attnviz.app.shared.uploads) hands its files here."""

from __future__ import annotations

import io

import numpy as np

from attnviz.core.errors import AttnvizInputError
from attnviz.core.inputs import MAX_D_MODEL, MAX_TOKENS
from attnviz.core.matrix_text import (cell_name, decode_text, number_at, parse_matrix_with_notes,
                                      text_shape)

MAX_UPLOAD_MB = 20            # 512 × 1024 numbers as CSV text of ~25 characters each fit
MAX_ROWS, MAX_COLS = MAX_TOKENS, MAX_D_MODEL    # no matrix the app can use is larger


def read_matrix_file(name: str, data: bytes) -> np.ndarray:
    """A 2-D float matrix from a .npy or CSV/TXT file's bytes; AttnvizInputError otherwise.
    The shape is judged before the numbers are read (a .npy by its header, a CSV by its
    lines and first row), so an oversized file is refused without being parsed."""
    return read_matrix_file_with_notes(name, data)[0]


def read_matrix_file_with_notes(name: str, data: bytes) -> tuple[np.ndarray, list[str]]:
    """`read_matrix_file`, and what was understood on the way: the text's encoding when it was
    not UTF-8, a decimal comma (see attnviz.core.matrix_text.parse_matrix_with_notes)."""
    if name.lower().endswith(".npy"):
        return _read_npy(name, data), []
    text, encoding = decode_text(data, name)
    _check_shape(name, *text_shape(text))
    matrix, notes = parse_matrix_with_notes(text, name=name, max_rows=MAX_ROWS,
                                            max_cols=MAX_COLS)
    return matrix, ([encoding] if encoding else []) + notes


def _read_npy(name: str, data: bytes) -> np.ndarray:
    _check_npy_header(name, data)
    try:
        arr = np.load(io.BytesIO(data), allow_pickle=False)
    except ValueError as exc:
        if "pickle" in str(exc).lower():
            raise AttnvizInputError("error.npy.pickle", name=name) from None
        raise AttnvizInputError("error.npy.invalid", name=name, problem=str(exc)) from None
    except Exception as exc:  # noqa: BLE001 - any unreadable file is the user's input
        raise AttnvizInputError("error.npy.invalid", name=name, problem=str(exc)) from None
    if not isinstance(arr, np.ndarray):                  # np.load gave an NpzFile
        raise AttnvizInputError("error.npy.is_npz", name=name)
    if np.iscomplexobj(arr):
        raise AttnvizInputError("error.npy.complex", name=name)
    if arr.ndim == 1:
        arr = arr[None, :]
    if arr.ndim != 2 or not np.issubdtype(arr.dtype, np.number):
        raise AttnvizInputError("error.npy.not_2d", name=name, ndim=arr.ndim,
                                dtype=str(arr.dtype))
    if not np.isfinite(arr).all():
        row, col = np.argwhere(~np.isfinite(arr))[0]
        number_at(float(arr[row, col]), cell_name(name, row + 1, col + 1))
    return arr.astype(np.float64)


def _check_shape(name: str, rows: int, cols: int) -> None:
    if rows > MAX_ROWS or cols > MAX_COLS:
        raise AttnvizInputError("error.npy.too_large", name=name, rows=rows, cols=cols,
                                max_rows=MAX_ROWS, max_cols=MAX_COLS)


def _check_npy_header(name: str, data: bytes) -> None:
    """Refuse a .npy by its header alone: not a .npy, objects (a pickle), or too large."""
    buf = io.BytesIO(data)
    try:
        version = np.lib.format.read_magic(buf)
    except ValueError:
        return                                   # not a plain .npy (an .npz?): np.load says
    try:
        read = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                else np.lib.format.read_array_header_2_0)
        shape, _, dtype = read(buf)
    except (ValueError, SyntaxError) as exc:
        raise AttnvizInputError("error.npy.invalid", name=name, problem=str(exc)) from None
    if dtype.hasobject:
        raise AttnvizInputError("error.npy.pickle", name=name)
    if len(shape) in (1, 2):
        _check_shape(name, *((1,) + shape if len(shape) == 1 else shape))


def matrix_to_text(arr: np.ndarray) -> str:
    """Each number exactly (its shortest round-trip decimal), so applying the text unchanged
    gives back the same matrix."""
    return "\n".join(", ".join(repr(float(v)) for v in row) for row in np.atleast_2d(arr))
