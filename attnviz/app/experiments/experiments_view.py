"""The nine experiments of the Experiments page, one function per tab (every word through the
catalogues: ids ``experiments.<tab>.<part>``)."""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
import pandas as pd
import streamlit as st

from attnviz.describe.labels import token_shown
from attnviz.i18n import t
from attnviz.plot import experiment_figures, figures, text_layout
from attnviz.tutorials import designs, experiments
from attnviz.core.errors import AttnvizInputError
from attnviz.core.grouped_query import kv_head
from attnviz.core.inputs import tokenize, truncate
from attnviz.describe.labels import feature_labels
from attnviz.session.view import View
from attnviz.tutorials.presets import load_preset
from attnviz.core.weights import MultiHeadWeights
from attnviz.models.catalogue import registry
from attnviz.models.decoders.decoder import MAX_TOKENS
from attnviz.models.catalogue.registry import ModelEntry
from attnviz.app import keys
from attnviz.app.shared import language, scales, widgets
from attnviz.app.shared.text import MAX_TEXT_CHARS, at_limit, literal, token_line

YOUR_X = "your input X"            # the source radios' second value (the first: "tutorial")
SOURCES = ("tutorial", YOUR_X)
DECODER_TEXT = "The capital of France is"
ROPE_SOURCES = ("model", "random")


def _weights_for(view: View) -> MultiHeadWeights:
    """The user's weights where there are some, else small random ones for their X."""
    if view.params is not None:
        return view.params
    d = view.trace.x.shape[1] if view.trace.x is not None else 8
    return MultiHeadWeights.random(d, 1, d_k=max(1, min(d, 8)), d_v=max(1, min(d, 8)))


def _tutorial_or_user_x(view: View, preset_name: str, label_id: str, key: str):
    """A radio between a tutorial preset's X and the user's own X: (x, tokens)."""
    source = st.radio(t("experiments.source.label"), SOURCES, horizontal=True,
                      persist_state="session", key=key,
                      format_func=lambda v: t(label_id) if v == "tutorial"
                      else t("experiments.source.yours"))
    if source == YOUR_X and view.trace.x is not None:
        return view.trace.x, view.tokens_q
    preset = load_preset(preset_name)
    return preset.x, preset.tokens


def _heat(a, rows, cols, *, key: str, title: str = "", kind: str = "signed", masked=None,
          row_title: str | None = None, col_title: str | None = None,
          weight_scale: str = "fixed", width: int = text_layout.NARROW_WIDTH) -> None:
    """A heatmap of the tab; `width` text_layout.HALF_WIDTH for one of two side by side."""
    widgets.chart(figures.heatmap(a, row_labels=rows, col_labels=cols, title=title, kind=kind,
                                  masked=masked, row_title=row_title or t("figure.axis.query"),
                                  col_title=col_title or t("figure.axis.key"),
                                  weight_scale=weight_scale, width=width), key=key)


def scaling_tab() -> None:
    st.markdown(t("experiments.scaling.intro"))
    d_k = st.slider("d_k", 1, experiments.MAX_SCALING_D_K, 64,
                    persist_state="session", key=keys.EXP_DK)
    r = experiments.scaling(d_k)
    c = st.columns(4)
    c[0].metric(t("experiments.scaling.variance"), f"{r.variance:.1f}",
                help=t("experiments.scaling.variance_help"))
    c[1].metric(t("experiments.scaling.theory"), f"{d_k}")
    c[2].metric(t("experiments.scaling.scaled_variance"), f"{r.scaled_variance:.3f}",
                help=t("experiments.scaling.scaled_variance_help"))
    c[3].metric(t("experiments.scaling.relative_error"), f"{abs(r.variance - d_k) / d_k:.1%}")
    widgets.chart(experiment_figures.dot_product_histogram(r), key=keys.EXP_HIST)
    key_names = [f"k{j}" for j in range(len(r.row_scores))]
    widgets.chart(experiment_figures.weight_bars(
        {"softmax(q·k)": r.row_unscaled, "softmax(q·k/√d_k)": r.row_scaled}, key_names,
        title=t("experiments.scaling.row_title", keys=len(key_names)),
        colours={"softmax(q·k)": experiment_figures.UNSCALED_COLOUR,
                 "softmax(q·k/√d_k)": experiment_figures.SCALED_COLOUR}), key=keys.EXP_ROW)
    st.table(pd.DataFrame({                     # a plain table: no data grid to load first
        t("experiments.scaling.max_weight"): [f"{r.row_unscaled.max():.6f}",
                                              f"{r.row_scaled.max():.6f}"],
        t("experiments.scaling.entropy"): [f"{r.entropy(r.row_unscaled):.6f}",
                                           f"{r.entropy(r.row_scaled):.6f}"],
        t("experiments.scaling.uniform"): [
            f"{1 / len(key_names):.6f}",
            t("experiments.scaling.bits", bits=f"{math.log2(len(key_names)):.6f}")]},
        index=[t("experiments.scaling.without"), t("experiments.scaling.with")]))
    st.caption(t("experiments.scaling.caption"))


