"""The toy model's answer beside the trained one, for the pages that show a trained layer (the
"Toy model" input): break a head by hand on Inputs & weights and see the prediction change."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from attnviz.core.errors import AttnvizInputError
from attnviz.i18n import t
from attnviz.session.view import View, toy_answers
from attnviz.models.trainer.toy_tasks import NO_TARGET
from attnviz.app import keys
from attnviz.app.shared import state
from attnviz.app.shared.text import literal

CHANGED_STYLE = "background-color: #fde2b8; font-weight: bold"
EDITED_ROW = "toy_view.row.edited"      # the message id of the row with the edits


def answers_frame(answers) -> pd.DataFrame:
    """One column per position; rows: the input, the right answer, the model's answer with the
    trained weights and with the edits (text: “–” where nothing is scored), named in the
    active language."""
    target = answers.target
    answer = t("toy_view.row.right")
    rows = {t("toy_view.row.input"): answers.sequence, answer: target,
            t("toy_view.row.trained"): answers.trained, t(EDITED_ROW): answers.edited}
    frame = pd.DataFrame({name: ["–" if y == NO_TARGET and name == answer else str(v)
                                 for v, y in zip(values, target)]
                          for name, values in rows.items()}).T
    frame.columns = [str(i) for i in range(len(target))]
    return frame


def prediction(view: View) -> None:
    """For a Toy model view: the model's answers on the shown sequence, trained against edited,
    the changed positions marked; nothing for any other input."""
    try:
        answers = toy_answers(view)
    except AttnvizInputError as exc:
        st.error(t("toy_view.error", error=literal(exc)))
        return
    if answers is None:
        return
    toy, layer = view.toy, view.settings.layer
    scored = answers.target != NO_TARGET
    changed = answers.changed
    with st.container(border=True):
        st.markdown(t("toy_view.heading", example=toy.example, layer=layer, step=toy.step))
        frame = answers_frame(answers)
        marks = pd.DataFrame("", index=frame.index, columns=frame.columns)
        marks.loc[t(EDITED_ROW), [c for c, ch in zip(frame.columns, changed) if ch]] = CHANGED_STYLE
        st.dataframe(frame.style.apply(lambda _: marks, axis=None), width="stretch",
                     key=keys.TOY_ANSWERS)
        right = [int(((a == answers.target) & scored).sum())
                 for a in (answers.trained, answers.edited)]
        of = int(scored.sum())
        if changed.any():
            where = t("toy_view.separator").join(str(i) for i in changed.nonzero()[0])
            st.caption(t("toy_view.changed", count=int(changed.sum()), where=where,
                         trained=right[0], edited=right[1], of=of))
        else:
            st.caption(t("toy_view.unchanged" if _has_edits(view) else "toy_view.no_edits",
                         right=right[0], of=of))
        if answers.x_edited:
            st.caption(t("toy_view.x_edited"))


def _has_edits(view: View) -> bool:
    return bool(state.edits(view))
