"""One head on two sentences: their weights side by side and, on the positions where both
sentences hold the same token, the difference (second − first). Used by the Pretrained model
page and, for the Sentence input, by Multi-head."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import streamlit as st

from attnviz.plot import budget, figures, text_layout
from attnviz.session.build import build_view
from attnviz.session.view import View
from attnviz.app import keys
from attnviz.app.shared import scales, state, widgets
from attnviz.app.shared.text import MAX_TEXT_CHARS, at_limit, bound, literal
from attnviz.i18n import t


def second_sentence_input(key: str, help: str) -> str | None:
    """The second sentence typed (None while the box is empty: the comparison is off)."""
    bound(key, MAX_TEXT_CHARS)
    other = st.text_input(t("compare.second.label"), persist_state="session", key=key,
                          placeholder=t("compare.second.placeholder"),
                          max_chars=MAX_TEXT_CHARS, help=help)
    at_limit(other, MAX_TEXT_CHARS)
    return other if other and other.strip() else None


def matching_positions(tokens_a: list[str], tokens_b: list[str]) -> list[int]:
    """The positions i where both token lists hold the same token (within the shorter one)."""
    return [i for i, (a, b) in enumerate(zip(tokens_a, tokens_b)) if a == b]


def side_by_side(weights_a: np.ndarray, tokens_a: list[str], weights_b: np.ndarray,
                 tokens_b: list[str], *, key: str, weight_scale: str = "fixed",
                 max_bytes: int = budget.PAGE_MAX_BYTES) -> None:
    """weights_a (n_a, n_a) and weights_b (n_b, n_b) of one head, on `weight_scale` (the
    page's colour scale), and their difference on the matching positions; the three maps
    share `max_bytes` (the figure budget left on the page)."""
    each = budget.share(3, of=max_bytes)
    left, right = st.columns(2)
    with left:
        widgets.chart(figures.heatmap(weights_a, row_labels=tokens_a, col_labels=tokens_a,
                                      kind="weights", title=t("figure.first_sentence"),
                                      weight_scale=weight_scale, max_bytes=each,
                                      width=text_layout.HALF_WIDTH), key=keys.FIRST(key))
    with right:
        widgets.chart(figures.heatmap(weights_b, row_labels=tokens_b, col_labels=tokens_b,
                                      kind="weights", title=t("figure.second_sentence"),
                                      weight_scale=weight_scale, max_bytes=each,
                                      width=text_layout.HALF_WIDTH), key=keys.SECOND(key))
    same = matching_positions(tokens_a, tokens_b)
    if not same:
        st.info(t("compare.no_match"))
        return
    delta = weights_b[np.ix_(same, same)] - weights_a[np.ix_(same, same)]   # (m, m)
    biggest = float(np.abs(delta).max())
    st.caption(t("compare.matching", count=len(same), biggest=f"{biggest:.4f}"))
    labels = [tokens_a[i] for i in same]
    widgets.chart(figures.heatmap(delta, row_labels=labels, col_labels=labels, kind="signed",
                                  title=t("figure.delta_weights", biggest=f"{biggest:.3f}"),
                                  value_name=t("figure.hover.delta"), max_bytes=each),
                  key=keys.DELTA(key))


def sentence_tab(view: View) -> None:
    """For the Sentence input: the same model (sizes, seed, your edited weights) on a second
    sentence, one head at a time. Edits to X belong to the first sentence's tokens: left out."""
    other = second_sentence_input(
        keys.MH_COMPARE, help=t("compare.second.help"))
    if other is None:
        st.info(t("compare.type_second"))
        return
    weight_edits = {name: e for name, e in state.edits(view).items() if name != "x"}
    second = build_view(replace(view.settings, sentence=other), weight_edits)
    if second.trace is None:
        st.error(t("compare.cannot", error=literal(second.error)))
        return
    if "x" in state.edits(view):
        st.caption(t("compare.x_edits"))
    head = widgets.head_picker(view, key=keys.MH_COMPARE_HEAD)
    side_by_side(view.trace.weights[head], view.tokens_q, second.trace.weights[head],
                 second.tokens_q, key=keys.MH_COMPARE, weight_scale=scales.current(view.trace.n_k),
                 max_bytes=budget.PAGE_MAX_BYTES - budget.GRID_MAX_BYTES)   # below the grid
