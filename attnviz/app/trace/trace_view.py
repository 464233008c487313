"""Trace the answer: from attention to the next token on the sidebar's language model — the logit
lens (every layer read as the last, on the sidebar's sentence), activation patching (a clean
and a corrupted prompt: which layer, position or head carries the answer) and information flow
(Ferrando & Voita's contribution graph of the sidebar's sentence, from one position down to
the tokens).

Patching runs on the server's queue for heavy work (``attnviz.models.heavy``: a bounded number
of workers, the rest waiting in order), one job per request whoever asks: the same prompts,
answers and kind give the same numbers, so learners asking for them share one job, running or
finished. The page polls its job (place in the queue, patches done); "Stop" leaves it (the job
stops when no learner wants it, its partial result kept, "Resume" goes on from it). One click
asks for at most MAX_PATCH_WORK (patches × tokens), said on the form before the press; a link
restores the form and shows a result computed already, but never starts a patching.
"""

from __future__ import annotations

import math

import numpy as np
import streamlit as st

from attnviz.app import keys
from attnviz.app.pretrained import pretrained_view
from attnviz.app.reading import reading_view
from attnviz.app.shared import heavy_jobs, language as app_language, model_loading, widgets
from attnviz.app.shared.text import at_limit, bound, code, literal, token_line, token_notation
from attnviz.core.cache import SizedCache, nbytes, python_bytes
from attnviz.core.errors import AttnvizInputError
from attnviz.describe.labels import HOVER_CHARS, token_shown
from attnviz.i18n import language, t
from attnviz.models.catalogue import registry
from attnviz.session import model_views
from attnviz.models.readers.patching import effect_shape, patch_work
from attnviz.plot import figures, flow_figures, text_layout
from attnviz.tutorials.patching_pairs import PATCHING_PAIRS, patching_pair

TABS = ("lens", "patching", "flow")        # the tabs, trace.tab.<name>
PAIRS = tuple(p.name for p in PATCHING_PAIRS) + ("custom",)   # trace.patch.pair.option.*
CUSTOM = PAIRS[-1]
WHERE = ("resid", "attn", "mlp", "heads", "heads_pos")        # trace.patch.where.option.*
MAX_PATCH_CHARS = 400       # a patching prompt's characters: a short sentence
MAX_PATCH_TOKENS = 32       # and its tokens: residual patching is (L + 1) × n runs
MAX_PATCH_WORK = 10_000     # one click's patches × the tokens each computes (patch_work)
TOP_PATCHES = 5             # the strongest patches listed under the map

THRESHOLD = 0.04            # the flow's default: the smallest importance an edge keeps
FLOW_EDGES = flow_figures.MAX_EDGES     # the most edges a flow's graph keeps (the most
                                        # important): what its figure draws and its files hold
# the presets a model answers right (greedy, both prompts, as many tokens each), per model file
_OFFERED = SizedCache(max_bytes=2**20, max_entries=16, size_of=lambda names: 64 * len(names))
# finished patchings, the same for every learner on the same prompts, answers and kind
_PATCHES = SizedCache(max_bytes=8 * 2**20, max_entries=64,
                      size_of=lambda p: 2 * p.metric.nbytes + 64 * len(p.clean_tokens))

# information flows (every importance, (L, H, n, n) floats: 4.4 MB for 64 tokens), per sentence
_FLOWS = SizedCache(max_bytes=64 * 2**20, max_entries=16, size_of=nbytes)
# their graphs, per (model, sentence, heads, position, threshold), each counted with the
# importances it shares with its flow (it keeps them alive while here)
_GRAPHS = SizedCache(max_bytes=48 * 2**20, max_entries=64,
                     size_of=lambda g: nbytes(g) + python_bytes((g.nodes, g.edges)))
# the graphs' figures, a language each (plotly's objects: ~3 MB at FLOW_EDGES edges), and
# their files (.npz arrays, JSON text), made once for every learner
_FLOW_FIGURES = SizedCache(max_bytes=24 * 2**20, max_entries=16, size_of=python_bytes)
_FLOW_FILES = SizedCache(max_bytes=32 * 2**20, max_entries=16,
                         size_of=lambda f: len(f) * 4 if isinstance(f, str) else nbytes(f))


