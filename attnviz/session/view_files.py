"""A view in a file, and back: the view's trace as .npz or JSON with its token labels and its
settings, and the view rebuilt from such a file alone (its settings, and its edits where the
file's matrices differ from what the settings make). No streamlit."""

from __future__ import annotations

import numpy as np

from attnviz.core.errors import AttnvizInputError
from attnviz.io import files
from attnviz.session.build import build_view
from attnviz.session.edits import Edit, make_edit
from attnviz.session.settings import TOY_MODE, Settings
from attnviz.session.view import View, current_matrices


def view_to_npz(view: View, file) -> None:
    """The view's trace as .npz (``attnviz.io.files.to_npz``) with its token labels and its
    settings (key ``settings``: JSON text), to a path or binary file object."""
    files.to_npz(view.trace, file, view.tokens_q, view.tokens_k,
                 settings=view.settings.to_dict())


def view_to_json(view: View) -> str:
    """The view's trace as JSON (``attnviz.io.files.to_json``) with its token labels and its
    settings (under ``"settings"``)."""
    return files.to_json(view.trace, view.tokens_q, view.tokens_k,
                         settings=view.settings.to_dict())


def view_from_file(file) -> View:
    """The view a .npz or JSON export was made from, rebuilt from the file alone: its settings
    make the input and the weights, and its X and parameters, where they differ from what the
    settings make, are the user's edits. `file`: a path, bytes, JSON text or a binary file
    object. AttnvizInputError when the file has no settings (a trace saved from Python) or is
    from the Toy model input (its trained run lives in the session, not in a file)."""
    return build_view(*recipe_from_file(file))


def recipe_from_file(file) -> tuple[Settings, dict[str, Edit], None]:
    """What `view_from_file` hands to `build_view`: (settings, edits, no toy run)."""
    settings_values, arrays = files.read_export(file)
    if settings_values is None:
        raise AttnvizInputError("error.file.no_settings")
    s = Settings.from_dict(settings_values)
    if s.mode == TOY_MODE:
        raise AttnvizInputError("error.file.toy_view")
    base = build_view(s)
    if base.error:
        raise AttnvizInputError("error.file.no_view", error=base.error)
    edits = {}
    for name, made in current_matrices(base).items():
        saved = arrays.get(name)
        if saved is not None and not np.array_equal(saved, made):
            edits[name] = make_edit(name, saved, base.tokens_q)
    return s, edits, None