def tied_tab(view: View) -> None:
    st.markdown(t("experiments.tied.intro"))
    x, tokens = _tutorial_or_user_x(view, "tied_qk", "experiments.tied.source",
                                    keys.EXP_TIED_SOURCE)
    r = experiments.tied_vs_separate(x, d_k=8)
    c = st.columns(2)
    for col, kind, tr in ((c[0], "tied", r.tied), (c[1], "separate", r.separate)):
        name = t(f"experiments.tied.{kind}")
        with col:
            st.metric(t("experiments.tied.asymmetry", name=name), f"{r.asymmetry(tr):.3g}")
            _heat(tr.scores[0], tokens, tokens, key=keys.EXP_TIED_SCORES(kind),
                  title=t("experiments.tied.chart", name=name), width=text_layout.HALF_WIDTH)
            widgets.table(tr.scores[0], tokens, tokens, key=keys.EXP_TIED_TABLE(kind))


def raw_tab(view: View) -> None:
    st.markdown(t("experiments.raw.intro"))
    x, tokens = _tutorial_or_user_x(view, "zao_shang_hao", "experiments.raw.source",
                                    keys.EXP_RAW_SOURCE)
    tr = experiments.raw_self_attention(x)
    scale = scales.weight_scale_picker(tr.n_k)
    c = st.columns(2)
    with c[0]:
        _heat(tr.scores[0], tokens, tokens, key=keys.EXP_RAW_SIM,
              title=t("experiments.raw.similarity"), width=text_layout.HALF_WIDTH)
    with c[1]:
        _heat(tr.weights[0], tokens, tokens, key=keys.EXP_RAW_W, kind="weights",
              title="softmax(X Xᵀ)", weight_scale=scale, width=text_layout.HALF_WIDTH)
    widgets.table(tr.weights[0], tokens, tokens, key=keys.EXP_RAW_TABLE)
    each = t("experiments.raw.separator").join(
        t("experiments.raw.weight_to", weight=f"{w:.2f}", token=k)
        for w, k in zip(tr.weights[0, 0], tokens))
    st.caption(literal(t("experiments.raw.row", token=tokens[0], weights=each)))


def order_tab(view: View) -> None:
    st.markdown(t("experiments.order.intro"))
    if view.params is None or len(view.tokens_q) < 2:
        st.info(t("experiments.order.needs"))
        return
    if st.button(t("experiments.order.shuffle"), key=keys.EXP_SHUFFLE):
        st.session_state[keys.EXP_SHUFFLE_SEED] = st.session_state.get(keys.EXP_SHUFFLE_SEED, 0) + 1
    seed = st.session_state.get(keys.EXP_SHUFFLE_SEED, 0)
    w = view.params
    r = experiments.word_order(view.tokens_q, w, shuffle_seed=seed,
                               embed_seed=view.settings.seed)
    st.markdown(t("experiments.order.shuffled", tokens=token_line(r.shuffled_tokens)))
    c = st.columns(2)
    c[0].metric(t("experiments.order.plain"), f"{r.plain_difference:.2e}",
                help=t("experiments.order.plain_help"))
    c[1].metric(t("experiments.order.encoded"), f"{r.encoded_difference:.3g}")
    _heat(r.positions, list(range(len(r.tokens))), feature_labels(w.d_model),
          key=keys.EXP_PE, title=t("experiments.order.encoding"),
          row_title=t("experiments.axis.position"), col_title=t("figure.axis.feature"))


