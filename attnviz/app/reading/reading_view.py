"""The Read the model page's four views of the sidebar's pretrained model (all-MiniLM-L6-v2 or
SmolLM2-135M-Instruct, ``Settings.model``) on the sidebar's sentence: attention rollout,
value-weighted attention, head statistics and head ablation. Every word through t()."""

from __future__ import annotations

import time
import uuid

import numpy as np
import pandas as pd
import streamlit as st

from attnviz.app import keys
from attnviz.app.pretrained import pretrained_view
from attnviz.app.shared import heavy_jobs, model_loading, scales, widgets
from attnviz.session.settings import Settings
from attnviz.app.shared.text import (MAX_TEXT_CHARS, at_limit, bound, literal, token_line,
                                     token_notation)
from attnviz.core.cache import SizedCache
from attnviz.core import heads as heads_parser
from attnviz.core.errors import AttnvizInputError
from attnviz.core.reading import (CLS, SEP, attention_rollout, causal_head_stats,
                                  detection_pattern, detection_scores, head_stats,
                                  is_punctuation, shares_on_keys)
from attnviz.describe.labels import HOVER_CHARS, token_shown
from attnviz.i18n import languages, render, t, use_language
from attnviz.models import heavy
from attnviz.models.catalogue import registry
from attnviz.models.decoders.decoder import DecoderModel, DecoderRun
from attnviz.models.encoder.pretrained import MIN_TOKENS, PretrainedTrace
from attnviz.plot import budget, figures, reading_figures, text_layout
from attnviz.session import model_views
from attnviz.session.decoder_runs import cached_decoder_run
from attnviz.session.encoder_runs import cached_encoder_run

RANKING_MAX_TOKENS = 64       # the ablation view reads at most this many tokens of each text
DECODER_MAX_TOKENS = 64       # SmolLM2 reads at most this many tokens of the text on this page
TOP_TARGETS = 10              # the next tokens whose log-probability the ranking keeps
KEPT_COLOUR, OFF_COLOUR = "#c6dbef", "#d6604d"   # the ablation's map of heads in use
# the second sentence's default, in the interface's language (message id)
OTHER_SENTENCE = "reading.ablation.other.default"
TABS = ("rollout", "value", "stats", "ablation", "lens")  # the tabs, reading.tab.<name>
TAB_VIEWS = {"lens": model_views.LENS}  # a tab only a model offering that view has
LENS_TOP = 10                 # the tokens the logit lens keeps in each cell
LENS_COLOURS = ("top", "target")   # what colours the lens's cells: reading.lens.colour.option.*
LENS_KINDS = ("logit", "tuned")    # how each layer is read: reading.lens.kind.option.*
# the statistics tables' columns: reading.stats.<column> names each
STATS_COLUMNS = ("entropy", "max_weight", "on_cls", "on_sep", "on_self", "on_prev", "on_next")
DECODER_STATS = ("entropy", "max_weight", "sink", "on_self", "on_prev", "previous_token",
                 "duplicate_token", "induction")
SURVIVAL = ("share of weight", "share of ‖αf(x)‖", "survives")   # its columns' data names
NO_RATIO = "—"              # "survives" of a group that takes no weight: no ratio to show

# Rankings, embeddings and the lens are the same for every learner on the same model and texts
# (each key starts with the model's name); the runs are the session's (encoder_runs,
# decoder_runs), shared with the Pretrained model page.
_RANKINGS = SizedCache(max_bytes=8 * 2**20, max_entries=64,
                       size_of=lambda table: int(table.memory_usage(index=True).sum()))
_EMBEDDINGS = SizedCache(max_bytes=16 * 2**20, max_entries=256)
_DECODER_RANKINGS = SizedCache(max_bytes=2 * 2**20, max_entries=64,
                               size_of=lambda found: found[0].nbytes + found[1].nbytes)
_DECODER_ABLATED = SizedCache(max_bytes=16 * 2**20, max_entries=64)    # (vocab,) log-probs
_LENSES = SizedCache(max_bytes=64 * 2**20, max_entries=16,
                     size_of=lambda found: found[0].residuals.nbytes)
_REPEATED = SizedCache(max_bytes=16 * 2**20, max_entries=4,
                       size_of=lambda found: found[1].nbytes)


def chosen_model() -> registry.ModelEntry:
    """The sidebar's pretrained model (Settings.model): its entry, which the views ask what
    the model is and has, and which loads it."""
    return pretrained_view.chosen_model()


def model_name() -> str:
    """The sidebar's pretrained model's name (registry.NAMES)."""
    return chosen_model().name


# ---- the page's run ----------------------------------------------------------------------------

def shown_name() -> str:
    """The sidebar's pretrained model's full name, as the page's errors say it."""
    return chosen_model().shown


def load(value_norms: bool = True) -> PretrainedTrace | DecoderRun:
    """The sidebar's model run on the sidebar's sentence (its token limit; SmolLM2 at most
    DECODER_MAX_TOKENS), with a spinner (and SmolLM2's progress indicator while it loads); on
    bad input shows the error and stops the page. value_norms: a decoder's value norms made
    on the run now (Read the model's views; Trace the answer reads none)."""
    entry = chosen_model()
    name = entry.shown
    text, limit = pretrained_view.sentence_and_limit()
    try:
        if not entry.causal:
            with st.spinner(t("reading.loading", model=name)):
                return cached_encoder_run(text, limit, entry.load())
        if not text:                     # the decoder has no [CLS]/[SEP]: nothing to read
            st.info(t("reading.empty_decoder", model=name))
            st.stop()
        m = model_loading.decoder(entry)
        limit = min(limit, DECODER_MAX_TOKENS)
        with st.spinner(t("reading.loading", model=name)):
            run = cached_decoder_run(text, limit, m)
            if value_norms:
                run.value_norms                  # made now, on the shared run: every view's
            return run
    except AttnvizInputError as exc:
        st.error(t("reading.error.run", model=name, error=literal(exc)))
        st.stop()


def draw_tab(draw, run) -> None:
    """One tab's view `draw(run)`; what the model cannot compute for it (a variant of the run:
    heads removed, another sentence, the value norms, the repeated sequence — numbers that
    are not finite, error.model.not_finite) is said with st.error in place of the rest of the
    tab, as ``load`` says the run's own."""
    try:
        draw(run)
    except AttnvizInputError as exc:
        st.error(t("reading.error.run", model=shown_name(), error=literal(exc)))


