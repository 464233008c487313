"""An edit that makes a step overflow: `trace_edited` runs the trace on the edited matrices and,
when a step overflows because of edited cells, finds the fewest that do it and names them as
the editor shows them (`View.blamed_cells`, and the error). No streamlit."""

from __future__ import annotations

import numpy as np

from attnviz.core.engine import AttentionTrace
from attnviz.core.errors import AttnvizInputError, OverflowInStep
from attnviz.core.matrix_text import cell_name
from attnviz.core.weights import PARAMETERS
from attnviz.describe.labels import matrix_labels, unique
from attnviz.i18n import Message, t
from attnviz.session.edits import CATALOGUE, shown_name
from attnviz.session.view import Blame, View


OVERFLOWING = ("q", "k", "v", "scores", "masked_scores", "z", "output")   # overflow.step.<name>
BLAME_TRIES = 16              # the largest edited cells tried, one by one, to find the cause


def trace_edited(view: View, run, unedited: tuple, edited: tuple) -> AttentionTrace:
    """`run(x, w)` on the edited X and parameters (`edited`, beside the `unedited` pair);
    when a step overflows because of edited cells, the error names them and the step (so the
    learner can find and fix them) and `view.blamed_cells` lists them."""
    try:
        return run(*edited)
    except OverflowInStep as exc:
        step = exc.step
        if edited[0] is unedited[0] and edited[1] is unedited[1]:
            raise
        cells = _overflowing_cells(view, run, unedited, edited)
        if not cells:
            raise
        view.blamed_cells = tuple(cells)
        raise AttnvizInputError(
            "error.overflow.edited", count=len(cells),
            cells=t("list.and").join(c.text for c in cells),
            step=Message(f"overflow.step.{step}") if step in OVERFLOWING else step) from None


def _overflowing_cells(view: View, run, unedited: tuple, edited: tuple) -> list[Blame]:
    """The fewest edited cells that, put alone into the unedited matrices, make `run` fail:
    edited cells are added largest first until it fails, then any not needed is dropped;
    empty when the BLAME_TRIES largest edited cells are not enough."""
    def arrays(x, w) -> dict:
        return {"x": x, **{n: getattr(w, n) for n in PARAMETERS if getattr(w, n) is not None}}

    old, new = arrays(*unedited), arrays(*edited)
    changed = []                                   # (|value|, name, index)
    for name, a in new.items():
        if name in old and old[name].shape == a.shape:
            for index in zip(*np.nonzero(a != old[name])):
                changed.append((abs(float(a[index])), name, tuple(int(i) for i in index)))
    changed.sort(key=lambda c: -c[0])

    def fails(cells: list) -> bool:
        trial = {name: np.array(a, dtype=np.float64) for name, a in old.items()}
        for _, name, index in cells:
            trial[name][index] = new[name][index]
        x = trial.pop("x")
        try:
            run(x, unedited[1].replace(**trial))
        except AttnvizInputError:
            return True
        return False

    for n in range(1, min(len(changed), BLAME_TRIES) + 1):
        if fails(changed[:n]):
            culprits = changed[:n]
            for c in list(culprits) if n > 1 else []:   # drop any that is not needed
                if fails([d for d in culprits if d is not c]):
                    culprits.remove(c)
            return [_blame(view, name, index, new[name][index]) for _, name, index in culprits]
    return []


def _blame(view: View, name: str, index: tuple, value: float) -> Blame:
    """The cell of `name` at `index` (in the full array), named as the editor shows it."""
    per_head = CATALOGUE[name].per_head
    head, where = (index[0], index[1:]) if per_head else (None, index)
    row, col = (0, where[0]) if len(where) == 1 else where
    w = view.params
    full = view.x_in if name == "x" else getattr(w, name)
    shape = np.atleast_2d(full[head] if per_head else full).shape
    rows, cols = matrix_labels(name, shape, view.tokens_q, w.num_heads, w.d_v)
    rows, cols = unique(rows), unique(cols)
    number = repr(float(value)).replace("e+", "e")
    where = cell_name(shown_name(name, head), row + 1, col + 1, rows[row], cols[col])
    return Blame(name, head, f"{where} = {number}")