def masks_tab(view: View) -> None:
    st.markdown(t("experiments.masks.intro"))
    if view.params is None:
        st.info(t("experiments.masks.needs"))
        return
    c = st.columns(2)
    max_len = c[0].number_input(t("experiments.masks.length"), 1, 64,
                                min(64, len(view.tokens_q) + 3),
                                persist_state="session", key=keys.EXP_LEN)
    causal = c[1].checkbox(t("experiments.masks.causal"), persist_state="session",
                           key=keys.EXP_CAUSAL)
    r = experiments.pad_and_mask(view.tokens_q, int(max_len), view.params, causal=causal,
                                 seed=view.settings.seed)
    if r.truncated:
        st.info(t("experiments.masks.truncated", count=r.truncated, length=max_len))
    tr = r.trace
    mask = None if tr.mask is None else tr.mask[0]
    scale = scales.weight_scale_picker(tr.n_k)
    c = st.columns(2)
    with c[0]:
        _heat(tr.masked_scores[0], r.tokens, r.tokens, key=keys.EXP_MASKED, masked=mask,
              title=t("experiments.masks.scores"), width=text_layout.HALF_WIDTH)
    with c[1]:
        _heat(tr.weights[0], r.tokens, r.tokens, key=keys.EXP_MASK_W, kind="weights",
              masked=mask, title=t("experiments.masks.weights"), weight_scale=scale,
              width=text_layout.HALF_WIDTH)
    masked_weights = tr.weights[0][mask] if mask is not None else np.array([])
    st.metric(t("experiments.masks.largest"), f"{masked_weights.max(initial=0.0):.1f}")
    widgets.table(tr.weights[0], r.tokens, r.tokens, key=keys.EXP_MASK_TABLE)
    for warning in tr.warnings:
        st.warning(literal(warning))


def cross_tab(view: View) -> None:
    st.markdown(t("experiments.cross.intro", code="`forward(query, key, value)`"))
    st.session_state.setdefault(keys.EXP_CROSS_TEXT,
                                language.default(keys.EXP_CROSS_TEXT, "Le chat est assis"))
    other = st.text_input(t("experiments.cross.second"), persist_state="session",
                          key=keys.EXP_CROSS_TEXT, max_chars=MAX_TEXT_CHARS)
    at_limit(other, MAX_TEXT_CHARS)
    try:
        other_tokens, _ = truncate(tokenize(other), 64)
    except AttnvizInputError as exc:
        st.error(t("experiments.cross.error", error=literal(exc)))
        return
    if view.params is None or view.trace.x is None:
        st.info(t("experiments.cross.needs"))
        return
    w = view.params
    if w.d_context != w.d_model:
        st.info(t("experiments.cross.fresh"))
        w = MultiHeadWeights.random(w.d_model, 1)
    tr = experiments.cross_attention(view.tokens_q, other_tokens, w, seed=view.settings.seed)
    _heat(tr.weights[0], view.tokens_q, other_tokens, key=keys.EXP_CROSS, kind="weights",
          title=t("experiments.cross.title", queries=tr.n_q, keys=tr.n_k),
          weight_scale=scales.weight_scale_picker(tr.n_k))
    widgets.table(tr.weights[0], view.tokens_q, other_tokens, key=keys.EXP_CROSS_TABLE)


def bug_tab(view: View) -> None:
    st.markdown(t("experiments.bug.intro", name="`Self_Attention`",
                  code="`nn.Softmax(dim=-1)(Q Kᵀ) * self._norm_fact`"))
    tr = view.trace
    r = experiments.scale_after_softmax(tr)
    c = st.columns(2)
    c[0].metric(t("experiments.bug.correct"), f"{r.correct.sum(axis=1).mean():.4f}")
    c[1].metric(t("experiments.bug.buggy"), f"{r.buggy.sum(axis=1).mean():.4f}",
                help=f"= 1/√d_k = 1/√{r.d_k} = {1 / math.sqrt(r.d_k):.4f}")
    scale = scales.weight_scale_picker(tr.n_k)
    c = st.columns(2)
    with c[0]:
        _heat(r.correct, view.tokens_q, view.tokens_k, key=keys.EXP_BUG_OK, kind="weights",
              title="softmax(QKᵀ/√d_k)", weight_scale=scale, width=text_layout.HALF_WIDTH)
    with c[1]:
        _heat(r.buggy, view.tokens_q, view.tokens_k, key=keys.EXP_BUG, kind="weights",
              title=t("experiments.bug.buggy_title"), weight_scale=scale,
              width=text_layout.HALF_WIDTH)
    widgets.table(np.column_stack([r.correct.sum(1), r.buggy.sum(1)]), view.tokens_q,
                  [t("experiments.bug.sum_correct"), t("experiments.bug.sum_buggy")],
                  key=keys.EXP_BUG_TABLE)


