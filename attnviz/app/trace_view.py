"""Trace the answer: from attention to the next token on a language model (SmolLM2) — the logit
lens (every layer read as the last, on the sidebar's sentence), activation patching (a clean
and a corrupted prompt: which layer, position or head carries the answer) and information flow
(Ferrando & Voita's contribution graph of the sidebar's sentence, from one position down to
the tokens).

Patching runs in chunks of about CHUNK_SECONDS: after each the partial result is kept in the
session, so "Stop" (whose click ends the run at the next chunk) loses nothing and "Resume" goes
on from it; a finished result is kept for every learner (the same prompts, answers and kind
give the same numbers).
"""

from __future__ import annotations

import time

import numpy as np
import streamlit as st

from attnviz.app import (keys, language, model_loading, pretrained_view, reading_view,
                         widgets)
from attnviz.app.text import at_limit, bound, code, literal, token_line
from attnviz.core.cache import SizedCache
from attnviz.core.errors import AttnvizInputError
from attnviz.describe.labels import token_shown
from attnviz.i18n import t
from attnviz.models import registry
from attnviz.models.patching import effect_shape
from attnviz.plot import figures
from attnviz.tutorials.patching_pairs import PATCHING_PAIRS, patching_pair

TABS = ("lens", "patching", "flow")        # the tabs, trace.tab.<name>
PAIRS = tuple(p.name for p in PATCHING_PAIRS) + ("custom",)   # trace.patch.pair.option.*
WHERE = ("resid", "attn", "mlp", "heads", "heads_pos")        # trace.patch.where.option.*
MAX_PATCH_CHARS = 400       # a patching prompt's characters: a short sentence
MAX_PATCH_TOKENS = 32       # and its tokens: residual patching is (L + 1) × n runs
CHUNK_SECONDS = 2.0         # patching between two points where "Stop" can end the run
TOP_PATCHES = 5             # the strongest patches listed under the map

THRESHOLD = 0.04            # the flow's default: the smallest importance an edge keeps
# finished patchings, the same for every learner on the same prompts, answers and kind
_PATCHES = SizedCache(max_bytes=8 * 2**20, max_entries=64,
                      size_of=lambda p: 2 * p.metric.nbytes + 64 * len(p.clean_tokens))

# information flows (every importance, (L, H, n, n) floats: 7 MB for 64 tokens), per sentence
_FLOWS = SizedCache(max_bytes=64 * 2**20, max_entries=16,
                    size_of=lambda f: sum(a.nbytes for a in f.arrays().values()))


def needs_language_model() -> bool:
    """True (and said, with a button switching the sidebar's model) when the sidebar's model
    has no language-model head: nothing on this page can be computed for it."""
    entry = reading_view.chosen_model()
    if entry.supports(registry.LENS):
        return False
    lm = registry.language_model()
    st.info(t("trace.needs_language_model", model=entry.shown, language_model=lm.shown),
            icon=":material/info:")
    widgets.action_button(t("trace.use_language_model", language_model=lm.shown),
                          _use_model, (lm.name,), key=keys.TR_USE_LM,
                          icon=":material/swap_horiz:")
    return True


def _use_model(name: str) -> None:
    st.session_state[keys.MODEL] = name


def tab_labels() -> list[str]:
    """The tabs' labels in the active language; the open one stays open across a switch."""
    ids = [f"trace.tab.{name}" for name in TABS]
    pretrained_view.keep_tab(keys.TR_VIEW, ids)
    return [t(i) for i in ids]


# ---- the logit lens (the sidebar's sentence) -----------------------------------------------------

def lens_tab() -> None:
    """Read the model's logit lens, on this page: the sidebar's sentence, every layer."""
    run = reading_view.load()
    reading_view.token_list(run)
    reading_view.draw_tab(reading_view.lens_tab, run)


# ---- activation patching ---------------------------------------------------------------------------

