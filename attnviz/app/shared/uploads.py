"""The file uploader of a matrix's text box (reading the file: attnviz.io.matrix_files)."""

from __future__ import annotations

import streamlit as st

from attnviz.app.shared.text import MAX_MATRIX_CHARS, literal
from attnviz.core.errors import AttnvizInputError
from attnviz.i18n import Message
from attnviz.io.matrix_files import MAX_UPLOAD_MB, matrix_to_text, read_matrix_file_with_notes
from attnviz.app import keys


def matrix_uploader(text_key: str, label: str) -> None:
    """A file uploader whose file, once read, replaces the text in `text_key`; what was
    understood on the way (an encoding, a decimal comma) is said below it. A matrix whose
    exact text is longer than the box holds (text.MAX_MATRIX_CHARS) is refused, saying so."""
    error_key, notes_key = keys.UPLOAD_ERROR(text_key), keys.UPLOAD_NOTES(text_key)

    def load():
        file = st.session_state.get(keys.UPLOAD(text_key))
        st.session_state.pop(notes_key, None)
        if file is None:
            return
        try:
            matrix, notes = read_matrix_file_with_notes(file.name, file.getvalue())
            written = matrix_to_text(matrix)
            if len(written) > MAX_MATRIX_CHARS:
                st.session_state[error_key] = Message(
                    "upload.too_long_for_box", name=file.name, rows=matrix.shape[0],
                    cols=matrix.shape[1], chars=f"{len(written):,}",
                    limit=f"{MAX_MATRIX_CHARS:,}")
                return
            st.session_state[text_key] = written
            st.session_state[notes_key] = notes
            st.session_state.pop(error_key, None)
        except AttnvizInputError as exc:  # kept as its Message: shown in the language of the run
            st.session_state[error_key] = exc.message or str(exc)

    st.file_uploader(label, type=["csv", "txt", "tsv", "npy"], key=keys.UPLOAD(text_key),
                     on_change=load, max_upload_size=MAX_UPLOAD_MB)
    for note in st.session_state.get(notes_key, []):
        st.info(literal(note))
    if st.session_state.get(error_key):
        st.error(literal(st.session_state[error_key]))