def needs_language_model() -> bool:
    """True (and said, with a button switching the sidebar's model) when the sidebar's model
    has no language-model head: nothing on this page can be computed for it."""
    entry = reading_view.chosen_model()
    if model_views.offers(entry, model_views.LENS):
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
    run = reading_view.load(value_norms=False)
    reading_view.token_list(run)
    reading_view.draw_tab(reading_view.lens_tab, run)


# ---- activation patching ---------------------------------------------------------------------------

def offered_pairs(m) -> tuple[str, ...]:
    """The presets `m` answers right — each prompt's most likely next token the first of its
    answer, both prompts of as many tokens — then "custom" (a learner's own pair works on any
    model). Checked once per model file for every learner (six short runs)."""
    def compute():
        def right(text: str, answer: str) -> bool:
            return int(np.argmax(m.next_token_logprobs(text))) == m.encode(answer, bos=False)[0]

        return tuple(p.name for p in PATCHING_PAIRS
                     if len(m.encode(p.clean)) == len(m.encode(p.corrupted))
                     and right(p.clean, p.clean_answer)
                     and right(p.corrupted, p.corrupted_answer)) + (CUSTOM,)

    return _OFFERED.get(str(m.path), compute)


def _fill_pair() -> None:
    """on_change of the preset: its prompts and answers in the boxes ("custom" keeps them)."""
    name = st.session_state.get(keys.TR_PAIR)
    if name != CUSTOM and name in PAIRS:
        p = patching_pair(name)
        st.session_state[keys.TR_CLEAN] = p.clean
        st.session_state[keys.TR_CORRUPTED] = p.corrupted
        # an answer of several tokens (四 is two byte pieces) is compared by its first
        st.session_state[keys.TR_ANSWER_CLEAN] = p.clean_answer
        st.session_state[keys.TR_ANSWER_CORRUPTED] = p.corrupted_answer


def _patch_inputs(m) -> tuple[str, str, tuple[str, str] | None, str, int | None]:
    """The preset (among those `m` answers right), both prompts, both answers, what to patch
    (and the layer of heads_pos)."""
    offered = offered_pairs(m)
    if st.session_state.get(keys.TR_PAIR) not in offered:
        default = app_language.default(keys.TR_PAIR, PAIRS[0])
        st.session_state[keys.TR_PAIR] = default if default in offered else offered[0]
    if st.session_state.get(keys.TR_CLEAN) is None:         # a fresh session: the preset's
        _fill_pair()
    st.selectbox(t("trace.patch.pair.label"), offered, key=keys.TR_PAIR, persist_state="session",
                 on_change=_fill_pair, format_func=_pair_name,
                 help=t("trace.patch.pair.help", model=m.model_name))
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
    return texts[0], texts[1], _answers(m, answers), where


def _pair_name(name: str) -> str:
    return t(f"trace.patch.pair.option.{name}")


def _where_name(where: str) -> str:
    return t(f"trace.patch.where.option.{where}")


def _answers(m, typed: list[str]) -> tuple[int, int] | None:
    """Both answers' token ids: each typed text's first token (a text of several — 四, two
    byte pieces — said with the token compared), or None (each prompt's own most likely
    next token) when both boxes are empty; one empty box is said."""
    if not any(typed):
        return None
    if not all(typed):
        st.error(t("trace.patch.one_answer"))
        st.stop()
    ids = []
    for text in typed:
        try:
            encoded = m.encode(text, bos=False)   # an answer follows its prompt
        except AttnvizInputError as exc:
            st.error(t("trace.patch.error", error=literal(exc)))
            st.stop()
        if len(encoded) > 1:
            st.caption(t("trace.patch.answer.first_token", text=code(token_shown(text)),
                         count=len(encoded), token=code(_answer_label(m, text, encoded[0]))))
        ids.append(int(encoded[0]))
    return ids[0], ids[1]