def _fill_pair() -> None:
    """on_change of the preset: its prompts and answers in the boxes ("custom" keeps them)."""
    name = st.session_state.get(keys.TR_PAIR)
    if name in PAIRS[:-1]:
        p = patching_pair(name)
        st.session_state[keys.TR_CLEAN] = p.clean
        st.session_state[keys.TR_CORRUPTED] = p.corrupted
        # an answer of several tokens (四 is two byte pieces) is left to the model: each
        # prompt's own most likely next token, its first piece
        m = registry.language_model().load()
        one_token = all(len(m.encode(a)) == 1 for a in (p.clean_answer, p.corrupted_answer))
        st.session_state[keys.TR_ANSWER_CLEAN] = p.clean_answer if one_token else ""
        st.session_state[keys.TR_ANSWER_CORRUPTED] = p.corrupted_answer if one_token else ""


def _patch_inputs() -> tuple[str, str, tuple[str, str] | None, str, int | None]:
    """The preset, both prompts, both answers, what to patch (and the layer of heads_pos)."""
    if st.session_state.get(keys.TR_PAIR) not in PAIRS:
        st.session_state[keys.TR_PAIR] = language.default(keys.TR_PAIR, PAIRS[0])
    if st.session_state.get(keys.TR_CLEAN) is None:         # a fresh session: the preset's
        _fill_pair()
    st.selectbox(t("trace.patch.pair.label"), PAIRS, key=keys.TR_PAIR, persist_state="session",
                 on_change=_fill_pair, format_func=_pair_name, help=t("trace.patch.pair.help"))
    texts = []
    for key, label, help_id in ((keys.TR_CLEAN, "trace.patch.clean.label",
                                 "trace.patch.clean.help"),
                                (keys.TR_CORRUPTED, "trace.patch.corrupted.label",
                                 "trace.patch.corrupted.help")):
        bound(key, MAX_PATCH_CHARS)
        typed = st.text_input(t(label), key=key, persist_state="session",
                              max_chars=MAX_PATCH_CHARS, help=t(help_id))[:MAX_PATCH_CHARS]
        at_limit(typed, MAX_PATCH_CHARS)
        texts.append(typed)
    left, right = st.columns(2)
    answers = []
    for where, key, label in ((left, keys.TR_ANSWER_CLEAN, "trace.patch.answer_clean.label"),
                              (right, keys.TR_ANSWER_CORRUPTED,
                               "trace.patch.answer_corrupted.label")):
        bound(key, MAX_PATCH_CHARS)
        answers.append(where.text_input(t(label), key=key, persist_state="session",
                                        max_chars=MAX_PATCH_CHARS,
                                        help=t("trace.patch.answer.help"))[:MAX_PATCH_CHARS])
    if st.session_state.get(keys.TR_WHERE) not in WHERE:
        st.session_state[keys.TR_WHERE] = WHERE[0]
    where = st.radio(t("trace.patch.where.label"), WHERE, horizontal=True, key=keys.TR_WHERE,
                     persist_state="session", format_func=_where_name,
                     help=t("trace.patch.where.help"))
    return texts[0], texts[1], _answers(answers), where


def _pair_name(name: str) -> str:
    return t(f"trace.patch.pair.option.{name}")


def _where_name(where: str) -> str:
    return t(f"trace.patch.where.option.{where}")


def _answers(typed: list[str]) -> tuple[str, str] | None:
    """Both answers as typed, or None (each prompt's own most likely next token) when both
    boxes are empty; one empty box is said."""
    if not any(typed):
        return None
    if not all(typed):
        st.error(t("trace.patch.one_answer"))
        st.stop()
    return typed[0], typed[1]


def _prompt_ids(m, text: str) -> np.ndarray | None:
    """The prompt's tokens (None, said, when empty or too long)."""
    if not text.strip():
        st.info(t("trace.patch.empty"))
        return None
    ids = m.encode(text)
    if len(ids) > MAX_PATCH_TOKENS:
        st.error(t("trace.patch.too_long", tokens=len(ids), limit=MAX_PATCH_TOKENS))
        return None
    return ids