# ---- the decoder's experiments (the sidebar's decoder) ------------------------------------------

def _decoder_entry() -> ModelEntry:
    """The language model the sidebar's choice names (the sidebar's pretrained model where that
    is one, else the first: model_choice.language_model_choice; a pick is the model's)."""
    from attnviz.app.sidebar.model_choice import language_model_choice

    with st.sidebar:
        return language_model_choice()


def _decoder(entry: ModelEntry):
    """`entry`'s model with its progress indicator while it loads; None (and the error shown)
    when it cannot load."""
    from attnviz.app.shared import model_loading

    return model_loading.decoder(entry, stop=False)


@lru_cache(maxsize=4)
def _layer_qk(name: str, text: str, layer: int):
    """(tokens, q (H, n, d_k), k (H, n, d_k) before rotation, scores (H, n, n)) of one layer
    of decoder `name` on `text` (its first SINK_MAX_TOKENS tokens); k repeated per query head.
    The layer's q and k are QK-normed where the model norms them."""
    run = registry.get(name).load().run(text, max_tokens=experiments.SINK_MAX_TOKENS)
    tr = run.trace(layer)
    q = tr.q if tr.q_normed is None else tr.q_normed
    k = tr.k if tr.k_normed is None else tr.k_normed
    return run.tokens, q, k, tr.scores


@lru_cache(maxsize=8)
def _sink(name: str, text: str) -> experiments.AttentionSink:
    return experiments.attention_sink(registry.get(name).load(), text)


def _decoder_text(key: str, model: str) -> str | None:
    """The text box of a decoder tab for the model shown as `model`; None (and the error
    shown) when it is empty."""
    text = st.text_input(t("experiments.decoder.text", model=model), DECODER_TEXT, persist_state="session",
                         key=key, max_chars=MAX_TEXT_CHARS)
    at_limit(text, MAX_TEXT_CHARS)
    if not text:
        st.error(t("error.experiment.sink.empty"))
        return None
    return text


def rope_tab() -> None:
    st.markdown(_rope_intro())
    source = st.radio(t("experiments.source.label"), ROPE_SOURCES, horizontal=True,
                      persist_state="session", key=keys.EXP_ROPE_SOURCE,
                      format_func=lambda v: t(f"experiments.rope.source.{v}"))
    q_k = _model_qk() if source == "model" else _random_qk()
    if q_k is None:
        return
    q, k, m, n, base, model_score = q_k
    max_offset = st.slider(t("experiments.rope.max_offset"), 1, experiments.MAX_ROPE_OFFSET,
                           512, persist_state="session", key=keys.EXP_ROPE_OFFSET)
    try:
        r = experiments.rope_shift(q, k, m=m, n=n, base=base, max_offset=max_offset)
    except AttnvizInputError as exc:
        st.error(literal(exc))
        return
    c = st.columns(3)
    c[0].metric(t("experiments.rope.score", m=m, n=n), f"{r.score:.6f}",
                help=None if model_score is None
                else t("experiments.rope.score_help", score=f"{model_score:.6f}"))
    c[1].metric(t("experiments.rope.shift_change"), f"{r.shift_change:.1e}",
                help=t("experiments.rope.shift_change_help", offset=max_offset))
    c[2].metric(t("experiments.rope.distance_range"), f"{r.distance_range:.4f}",
                help=t("experiments.rope.distance_range_help", offset=max_offset))
    widgets.chart(experiment_figures.rope_scores(r), key=keys.EXP_ROPE_CHART)
    shown = sorted({0, 1, 10, 100, max_offset} & set(range(max_offset + 1)))
    st.table(pd.DataFrame({
        t("experiments.rope.column.offset"): [str(s) for s in shown],
        t("experiments.rope.column.together"): [
            f"({m + s}, {n + s}) → {r.shifted_scores[s]:.6f}"
            for s in shown],
        t("experiments.rope.column.apart"): [
            f"({n + s}, {n}) → {r.distance_scores[s]:.6f}"
            for s in shown]}))
    st.caption(t("experiments.rope.caption", change=f"{r.shift_change:.1e}"))


