"""Small streamlit pieces every page uses: status messages, a heatmap with its table, pickers."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
import streamlit as st

from attnviz.i18n import language, t, use_language
from attnviz.session.edits import shown_name
from attnviz.describe.labels import unique
from attnviz.session.view import NO_TOY_RUN, View
from attnviz.core.modes import Mode
from attnviz.app import keys
from attnviz.app.shared import navigation, state
from attnviz.app.shared.text import literal

IMAGE_FORMATS = ("png", "svg")
TABLE_MAX_CELLS = 40_000      # larger tables show their first rows only


def show_status(view: View) -> bool:
    """Show the view's notices and error; False when there is nothing to draw."""
    for notice in view.notices:
        st.info(literal(notice))
    if view.trace is not None:
        for warning in view.trace.warnings:
            st.warning(literal(warning))
    if view.error:
        st.error(t("status.cannot_compute", error=literal(view.error)))
        return False
    return True


def page_view(title: str, caption: str) -> View:
    """A step page's top: the session's state, the page's `title` and `caption`, and its view
    (:func:`view_or_stop`)."""
    state.init()
    st.title(title)
    st.caption(caption)
    return view_or_stop()


def view_or_stop(*, editor: bool = False) -> View:
    """The current view for a page; its notices shown, or its error shown and the page
    stopped when there is nothing to draw. When edited cells make a step overflow, the error
    names them; the page with the `editor` goes on (it shows the matrices without a trace, and
    its own Reset edits), any other offers a button to the cell and Reset edits. A view of
    SmolLM2's layers loads the model first, with its progress indicator (model_loading)."""
    s = state.settings()
    if s.mode == Mode.PRETRAINED and s.model_entry.causal:
        from attnviz.app.shared import model_loading

        model_loading.decoder(s.model_entry)
    view = state.current_view()
    if not show_status(view):
        if view.error.msg_id == NO_TOY_RUN:
            page_link("train", t("sidebar.toy.train_link"), ":material/model_training:")
        if view.blamed_cells:
            if editor:
                return view
            _ways_out(view)
        st.stop()
    return view


def _ways_out(view: View) -> None:
    """A button to the first cell named in the view's error (its matrix and head chosen on
    Inputs & weights), and Reset edits."""
    cell = view.blamed_cells[0]
    row = st.container(horizontal=True)
    if action_button(":material/edit: " + t("widgets.change_on_inputs",
                                             matrix=shown_name(cell.name, cell.head)),
                     _pick_matrix, (cell.name, cell.head), key=keys.OVERFLOW_TO_CELL,
                     where=row, rerun=False):
        switch_page("inputs")
    action_button(":material/restart_alt: " + t("widgets.reset_edits"), state.reset_edits,
                  (view.signature,), key=keys.OVERFLOW_RESET, where=row,
                  help=t("widgets.reset_edits.help"))


def _pick_matrix(name: str, head: int | None) -> None:
    """Choose `name` (and its `head`) in the Inputs & weights page's pickers."""
    st.session_state[keys.MATRIX] = name
    if head is not None:
        st.session_state[keys.EDIT_HEAD] = head


