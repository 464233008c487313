"""Home: the sentence's tokens, every head's attention at a glance, the output, a map of steps."""

import streamlit as st

from attnviz.plot import figures
from attnviz.describe import steps
from attnviz.i18n import t
from attnviz.app import keys, scales, widgets
from attnviz.app.navigation import ICONS, PAGES
from attnviz.app.text import token_line

# the pages on Home's map: every page but Home, in the navigation's order; the link says
# nav.<name>, the caption home.map.<name>.caption
PAGE_MAP = [name for name, _ in PAGES[1:]]


def render() -> None:
    """The page (its file in pages/ calls this; `attnviz app` registers it)."""
    view = widgets.page_view(t("home.title"), t("home.caption"))
    trace = view.trace

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

    st.subheader(t("home.steps.subheader"))
    STEP_CHAIN = " → ".join(steps.title(trace, s.name) for s in trace.steps)
    for i, name in enumerate(PAGE_MAP):
        if i % 3 == 0:
            cols = st.columns(3)
        with cols[i % 3]:
            widgets.page_link(name, t(f"nav.{name}"), ICONS[name])   # short: a column is narrow
            st.caption(STEP_CHAIN if name == "steps" else t(f"home.map.{name}.caption"))

    widgets.downloads(view, key=keys.HOME_FILES)