def _rope_intro() -> str:
    """The tab's first words, naming the sidebar's language model and its rotary bases (each
    kind of layer's where they differ; none where its config cannot be read, which the model's
    source says when chosen)."""
    from attnviz.app.shared.model_words import rope_words
    from attnviz.app.sidebar.model_choice import language_model

    entry = language_model()
    try:
        bases = rope_words(entry.sizes(), entry.shown, "experiments.rope.base_one",
                           "experiments.rope.bases_per_kind")
    except AttnvizInputError:
        bases = ""
    return t("experiments.rope.intro", model=entry.shown, bases=bases)


def _model_qk():
    """A real head's q (of one token) and k (of another) from the sidebar's decoder on the
    learner's text: (q, k, m, n, base, the model's own score for the pair), or None."""
    entry = _decoder_entry()
    model = _decoder(entry)
    text = _decoder_text(keys.EXP_ROPE_TEXT, entry.shown) if model is not None else None
    if text is None:
        return None
    c = st.columns(4)
    layer = int(c[0].number_input(t("experiments.rope.layer"), 0, model.num_layers - 1, 3,
                                  persist_state="session", key=keys.EXP_ROPE_LAYER))
    head = int(c[1].number_input(t("experiments.rope.head"), 0, model.num_heads - 1, 0,
                                 persist_state="session", key=keys.EXP_ROPE_HEAD))
    try:
        with st.spinner(t("experiments.model.running", model=entry.shown)):
            tokens, q, k, scores = _layer_qk(entry.name, text, layer)
    except AttnvizInputError as exc:
        st.error(t("experiments.model.error", model=entry.shown, error=literal(exc)))
        return None
    n_tok = len(tokens)
    i = int(c[2].number_input(t("experiments.rope.query_token"), 0, n_tok - 1, n_tok - 1,
                              persist_state="session", key=keys.EXP_ROPE_QUERY))
    j = int(c[3].number_input(t("experiments.rope.key_token"), 0, n_tok - 1, 0,
                              persist_state="session", key=keys.EXP_ROPE_KEY))
    i, j = min(i, n_tok - 1), min(j, n_tok - 1)        # a shorter text than the last one
    st.caption(literal(t("experiments.rope.pair", query=tokens[i], key=tokens[j], i=i, j=j,
                         layer=layer, head=head,
                         kv_head=kv_head(head, model.num_heads, model.num_kv_heads))))
    return (q[head, i], k[head, j], i, j, model.config.rope_base_of(layer),
            float(scores[head, i, j]))


def _random_qk():
    """Random q and k of a width the learner picks, at positions they pick."""
    c = st.columns(5)
    d = int(c[0].number_input("d_k", 2, 256, 64, step=2, persist_state="session",
                              key=keys.EXP_ROPE_D))
    seed = int(c[1].number_input(t("experiments.rope.seed"), 0, 2**31 - 1, 0,
                                 persist_state="session", key=keys.EXP_ROPE_SEED))
    m = int(c[2].number_input("m", 0, experiments.MAX_ROPE_POSITION, 7,
                              persist_state="session", key=keys.EXP_ROPE_M,
                              help=t("experiments.rope.m_help")))
    n = int(c[3].number_input("n", 0, experiments.MAX_ROPE_POSITION, 3,
                              persist_state="session", key=keys.EXP_ROPE_N,
                              help=t("experiments.rope.n_help")))
    base = float(c[4].number_input(t("experiments.rope.base"), 2.0, 1e7, 10000.0,
                                   persist_state="session", key=keys.EXP_ROPE_BASE))
    if d % 2:
        st.error(t("error.experiment.rope.odd", d=d))
        return None
    q, k = experiments.random_qk(d, seed)
    return q, k, m, n, base, None


