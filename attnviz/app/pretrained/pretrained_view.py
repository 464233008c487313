"""Pieces of the Pretrained model page: the cached model and run, the token list, the pickers,
and the jump to Step by step on the chosen head."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import streamlit as st

from attnviz.plot import budget, figures, model_figures
from attnviz.core.modes import Mode
from attnviz.core.errors import AttnvizInputError
from attnviz.session.settings import Settings
from attnviz.core.cache import SizedCache, python_bytes
from attnviz.i18n import language, languages, render, t
from attnviz.models.encoder.pretrained import PretrainedTrace
from attnviz.session.encoder_runs import cached_encoder_run
from attnviz.models.catalogue.registry import ModelEntry
from attnviz.app import keys
from attnviz.app.shared import compare_view, state, widgets
from attnviz.app.shared.text import MAX_TEXT_CHARS, at_limit, bound, literal, token_line


@dataclass(frozen=True, eq=False)
class ModelRun:
    """One run of the model as the views draw it."""

    attentions: np.ndarray        # (L, H, n, n) every layer's weights, the shown tokens only
    tokens: list[str]             # (n,) the shown tokens
    positions: np.ndarray         # (n,) their positions in run.tokens

    @property
    def start(self) -> int:
        """Position of the first shown token, when the shown ones are consecutive (they are:
        only the first and last, [CLS] and [SEP], are ever hidden); else 0."""
        p = self.positions
        return int(p[0]) if np.array_equal(p, np.arange(p[0], p[0] + len(p))) else 0


# What the views draw, shared by every session (with [CLS]/[SEP] hidden, a copy of the weights).
_SHOWN = SizedCache(max_bytes=128 * 2**20, max_entries=32)


def _shown(sentence: str, max_tokens: int, hide_special: bool) -> ModelRun:
    entry = chosen_model()
    return _SHOWN.get((entry.name, sentence, max_tokens, hide_special),
                      lambda: _model_run(entry, sentence, max_tokens, hide_special))


def _model_run(entry: ModelEntry, sentence: str, max_tokens: int,
               hide_special: bool) -> ModelRun:
    run = cached_encoder_run(sentence, max_tokens, entry.load())
    attentions = run.attentions                                   # (L, H, n, n)
    positions = np.arange(len(run.tokens))
    if hide_special:
        positions = positions[~run.encoding.special]
        attentions, _ = model_figures.keep_tokens(attentions, run.tokens, positions)
        attentions.setflags(write=False)
    return ModelRun(attentions=attentions, tokens=[run.tokens[i] for i in positions],
                    positions=positions)


# The figures are the same for every learner on the same text: built once, shared. Measured
# by the Python objects they hold (a plotly figure takes 3–7 times its JSON's size).
_FIGURES = SizedCache(max_bytes=32 * 2**20, max_entries=32, size_of=python_bytes)


def shared_figure(name: str, build, *key):
    """`build()` for the sidebar's model, text and limit and `key` (the view's own choices),
    built once for every session that shows the same in the same language (plotly figures are
    not changed by drawing; their titles are in the language they were built in)."""
    return _FIGURES.get((name, language(), chosen_model().name, *_sentence_and_limit(), *key),
                        build)


def keep_tab(key: str, ids: list[str]) -> None:
    """A tab bar's session value is its label: after a language switch it is the other
    language's label of the same tab, given here in this one (else the first tab opens)."""
    current = st.session_state.get(key)
    if current is None:
        return
    for msg_id in ids:
        if current in {render(msg_id, lang) for lang in languages()}:
            st.session_state[key] = t(msg_id)
            return


def chosen_model() -> ModelEntry:
    """The sidebar's pretrained model (Settings.model): its registry entry."""
    return Settings.from_mapping(st.session_state).model_entry


def sentence_and_limit() -> tuple[str, int]:
    """The sidebar's sentence and token limit, which every view of the model reads."""
    s = Settings.from_mapping(st.session_state)
    return s.sentence, s.max_tokens


_sentence_and_limit = sentence_and_limit