def _show_tokens(m, clean_ids: np.ndarray, corrupted_ids: np.ndarray) -> bool:
    """Both prompts' tokens, and where they differ; False (said) when their lengths do."""
    clean, corrupted = m.labels(clean_ids)[0], m.labels(corrupted_ids)[0]
    st.markdown(t("trace.patch.tokens.clean", count=len(clean)) + " " + token_line(clean))
    st.markdown(t("trace.patch.tokens.corrupted", count=len(corrupted)) + " "
                + token_line(corrupted))
    if len(clean) != len(corrupted):
        st.warning(t("trace.patch.lengths", clean=len(clean), corrupted=len(corrupted)))
        return False
    differ = [int(i) for i in np.flatnonzero(clean_ids != corrupted_ids)]
    if not differ:
        st.info(t("trace.patch.tokens.same"))
        return False
    st.caption(t("trace.patch.tokens.differ", positions=", ".join(map(str, differ))))
    return True


def patching_key(clean_ids, corrupted_ids, answers, where: str, layer: int | None) -> tuple:
    """What a patching result is kept under (every learner's): the prompts, answers, kind."""
    return (registry.language_model().name, clean_ids.tobytes(), corrupted_ids.tobytes(),
            answers, where, layer)


def _ask(key: tuple) -> None:
    st.session_state[keys.TR_RAN] = True
    st.session_state[keys.TR_RUN_FOR] = key
    st.session_state[keys.TR_STOPPED_FOR] = None


def _stop(key: tuple) -> None:
    st.session_state[keys.TR_STOPPED_FOR] = key


def patching_tab() -> None:
    """Two prompts, two answers, one kind of patch: the effect of every patch as a map."""
    m = model_loading.decoder(registry.language_model())
    st.caption(t("trace.patch.caption"))
    clean_text, corrupted_text, answers, where = _patch_inputs()
    layer = None
    if where == "heads_pos":
        layer = pretrained_view.pick_number("layer", m.num_layers, keys.TR_LAYER,
                                            default=m.num_layers - 1)
    clean_ids, corrupted_ids = _prompt_ids(m, clean_text), _prompt_ids(m, corrupted_text)
    if clean_ids is None or corrupted_ids is None:
        return
    if not _show_tokens(m, clean_ids, corrupted_ids):
        return
    key = patching_key(clean_ids, corrupted_ids, answers, where, layer)
    if st.session_state.get(keys.TR_RAN) and st.session_state.get(keys.TR_RUN_FOR) is None:
        st.session_state[keys.TR_RUN_FOR] = key          # a link that was patched: again
    result = _PATCHES.peek(key)
    if result is None:
        result = _run(m, key, clean_ids, corrupted_ids, answers, where, layer)
    if result is not None:
        _show_result(m, result)


def _run(m, key, clean_ids, corrupted_ids, answers, where, layer):
    """The patching asked for: computed chunk by chunk (a partial one kept in the session,
    resumed), with "Patch", "Stop" and "Resume" buttons and a progress bar. The result when
    finished, or the partial one stopped."""
    partial = st.session_state.get(keys.TR_PARTIAL)
    partial = partial[1] if isinstance(partial, tuple) and partial[0] == key else None
    asked = st.session_state.get(keys.TR_RUN_FOR) == key
    stopped = st.session_state.get(keys.TR_STOPPED_FOR) == key
    size = int(np.prod(effect_shape(m, where, len(clean_ids))))
    if not asked:
        widgets.action_button(t("trace.patch.button", count=size), _ask, (key,),
                              key=keys.TR_PATCH, type="primary", icon=":material/play_arrow:",
                              help=t("trace.patch.button.help"))
        return None
    if stopped:
        done = 0 if partial is None else partial.done
        st.info(t("trace.patch.stopped", done=done, total=size))
        widgets.action_button(t("trace.patch.resume"), _ask, (key,), key=keys.TR_RESUME,
                              icon=":material/play_arrow:")
        return partial
    widgets.action_button(t("trace.patch.stop"), _stop, (key,), key=keys.TR_STOP,
                          icon=":material/stop:", rerun=False)
    bar = st.progress(0.0 if partial is None else partial.done / size,
                      text=t("trace.patch.progress", done=0 if partial is None
                             else partial.done, total=size))
    try:
        while partial is None or not partial.complete:
            started = time.monotonic()
            partial = m.patch(clean_ids, corrupted_ids, answers=answers, where=where,
                              layer=layer, resume=partial,
                              should_stop=lambda: time.monotonic() - started > CHUNK_SECONDS)
            st.session_state[keys.TR_PARTIAL] = (key, partial)
            # a point where a click on Stop ends this run, the partial result kept
            bar.progress(partial.done / size,
                         text=t("trace.patch.progress", done=partial.done, total=size))
    except AttnvizInputError as exc:
        bar.empty()
        st.error(t("trace.patch.error", error=literal(exc)))
        return None
    bar.empty()
    st.session_state.pop(keys.TR_PARTIAL, None)
    return _PATCHES.get(key, lambda: partial)


