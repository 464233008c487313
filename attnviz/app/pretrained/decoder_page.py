"""The Pretrained model page with a causal model chosen (the decoder SmolLM2-135M-Instruct): its
tokens as readable pieces, a note on its causal mask and its shared key/value heads, and the
page's three views — one head, every layer and head (30 × 9), one layer's heads as lines between
tokens."""

from __future__ import annotations

import numpy as np
import streamlit as st

from attnviz.core.errors import AttnvizInputError
from attnviz.core.grouped_query import query_heads
from attnviz.i18n import t
from attnviz.models.decoders.decoder import DecoderRun
from attnviz.models.catalogue.registry import ModelEntry
from attnviz.plot import budget, figures, model_figures
from attnviz.session.decoder_runs import cached_decoder_run
from attnviz.app.pretrained.pretrained_view import (ModelRun, head_view_chart, keep_in_range,
                                                    keep_tab, pick_heads, pick_number, pick_token,
                                                    sentence_and_limit, shared_figure,
                                                    step_through_button)
from attnviz.app.shared.text import code, literal, token_line
from attnviz.app.shared.decoder_view import head_reads
from attnviz.app import keys
from attnviz.app.shared import model_loading, scales, state, widgets
from attnviz.app.shared.model_words import entry_text

# the model view's maps, at most this many pixels a side, halved until the figure fits its
# budget (270 maps: a long text's would not fit at 128)
MODEL_VIEW_SIDES = (128, 64, 32, 16)
MODEL_VIEW_MAX_BYTES = budget.PAGE_MAX_BYTES - budget.SMALL_CHARTS_BYTES


def render(entry: ModelEntry, tabs: list[str]) -> None:
    """The page's body below its title for the model of `entry`; `tabs` the views' message
    ids, in order."""
    st.caption(entry_text("pretrained.caption", entry))
    run = load(entry)
    model = model_loading.decoder(entry)
    if run.truncated:
        st.info(t("decoder.truncated", total=run.total, shown=len(run.ids)))
    st.subheader(t("pretrained.tokens", count=len(run.ids)))
    token_list(run)
    st.info(t("decoder.mask_note") + window_text(model.config) + " "
            + sharing_text(model.num_heads, model.num_kv_heads), icon=":material/info:")
    view = ModelRun(attentions=run.attentions, tokens=list(run.tokens),
                    positions=np.arange(len(run.ids)))
    layers, heads = run.attentions.shape[:2]

    def one_head_tab() -> None:
        keep_in_range(keys.PT_DEC_LAYER, layers, st.session_state.get(keys.LAYER, 0))
        layer = st.selectbox(t("pretrained.pick.layer"), list(range(layers)),
                             persist_state="session", key=keys.PT_DEC_LAYER,
                             format_func=_layer_name)
        head = pick_number("head", heads, keys.PT_DEC_HEAD,
                           default=st.session_state.get(keys.HEAD, 0))
        st.caption(head_reads(head, model.num_heads, model.num_kv_heads))
        scale = scales.weight_scale_picker(len(view.tokens))
        widgets.chart(one_head_heatmap(view, layer, head, scale,
                                       window=model.config.window_of(layer)),
                      key=keys.PT_DEC_HEATMAP)
        step_through_button(layer, head)

    def model_view_tab() -> None:
        scale = scales.weight_scale_picker(len(view.tokens))
        fig, side = shared_figure("decoder_model_view",
                                  lambda: model_view_in_budget(run.attentions, scale), scale)
        st.caption(t("decoder.model_view.caption", layers=layers, heads=heads,
                     scale=t(f"figure.weight_scale.{scale}"))
                   + (" " + t("pretrained.model_view.pooled", side=side)
                      if len(view.tokens) > side else ""))
        widgets.chart(fig, key=keys.PT_DEC_MODEL_VIEW)

    def head_view_tab() -> None:
        st.caption(t("pretrained.head_view.caption",
                     min_weight=model_figures.HEAD_VIEW_MIN_WEIGHT))
        keep_in_range(keys.PT_DEC_HV_LAYER, layers)
        controls = st.columns(2)
        with controls[0]:
            hv_layer = st.selectbox(t("pretrained.pick.layer"), list(range(layers)),
                                    persist_state="session", key=keys.PT_DEC_HV_LAYER,
                                    format_func=_layer_name)
        with controls[1]:
            token = pick_token(view, keys.PT_DEC_HV_TOKEN)
        shown_heads = pick_heads(heads, keys.PT_DEC_HV_HEADS)
        if not shown_heads:
            st.info(t("pretrained.head_view.no_heads"))
            return
        fig = shared_figure("decoder_head_view", lambda: model_figures.head_view(
            run.attentions[hv_layer], view.tokens, heads=shown_heads, highlight=token),
            hv_layer, tuple(shown_heads), token)
        head_view_chart(fig, view, keys.PT_DEC_HV_TOKEN, key=keys.PT_DEC_HEAD_VIEW)

    keep_tab(keys.PT_VIEW, tabs)
    draws = [one_head_tab, model_view_tab, head_view_tab]
    # only the open tab is drawn: every chart on a page is drawn before the first one shows
    for tab, draw in zip(st.tabs([t(i) for i in tabs], key=keys.PT_VIEW, on_change="rerun"), draws):
        if tab.open:
            with tab:
                draw()