def token_list(run) -> None:
    """The tokens in one row, what they are, and what was cut."""
    if chosen_model().causal:
        st.markdown(token_line(token_shown(s, HOVER_CHARS) for s in run.tokens))
        st.caption(t("reading.tokens.decoder", count=len(run.tokens)))
        token_notation()
        if run.truncated:
            st.info(t("reading.notice.decoder", total=run.total, limit=len(run.ids)))
        return
    st.markdown(token_line(run.tokens))
    unknown = run.tokens.count("[UNK]")
    st.caption(t("reading.tokens.encoder") + (
        " " + t("reading.tokens.unknown", unknown=unknown, count=len(run.tokens))
        if unknown else ""))
    if run.truncated:
        st.info(t("reading.notice.encoder", total=run.encoding.total,
                  limit=len(run.tokens)))


def tab_names() -> list[str]:
    """The tabs the sidebar's model has (TABS; the logit lens only for a language model)."""
    entry = chosen_model()
    return [name for name in TABS
            if name not in TAB_VIEWS or model_views.offers(entry, TAB_VIEWS[name])]


def tab_labels() -> list[str]:
    """The tabs' labels in the active language; the open tab (its label in session state, in
    whichever language it was opened) stays open across a language switch."""
    names = tab_names()
    labels = [t(f"reading.tab.{name}") for name in names]
    current = st.session_state.get(keys.RD_VIEW)
    for name, label in zip(names, labels):
        if current in {render(f"reading.tab.{name}", lang) for lang in languages()}:
            st.session_state[keys.RD_VIEW] = label
    return labels


def _pick(label_id: str, n: int, key: str, name_id: str) -> int:
    return pretrained_view.pick(t(label_id), n, key, name=t(name_id))


def _pick_token(run, key: str, label: str) -> int:
    """A position of run.tokens (a selectbox "3: animal"), kept in range."""
    pretrained_view.keep_in_range(key, len(run.tokens), default=min(2, len(run.tokens) - 1))
    labels = [f"{i}: {token}" for i, token in enumerate(run.tokens)]   # not the run: the
    return st.selectbox(label, list(range(len(run.tokens))), persist_state="session", key=key,
                        format_func=labels.__getitem__)     # session keeps format_func


def _number_columns(labels: dict[str, str], fmt: str = "%.3f") -> dict:
    """column_config: each data column shown under its label, as a number."""
    return {c: st.column_config.NumberColumn(label, format=fmt) for c, label in labels.items()}


# ---- rollout -----------------------------------------------------------------------------------

def rollout_tab(run) -> None:
    st.caption(t("reading.rollout.caption"))
    if chosen_model().causal:
        st.caption(t("reading.rollout.causal"))
    layers = run.attentions.shape[0]
    layer = _pick("reading.after_layer", layers, keys.RO_LAYER, "reading.layer")
    residual = st.checkbox(t("reading.rollout.residual.label"), value=True,
                           persist_state="session", key=keys.RO_RESIDUAL,
                           help=t("reading.rollout.residual.help"))
    tokens = run.tokens
    scale = scales.weight_scale_picker(len(tokens))
    rollout = attention_rollout(run.attentions, residual=residual)      # (L, n, n)
    raw = run.attentions[layer].mean(axis=0)                             # (n, n)
    each = budget.share(2)                      # two maps, and two bar charts below them
    left, right = st.columns(2)
    with left:
        fig = pretrained_view.shared_figure("rollout", lambda: figures.heatmap(
            rollout[layer], row_labels=tokens, col_labels=tokens, kind="weights",
            title=t("reading.rollout.title", layer=layer),
            col_title=t("reading.rollout.input_token"), weight_scale=scale, max_bytes=each,
            width=text_layout.HALF_WIDTH), layer, residual, scale)
        widgets.chart(fig, key=keys.RO_ROLLOUT)
    with right:
        fig = pretrained_view.shared_figure("rollout_raw", lambda: figures.heatmap(
            raw, row_labels=tokens, col_labels=tokens, kind="weights",
            title=t("reading.rollout.raw_title", layer=layer), weight_scale=scale,
            max_bytes=each, width=text_layout.HALF_WIDTH), layer, scale)
        widgets.chart(fig, key=keys.RO_RAW)
    token = _pick_token(run, keys.RO_TOKEN, t("reading.rollout.token"))
    left, right = st.columns(2)
    with left:
        widgets.chart(reading_figures.token_bars(
            rollout[layer, token], tokens,
            title=t("reading.rollout.row_title", token=token, layer=layer),
            value_name=t("reading.share"), width=text_layout.HALF_WIDTH), key=keys.RO_BARS)
    with right:
        widgets.chart(reading_figures.token_bars(
            raw[token], tokens, title=t("reading.rollout.raw_row_title", token=token,
                                        layer=layer),
            value_name=t("figure.hover.weight"), width=text_layout.HALF_WIDTH),
                      key=keys.RO_RAW_BARS)


# ---- value-weighted ----------------------------------------------------------------------------

def value_weighted_tab(run) -> None:
    st.caption(t("reading.value.caption_decoder" if chosen_model().causal
                 else "reading.value.caption"))
    layers, heads = run.attentions.shape[:2]
    layer = _pick("reading.layer_label", layers, keys.VW_LAYER, "reading.layer")
    head = _pick("reading.head_label", heads, keys.VW_HEAD, "reading.head")
    weights, norms = run.attentions[layer, head], run.value_norms[layer, head]   # (n, n)
    scale = scales.weight_scale_picker(len(run.tokens))
    each = budget.share(2)
    left, right = st.columns(2)
    with left:
        fig = pretrained_view.shared_figure("vw_weights", lambda: figures.heatmap(
            weights, row_labels=run.tokens, col_labels=run.tokens, kind="weights",
            title=t("reading.value.weights_title", layer=layer, head=head), weight_scale=scale,
            max_bytes=each, width=text_layout.HALF_WIDTH), layer, head, scale)
        widgets.chart(fig, key=keys.VW_WEIGHTS)
    with right:
        fig = pretrained_view.shared_figure("vw_norms", lambda: reading_figures.norms_heatmap(
            norms, run.tokens, title=t("reading.value.norms_title", layer=layer, head=head),
            max_bytes=each, width=text_layout.HALF_WIDTH), layer, head)
        widgets.chart(fig, key=keys.VW_NORMS)
    st.markdown(t("reading.value.table"))
    table = survival_table(run.tokens, weights, norms,
                           first_token=model_views.offers(chosen_model(),
                                                          model_views.SINK))
    st.dataframe(table, hide_index=True, key=keys.VW_TABLE,
                 column_config={"keys": st.column_config.TextColumn(t("reading.value.keys")),
                                "count": st.column_config.NumberColumn(
                                    t("reading.value.count")),
                                **_number_columns({c: t(f"reading.value.column.{i}")
                                                   for i, c in enumerate(SURVIVAL[:2])}),
                                SURVIVAL[2]: st.column_config.TextColumn(
                                    t("reading.value.column.2"))})
    st.caption(t("reading.value.survives")
               + (" " + t("reading.value.survives_none", none=NO_RATIO)
                  if (table[SURVIVAL[2]] == NO_RATIO).any() else ""))


