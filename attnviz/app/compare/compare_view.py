"""Compare models: one text, two decoders side by side (the sidebar's two choices, keys.CMP_A
and keys.CMP_B): each one's tokens, one head of a layer picked for each, the weight on the first
token in every layer and head (the attention sink), the logit lens of the last position (the
row where each model's answer comes to the top) and its greedy continuation. Everything a model
computes is kept once for every learner, keyed by the model's file and the text; a link carries
both models and every pick, and the files hold both runs' arrays."""

from __future__ import annotations

import json

import numpy as np
import streamlit as st

from attnviz.core.cache import SizedCache, python_bytes
from attnviz.core.errors import AttnvizInputError
from attnviz.describe.labels import HOVER_CHARS, token_shown
from attnviz.i18n import t
from attnviz.models.decoders.decoder import DecoderModel, DecoderRun
from attnviz.plot import figures, generate_figures, lens_figures, text_layout
from attnviz.session.decoder_runs import cached_decoder_run
from attnviz.app import keys
from attnviz.app.reading import reading_view
from attnviz.app.shared import model_loading, widgets
from attnviz.app.shared.model_words import named
from attnviz.app.shared.text import code, literal, token_line
from attnviz.app.sidebar.model_choice import compared

SIDES = ("a", "b")              # the two columns, keys.CMP_A and keys.CMP_B's models
MAX_TOKENS = 64                 # what each model reads at most (the sidebar's limit within it)
CONTINUATION = 12               # the greedy continuation's new tokens
LENS_TOP = 5                    # the tokens each lens row keeps (its hover)
COLUMN_PX = 250                 # a column's charts at 1024 px: titles wrapped to fit

# a model's greedy continuation and its last position's lens, per (model file, text, limit)
_CONTINUED = SizedCache(max_bytes=2**20, max_entries=64, size_of=python_bytes)
_LENSES = SizedCache(max_bytes=16 * 2**20, max_entries=32,
                     size_of=lambda found: found[0].residuals.nbytes)


def run_of(m: DecoderModel, text: str, limit: int) -> DecoderRun:
    return cached_decoder_run(text, limit, m)


def _continuation_shown(m: DecoderModel, entry, text: str, limit: int) -> str | None:
    """The model's greedy continuation, shown once asked for (CONTINUE_ASKED: the button
    under both columns, for this text) or made already on this server for anyone; else
    nothing is computed (a page's first view stays two runs and two lenses; a link never
    generates by itself)."""
    key = (str(m.path), text, limit)
    if st.session_state.get(keys.CMP_ASKED) != (text, limit) and _CONTINUED.peek(key) is None:
        return None
    with st.spinner(t("compare.continuation.computing", model=entry.shown, n=CONTINUATION)):
        continued = continuation(m, text, limit)
    st.markdown(t("compare.continuation", model=entry.shown, n=CONTINUATION))
    st.code(continued, language=None, wrap_lines=True)
    return continued


def continue_button(text: str, limit: int) -> None:
    """Both models' greedy continuations, on a press (said with the button)."""
    if st.session_state.get(keys.CMP_ASKED) == (text, limit):
        return
    st.caption(t("compare.continuation.press", n=CONTINUATION))
    widgets.action_button(t("compare.continuation.button", n=CONTINUATION), _ask,
                          ((text, limit),), key=keys.CMP_CONTINUE,
                          icon=":material/play_arrow:")


def _ask(what: tuple[str, int]) -> None:
    st.session_state[keys.CMP_ASKED] = what


def continuation(m: DecoderModel, text: str, limit: int) -> str:
    """The model's greedy continuation of the text's first `limit` tokens (CONTINUATION new
    tokens, or fewer where it ends its text)."""
    def compute():
        ids = run_of(m, text, limit).ids
        bos = int(m.config.add_bos and ids[0] == m.config.bos_id)    # generate puts it first
        return m.generate(m.decode(ids[bos:]), max_new_tokens=CONTINUATION).text
    return _CONTINUED.get((str(m.path), text, limit), compute)


def last_lens(m: DecoderModel, name: str, run: DecoderRun):
    """The logit lens of the run's last position, its target the model's own next token: (the
    lens with one column, its rows' top tokens as the page writes them (R, k)). Read from the
    run's streams; the last column of the whole lens Trace the answer or Read the model kept
    of this run (``reading_view.kept_lens``: the same products, to the bit) when there is one."""
    def compute():
        kept = reading_view.kept_lens(name, run)
        if kept is not None:
            whole, words = kept
            return whole.last_column(LENS_TOP), [row[-1][:LENS_TOP] for row in words]
        lens = m.logit_lens(run, k=LENS_TOP, positions=[-1], max_tokens=len(run.ids))
        return lens, [row[0] for row in reading_view.lens_labels(m, run, lens)]
    return _LENSES.get((str(m.path), run.ids.tobytes()), compute)


def first_weights(run: DecoderRun) -> np.ndarray:
    """(layers, heads): each head's weight on the first token, averaged over the queries after
    it (the first token's own row is all on itself)."""
    a = run.attentions                                   # (L, H, n, n)
    if a.shape[2] < 2:
        return a[:, :, :, 0].mean(axis=-1)
    return a[:, :, 1:, 0].mean(axis=-1)


def window_mask(m: DecoderModel, layer: int, n: int) -> np.ndarray:
    """(n, n) True where a query cannot see a key at `layer`: after it (causal), or further
    back than the layer's sliding window (Gemma 3's local layers: 512)."""
    i, j = np.indices((n, n))
    window = m.config.window_of(layer)
    return (j > i) | ((i - j >= window) if window else False)