def _layer_name(layer: int) -> str:
    return t("pretrained.pick.layer.option", number=layer)


def load(entry: ModelEntry) -> DecoderRun:
    """The model's run on the sidebar's sentence and token limit, with the model's progress
    indicator while it loads (model_loading) and a spinner while it runs; a problem is shown in
    the page, which stops there."""
    state.init()
    model = model_loading.decoder(entry)
    try:
        with st.spinner(t("pretrained.running", model=entry.shown)):
            return cached_decoder_run(*sentence_and_limit(), model)
    except AttnvizInputError as exc:
        st.error(t("pretrained.cannot_run", error=literal(exc)))
    st.stop()


def readable_tokens(run: DecoderRun) -> list[str]:
    """The tokens as the token line shows them: a character spread over several tokens (whose
    labels are only its parts, "早[1/2]", "早[2/2]") once, as itself."""
    shown, i = [], 0
    starts = {span.first: span for span in run.spans}
    while i < len(run.tokens):
        span = starts.get(i)
        if span is not None and all(run.tokens[j] == f"{span.text}[{j - span.first + 1}/"
                                                      f"{span.last - span.first + 1}]"
                                    for j in range(span.first, span.last + 1)):
            shown.append(span.text)
            i = span.last + 1
        else:
            shown.append(run.tokens[i])
            i += 1
    return shown


def token_list(run: DecoderRun) -> None:
    """The tokens in one row, a character split over byte tokens as one, and what they are."""
    st.markdown(token_line(readable_tokens(run)))
    sentencepiece = run.config.tokenizer == "llama"               # Gemma's: ▁ for a space
    st.caption(t("decoder.pieces_note" if sentencepiece else "decoder.bytes_note"))
    if run.spans:
        spans = t("decoder.span_list_separator").join(
            t("decoder.span", char=code(span.text), first=span.first, last=span.last)
            for span in run.spans[:8])
        more = len(run.spans) - 8
        st.caption(t("decoder.spans_note", spans=spans,
                     example=code(run.tokens[run.spans[0].first]))
                   + (" " + t("decoder.spans_more", count=more) if more > 0 else ""))


def window_text(config) -> str:
    """" On its local layers a query sees only the last 512 keys …" for a model with sliding
    and global layers; "" for one whose every layer sees every earlier key."""
    full = [i for i, kind in enumerate(config.layer_types) if kind == "full"]
    if config.sliding_window is None or len(full) == config.num_layers:
        return ""
    return " " + t("decoder.window_note", window=config.sliding_window,
                   layers=t("decoder.number_separator").join(map(str, full)))


def sharing_text(heads: int, kv_heads: int) -> str:
    """Which query heads share each key/value head: "0–2 → K/V 0, 3–5 → K/V 1, …"."""

    def group(kv: int) -> str:
        shared = query_heads(kv, heads, kv_heads)
        return t("decoder.sharing.group", first=shared[0], last=shared[-1], kv_head=kv)

    if kv_heads == 1:                                    # multi-query: one K/V head for all
        return t("decoder.sharing_multi_query", heads=heads)
    groups = t("decoder.span_list_separator").join(group(kv) for kv in range(kv_heads))
    return t("decoder.sharing", heads=heads, kv_heads=kv_heads, groups=groups)


def causal_mask(n: int, window: int | None = None) -> np.ndarray:
    """(n, n) bool, True = masked: a key after its query, and with a sliding `window` a key
    `window` or more positions before it (the layer's own mask)."""
    back = np.arange(n)[:, None] - np.arange(n)[None, :]          # query − key
    return (back < 0) if window is None else (back < 0) | (back >= window)


def one_head_heatmap(view: ModelRun, layer: int, head: int, weight_scale: str,
                     window: int | None = None):
    """One head's weights, the masked cells (the upper triangle, and keys outside a sliding
    `window`) marked as masked; the page's main map."""
    n = len(view.tokens)
    return figures.heatmap(view.attentions[layer, head], row_labels=view.tokens,
                           col_labels=view.tokens, kind="weights",
                           masked=causal_mask(n, window),
                           weight_scale=weight_scale,
                           title=t("pretrained.one_head.title", layer=layer, head=head),
                           max_bytes=budget.MAIN_MAX_BYTES)


def model_view_in_budget(attentions: np.ndarray, weight_scale: str):
    """The model view of every layer and head with maps as large as the figure budget allows:
    (figure, the largest side of a map in pixels)."""
    for side in MODEL_VIEW_SIDES:
        fig = model_figures.model_view(attentions, max_side=side, weight_scale=weight_scale)
        if budget.figure_bytes(fig) <= MODEL_VIEW_MAX_BYTES:
            return fig, side
    return fig, side
