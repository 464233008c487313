"""Multi-head: every head's weights side by side, each head's Z, the concatenation, W_O, output."""

import streamlit as st

from attnviz.plot import budget, figures
from attnviz.core.modes import Mode
from attnviz.describe import steps
from attnviz.i18n import t
from attnviz.describe.labels import concat_labels, feature_labels
from attnviz.app import keys
from attnviz.app.shared import baseline, compare_view, decoder_view, scales, widgets
from attnviz.app.pretrained.pretrained_view import keep_tab

TABS = ("z", "concat", "output", "second")     # its tabs' labels: multihead.tab.<tab>


def render() -> None:
    """The page (its file in pages/ calls this; `attnviz app` registers it)."""
    view = widgets.page_view(t("multihead.title"), t("multihead.caption"))
    trace = view.trace
    comparison = baseline.compare(view)          # None unless a baseline is pinned
    baseline.status(comparison)

    st.subheader(t("multihead.grid.subheader", count=trace.num_heads))
    st.latex(trace.step("weights").formula + r",\quad h = 0, \dots, H-1")  # scale and mask
    scale = scales.weight_scale_picker(trace.n_k)
    widgets.chart(figures.heads_grid(trace, view.tokens_q, view.tokens_k, weight_scale=scale),
                  key=keys.MH_GRID)
    baseline.summary(comparison, "weights")
    decoder_view.multihead_notes(view)     # shared K/V heads, rotations, the causal mask


    def z_tab() -> None:
        st.subheader(t("multihead.z.subheader"))
        head = widgets.head_picker(view, key=keys.MH_HEAD)
        widgets.chart(figures.step_figure(trace, "z", head=head, tokens_q=view.tokens_q,
                                          tokens_k=view.tokens_k), key=keys.MH_Z)
        baseline.summary(comparison, "z")
        widgets.toggled_table(trace.z[head], view.tokens_q, feature_labels(trace.d_v),
                              key=keys.MH_Z_TABLE, label=t("multihead.z.table"))


    def concat_tab() -> None:
        concat = trace.step("concat")
        st.subheader(steps.title(trace, "concat"))
        st.latex(concat.formula)
        widgets.chart(figures.concat_figure(trace, view.tokens_q), key=keys.MH_CONCAT)
        baseline.summary(comparison, "concat")
        widgets.toggled_table(trace.concat, view.tokens_q, concat_features,
                              key=keys.MH_CONCAT_TABLE, label=t("multihead.concat.table"))


    def output_tab() -> None:
        if view.params is None:
            st.info(t("multihead.output.no_w_o"))
            return
        w_o = view.params.w_o
        each = budget.share(2, of=budget.PAGE_MAX_BYTES - budget.GRID_MAX_BYTES)  # below the grid
        st.subheader(f"W_O ({w_o.shape[0]} × {w_o.shape[1]})")
        widgets.chart(figures.heatmap(w_o, row_labels=concat_features,
                                      col_labels=feature_labels(w_o.shape[1]),
                                      title=t("figure.wo.title"),
                                      row_title=t("multihead.axis.concat_feature"),
                                      col_title=t("multihead.axis.output_feature"),
                                      max_bytes=each), key=keys.MH_WO)
        out = trace.step("output")
        st.subheader(steps.title(trace, "output"))
        st.latex(out.formula)
        widgets.chart(figures.step_figure(trace, "output", tokens_q=view.tokens_q, max_bytes=each),
                      key=keys.MH_OUTPUT)
        baseline.summary(comparison, "output")
        widgets.toggled_table(trace.output, view.tokens_q,
                              feature_labels(trace.output.shape[1]), key=keys.MH_OUTPUT_TABLE,
                              label=t("multihead.output.table"))


    concat_features = concat_labels(trace.num_heads, trace.d_v)
    SECTIONS = {t("multihead.tab.z"): z_tab, t("multihead.tab.concat"): concat_tab,
                t("multihead.tab.output"): output_tab}
    if view.settings.mode == Mode.SENTENCE:
        SECTIONS[t("multihead.tab.second")] = lambda: compare_view.sentence_tab(view)
    # a link's (or the other language's) label of a tab: this language's
    keep_tab(keys.MH_SECTION, [f"multihead.tab.{tab}" for tab in TABS])
    # only the open tab is drawn: every chart on a page is drawn before the first one shows
    for tab, draw in zip(st.tabs(list(SECTIONS), key=keys.MH_SECTION, on_change="rerun"),
                         SECTIONS.values()):
        if tab.open:
            with tab:
                draw()

    widgets.downloads(view, key=keys.MH_FILES)