def column(side: str, text: str, limit: int) -> dict | None:
    """One model's column: its name, tokens, head, sink, lens and continuation; the arrays
    its file carries (None when it cannot run, said in the column)."""
    entry = compared(side)
    st.subheader(named(entry))
    m = model_loading.decoder(entry, stop=False)
    if m is None:
        return None
    try:
        with st.spinner(t("compare.running", model=entry.shown)):
            run = run_of(m, text, limit)
    except AttnvizInputError as exc:
        st.error(t("reading.error.run", model=entry.shown, error=literal(exc)))
        return None
    shown = [token_shown(s, HOVER_CHARS) for s in run.tokens]
    bos = int(m.config.add_bos and run.ids[0] == m.config.bos_id)
    st.markdown(token_line(shown))
    st.caption(t("compare.tokens_bos" if bos else "compare.tokens", model=entry.shown,
                 count=len(run.ids) - bos))
    if run.truncated:
        st.info(t("reading.notice.decoder", total=run.total, limit=len(run.ids)))

    layer_key, head_key = (keys.CMP_LAYER_A, keys.CMP_HEAD_A) if side == "a" else \
        (keys.CMP_LAYER_B, keys.CMP_HEAD_B)
    layer = _pick(layer_key, m.num_layers, m.num_layers - 1, "compare.layer", "figure.layer",
                  "layer")
    head = _pick(head_key, m.num_heads, 0, "compare.head", "figure.head", "head")
    window = m.config.window_of(layer)
    kind = t("compare.layer_kind.sliding", window=window) if window \
        else t("compare.layer_kind.full")
    st.caption(t("compare.head.caption", layer=layer, head=head, kind=kind,
                 kv=head // (m.num_heads // m.num_kv_heads), kv_heads=m.num_kv_heads))
    n = len(run.ids)
    widgets.chart(figures.heatmap(
        run.attentions[layer, head], row_labels=shown, col_labels=shown, kind="weights",
        masked=window_mask(m, layer, n), row_title=t("figure.axis.query"),
        col_title=t("figure.axis.key"), show_values=False, width=COLUMN_PX,
        title=_title(t("figure.compare.head.title", model=entry.shown, layer=layer, head=head))),
        key=keys.CMP_MAP(side))

    sink = first_weights(run)
    st.caption(t("compare.sink.caption", first=code(shown[0]), mean=float(sink.mean()),
                 over=int((sink > 0.5).sum()), heads=sink.size))
    widgets.chart(generate_figures.sink_map(
        sink, title=_title(t("figure.compare.sink.title", model=entry.shown)), width=COLUMN_PX),
        key=keys.CMP_SINK(side))

    with st.spinner(t("compare.lens.computing", model=entry.shown)):
        lens, labels = last_lens(m, entry.name, run)
    rows = [reading_view.lens_row_label(kind, i) for kind, i in lens.rows]
    ranks, probs = lens.target_rank[:, 0], lens.target_prob[:, 0]
    answer = token_shown(m.piece_after(run.ids, int(lens.target[0])))
    widgets.chart(lens_figures.step_lens(
        lens.top_probs[:, 0], labels, ranks, probs, row_labels=rows, token=answer,
        title=t("figure.compare.lens.title", model=entry.shown, position=n - 1),
        width=COLUMN_PX),
        key=keys.CMP_LENS(side))
    rise = _first_of_last_run(ranks)
    st.caption(t("compare.lens.first_top", token=code(answer), row=rows[rise],
                 probability=f"{float(probs[-1]):.3f}"))

    continued = _continuation_shown(m, entry, text, limit)
    return {"model": entry.name, "ids": run.ids, "tokens": run.tokens,
            "attentions": run.attentions, "sink": sink, "lens_top_ids": lens.top_ids[:, 0],
            "lens_top_probs": lens.top_probs[:, 0], "lens_target_rank": ranks,
            "lens_target_prob": probs, "continuation": continued or ""}


def _title(title: str) -> str:
    """A heatmap's title escaped and wrapped to a column (the heatmap writes it as given)."""
    return text_layout.wrap_title(text_layout.escape(title), COLUMN_PX)


def _first_of_last_run(ranks: np.ndarray) -> int:
    """The row from which the answer stays the top token to the end (the last row always
    has it on top: it is the model's own output)."""
    row = len(ranks) - 1
    while row > 0 and ranks[row - 1] == 1:
        row -= 1
    return row


def _pick(key: str, n: int, default: int, label_id: str, option_id: str, name: str) -> int:
    """A layer or head of one column: a selectbox within 0 … n-1 (kept in range)."""
    from attnviz.app.pretrained.pretrained_view import keep_in_range

    keep_in_range(key, n, default)
    return st.selectbox(t(label_id), list(range(n)), key=key, persist_state="session",
                        format_func=lambda i: t(option_id, **{name: i}))


def downloads(found: dict[str, dict]) -> None:
    """Both runs' arrays (.npz, each array named a_… and b_…) and their numbers (JSON)."""
    def arrays() -> dict:
        out = {}
        for side, f in found.items():
            for name, value in f.items():
                if name not in ("model", "tokens", "continuation"):
                    out[f"{side}_{name}"] = np.asarray(value)
            out[f"{side}_tokens"] = np.array(f["tokens"], dtype=str)
            out[f"{side}_model"] = np.array(f["model"])
        return out

    def numbers() -> str:            # the attentions are in the .npz only (L·H·n² numbers)
        return json.dumps({side: {name: np.asarray(v).tolist() if isinstance(v, np.ndarray)
                                  else v for name, v in f.items() if name != "attentions"}
                           for side, f in found.items()}, ensure_ascii=False)

    widgets.array_downloads(arrays, numbers, "compare_models", key=keys.CMP_FILES)


__all__ = ["column", "downloads"]