def sink_tab() -> None:
    st.markdown(t("experiments.sink.intro"))
    entry = _decoder_entry()
    model = _decoder(entry)
    text = _decoder_text(keys.EXP_SINK_TEXT, entry.shown) if model is not None else None
    if text is None:
        return
    try:
        with st.spinner(t("experiments.model.running", model=entry.shown)):
            r = _sink(entry.name, text)
    except AttnvizInputError as exc:
        st.error(literal(exc))
        return
    st.markdown(token_line(r.tokens))
    before, after = r.top(False)[0], r.top(True)[0]
    c = [*st.columns(2), *st.columns(2)]      # two rows: the labels are long in Chinese
    c[0].metric(t("experiments.sink.mean"), f"{r.first_weight.mean():.3f}",
                help=t("experiments.sink.mean_help"))
    c[1].metric(t("experiments.sink.even"), f"{r.even:.3f}", help=t("experiments.sink.even_help"))
    c[2].metric(t("experiments.sink.top"), _shown_piece(before[1]),
                help=t("experiments.sink.top_help", after=literal(_shown_piece(after[1]))))
    c[3].metric(t("experiments.sink.change", token=literal(_shown_piece(before[1]))),
                f"{r.change(before[0]):+.3f}", help=t("experiments.sink.change_help"))
    widgets.chart(experiment_figures.sink_layers(r), key=keys.EXP_SINK_LAYERS)
    widgets.chart(experiment_figures.next_token_bars(r), key=keys.EXP_SINK_NEXT)
    for after_masking in (False, True):     # one under the other: side by side, 1024 px cut them
        st.markdown(t("experiments.sink.table_after" if after_masking
                      else "experiments.sink.table_before"))
        st.dataframe(pd.DataFrame(
            [(_shown_piece(piece), f"{r.logprobs_before[i]:.3f}",
              f"{r.logprobs_after[i]:.3f}", f"{r.change(i):+.3f}")
             for i, piece, _ in r.top(after_masking)],
            columns=[t("experiments.sink.column.token"), t("experiments.sink.column.before"),
                     t("experiments.sink.column.after"),
                     t("experiments.sink.column.change")]),
            hide_index=True, key=keys.EXP_SINK_TABLE(after_masking))
    st.caption(t("experiments.sink.caption"))


def _shown_piece(piece: str) -> str:
    """A token as every page writes it: a space at either end as ␣, a line break as ↵."""
    return token_shown(piece)


def tab_labels() -> dict[str, str]:
    """Each tab's name (its id: the label in the active language)."""
    return {name: t(f"experiments.tab.{name}") for name in TABS}


TABS = ("scaling", "tied", "raw", "order", "masks", "cross", "bug", "rope", "sink", "window",
        "qk", "kv")


# ---- the decoder designs: the sliding window, QK-norm, the KV cache (tutorials/designs) ---------

WINDOW_TEXT = ("Attention lets every token look back at the tokens before it, and a long text "
               "gives it many of them to look at.")


@lru_cache(maxsize=4)
def _window(name: str, text: str) -> designs.SlidingWindow:
    model = registry.get(name).load()
    return designs.sliding_window(model, designs.window_ids(model, text))


@lru_cache(maxsize=4)
def _score_range(name: str, text: str) -> designs.ScoreRange:
    model = registry.get(name).load()
    return designs.score_range(model, model.run(text, max_tokens=experiments.SINK_MAX_TOKENS))


def _model_tab_text(key: str, default: str) -> tuple[ModelEntry, str] | None:
    """The sidebar's decoder, loaded, and the tab's text; None (the problem shown) else."""
    entry = _decoder_entry()
    if _decoder(entry) is None:
        return None
    text = st.text_input(t("experiments.decoder.text", model=entry.shown), default,
                         persist_state="session",
                         key=key, max_chars=MAX_TEXT_CHARS)
    at_limit(text, MAX_TEXT_CHARS)
    if not text.strip():
        st.error(t("error.experiment.sink.empty"))
        return None
    return entry, text


def _model_result(key: str, default: str, compute):
    """(the sidebar's decoder, compute(its name, the tab's text)) with a spinner naming the
    model; None when there is no text or the model cannot compute it (said in its place)."""
    chosen = _model_tab_text(key, default)
    if chosen is None:
        return None
    entry, text = chosen
    try:
        with st.spinner(t("experiments.model.running", model=entry.shown)):
            return entry, compute(entry.name, text)
    except AttnvizInputError as exc:
        st.error(t("experiments.model.error", model=entry.shown, error=literal(exc)))
        return None