def survival_table(tokens: list[str], weights: np.ndarray, norms: np.ndarray,
                   first_token: bool = False) -> pd.DataFrame:
    """One row per group of keys ([CLS], [SEP] — or, for a decoder, the first token —,
    punctuation, the rest): its share of the weight, of the norm, and their ratio (below 1:
    weight that moves less than its share) as the table shows it, three decimals, or NO_RATIO
    where the group takes no weight (it has no key: a text without punctuation), never a NaN
    the table would show as "None". The groups are named in the active language."""
    if first_token:
        groups = {t("reading.value.group.first", token=tokens[0]): [0]}
    else:
        groups = {CLS: [j for j, tok in enumerate(tokens) if tok == CLS],
                  SEP: [j for j, tok in enumerate(tokens) if tok == SEP]}
    special = {j for members in groups.values() for j in members}
    groups[t("reading.value.group.punctuation")] = [
        j for j, tok in enumerate(tokens) if is_punctuation(tok.strip()) and j not in special]
    special = {j for members in groups.values() for j in members}
    groups[t("reading.value.group.other")] = [j for j in range(len(tokens)) if j not in special]
    rows = []
    for name, members in groups.items():
        weight, norm = shares_on_keys(weights, norms, members)
        rows.append({"keys": name, "count": len(members), SURVIVAL[0]: weight, SURVIVAL[1]: norm,
                     SURVIVAL[2]: f"{norm / weight:.3f}" if weight else NO_RATIO})
    return pd.DataFrame(rows)


# ---- head statistics ---------------------------------------------------------------------------

def _select_row() -> None:
    """on_select of the statistics table: choose the clicked head below (rows are the table's
    own positions, layer-major)."""
    rows = st.session_state[keys.HS_TABLE].selection.rows
    if rows:
        heads = st.session_state.get(keys.HS_HEADS, 12)
        st.session_state[keys.HS_LAYER], st.session_state[keys.HS_HEAD] = divmod(rows[0], heads)


def repeated_sequence(m: DecoderModel) -> tuple[str, DecoderRun]:
    """The repeated random sequence and the model's run on it (once for every learner)."""
    from attnviz.models.decoders.decoder_reading import repeated_random_text

    def compute():
        text, _ = repeated_random_text(m)
        return text, m.run(text)

    return _REPEATED.get((str(m.path), "seed 0"), compute)


def decoder_stats_table(run: DecoderRun) -> pd.DataFrame:
    """causal_head_stats of the run, and the head detector's three scores on the repeated
    random sequence, one row per head (layer-major)."""
    table = causal_head_stats(run.attentions)
    _, repeated = repeated_sequence(chosen_model().load())
    for name in ("previous_token", "duplicate_token", "induction"):
        scores = detection_scores(repeated.attentions, detection_pattern(repeated.ids, name))
        table[name] = scores.ravel()
    return table


def head_stats_tab(run) -> None:
    # the first token, the sink; no [CLS]/[SEP]
    causal = model_views.offers(chosen_model(), model_views.SINK)
    n = len(run.tokens)
    st.caption(t("reading.stats.caption_decoder" if causal else "reading.stats.caption",
                 n=n, uniform=f"{np.log2(n):.2f}"))
    layers, heads = run.attentions.shape[:2]
    st.session_state[keys.HS_HEADS] = heads
    columns = DECODER_STATS if causal else STATS_COLUMNS
    if causal:
        table = decoder_stats_table(run)
        m = chosen_model().load()
        text, _ = repeated_sequence(m)
        with st.expander(t("reading.stats.detector.expander")):
            st.caption(t("reading.stats.detector.caption"))
            st.markdown(token_line(m.tokenize(text)))
    else:
        table = head_stats(run.attentions, run.tokens)
    st.dataframe(table, hide_index=True, key=keys.HS_TABLE, on_select=_select_row,
                 selection_mode="single-row", height=300,
                 column_config={"layer": st.column_config.NumberColumn(t("reading.layer")),
                                "head": st.column_config.NumberColumn(t("reading.head")),
                                **_number_columns({c: t(f"reading.stats.{c}")
                                                   for c in columns})})
    if st.session_state.get(keys.HS_COLUMN) not in columns:
        st.session_state[keys.HS_COLUMN] = columns[0]
    column = st.selectbox(t("reading.stats.map_of"), list(columns), persist_state="session",
                          key=keys.HS_COLUMN, format_func=lambda c: t(f"reading.stats.{c}"))
    values = table[column].to_numpy().reshape(layers, heads)             # (L, H)
    kind, top = "weights", None
    if column == "entropy":                          # bits, from 0 to log₂ n (uniform)
        kind, top = "scaled", np.log2(n)
    fig = pretrained_view.shared_figure("hs_map", lambda: reading_figures.layers_heads_map(
        values, title=t(f"reading.stats.{column}"), value_name=t(f"reading.stats.{column}"),
        kind=kind, top=top), column)
    widgets.chart(fig, key=keys.HS_MAP)
    layer = _pick("reading.layer_label", layers, keys.HS_LAYER, "reading.layer")
    head = _pick("reading.head_label", heads, keys.HS_HEAD, "reading.head")
    pretrained_view.step_through_button(layer, head)


# ---- ablation ----------------------------------------------------------------------------------