def _pick_head(points: list[dict], where: str, layer: int | None, columns: int) -> None:
    """on_click of a heads map: the clicked cell's (layer, head) under TR_PICK. The clicks
    are the map's cell markers' (its second trace, ``figures.cell_markers``): point
    r · columns + c is cell (r, c)."""
    for point in reversed(points):
        index = point.get("point_index")
        if point.get("curve_number") == 1 and isinstance(index, int):
            r, c = divmod(index, columns)
            st.session_state[keys.TR_PICK] = (where, r, c) if where == "heads" else \
                (where, layer, r)
            return
    st.session_state[keys.TR_PICK] = None


def _picked_head(where: str) -> None:
    """The head clicked on the map, with "Step through this head"."""
    picked = st.session_state.get(keys.TR_PICK)
    if not (isinstance(picked, tuple) and len(picked) == 3 and picked[0] == where):
        st.caption(t("trace.patch.click"))
        return
    _, layer, head = picked
    st.markdown(t("trace.patch.picked", layer=layer, head=head))
    pretrained_view.step_through_button(int(layer), int(head))


def _map_axes(m, p) -> tuple[list[str], list[str], str, str]:
    """(row labels, column labels, row title, column title) of a patching's effect map."""
    tokens = [token_shown(s) for s in p.corrupted_tokens]
    layers = [t("figure.layer", layer=i) for i in range(m.num_layers)]
    heads = [t("figure.head", head=h) for h in range(m.num_heads)]
    if p.where == "resid":
        rows = [reading_view.lens_row_label("layer", i) for i in range(m.num_layers + 1)]
        return rows, tokens, t("trace.patch.axis.boundary"), t("figure.lens.position")
    if p.where == "heads":
        return layers, heads, t("figure.axis.layer"), t("figure.axis.head")
    if p.where == "heads_pos":
        return heads, tokens, t("figure.axis.head"), t("figure.lens.position")
    return layers, tokens, t("figure.axis.layer"), t("figure.lens.position")


def _show_result(m, p) -> None:
    """The metric of both runs, the effect map, the strongest patches and the downloads."""
    from attnviz.plot import patching_figures

    clean_answer, corrupted_answer = (token_shown(a) for a in p.answer_tokens)
    st.markdown(t("trace.patch.metric", clean_answer=code(clean_answer),
                  corrupted_answer=code(corrupted_answer), clean=f"{p.clean:.4f}",
                  corrupted=f"{p.corrupted:.4f}"))
    rows, cols, row_title, col_title = _map_axes(m, p)
    where = _where_name(p.where) if p.layer is None else \
        t("trace.patch.where.of_layer", where=_where_name(p.where), layer=p.layer)
    fig = patching_figures.effect_map(
        p.effect, row_labels=rows, col_labels=cols, row_title=row_title, col_title=col_title,
        title=t("trace.patch.map_title", where=figures.escape(where)),
        clean_tokens=None if p.where == "heads" else
        [token_shown(s) for s in p.clean_tokens], numbered=p.where != "heads")
    if p.where in ("heads", "heads_pos"):          # a cell is a head: a click opens it
        widgets.chart(fig, key=keys.TR_MAP, on_click=_pick_head,
                      args=(p.where, p.layer, len(cols)))
        _picked_head(p.where)
    else:
        widgets.chart(fig, key=keys.TR_MAP)
    if not p.complete:
        st.caption(t("trace.patch.partial", done=p.done, total=p.effect.size))
    top = [(rows[r], cols[c], e) for (r, c), e in p.top(min(TOP_PATCHES, p.done or 1))
           if np.isfinite(e)]
    if top:
        st.caption(t("trace.patch.top", items="; ".join(
            f"{r} · {c}: {e:.3f}" for r, c, e in top)))
    widgets.array_downloads(p.arrays, p.to_json, f"patching_{p.where}", key=keys.TR_MAP)