def load() -> PretrainedTrace:
    """The model run on the sidebar's sentence and token limit, with a spinner while the model
    loads or runs; on bad input shows the error and stops the page."""
    state.init()
    entry = chosen_model()
    try:
        with st.spinner(t("pretrained.loading", model=entry.shown)):
            model = entry.load()
        with st.spinner(t("pretrained.running", model=entry.shown)):
            return cached_encoder_run(*_sentence_and_limit(), model)
    except AttnvizInputError as exc:
        st.error(t("pretrained.cannot_run", error=literal(exc)))
        st.stop()


def shown(hide_special: bool) -> ModelRun:
    """What the views draw: every layer's weights, without [CLS]/[SEP] if `hide_special`
    (call after :func:`load`)."""
    return _shown(*_sentence_and_limit(), hide_special)


def token_list(run: PretrainedTrace) -> None:
    """The WordPiece tokens in one row, and what [UNK] means."""
    tokens = run.tokens
    st.markdown(token_line(tokens))
    unknown = tokens.count("[UNK]")
    st.caption(t("pretrained.wordpiece") + (
        " " + t("pretrained.unknown", unknown=unknown, count=len(tokens)) if unknown else ""))


def hide_special_checkbox(key: str = keys.PT_HIDE_SPECIAL) -> bool:
    """"Hide [CLS]/[SEP]": True when the views drop those tokens."""
    if not isinstance(st.session_state.get(key, False), bool):
        del st.session_state[key]
    return st.checkbox(t("pretrained.hide_special.label"), persist_state="session", key=key,
                       help=t("pretrained.hide_special.help"))


def keep_in_range(key: str, n: int, default=0) -> None:
    """Reset st.session_state[key] to `default` (or 0) unless it is a whole number 0 … n-1."""
    def usable(i) -> bool:
        return isinstance(i, (int, np.integer)) and not isinstance(i, bool) and 0 <= i < n

    if not usable(st.session_state.get(key)):
        st.session_state[key] = int(default) if usable(default) else 0


def pick(label: str, n: int, key: str, *, default: int = 0, name: str) -> int:
    """A one-click choice of 0 … n-1 (a layer or a head), kept in range."""
    keep_in_range(key, n, default)
    return st.segmented_control(label, list(range(n)),
                                persist_state="session", key=key, required=True,
                                format_func=lambda i: f"{name} {i}")


def pick_number(what: str, n: int, key: str, *, default: int = 0) -> int:
    """`pick` in the page's language: `what` is "layer" or "head" (its label
    pretrained.pick.<what>, each option pretrained.pick.<what>.option)."""
    keep_in_range(key, n, default)
    return st.segmented_control(t(f"pretrained.pick.{what}"), list(range(n)),
                                persist_state="session", key=key, required=True,
                                format_func=lambda i: t(f"pretrained.pick.{what}.option", number=i))


def pick_heads(n: int, key: str) -> list[int]:
    """Which heads the head view draws (several at once)."""
    current = st.session_state.get(key)
    if not isinstance(current, list) or any(
            not isinstance(h, int) or not 0 <= h < n for h in current):
        st.session_state[key] = list(range(n))
    return sorted(st.segmented_control(t("pretrained.heads.label"), list(range(n)),
                                       persist_state="session", key=key, selection_mode="multi",
                                       format_func=lambda h: str(h),
                                       help=t("pretrained.heads.help")))


EVERY_TOKEN = -1       # "Highlight token"'s "(every token)": an option, never None, which
                       # a selectbox shows as nothing selected ("Choose an option")


def pick_token(view: ModelRun, key: str) -> int | None:
    """"Highlight token": a shown token's index in view.tokens, or None for all tokens. The
    choice is stored as the token's position in the text, so hiding [CLS]/[SEP] keeps it;
    every token is EVERY_TOKEN (a value a selectbox shows as its option, after any rerun or
    a switch of model)."""
    positions = [int(p) for p in view.positions]
    if st.session_state.get(key) not in [EVERY_TOKEN, *positions]:
        st.session_state[key] = EVERY_TOKEN
    labels = dict(zip(positions, view.tokens))
    chosen = st.selectbox(t("pretrained.highlight.label"), [EVERY_TOKEN, *positions],
                          persist_state="session", key=key,
                          format_func=lambda p: t("pretrained.highlight.every")
                          if p == EVERY_TOKEN else f"{p}: {labels[p]}",
                          help=t("pretrained.highlight.help"))
    return None if chosen == EVERY_TOKEN else positions.index(chosen)