def _embed(text: str, mask: np.ndarray | None, limit: int) -> np.ndarray:
    """The embedding of the first `limit` tokens of `text`, with the heads of `mask` off."""
    entry = chosen_model()
    key = (entry.name, text, None if mask is None else mask.tobytes(), limit)
    return _EMBEDDINGS.get(key, lambda: entry.load().embed(text, head_mask=mask,
                                                           max_tokens=limit))


def head_mask(layers: int, heads: int) -> np.ndarray | None:
    """(layers, heads) float 0/1 from the heads typed to switch off (read exactly: L3H2 is that
    head only; L5 or L5H* a whole layer); None when nothing is switched off."""
    if not isinstance(st.session_state.get(keys.AB_HEADS), str):
        st.session_state[keys.AB_HEADS] = ""
    typed = st.text_input(t("reading.ablation.heads.label"), persist_state="session",
                          key=keys.AB_HEADS, max_chars=heads_parser.MAX_TEXT_CHARS,
                          placeholder=t("reading.ablation.heads.placeholder"),
                          help=t("reading.ablation.heads.help", layers=layers - 1,
                                 heads=heads - 1))
    try:
        off = heads_parser.parse_heads(typed, layers, heads)
    except AttnvizInputError as exc:
        st.error(literal(exc))
        off = np.zeros((layers, heads), dtype=bool)
    if off.any():
        st.caption(t("reading.ablation.heads.off", count=int(off.sum()),
                     heads=heads_parser.heads_text(off)))
    mask = (~off).astype(float)                                        # (layers, heads)
    fig = reading_figures.layers_heads_map(mask, title=t("reading.ablation.map.title"),
                                           value_name=t("reading.ablation.map.kept"),
                                           kind="weights")
    fig.update_traces(showscale=False, colorscale=[[0, OFF_COLOUR], [1, KEPT_COLOUR]],
                      xgap=2, ygap=2,
                      hovertemplate="%{y}, %{x}: %{z:.0f} ("
                                    + t("reading.ablation.map.hover") + ")<extra></extra>")
    widgets.chart(fig, key=keys.AB_MASK)
    return None if mask.all() else mask


def ablation_limit() -> int:
    """The most tokens the Ablation view reads of each text ([CLS] and [SEP] included): the
    sidebar's token limit, at most RANKING_MAX_TOKENS (the ranking runs 73 variants of each
    text). Every number of the view, with every head or without some, is on these tokens."""
    _, limit = pretrained_view.sentence_and_limit()
    return max(MIN_TOKENS, min(limit, RANKING_MAX_TOKENS))


def _other_default() -> None:
    """The second sentence starts as the default in the interface's language, and follows a
    language switch for as long as it is untouched (any language's default)."""
    other = st.session_state.get(keys.AB_OTHER)
    defaults = set()
    for lang in languages():
        with use_language(lang):
            defaults.add(t(OTHER_SENTENCE))
    if not isinstance(other, str) or other in defaults:
        st.session_state[keys.AB_OTHER] = t(OTHER_SENTENCE)


def ablation_tab(run) -> None:
    """Heads switched off: what the next token loses (a language model), or the sentence
    embedding (an encoder)."""
    if model_views.offers(chosen_model(), model_views.NEXT_TOKEN):
        decoder_ablation(run)
    elif model_views.offers(chosen_model(), model_views.EMBEDDING):
        embedding_ablation(run)


def embedding_ablation(run: PretrainedTrace) -> None:
    """Ablation on the encoder: heads switched off, the sentence embedding's similarity to
    another sentence's (the model's own sentence-transformers use)."""
    st.caption(t("reading.ablation.caption"))
    text_a, _ = pretrained_view.sentence_and_limit()
    limit = ablation_limit()
    _other_default()
    bound(keys.AB_OTHER, MAX_TEXT_CHARS)
    text_b = st.text_input(t("reading.ablation.other.label"), persist_state="session",
                           key=keys.AB_OTHER, max_chars=MAX_TEXT_CHARS)
    at_limit(text_b, MAX_TEXT_CHARS)
    if not text_b.strip():
        st.info(t("reading.ablation.other.empty"))
        return
    model = chosen_model().load()
    st.markdown(token_line(model.tokenize(text_b, limit)))
    cut = sum(model.encode(text, limit).truncated for text in (text_a, text_b))
    st.caption(t("reading.ablation.limit", limit=limit, most=RANKING_MAX_TOKENS)
               + (" " + t("reading.ablation.cut", count=cut) if cut else ""))
    layers, heads = run.attentions.shape[:2]
    mask = head_mask(layers, heads)
    a, b = _embed(text_a, None, limit), _embed(text_b, None, limit)
    similarity = float(a @ b)

    def switched_off() -> list[tuple]:
        a_off, b_off = _embed(text_a, mask, limit), _embed(text_b, mask, limit)
        off = float(a_off @ b_off)
        return [(t("reading.ablation.similarity_off.label"), f"{off:.4f}",
                 f"{off - similarity:+.4f}", t("reading.ablation.similarity_off.help")),
                (t("reading.ablation.itself.label"), f"{float(a_off @ a):.4f}", None,
                 t("reading.ablation.itself.help"))]

    _ablation_metrics(mask, (t("reading.ablation.similarity.label"), f"{similarity:.4f}",
                             t("reading.ablation.similarity.help")),
                      t("reading.ablation.similarity_off.label"), switched_off)
    ranking_section(text_a, text_b, limit)


def _ablation_metrics(mask, before: tuple[str, str, str], off_label: str, after) -> None:
    """A row of three numbers: `before` (label, value, help) with every head on; with the
    heads of `mask` off (None: none chosen, said in the second) `after()`'s two (label, value,
    delta or None, help); and how many heads are off."""
    cols = st.columns(3)
    label, value, help_text = before
    cols[0].metric(label, value, help=help_text)
    if mask is None:
        cols[1].metric(off_label, "—", help=t("reading.ablation.similarity_off.none"))
        return
    for col, (label, value, delta, help_text) in zip(cols[1:], after()):
        col.metric(label, value, delta=delta, delta_color="off", help=help_text)
    st.caption(t("reading.ablation.off_count", off=int((mask == 0).sum()), total=mask.size))


def _ranking_columns() -> dict:
    return {"layer": st.column_config.NumberColumn(t("reading.layer")),
            "head": st.column_config.NumberColumn(t("reading.head")),
            **_number_columns({"similarity": t("reading.ablation.similarity.label"),
                               "change": t("reading.ablation.change"),
                               "logprob": t("reading.ablation.logprob"),
                               "probability": t("reading.ablation.probability")},
                              "%.4f")}