def _answer_label(m, typed, token_id: int, fallback: str = "") -> str:
    """An answer as shown: the first token of the text typed for it, as the prompt's chips
    write it (四 → 四[1/2]) when `token_id` is that token, else `fallback` (the token alone)."""
    try:
        ids = m.encode(typed, bos=False) if isinstance(typed, str) else None
    except AttnvizInputError:
        ids = None
    if ids is not None and int(ids[0]) == int(token_id):
        return token_shown(m.labels(ids)[0][0])
    return token_shown(fallback)


def _prompt_ids(m, texts: tuple[str, str]) -> tuple[np.ndarray, np.ndarray] | None:
    """Both prompts' tokens (None, said once, when one is empty or too long)."""
    if not all(text.strip() for text in texts):
        st.info(t("trace.patch.empty"))
        return None
    ids = [m.encode(text) for text in texts]
    longest = max(len(i) for i in ids)
    if longest > MAX_PATCH_TOKENS:
        st.error(t("trace.patch.too_long", tokens=longest, limit=MAX_PATCH_TOKENS))
        return None
    return ids[0], ids[1]


def _show_tokens(m, clean_ids: np.ndarray, corrupted_ids: np.ndarray) -> bool:
    """Both prompts' tokens, and where they differ; False (said) when their lengths do."""
    clean, corrupted = ([token_shown(s, HOVER_CHARS) for s in m.labels(ids)[0]]
                        for ids in (clean_ids, corrupted_ids))
    st.markdown(t("trace.patch.tokens.clean", count=len(clean)) + " " + token_line(clean))
    st.markdown(t("trace.patch.tokens.corrupted", count=len(corrupted)) + " "
                + token_line(corrupted))
    token_notation()
    if len(clean) != len(corrupted):
        st.warning(t("trace.patch.lengths", clean=len(clean), corrupted=len(corrupted)))
        return False
    differ = [int(i) for i in np.flatnonzero(clean_ids != corrupted_ids)]
    if not differ:
        st.info(t("trace.patch.tokens.same"))
        return False
    st.caption(t("trace.patch.tokens.differ", positions=", ".join(map(str, differ))))
    return True


def patching_key(m, clean_ids, corrupted_ids, answers, where: str,
                 layer: int | None) -> tuple:
    """What a patching result is kept under (every learner's): the model's file, the prompts,
    answers, kind."""
    return (str(m.path), clean_ids.tobytes(), corrupted_ids.tobytes(), answers, where, layer)


def within_budget(m, where: str, clean_ids, corrupted_ids) -> bool:
    """The work this patching asks for, said before the press: True when within
    MAX_PATCH_WORK, else refused (said why, with what would fit)."""
    patches, tokens = patch_work(m, where, clean_ids, corrupted_ids)
    if patches * tokens > MAX_PATCH_WORK:
        st.error(t("trace.patch.over_budget", patches=patches, tokens=tokens,
                   work=patches * tokens, limit=MAX_PATCH_WORK))
        return False
    st.caption(t("trace.patch.budget", patches=patches, tokens=tokens, work=patches * tokens,
                 limit=MAX_PATCH_WORK))
    return True


def _work(m, key, clean_ids, corrupted_ids, answers, where, layer):
    """The patching as the queue runs it (``heavy.Work``): one ``patch`` call, resumed from a
    stopped job's partial result; a finished result kept for every learner."""
    def work(resume, progress, should_stop):
        result = m.patch(clean_ids, corrupted_ids, answers=answers, where=where, layer=layer,
                         resume=resume, progress=progress, should_stop=should_stop)
        if result.complete:
            _PATCHES.get(key, lambda: result)
        return result
    return work


def _ask(key: tuple, work, size: int) -> None:
    """on_click of Patch and Resume: this learner joins the server's job for these inputs."""
    heavy_jobs.join(key, work, size, job_key=keys.TR_JOB, stopped_key=keys.TR_STOPPED_FOR)
    st.session_state[keys.TR_RAN] = True


