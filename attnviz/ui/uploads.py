"""Reading a matrix from an uploaded CSV or .npy file (pickles refused)."""

from __future__ import annotations

import io

import numpy as np
import streamlit as st

from ..errors import AttnvizInputError
from ..inputs import cell_name, number_at, parse_matrix
from .text import literal

MAX_UPLOAD_MB = 20


def read_matrix_file(name: str, data: bytes) -> np.ndarray:
    """A 2-D float matrix from a .npy or CSV/TXT file's bytes; AttnvizInputError otherwise."""
    if name.lower().endswith(".npy"):
        try:
            arr = np.load(io.BytesIO(data), allow_pickle=False)
        except ValueError as exc:
            if "pickle" in str(exc).lower():
                raise AttnvizInputError(
                    f"{name} holds Python objects (a pickle); only plain number arrays are "
                    "accepted") from None
            raise AttnvizInputError(f"{name} is not a valid .npy file ({exc})") from None
        except Exception as exc:  # noqa: BLE001 - any unreadable file is the user's input
            raise AttnvizInputError(f"{name} is not a valid .npy file ({exc})") from None
        if not isinstance(arr, np.ndarray):                  # np.load gave an NpzFile
            raise AttnvizInputError(f"{name} is a .npz archive of several arrays, not a .npy "
                                    "file of one matrix: save one array with np.save")
        if np.iscomplexobj(arr):
            raise AttnvizInputError(f"{name} holds complex numbers; only real numbers can be "
                                    "weights or inputs")
        if arr.ndim == 1:
            arr = arr[None, :]
        if arr.ndim != 2 or not np.issubdtype(arr.dtype, np.number):
            raise AttnvizInputError(
                f"{name} must hold a 2-D array of numbers, not {arr.ndim}-D {arr.dtype}")
        if not np.isfinite(arr).all():
            row, col = np.argwhere(~np.isfinite(arr))[0]
            number_at(float(arr[row, col]), cell_name(name, row + 1, col + 1))
        return arr.astype(np.float64)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise AttnvizInputError(f"{name} is not a text (CSV) file") from None
    return parse_matrix(text, name=name)


def matrix_to_text(arr: np.ndarray) -> str:
    """Each number exactly (its shortest round-trip decimal), so applying the text unchanged
    gives back the same matrix."""
    return "\n".join(", ".join(repr(float(v)) for v in row) for row in np.atleast_2d(arr))


def matrix_uploader(text_key: str, label: str) -> None:
    """A file uploader whose file, once read, replaces the text in `text_key`."""
    error_key = f"{text_key}_upload_error"

    def load():
        file = st.session_state.get(f"{text_key}_upload")
        if file is None:
            return
        try:
            st.session_state[text_key] = matrix_to_text(read_matrix_file(file.name,
                                                                         file.getvalue()))
            st.session_state.pop(error_key, None)
        except AttnvizInputError as exc:
            st.session_state[error_key] = str(exc)

    st.file_uploader(label, type=["csv", "txt", "tsv", "npy"], key=f"{text_key}_upload",
                     on_change=load, max_upload_size=MAX_UPLOAD_MB)
    if st.session_state.get(error_key):
        st.error(literal(st.session_state[error_key]))