def ranking_section(text_a: str, text_b: str, limit: int) -> None:
    """"Rank every head": each single head switched off in turn, the heads that change the
    similarity most first, each text read up to `limit` tokens; computed once per pair of
    texts and limit for every learner."""
    st.subheader(t("reading.ranking.subheader"))
    model = chosen_model().load()
    st.caption(t("reading.ranking.caption", heads=model.num_layers * model.num_heads))
    key = (chosen_model().name, text_a, text_b, limit)
    clicked = st.button(t("reading.ranking.button"), key=keys.AB_RANK, icon=":material/sort:")
    if not (clicked or key in _RANKINGS):
        return
    bar = st.progress(0.0, text=t("reading.ranking.progress_start"))

    def compute() -> pd.DataFrame:
        return model.head_ablation_effects(
            text_a, text_b, max_tokens=limit,
            on_progress=lambda done, total: bar.progress(
                done / total, text=t("reading.ranking.progress", done=done, total=total)))

    table = _RANKINGS.get(key, compute)
    bar.empty()
    baseline = table.attrs["baseline"]
    st.caption(t("reading.ranking.baseline", baseline=f"{baseline:.4f}"))
    left, right = st.columns([2, 3])
    with left:
        st.dataframe(table.head(10), hide_index=True, key=keys.AB_TOP,
                     column_config=_ranking_columns())
    with right:
        change = np.zeros((model.num_layers, model.num_heads))
        change[table["layer"], table["head"]] = table["change"]
        widgets.chart(reading_figures.layers_heads_map(
            change, title=t("reading.ranking.map_title"),
            value_name=t("reading.ablation.change"), kind="signed"), key=keys.AB_MAP)


# ---- ablation on the decoder: the next token's log-probability --------------------------------

def _targets(run: DecoderRun) -> tuple[np.ndarray, np.ndarray]:
    """The TOP_TARGETS most likely next tokens with every head (ids, log-probabilities),
    most likely first."""
    logits = run.next_logits.astype(np.float64)
    logprobs = logits - logits.max() - np.log(np.exp(logits - logits.max()).sum())
    best = np.argsort(-logprobs, kind="stable")[:TOP_TARGETS]
    return best, logprobs[best]


def decoder_ablation(run: DecoderRun) -> None:
    """Heads removed (their Z zeroed before W_O) and the log-probability of a next token."""
    from attnviz.models.decoders.decoder_reading import logprobs_without_heads

    st.caption(t("reading.decoder_ablation.caption", count=len(run.ids)))
    m = chosen_model().load()
    ids, logprobs = _targets(run)
    labels = {int(i): f"{token_shown(m.piece_text(int(i)))} ({np.exp(lp):.1%})"
              for i, lp in zip(ids, logprobs)}
    if st.session_state.get(keys.AB_TARGET) not in labels:
        st.session_state[keys.AB_TARGET] = int(ids[0])
    target = st.selectbox(t("reading.decoder_ablation.target.label"), list(labels),
                          persist_state="session", key=keys.AB_TARGET,
                          format_func=labels.__getitem__,
                          help=t("reading.decoder_ablation.target.help"))
    full = float(logprobs[list(labels).index(target)])
    mask = head_mask(m.num_layers, m.num_heads)

    def switched_off() -> list[tuple]:
        off = _DECODER_ABLATED.get((chosen_model().name, run.ids.tobytes(), mask.tobytes()),
                                   lambda: logprobs_without_heads(m, run, mask[None])[0])
        return [(t("reading.decoder_ablation.off.label"), f"{off[target]:.4f}",
                 f"{off[target] - full:+.4f}", t("reading.decoder_ablation.off.help")),
                (t("reading.decoder_ablation.top.label"), token_shown(m.piece_text(int(np.argmax(off)))),
                 None, t("reading.decoder_ablation.top.help"))]

    _ablation_metrics(mask, (t("reading.decoder_ablation.full.label"), f"{full:.4f}",
                             t("reading.decoder_ablation.full.help")),
                      t("reading.decoder_ablation.off.label"), switched_off)
    decoder_ranking(run, target, full)


class _Cancelled(Exception):
    """Raised from a heavy job's progress callback when nobody waits for it any more."""


def _ranking_work(m: DecoderModel, run: DecoderRun, key: tuple):
    """The ranking as the server's queue runs it (``heavy.Work``): a layer's heads at a time,
    given up between two layers when nobody waits for it any more; kept for every learner."""
    from attnviz.models.decoders.decoder_reading import single_head_logprobs

    ids, _ = _targets(run)

    def work(resume, progress, should_stop):
        def tell(done: int, total: int) -> None:
            progress(done, total)
            if done < total and should_stop():
                raise _Cancelled

        try:
            found = ids, single_head_logprobs(m, run, ids, on_progress=tell)
        except _Cancelled:
            return None
        return _DECODER_RANKINGS.get(key, lambda: found)

    return work


def _ask_ranking(m: DecoderModel, run: DecoderRun, key: tuple) -> None:
    """on_click of "Rank every head": this learner joins the server's job for this text."""
    from attnviz.app.train.train_view import alive_check

    token = uuid.uuid4().hex
    job = heavy.default_queue().submit(key, _ranking_work(m, run, key), total=m.num_layers,
                                       learner=token, alive=alive_check())
    st.session_state[keys.AB_RANK_JOB] = (key, job, token)


def _stop_ranking() -> None:
    """on_click of Stop: this learner stops waiting (the ranking stops when nobody waits)."""
    mine = st.session_state.pop(keys.AB_RANK_JOB, None)
    if isinstance(mine, tuple):
        heavy.default_queue().leave(mine[1], mine[2])
    st.session_state[keys.AB_RANK_STOPPED] = True