def patching_tab() -> None:
    """Two prompts, two answers, one kind of patch: the effect of every patch as a map."""
    m = model_loading.decoder(reading_view.chosen_model())
    st.caption(t("trace.patch.caption"))
    clean_text, corrupted_text, answers, where = _patch_inputs(m)
    layer = None
    if where == "heads_pos":
        layer = pretrained_view.pick_number("layer", m.num_layers, keys.TR_LAYER,
                                            default=m.num_layers - 1)
    st.caption(t("trace.patch.limits", tokens=MAX_PATCH_TOKENS, limit=MAX_PATCH_WORK))
    ids = _prompt_ids(m, (clean_text, corrupted_text))
    if ids is None:
        return
    clean_ids, corrupted_ids = ids
    if not _show_tokens(m, clean_ids, corrupted_ids):
        return
    if not within_budget(m, where, clean_ids, corrupted_ids):
        return
    key = patching_key(m, clean_ids, corrupted_ids, answers, where, layer)
    result = _PATCHES.peek(key)             # computed already, for any learner: shown at once
    if result is None:
        result = _run(m, key, clean_ids, corrupted_ids, answers, where, layer)
    if result is not None:
        _show_result(m, result)


def _run(m, key, clean_ids, corrupted_ids, answers, where, layer):
    """The patching asked for, on the server's queue (``attnviz.models.heavy``): the Patch
    button, then the place in the queue or the progress, live, with Stop; after a Stop, the
    partial result and Resume. The result when finished, or the partial one stopped."""
    size = int(np.prod(effect_shape(m, where, len(clean_ids))))
    job, token = heavy_jobs.mine(keys.TR_JOB, key)
    stopped = st.session_state.get(keys.TR_STOPPED_FOR) == key
    if job is not None and not stopped:
        if job.running:
            heavy_jobs.live(job, token, "trace.patch", heavy_jobs.counted("trace.patch", size),
                            heavy_jobs.leave, (key, job, token, keys.TR_STOPPED_FOR),
                            keys.TR_STOP)
            return None
        if job.ended == "failed":
            st.error(t("trace.patch.error", error=literal(job.error)))
        elif job.result is not None and job.result.complete:
            return _PATCHES.get(key, lambda: job.result)
        else:
            stopped = True
    work = _work(m, key, clean_ids, corrupted_ids, answers, where, layer)
    if stopped:
        partial, done = heavy_jobs.stopped_partial(key, job)
        st.info(t("trace.patch.stopped", done=done, total=size))
        widgets.action_button(t("trace.patch.resume"), _ask, (key, work, size),
                              key=keys.TR_RESUME, icon=":material/play_arrow:")
        return partial
    if job is None and st.session_state.get(keys.TR_RAN):
        st.info(t("trace.patch.from_link"))          # a link restores, it does not compute
    widgets.action_button(t("trace.patch.button", count=size), _ask, (key, work, size),
                          key=keys.TR_PATCH, type="primary", icon=":material/play_arrow:",
                          help=t("trace.patch.button.help"))
    return None


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

    clean_answer, corrupted_answer = (
        _answer_label(m, st.session_state.get(key), a, piece) for key, a, piece in
        zip((keys.TR_ANSWER_CLEAN, keys.TR_ANSWER_CORRUPTED), p.answers, p.answer_tokens))
    st.markdown(t("trace.patch.metric", clean_answer=code(clean_answer),
                  corrupted_answer=code(corrupted_answer), clean=f"{p.clean:.4f}",
                  corrupted=f"{p.corrupted:.4f}"))
    rows, cols, row_title, col_title = _map_axes(m, p)
    where = _where_name(p.where) if p.layer is None else \
        t("trace.patch.where.of_layer", where=_where_name(p.where), layer=p.layer)
    fig = patching_figures.effect_map(
        p.effect, row_labels=rows, col_labels=cols, row_title=row_title, col_title=col_title,
        title=t("trace.patch.map_title", where=text_layout.escape(where)),
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

def _flows(m, name: str, ids: np.ndarray, heads: bool):
    """The sentence's information flow, every importance computed (the graph is walked
    again for each position and threshold), once for every learner."""
    return _FLOWS.get((name, ids.tobytes(), heads),
                      lambda: m.information_flow(ids, position=-1, threshold=THRESHOLD,
                                                 heads=heads, max_edges=FLOW_EDGES))


def _graph(m, name: str, ids: np.ndarray, heads: bool, position: int, threshold: float):
    """The graph from `position` at `threshold`: its FLOW_EDGES most important edges (at
    threshold 0 a graph of 64 tokens has 549,027), walked once for every learner."""
    return _GRAPHS.get((name, ids.tobytes(), heads, position, threshold),
                       lambda: _flows(m, name, ids, heads).graph(position, threshold,
                                                                 max_edges=FLOW_EDGES))


def _figure(graph, name: str, shown: list[str], num_layers: int):
    """The graph's figure in the page's language, built once for every learner."""
    key = (name, graph.ids.tobytes(), graph.heads, graph.position, graph.threshold,
           language())
    return _FLOW_FIGURES.get(key, lambda: flow_figures.flow_graph(
        graph.edges, shown, num_layers, position=graph.position, total=graph.total_edges,
        title=t("trace.flow.title", position=graph.position,
                token=text_layout.escape(shown[graph.position]),
                threshold=f"{graph.threshold:.2f}")))


def _flow_downloads(entry, ids: np.ndarray, heads: bool, position: int,
                    threshold: float) -> None:
    """The graph's .npz and JSON, each made once for every learner, when first clicked. The
    buttons keep what finds the graph again (the model's entry, the ids, the settings), never
    the graph or the model: a session holds none of their arrays."""
    ids = np.array(ids)                          # its own copy: nothing else kept alive

    def made(kind: str):
        return _FLOW_FILES.get((entry.name, ids.tobytes(), heads, position, threshold, kind),
                               lambda: getattr(_graph(entry.load(), entry.name, ids, heads,
                                                      position, threshold), kind)())

    widgets.array_downloads(lambda: made("arrays"), lambda: made("to_json"), "flow",
                            key=keys.FL_GRAPH)


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
    each head's, residual's and MLP's edges above the threshold, the FLOW_EDGES most
    important (the rest said); a clicked head edge opens that head on Step by step."""
    run = reading_view.load(value_norms=False)
    reading_view.token_list(run)
    entry = reading_view.chosen_model()
    m = entry.load()
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
    heads = bool(right.toggle(t("trace.flow.heads"), key=keys.FL_HEADS,
                              persist_state="session", help=t("trace.flow.heads.help")))
    try:
        with st.spinner(t("trace.flow.computing")):
            graph = _graph(m, entry.name, run.ids, heads, position, threshold)
    except AttnvizInputError as exc:
        st.error(t("reading.error.run", model=reading_view.shown_name(), error=literal(exc)))
        return
    with st.spinner(t("trace.flow.drawing", edges=len(graph.edges), position=position),
                    show_time=True):
        widgets.chart(_figure(graph, entry.name, shown, m.num_layers), key=keys.FL_GRAPH,
                      on_click=_pick_edge)
    st.caption(t("trace.flow.count", edges=len(graph.edges), nodes=len(graph.nodes)))
    if graph.left_out:
        st.info(t("trace.flow.left_out", total=graph.total_edges, shown=len(graph.edges),
                  left=graph.left_out, least=_at_least(min(e[5] for e in graph.edges))),
                icon=":material/filter_alt:")
    _picked_edge(shown)
    _flow_downloads(entry, run.ids, heads, position, threshold)


def _at_least(weight: float) -> str:
    """`weight` rounded down to 3 decimals: a bound "at least" that is true."""
    return f"{math.floor(weight * 1000) / 1000:.3f}"


def _picked_edge(shown: list[str]) -> None:
    """The clicked edge in words; a head's edge offers "Step through this head", which opens
    it on Step by step."""
    edge = st.session_state.get(keys.FL_EDGE)
    if not edge:
        st.caption(t("trace.flow.click"))
        return
    layer, head, source, target, kind = edge
    if not (isinstance(source, int) and isinstance(target, int)
            and 0 <= source < len(shown) and 0 <= target < len(shown)):
        return
    said = t(f"trace.flow.edge.{kind}", layer=layer, head=head, source=code(shown[source]),
             target=code(shown[target]))
    if kind != "head":
        st.markdown(said)
        return
    words, button = st.columns([3, 1], vertical_alignment="center")
    words.markdown(said + " " + t("trace.flow.edge.open"))
    with button:
        pretrained_view.step_through_button(int(layer), int(head))


__all__ = ["TABS", "flow_tab", "lens_tab", "needs_language_model", "patching_tab",
           "tab_labels"]