# ---- information flow (the sidebar's sentence) ---------------------------------------------------

def _flows(m, ids: np.ndarray, heads: bool):
    """The sentence's information flow, every importance computed (the graph is walked
    again for each position and threshold), once for every learner."""
    return _FLOWS.get((registry.language_model().name, ids.tobytes(), heads),
                      lambda: m.information_flow(ids, position=-1, threshold=THRESHOLD,
                                                 heads=heads))


def _pick_edge(points: list[dict]) -> None:
    """on_click of the graph: the edge whose midpoint was clicked (its customdata)."""
    for point in reversed(points):
        data = point.get("customdata")
        if isinstance(data, (list, tuple)) and len(data) >= 5:
            st.session_state[keys.FL_EDGE] = tuple(data[:5])
            return
    st.session_state[keys.FL_EDGE] = None


def flow_tab() -> None:
    """The contribution graph of the sidebar's sentence from one position down to the tokens:
    each head's, residual's and MLP's edges above the threshold; a clicked head edge opens
    that head on Step by step."""
    from attnviz.plot import flow_figures

    run = reading_view.load()
    reading_view.token_list(run)
    m = reading_view.chosen_model().load()
    st.caption(t("trace.flow.caption"))
    n = len(run.ids)
    shown = [token_shown(s) for s in run.tokens]
    pretrained_view.keep_in_range(keys.FL_POSITION, n, default=n - 1)
    left, middle, right = st.columns([2, 2, 1])
    position = left.selectbox(t("trace.flow.position"), list(range(n)), key=keys.FL_POSITION,
                              persist_state="session", format_func=lambda i: f"{i}: {shown[i]}",
                              help=t("trace.flow.position.help"))
    value = st.session_state.get(keys.FL_THRESHOLD)
    if not isinstance(value, float) or not 0.0 <= value <= 1.0:
        st.session_state[keys.FL_THRESHOLD] = THRESHOLD
    threshold = middle.slider(t("trace.flow.threshold"), 0.0, 1.0, step=0.01,
                              key=keys.FL_THRESHOLD, persist_state="session",
                              help=t("trace.flow.threshold.help"))
    st.session_state.setdefault(keys.FL_HEADS, True)
    heads = right.toggle(t("trace.flow.heads"), key=keys.FL_HEADS, persist_state="session",
                         help=t("trace.flow.heads.help"))
    try:
        with st.spinner(t("trace.flow.computing")):
            flow = _flows(m, run.ids, bool(heads))
        graph = flow.graph(position=position, threshold=threshold)
    except AttnvizInputError as exc:
        st.error(t("reading.error.run", model=reading_view.shown_name(), error=literal(exc)))
        return
    fig = flow_figures.flow_graph(graph.edges, shown, m.num_layers, position=position,
                                  title=t("trace.flow.title", position=position,
                                          token=figures.escape(shown[position]),
                                          threshold=f"{threshold:.2f}"))
    widgets.chart(fig, key=keys.FL_GRAPH, on_click=_pick_edge)
    st.caption(t("trace.flow.count", edges=len(graph.edges), nodes=len(graph.nodes)))
    _picked_edge(shown)
    widgets.array_downloads(graph.arrays, graph.to_json, "flow", key=keys.FL_GRAPH)


def _picked_edge(shown: list[str]) -> None:
    """The clicked edge in words; a head's edge opens that head on Step by step."""
    edge = st.session_state.get(keys.FL_EDGE)
    if not edge:
        st.caption(t("trace.flow.click"))
        return
    layer, head, source, target, kind = edge
    if not (isinstance(source, int) and isinstance(target, int)
            and 0 <= source < len(shown) and 0 <= target < len(shown)):
        return
    st.markdown(t(f"trace.flow.edge.{kind}", layer=layer, head=head,
                  source=code(shown[source]), target=code(shown[target])))
    if kind == "head":
        pretrained_view.step_through_button(int(layer), int(head))


__all__ = ["TABS", "flow_tab", "lens_tab", "needs_language_model", "patching_tab",
           "tab_labels"]