def _ranking_job(m: DecoderModel, run: DecoderRun, key: tuple) -> None:
    """The button, or this learner's job under way (polled, with Stop), or how it ended."""
    mine = st.session_state.get(keys.AB_RANK_JOB)
    job, token = mine[1:] if isinstance(mine, tuple) and mine[0] == key else (None, None)
    if job is not None and job.running:
        heavy_jobs.live(job, token, "reading.decoder_ranking", _ranking_progress,
                        _stop_ranking, (), keys.AB_RANK_STOP, other_tabs=True)
        return
    if job is not None and job.ended == "failed":
        st.error(t("reading.decoder_ranking.failed", error=literal(job.error)))
    if st.session_state.pop(keys.AB_RANK_STOPPED, None):
        st.info(t("reading.decoder_ranking.stopped"))
    st.session_state.pop(keys.AB_RANK_JOB, None)
    widgets.action_button(t("reading.ranking.button"), _ask_ranking, (m, run, key),
                          key=keys.AB_RANK, icon=":material/sort:")


def _ranking_progress(job) -> tuple[float, str]:
    return job.done / job.total, (t("reading.decoder_ranking.progress", done=job.done,
                                    total=job.total) if job.done
                                  else t("reading.ranking.progress_start"))


def decoder_ranking(run: DecoderRun, target: int, full: float) -> None:
    """"Rank every head" on the decoder: each of the 270 heads removed alone, the change in
    log p(target); computed once per text for every learner (every top-10 target kept), on the
    server's queue for heavy work when a learner presses the button (``_ranking_job``)."""
    m = chosen_model().load()
    st.subheader(t("reading.decoder_ranking.subheader"))
    st.caption(t("reading.decoder_ranking.caption", heads=m.num_layers * m.num_heads))
    key = ("decoder_ranking", chosen_model().name, run.ids.tobytes())
    found = _DECODER_RANKINGS.peek(key)          # computed already, for any learner
    if found is None:
        _ranking_job(m, run, key)
        return
    ranked_ids, logprobs = found                                       # (L, H, TOP_TARGETS)
    change = logprobs[..., list(ranked_ids).index(target)] - full      # (L, H)
    order = np.argsort(change.ravel(), kind="stable")                  # most harmful first
    layer, head = np.unravel_index(order, change.shape)
    table = pd.DataFrame({"layer": layer, "head": head,
                          "logprob": change.ravel()[order] + full,
                          "change": change.ravel()[order]})
    st.caption(t("reading.decoder_ranking.baseline", token=token_shown(m.piece_text(target)),
                 logprob=f"{full:.4f}"))
    left, right = st.columns([2, 3])
    with left:
        st.dataframe(table.head(10), hide_index=True, key=keys.AB_TOP,
                     column_config=_ranking_columns())
    with right:
        widgets.chart(reading_figures.layers_heads_map(
            change, title=t("reading.decoder_ranking.map_title"),
            value_name=t("reading.ablation.change"), kind="signed"), key=keys.AB_MAP)


# ---- the logit lens ------------------------------------------------------------------------------

def lens_row_label(kind: str, layer: int) -> str:
    """A lens row in words: the embeddings, after layer ℓ − 1 (the stream after ℓ layers; the
    page counts layers from 0), or after layer ℓ's attention."""
    from attnviz.models.readers.lens import ATTENTION

    if kind == ATTENTION:
        return t("reading.lens.row.attention", layer=layer)
    return t("reading.lens.row.embeddings") if layer == 0 else \
        t("reading.lens.row.layer", layer=layer - 1)


def click_lens_cell(points: list[dict], row_labels: list[str], rows: list[tuple[str, int]],
                    n: int) -> None:
    """on_click of the lens grid: a click on a cell picks its position (LENS_POSITION) and its
    row — a layer boundary ℓ (LENS_LAYER), or the row after layer ℓ's attention, read as
    boundary ℓ + 1 before its MLP (LENS_ATTENTION). `row_labels` (R,): the grid's rows as
    drawn (its y), `rows` (R,) what each is, `n` the positions; a click beside: nothing."""
    from attnviz.models.readers.lens import ATTENTION

    for point in reversed(points):
        x, y = str(point.get("x", "")), point.get("y")
        head = x.split(":", 1)[0]
        if y not in row_labels or not head.isdigit() or int(head) >= n:
            continue
        kind, layer = rows[row_labels.index(y)]
        attention = kind == ATTENTION
        st.session_state[keys.LENS_POSITION] = int(head)
        st.session_state[keys.LENS_LAYER] = layer + 1 if attention else layer
        st.session_state[keys.LENS_ATTENTION] = attention
        return


def lens_labels(m: DecoderModel, run: DecoderRun, lens) -> list:
    """(R, n, k) the lens's top tokens as the page writes them, each read after the text up
    to its position."""
    return [[[token_shown(m.piece_after(run.ids[:int(i) + 1], int(j))) for j in cell]
             for i, cell in zip(lens.positions, row)] for row in lens.top_ids]


def _lens(m: DecoderModel, run: DecoderRun, sublayers: bool, tuned: bool = False, first=None):
    """The lens of the run (its streams and logits read, not computed again; with `tuned`,
    the tuned lens: its translators loaded first, ``tuned_lens``) and its cells' labels (top-k
    as the page writes them), once for every learner. first: None, or what to do with the
    lens's last column alone (and its labels) as soon as it is computed, before the other
    positions are (``logit_lens(first=)``), when this call computes the lens. The last column
    is always computed first: Compare models reads it (``kept_lens``)."""
    from attnviz.models.readers.lens import logit_lens

    def column_first(column) -> None:
        if first is not None:
            first(column, lens_labels(m, run, column))

    def compute():
        lens = logit_lens(m, run, sublayers=sublayers, k=LENS_TOP,
                          tuned=m.tuned_lens() if tuned else None, first=column_first)
        return lens, lens_labels(m, run, lens)

    return _LENSES.get((chosen_model().name, run.ids.tobytes(), sublayers, tuned), compute)


def kept_lens(name: str, run: DecoderRun):
    """The logit lens of `run` on model `name` (registry.NAMES) as this page computed it for
    any learner, with its labels — its last column computed first, alone (``_lens``) —, or
    None when it is not kept: nothing is computed."""
    return _LENSES.peek((name, run.ids.tobytes(), False, False))


def _answer_column(slot, column, labels, rows: list[str], shown: list[str], colour: str,
                   ) -> None:
    """The lens's last column in the grid's place (`slot`) while the other positions are
    read: where the text's next token is chosen, at every layer — the whole grid's last
    column, the same numbers — and how many positions are still being read."""
    from attnviz.plot import lens_figures

    n = len(shown)
    with slot.container():
        widgets.chart(lens_figures.lens_grid(
            column.top_probs, labels, row_labels=rows, col_labels=shown[-1:],
            positions=column.positions,
            title=t("reading.lens.column.title", position=n - 1,
                    token=text_layout.escape(shown[-1])),
            colour=column.target_prob if colour == "target" else None,
            colour_name=t("figure.lens.target_probability")), key=keys.LENS_COLUMN)
        st.caption(t("reading.lens.column.caption", count=n - 1))