def table(array: np.ndarray, rows, cols, *, key: str | None = None) -> None:
    """The same numbers as the heatmap, as a table with the token labels as headers."""
    a = np.atleast_2d(np.asarray(array, dtype=np.float64))
    limit = max(1, TABLE_MAX_CELLS // max(1, a.shape[1]))
    if a.shape[0] > limit:
        st.caption(t("widgets.table.first_rows", limit=limit, count=a.shape[0]))
    frame = pd.DataFrame(a[:limit], index=unique(rows)[:limit], columns=unique(cols))
    st.dataframe(frame, key=key, width="stretch")


def table_toggle(label: str | None = None, *, key: str) -> bool:
    """A toggle, off by default, for a table whose numbers the chart above already shows: a
    table loads a grid component first, which delays the page's first chart by about half a
    second, so it is drawn only on request."""
    return st.toggle(t("widgets.table.show") if label is None else label,
                     persist_state="session", key=keys.SHOWN(key))


def toggled_table(array: np.ndarray, rows, cols, *, key: str,
                  label: str | None = None) -> None:
    """`table` behind `table_toggle`."""
    if table_toggle(label, key=key):
        table(array, rows, cols, key=key)


def chart(fig, *, key: str, on_click=None, args: tuple = ()) -> None:
    """A plotly chart whose camera button saves it as PNG or SVG (the Download expander's
    choice) under a file name that says what it shows. With `on_click`, a click on one of its
    points calls ``on_click(points, *args)`` before the page draws again (`points` the
    selection Streamlit reports: dicts with "x", "y", "curve_number" …; empty when a click
    cleared it)."""
    fmt = st.session_state.get(keys.IMAGE_FORMAT, "png")
    fmt = fmt if fmt in IMAGE_FORMATS else "png"
    config = {"displaylogo": False,
              "toImageButtonOptions": {"format": fmt, "filename": f"attnviz_{key}",
                                       "scale": 2 if fmt == "png" else 1}}
    if on_click is None:
        st.plotly_chart(fig, key=key, config=config, theme=None)
        return

    def callback() -> None:
        event = st.session_state.get(key)
        on_click(list(event.selection.points) if event else [], *args)

    st.plotly_chart(fig, key=key, config=config, theme=None, on_select=callback,
                    selection_mode="points")


def array_downloads(arrays, json_text, name: str, *, key: str) -> None:
    """Two download buttons beside each other: `arrays()` (a dict of arrays) as
    ``attnviz_<name>.npz`` and `json_text()` (a JSON text) as ``attnviz_<name>.json``, each
    made when clicked."""
    def npz() -> bytes:
        out = io.BytesIO()
        np.savez(out, **arrays())
        return out.getvalue()

    left, right = st.columns(2)
    left.download_button(t("downloads.arrays"), npz, f"attnviz_{name}.npz",
                         "application/octet-stream", key=keys.NPZ(key), on_click="ignore",
                         icon=":material/download:")
    right.download_button(t("downloads.numbers"), json_text, f"attnviz_{name}.json",
                          "application/json", key=keys.JSON(key), on_click="ignore",
                          icon=":material/download:")


def head_picker(view: View, *, key: str = keys.HEAD) -> int:
    """A head selector (hidden for one head); the choice is kept in range."""
    n = (view.trace or view.params).num_heads     # params alone: a trace that overflowed
    current = st.session_state.get(key)
    if not isinstance(current, int) or not 0 <= current < n:
        st.session_state[key] = 0
    if n == 1:
        return 0
    return st.segmented_control(t("widgets.head"), list(range(n)),
                                persist_state="session", key=key, required=True,
                                format_func=_head_name)


def _head_name(h: int) -> str:
    """A head's name in the active language (a module function: a widget keeps its
    format_func for the session's life)."""
    return t("figure.head", head=h)


def action_button(label: str, action, args: tuple = (), *, key: str, where=st,
                  rerun: bool = True, **options) -> bool:
    """A button that calls `action(*args)` when clicked, before the page draws (as on_click
    does, so what it changes shows at once); True in the run it was clicked. On a session's
    first run (the first click after a server restart) Streamlit does not know the callback
    yet and only the click reaches the page: then the action is done here, and the page
    reruns to show it (unless not `rerun`: the caller moves on itself, e.g. to another page).
    `where` is a container (default: the page)."""
    done = keys.DONE(key)

    def callback() -> None:
        st.session_state[done] = True
        action(*args)

    clicked = where.button(label, key=key, on_click=callback, **options)
    if clicked and not st.session_state.pop(done, False):
        action(*args)
        if rerun:
            st.rerun()
    return clicked


def page_link(name: str, label: str, icon: str) -> None:
    """A link to page `name` (attnviz.app.shared.navigation.PAGES)."""
    st.page_link(navigation.page(name), label=label, icon=icon)


def switch_page(name: str) -> None:
    """Go to page `name` now (the run ends here)."""
    st.switch_page(navigation.page(name))


def downloads(view: View, *, key: str) -> None:
    """Every intermediate of the view's trace as .npz, CSV zip, JSON and an offline HTML report,
    with the page's token labels (and, in the report, its input and settings); each file is
    made only when its button is clicked, and a click does not rerun the page (so a second
    click while the first file is made is not lost). The buttons keep only the settings and
    edits, never the trace: a session that left holds no trace for the minutes it lingers."""
    import io

    from attnviz.io.report import report_html
    from attnviz.session.build import build_view
    from attnviz.session.view_files import view_to_json, view_to_npz

    recipe = (view.settings, dict(state.edits(view)), view.toy)   # no intermediate arrays

    def rebuilt() -> View:
        return build_view(*recipe)

    def npz() -> bytes:
        buf = io.BytesIO()
        view_to_npz(rebuilt(), buf)              # with the settings: view_from_file reads it
        return buf.getvalue()

    def csv_zip() -> bytes:
        v, buf = rebuilt(), io.BytesIO()
        v.trace.to_csv_zip(buf, v.tokens_q, v.tokens_k)
        return buf.getvalue()

    def json_text() -> str:
        return view_to_json(rebuilt())

    lang = language()     # a deferred file is made outside the script run: in this run's language

    def report() -> str:
        v = rebuilt()
        with use_language(lang):
            return report_html(v.trace, v.tokens_q, v.tokens_k, settings=v.settings)

    with st.expander(t("downloads.label")):
        cols = st.columns(4)
        cols[0].download_button(t("downloads.npz"), npz, "attnviz_trace.npz",
                                "application/octet-stream", key=keys.NPZ(key),
                                on_click="ignore")
        cols[1].download_button(t("downloads.csv"), csv_zip, "attnviz_trace_csv.zip",
                                "application/zip", key=keys.CSV(key),
                                on_click="ignore")
        cols[2].download_button("JSON", json_text, "attnviz_trace.json", "application/json",
                                key=keys.JSON(key), on_click="ignore")
        cols[3].download_button(t("downloads.html"), report, "attnviz_report.html",
                                "text/html", key=keys.HTML(key), on_click="ignore")
        st.radio(t("downloads.image_format"), IMAGE_FORMATS,
                 persist_state="session", key=keys.IMAGE_FORMAT, horizontal=True,
                 format_func=str.upper)