def window_tab() -> None:
    st.markdown(t("experiments.window.intro", n=designs.WINDOW_TOKENS, limit=MAX_TOKENS))
    found = _model_result(keys.EXP_WINDOW_TEXT, WINDOW_TEXT, _window)
    if found is None:
        return
    entry, r = found
    if r.local_layer is None:
        st.info(t("experiments.window.none", model=entry.shown))
    else:
        c = st.columns(3)
        c[0].metric(t("experiments.window.local", layer=r.local_layer), repr(r.local_beyond),
                    help=t("experiments.window.local_help", window=r.window,
                           keys=int(r.beyond.sum())))
        c[1].metric(t("experiments.window.global", layer=r.global_layer),
                    f"{r.global_beyond:.4f}", help=t("experiments.window.global_help",
                                                     window=r.window))
        c[2].metric(t("experiments.window.masked"), f"{int(r.beyond.sum())}",
                    help=t("experiments.window.masked_help", query=r.n - 1, window=r.window))
    widgets.chart(experiment_figures.window_weights(r), key=keys.EXP_WINDOW_CHART)
    if r.local_layer is not None:
        st.caption(t("experiments.window.caption", window=r.window, edge=r.n - r.window))
    widgets.chart(experiment_figures.layer_reach(r.reach, r.n), key=keys.EXP_REACH_CHART)
    if r.local_layer is not None:
        st.caption(t("experiments.window.reach", hop=r.window - 1, layer=r.global_layer))
    else:
        st.caption(t("experiments.window.reach_global", model=entry.shown))


def qk_norm_tab() -> None:
    st.markdown(t("experiments.qk.intro"))
    found = _model_result(keys.EXP_QK_TEXT, DECODER_TEXT, _score_range)
    if found is None:
        return
    entry, r = found
    st.caption(t("experiments.qk.has" if r.qk_norm else "experiments.qk.has_not",
                 model=entry.shown))
    c = st.columns(3)
    c[0].metric(t("experiments.qk.with"), f"{r.with_norm.max():.4g}")
    c[1].metric(t("experiments.qk.without"), f"{r.without_norm.max():.4g}")
    c[2].metric(t("experiments.qk.softcap"), f"{r.softcap_change.max():.3g}",
                help=t("experiments.qk.softcap_help", cap=f"{designs.SOFTCAP:g}"))
    widgets.chart(experiment_figures.score_ranges(r), key=keys.EXP_QK_CHART)
    st.markdown(t("experiments.qk.why", cap=f"{designs.SOFTCAP:g}",
                  largest=f"{r.with_norm.max():.4g}",
                  without=f"{r.without_norm.max():.4g}"))


def kv_cache_tab() -> None:
    st.markdown(t("experiments.kv.intro"))
    sizes = []
    for entry in (e for e in registry.ENTRIES if e.causal):
        try:
            sizes.append(designs.cache_size(entry.shown, entry.config()))
        except AttnvizInputError:           # not installed: its config cannot be read
            continue
    if not sizes:
        st.info(t("experiments.kv.none"))
        return
    widgets.chart(experiment_figures.cache_bars(sizes), key=keys.EXP_KV_CHART)
    rows = []
    for s in sizes:
        designs_of = [(t(f"experiments.kv.design.{s.design}", kv=s.num_kv_heads,
                         heads=s.num_heads), s.num_kv_heads, False)]
        if s.window is not None:
            designs_of.append((t("experiments.kv.design.window", window=s.window,
                                 local=s.local_layers), s.num_kv_heads, True))
        if s.num_kv_heads != s.num_heads:
            designs_of.append((t("experiments.kv.design.full", heads=s.num_heads),
                               s.num_heads, False))
        for name, kv, windowed in designs_of:
            rows.append((s.name, name, f"{s.bytes_per_token(kv):,}",
                         *(_mib(s.bytes_at(n, kv, windowed=windowed))
                           for n in designs.CACHE_LENGTHS)))
    st.dataframe(pd.DataFrame(rows, columns=[
        t("experiments.kv.column.model"), t("experiments.kv.column.design"),
        t("experiments.kv.column.per_token"),
        *(t("experiments.kv.column.at", tokens=f"{n:,}") for n in designs.CACHE_LENGTHS)]),
        hide_index=True, key=keys.EXP_KV_TABLE)
    st.caption(t("experiments.kv.caption"))


def _mib(n_bytes: int) -> str:
    return f"{n_bytes / 2**20:,.1f}"