# the fit's seconds as `python benchmarks/bench_tuned_lens.py` measured it here
# (docs/benchmarks.md: one idle core, 52.4 s); said until this process has timed a fit of its own
BENCH_FIT_SECONDS = 52
_FIT_SECONDS: dict[str, float] = {}     # model path → the wall seconds of its last fit here
_FIT_STAGES: dict[str, list] = {}       # model path → the stages its fit under way has told


def _fit_key(m: DecoderModel) -> tuple:
    return ("tuned_lens", str(m.path))


def _fit_work(m: DecoderModel):
    """The tuned lens's fit as the server's queue runs it (``heavy.Work``): ``m.tuned_lens``,
    whose stages are kept for the page; between two training texts, a job nobody waits for
    any more is given up (nothing written, the next press starts over)."""
    from attnviz.models.readers import tuned_lens as tl

    units = len(tl.TRAINING_PROMPTS) + 2                   # each text, the maps, the writing

    def work(resume, progress, should_stop):
        stages = _FIT_STAGES[str(m.path)] = []
        started = time.monotonic()

        def tell(stage) -> None:
            stages.append(stage)
            if stage.stage == "generating":
                progress(stage.done, units)
                if should_stop():
                    raise _Cancelled
            elif stage.stage in ("fitting", "writing"):
                progress(units - 2 + (stage.stage == "writing"), units)

        try:
            found = m.tuned_lens(progress=tell)
        except _Cancelled:
            return None
        if found.outcome != "verified":
            _FIT_SECONDS[str(m.path)] = time.monotonic() - started
        progress(units, units)
        return found

    return work, units


def _ask_fit(m: DecoderModel) -> None:
    """on_click of "Fit the tuned lens": this learner joins the server's one fit of the model."""
    from attnviz.app.train.train_view import alive_check

    work, units = _fit_work(m)
    token = uuid.uuid4().hex
    job = heavy.default_queue().submit(_fit_key(m), work, total=units, learner=token,
                                       alive=alive_check())
    st.session_state[keys.LENS_TUNED_JOB] = (_fit_key(m), job, token)
    st.session_state[keys.LENS_TUNED_WAITED] = True             # told how it ended, once


def _cancel_fit() -> None:
    """on_click of Cancel: this learner stops waiting (the fit stops when nobody waits)."""
    mine = st.session_state.pop(keys.LENS_TUNED_JOB, None)
    if isinstance(mine, tuple):
        heavy.default_queue().leave(mine[1], mine[2])
    st.session_state[keys.LENS_TUNED_WAITED] = None
    st.session_state[keys.LENS_TUNED_CANCELLED] = True


def _fit_progress(m: DecoderModel):
    """The fit's progress as its stages tell it: (share done, in words)."""
    def progress(job) -> tuple[float, str]:
        stages = _FIT_STAGES.get(str(m.path)) or []
        stage = stages[-1] if stages else None
        if stage is None or stage.stage not in ("generating", "fitting", "writing"):
            return 0.0, t("reading.lens.tuned.loading")
        return stage.fraction, t(f"reading.lens.tuned.progress.{stage.stage}",
                                 done=stage.done + 1, total=stage.total, model=m.model_name)
    return progress


def _fit_offer(m: DecoderModel) -> None:
    """The button starting the fit, with its time as measured on this server."""
    from attnviz.models.readers.tuned_lens import can_keep

    seconds = _FIT_SECONDS.get(str(m.path))
    st.info(t("reading.lens.tuned.not_fitted") + " " + (
        t("reading.lens.tuned.estimate.last", seconds=round(seconds)) if seconds is not None
        else t("reading.lens.tuned.estimate.bench", seconds=BENCH_FIT_SECONDS)))
    if not can_keep(m):
        st.info(t("reading.lens.tuned.not_kept"))
    widgets.action_button(t("reading.lens.tuned.fit"), _ask_fit, (m,),
                          key=keys.LENS_TUNED_FIT, type="primary",
                          icon=":material/play_arrow:")


def tuned_lens(m: DecoderModel):
    """The model's tuned lens when it is at hand (fitted in this process, or kept whole on
    disk: read at once); else None, and the page reads the logit lens with, in its place, a
    button fitting it on the server's queue for heavy work (``attnviz.models.heavy``: one fit
    for every learner, never started by a link or the radio), then the fit's progress, polled,
    with Cancel. To the learner who waited for the fit only, once, a notice when a damaged copy
    on disk was fitted again or the fit cannot be kept on disk."""
    from attnviz.models.readers import tuned_lens as tl

    try:
        found = tl.kept(m)
    except (AttnvizInputError, OSError, MemoryError) as exc:   # the page reads the logit lens
        st.error(t("reading.lens.tuned.failed", error=literal(exc)))
        return None
    mine = st.session_state.get(keys.LENS_TUNED_JOB)
    job, token = mine[1:] if isinstance(mine, tuple) and mine[0] == _fit_key(m) else \
        (None, None)
    if found is None and job is not None and job.running:
        heavy_jobs.live(job, token, "reading.lens.tuned", _fit_progress(m), _cancel_fit, (),
                        keys.LENS_TUNED_CANCEL, other_tabs=True)
        return None
    st.session_state.pop(keys.LENS_TUNED_JOB, None)
    if job is not None and job.running:          # at hand meanwhile (another process fitted it)
        heavy.default_queue().leave(job, token)
    if found is None and job is not None and job.ended == "failed":
        st.error(t("reading.lens.tuned.failed", error=literal(job.error)))
    if found is None:
        if st.session_state.pop(keys.LENS_TUNED_CANCELLED, None):
            st.info(t("reading.lens.tuned.cancelled", model=m.model_name))
        _fit_offer(m)
        return None
    model_loading.tell_repair(found, "reading.lens.tuned", not_kept=True,
                              waited=bool(st.session_state.pop(keys.LENS_TUNED_WAITED, None)))
    return found


