"""Step by step: walk `trace.steps` with its formula, explanation, heatmap and table, per head,
and follow one query token through the vector view of tutorials 000 and 003."""

import streamlit as st

from attnviz.plot import figures
from attnviz.describe import steps
from attnviz.i18n import t
from attnviz.app import keys
from attnviz.app.steps import steps_view
from attnviz.app.shared import baseline, decoder_view, scales, state, toy_view, widgets


def render() -> None:
    """The page (its file in pages/ calls this; `attnviz app` registers it)."""
    state.init()
    st.title(t("steps.title"))
    view = widgets.view_or_stop()
    trace = view.trace

    names = [s.name for s in trace.steps]
    steps_view.keep_step_in_range(names)
    head = widgets.head_picker(view)
    nav = st.columns([2, 5, 2], vertical_alignment="bottom")
    # before the step box: they may move it
    for where, label, delta, end in ((nav[0], "◀ " + t("steps.previous"), -1, names[0]),
                                     (nav[2], t("steps.next") + " ▶", 1, names[-1])):
        widgets.action_button(label, steps_view.move_step, (names, delta),
                              key=keys.STEP_GO(f"{delta:+d}"), where=where,
                              disabled=st.session_state[keys.STEP] == end, width="stretch")
    # a dict's lookup, not a lambda: a widget keeps its format_func for the session's life, and a
    # lambda here would keep this page's globals (the trace) with it; the titles are in the
    # active language (keys.STEP is marked formatted)
    titles = {n: f"{i + 1}. {steps.title(trace, n)}" for i, n in enumerate(names)}
    nav[1].selectbox(t("steps.step"), names, persist_state="session", key=keys.STEP,
                     format_func=titles.get)
    comparison = baseline.compare(view)          # None unless a baseline is pinned
    baseline.step_controls(comparison)

    step = trace.step(st.session_state[keys.STEP])
    title = steps.title(trace, step.name)
    st.subheader(t("figure.title.head", title=title, head=head) if step.per_head else title)
    cited = steps.tutorial_step(trace, step.name)
    if cited:
        st.caption(":material/menu_book: " + cited)    # tutorial 000's step it follows
    st.latex(step.formula)
    st.write(step.explanation)

    query = steps_view.query_picker(view) if step.name == "weighted_values" else None
    scale = scales.weight_scale_picker(trace.n_k) if step.name == "weights" else "fixed"
    fig = figures.step_figure(trace, step.name, head=head, tokens_q=view.tokens_q,
                              tokens_k=view.tokens_k, query=query, weight_scale=scale,
                              max_bytes=figures.MAIN_MAX_BYTES)   # beside two detail maps at most
    widgets.chart(fig, key=keys.STEP_MAP(step.name))
    array, rows, cols = steps_view.table_of(view, step, head, query)
    widgets.toggled_table(array, rows, cols, key=keys.STEP_TABLE(step.name))
    decoder_view.step_notes(view, step.name, head)   # rotations, shared K/V heads, causal mask
    toy_view.prediction(view)          # Toy model input: its answer, trained and with the edits
    baseline.step_change(view, comparison, step, head, query)

    st.divider()
    steps_view.vector_view(view, head)

    widgets.downloads(view, key=keys.STEPS_FILES)
