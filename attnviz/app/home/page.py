"""Home: where to start and a map of the pages, then the sentence's tokens, every head's
attention at a glance and the output."""

import streamlit as st

from attnviz.core.modes import Mode
from attnviz.plot import figures
from attnviz.describe import steps
from attnviz.i18n import t
from attnviz.app import keys
from attnviz.app.shared import scales, widgets
from attnviz.app.shared.navigation import ICONS, PAGES
from attnviz.app.shared.text import token_line

# the pages on Home's map: every page but Home, in the navigation's order; the link says
# nav.<name>, the caption home.map.<name>.caption
PAGE_MAP = [name for name, _ in PAGES[1:]]
START_PRESET = "three_inputs"     # where a newcomer starts: tutorial 003's worked example
RANDOM_MODES = (Mode.SENTENCE, Mode.MATRIX_X)     # the modes whose weights are drawn at random


def render() -> None:
    """The page (its file in pages/ calls this; `attnviz app` registers it)."""
    view = widgets.page_view(t("home.title"), t("home.caption"))
    trace = view.trace
    s = view.settings
    if s.mode in RANDOM_MODES and s.init != "identity":
        notice = t("home.random.notice", init=t(f"sidebar.init.option.{s.init}"), seed=s.seed,
                   pretrained=t("nav.pretrained"))
        if {"it", "animal"} <= set(view.tokens_q):         # tutorial 000's question
            notice += " " + t("home.random.it")
        st.info(notice, icon=":material/casino:")
    start_here()
    page_map(trace)

    st.subheader(t("home.tokens", count=len(view.tokens_q)))
    st.markdown(token_line(view.tokens_q))

    st.subheader(t("home.weights.subheader"))
    st.caption(t("home.weights.caption"))
    scale = scales.weight_scale_picker(trace.n_k)
    widgets.chart(figures.heads_grid(trace, view.tokens_q, view.tokens_k, weight_scale=scale),
                  key=keys.HOME_GRID)

    last = trace.steps[-1]
    st.subheader(steps.title(trace, last.name))
    st.latex(last.formula)
    widgets.chart(figures.step_figure(trace, last.name, tokens_q=view.tokens_q,
                                      tokens_k=view.tokens_k), key=keys.HOME_OUTPUT)

    widgets.downloads(view, key=keys.HOME_FILES)


def start_here() -> None:
    """Where to start: Step by step on a tutorial's worked example, one click away."""
    st.subheader(t("home.start.subheader"))
    st.caption(t("home.start.caption", steps=t("nav.steps")))
    if widgets.action_button(t("home.start.button", steps=t("nav.steps"),
                               preset=t(f"preset.{START_PRESET}.title")),
                             _open_tutorial, key=keys.HOME_START, rerun=False,
                             icon=ICONS["steps"], type="primary"):
        widgets.switch_page("steps")


def _open_tutorial() -> None:
    """on_click: the sidebar on the starting preset (widget keys can only be set before their
    widgets are drawn, so this runs as a callback)."""
    st.session_state[keys.MODE] = Mode.PRESET.value
    st.session_state[keys.PRESET] = START_PRESET


def page_map(trace) -> None:
    """A link to every other page, three to a row, each with what it shows."""
    st.subheader(t("home.steps.subheader"))
    step_chain = " → ".join(steps.title(trace, s.name) for s in trace.steps)
    for i, name in enumerate(PAGE_MAP):
        if i % 3 == 0:
            cols = st.columns(3)
        with cols[i % 3]:
            widgets.page_link(name, t(f"nav.{name}"), ICONS[name])   # short: a column is narrow
            st.caption(step_chain if name == "steps" else t(f"home.map.{name}.caption"))