def click_token(points: list[dict], key: str, positions: list[int]) -> None:
    """on_click of the head view: a click on a token's label (a query on the left or a key on
    the right: the labels are the figure's only points that answer a click) makes it
    "Highlight token"'s choice, under `key`; a click on the highlighted token shows every
    token again. `positions`: the drawn tokens' positions in the text, top to bottom."""
    rows = [p.get("y") for p in points]
    rows = [int(y) for y in rows if isinstance(y, (int, float)) and float(y).is_integer()
            and 0 <= y < len(positions)]
    if not rows:
        return
    position = positions[rows[-1]]
    st.session_state[key] = EVERY_TOKEN if st.session_state.get(key) == position else position


def head_view_chart(fig, view: ModelRun, token_key: str, *, key: str) -> None:
    """The head view's chart: clicking a token highlights it (BertViz's hover, as a click),
    "Highlight token" (`token_key`) follows."""
    widgets.chart(fig, key=key, on_click=click_token,
                  args=(token_key, [int(p) for p in view.positions]))


def _open_in_steps(layer: int, head: int) -> None:
    """on_click: make the step pages show this head of the real model (widget keys can only be
    set before their widgets are drawn, so this runs as a callback)."""
    st.session_state[keys.MODE] = Mode.PRETRAINED.value
    st.session_state[keys.LAYER] = layer
    st.session_state[keys.HEAD] = head


def step_through_button(layer: int, head: int) -> None:
    """"Step through this head": the Step by step page on this layer and head."""
    if widgets.action_button(t("pretrained.step_through.label"), _open_in_steps, (layer, head),
                             key=keys.PT_STEP_THROUGH, rerun=False, icon=":material/footprint:",
                             help=t("pretrained.step_through.help")):
        widgets.switch_page("steps")


def one_head_heatmap(view: ModelRun, layer: int, head: int, weight_scale: str):
    """The One head tab's heatmap of `layer`, `head`: the page's main map (MAIN_MAX_BYTES of
    the figure budget: 512 tokens are sent whole, on every scale)."""
    return figures.heatmap(view.attentions[layer, head], row_labels=view.tokens,
                           col_labels=view.tokens, kind="weights", weight_scale=weight_scale,
                           title=t("pretrained.one_head.title", layer=layer, head=head),
                           max_bytes=budget.MAIN_MAX_BYTES)


def second_sentence(layer: int, head: int, view: ModelRun, hide_special: bool,
                    weight_scale: str = "fixed", *, above=None) -> None:
    """"Compare with a second sentence" (empty: off): the same head's weights on a second text
    beside the first (both on `weight_scale`), and on the positions where both texts have the
    same token, the difference second − first, in the figure budget that the figure `above`
    (the head's own map) leaves."""
    bound(keys.PT_COMPARE, MAX_TEXT_CHARS)
    other = st.text_input(t("pretrained.compare.label"), persist_state="session",
                          key=keys.PT_COMPARE, placeholder=t("pretrained.compare.placeholder"),
                          max_chars=MAX_TEXT_CHARS, help=t("pretrained.compare.help"))
    at_limit(other, MAX_TEXT_CHARS)
    if not other or not other.strip():
        return
    _, limit = sentence_and_limit()
    try:
        second = _shown(other, limit, hide_special)
    except AttnvizInputError as exc:
        st.error(t("pretrained.compare.cannot_run", error=literal(exc)))
        return
    compare_view.side_by_side(view.attentions[layer, head], view.tokens,
                              second.attentions[layer, head], second.tokens, key=keys.PT_COMPARE,
                              weight_scale=weight_scale,
                              max_bytes=budget.PAGE_MAX_BYTES
                              - (0 if above is None else budget.figure_bytes(above)))