def _option_radio(messages: str, options: tuple[str, ...], key: str) -> str:
    """A horizontal radio of `options`, kept in the session under `key` (a value not among
    them, from an old session or a link, is the first), its words `messages`.label, .help and
    .option.<value>."""
    if st.session_state.get(key) not in options:
        st.session_state[key] = options[0]
    return st.radio(t(f"{messages}.label"), options, horizontal=True, persist_state="session",
                    key=key, format_func=lambda c: t(f"{messages}.option.{c}"),
                    help=t(f"{messages}.help"))


def lens_tab(run: DecoderRun) -> None:
    """The logit lens: every layer boundary (and, asked, every attention sublayer) read through
    the final RMSNorm and the tied unembedding; one position's top 10 and its answer's rank.
    A cell is picked by a click on it, or with the position and layer pickers below it."""
    from attnviz.models.readers.lens import ATTENTION
    from attnviz.plot import lens_figures

    st.caption(t("reading.lens.caption"))
    st.caption(t("reading.lens.same", reading=t("nav.reading"), trace=t("nav.trace")))
    m = chosen_model().load()
    kind = _option_radio("reading.lens.kind", LENS_KINDS, keys.LENS_KIND)
    fitted = tuned_lens(m) if kind == "tuned" else None
    tuned = fitted is not None
    if tuned:
        st.caption(t("reading.lens.tuned.caption", tokens=fitted.tokens, model=m.model_name))
    sublayers = st.checkbox(t("reading.lens.sublayers.label"), value=False,
                            persist_state="session", key=keys.LENS_SUBLAYERS, disabled=tuned,
                            help=t("reading.lens.tuned.no_sublayers" if tuned
                                   else "reading.lens.sublayers.help")) and not tuned
    colour = _option_radio("reading.lens.colour", LENS_COLOURS, keys.LENS_COLOUR)
    shown = [token_shown(tok) for tok in run.tokens]
    slot = st.empty()        # the grid's place: the last position's column first, while the
    with st.spinner(t("reading.lens.computing"), show_time=True):        # rest is computed
        lens, labels = _lens(m, run, bool(sublayers), tuned, first=lambda column, words: (
            _answer_column(slot, column, words, [lens_row_label(kind, layer) for kind, layer
                                                 in column.rows], shown, colour)))
    rows = [lens_row_label(kind, layer) for kind, layer in lens.rows]
    by_target = colour == "target"
    fig = pretrained_view.shared_figure("lens_grid", lambda: lens_figures.lens_grid(
        lens.top_probs, labels, row_labels=rows, col_labels=shown,
        title=t("reading.lens.tuned.grid_title" if tuned else "reading.lens.grid_title"),
        colour=lens.target_prob if by_target else None,
        colour_name=t("figure.lens.target_probability")), run.ids.tobytes(), bool(sublayers),
        colour, tuned)
    # a click on a cell picks it: the pickers below follow (and stay, for the keyboard)
    with slot:
        widgets.chart(fig, key=keys.LENS_GRID, on_click=click_lens_cell,
                      args=(list(fig.data[0].y), lens.rows, len(run.tokens)))
    n = len(run.tokens)
    pretrained_view.keep_in_range(keys.LENS_POSITION, n, default=n - 1)
    pick = st.columns([3, 3, 2] if sublayers else [1, 1], vertical_alignment="bottom")
    position = pick[0].selectbox(t("reading.lens.position"), list(range(n)),
                                 persist_state="session", key=keys.LENS_POSITION,
                                 format_func=lambda i: f"{i}: {shown[i]}")
    layers = m.num_layers + 1                                          # boundaries 0 … L
    pretrained_view.keep_in_range(keys.LENS_LAYER, layers, default=layers - 1)
    layer = pick[1].selectbox(t("reading.lens.layer"), list(range(layers)),
                              persist_state="session", key=keys.LENS_LAYER,
                              format_func=lambda l: lens_row_label("layer", l))
    r = lens.row("layer", layer)
    if sublayers:                               # layer ℓ's attention row: after layer ℓ − 1's
        before_mlp = pick[2].checkbox(t("reading.lens.attention.label"), value=False,
                                      persist_state="session", key=keys.LENS_ATTENTION,
                                      disabled=layer == 0,
                                      help=t("reading.lens.attention.help"))
        if before_mlp and layer > 0:
            r = lens.row(ATTENTION, layer - 1)
    target = int(lens.target[position])
    left, right = st.columns(2)
    with left:
        widgets.chart(lens_figures.top_bars(
            labels[r][position], lens.top_probs[r, position],
            title=t("reading.lens.bars_title", position=position,
                    token=text_layout.escape(shown[position]),
                    row=rows[r]), width=text_layout.HALF_WIDTH), key=keys.LENS_BARS)
    with right:
        answer = token_shown(m.piece_after(run.ids[:position + 1], target))
        widgets.chart(lens_figures.rank_line(
            lens.target_rank[:, position], row_labels=rows,
            title=t("reading.lens.rank_title", token=text_layout.escape(answer),
                    position=position),
            width=text_layout.HALF_WIDTH), key=keys.LENS_RANK)
    first = int(np.argmax(lens.target_rank[:, position] == 1))
    st.caption(t("reading.lens.first_top", token=answer, row=rows[first],
                 probability=f"{float(lens.target_prob[-1, position]):.3f}",
                 kl=f"{float(lens.kl[r, position]):.3f}", layer_row=rows[r]))
    if tuned:
        kl_side_by_side(m, run, lens)


def kl_side_by_side(m: DecoderModel, run: DecoderRun, tuned) -> None:
    """The tuned lens beside the logit lens: KL(output ‖ layer) at each layer boundary,
    averaged over the text's positions, one line each."""
    from attnviz.plot import lens_figures

    logit, _ = _lens(m, run, False)
    rows = [lens_row_label(kind, layer) for kind, layer in tuned.rows]
    kls = {"logit": logit.kl.mean(axis=1), "tuned": tuned.kl.mean(axis=1)}      # (R,) each
    widgets.chart(lens_figures.kl_lines(
        kls, {kind: t(f"reading.lens.kind.option.{kind}") for kind in kls}, row_labels=rows,
        title=t("reading.lens.tuned.kl_title", tokens=len(run.tokens))), key=keys.LENS_KL)
    below = int((kls["tuned"][:-1] < kls["logit"][:-1]).sum())
    st.caption(t("reading.lens.tuned.kl_caption", below=below, layers=len(rows) - 1))
