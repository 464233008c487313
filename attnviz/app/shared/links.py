"""The view's state in the URL, so a copied link reopens the same view.

Settings that differ from the defaults, the page's picks (head, step, query…: every widget a
page keys, keys.LINK_DEFAULTS and keys.LINK_SUFFIXES) and, when small, the edited matrices are
written to ``st.query_params`` on every run; they are read once, when a session starts. A value
that does not parse falls back to its default with a notice; a pick the page then could not use
(a layer beyond the model's, an unknown tab or choice) is said after its first run. Every
parameter is bounded before it is used: its length (MAX_CHARS), its type (a whole number, a
switch, one of the choices) and, for a typed matrix, its shape and nesting (the matrix must
parse: a 5000-deep JSON list is refused by attnviz.core.inputs before it is read). A sentence is
any text up to its length (a blank one shows the page's error, with the sidebar to fix it).
A page's own name may stand in for a pick's value (keys.LINK_STAND_INS): the Head atlas's
corpus of the learner's texts goes as ``at_corpus=user:<hash>``, the texts kept on the server.
"""

from __future__ import annotations

import re
from urllib.parse import quote, urlencode

import streamlit as st

from attnviz.app import keys
from attnviz.session import edits
from attnviz.core.errors import AttnvizInputError
from attnviz.i18n import Message, languages, t
from attnviz.core.inputs import MAX_TOKENS
from attnviz.core.matrix_text import parse_matrix
from attnviz.describe.labels import cut
from attnviz.core.inputs import MAX_D_MODEL
from attnviz.session.settings import TOY_MODE, Settings, bounds, weights_signature
from attnviz.app.runtime import streamlit_compat
from attnviz.app.shared import language
from attnviz.app.shared.text import MAX_TEXT_CHARS, drop_invisible, literal

EDITS_PARAM = "edits"
LEFT_OUT_PARAM = "unsaved_edits"     # names the edited matrices too large for the link
GEN_TOKENS_PARAM = "gen_tokens"      # how many tokens Generate made: the link makes them again
OWN_PARAMS = (EDITS_PARAM, LEFT_OUT_PARAM, GEN_TOKENS_PARAM)
MAX_EDITS_CHARS = 4000
MAX_LINK_TEXT_CHARS = 2000    # a longer sentence or matrix text is left out of the link
MATRIX_TEXTS = (keys.X_TEXT, keys.Q_TEXT, keys.K_TEXT, keys.V_TEXT)
# the longest value each kind of parameter may have, written or read: free text (a sentence's
# box holds as much: text.MAX_TEXT_CHARS; a matrix's more), a whole number, a name, a tab's label
MAX_CHARS = {str: MAX_TEXT_CHARS, int: 30, float: 30, bool: 5, list: 2000, "name": 40,
             "tab": 100}
NAMES = (keys.MODE, keys.PRESET, keys.INIT, keys.STEP, keys.MATRIX)   # one of a few choices: short
MAX_UNKNOWN_SHOWN = 3         # unknown parameters named in the notice


def read_once() -> None:
    """At a session's first run, copy the URL's values into session state (validated). Where
    the browser sent a widget's value with this run too, both are kept for
    :func:`keep_first_click`: a page on screen from before this session (a server restart)
    sends its widgets' values with its first click."""
    if st.session_state.get(keys.LINK_READ):
        st.session_state.update(st.session_state.pop(keys.LINK_CLICKED, {}))   # keep_first_click
        return
    st.session_state[keys.LINK_READ] = True
    params = st.query_params.to_dict()
    sent = streamlit_compat.widget_values_sent()
    notices, asked, seeded = [], {}, []
    settings = Settings().__dict__
    unknown = [name for name in params
               if name not in (*OWN_PARAMS, keys.LANG, *settings)
               and not keys.link_default(name)[0]]
    if unknown:
        shown = ", ".join(f"“{cut(name, 100)}”" for name in unknown[:MAX_UNKNOWN_SHOWN])
        more = len(unknown) - MAX_UNKNOWN_SHOWN
        notices.append(Message("link.unknown_more", names=shown, more=more) if more > 0 else
                       Message("link.unknown", names=shown, count=len(unknown)))
    for name, raw in params.items():
        if name == keys.LANG:             # read by language.activate, before navigation
            if raw not in languages():
                notices.append(Message("link.lang_invalid", value=cut(raw, 40),
                                       choices=", ".join(languages())))
            continue
        param = name                      # as the link names it (the notices say so)
        stand_in = keys.LINK_STAND_INS.get(name)
        if name == GEN_TOKENS_PARAM:
            name, default = keys.GEN_FROM_LINK, 0
        elif stand_in is not None and raw.startswith(stand_in[0]):
            name, default = stand_in[1], ""   # the page's own name: the page reads it
        elif name in settings:
            default = settings[name]
        elif name not in OWN_PARAMS and keys.link_default(name)[0]:
            default = keys.link_default(name)[1]
            asked[name] = raw
        else:
            continue
        try:
            value = _parse(name, raw, default)
        except ValueError as why:
            notices.append(Message("link.bad_value", name=param, value=repr(cut(raw, 40)),
                                   why=why.args[0]))
            continue
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            value = _clamped(name, raw, value, notices, default, param)
        st.session_state[name] = value
        seeded.append(name)
        if name == keys.GEN_PROMPT:       # its next-token bars: a press when long (generate_view)
            st.session_state[keys.GEN_LINK_PROMPT] = value
        if name in asked:
            asked[name] = value
        if name in keys.LINK_CHOSEN:
            st.session_state[keys.LINK_CHOSEN[name]] = True
        if name == keys.SENTENCE:
            drop_invisible(name)          # the sidebar's box shows it as the tokens read it
    if params.get(keys.MODE) == TOY_MODE:
        notices.append(Message("link.toy_mode", mode=repr(TOY_MODE),     # the default input,
                               button=Message("train.step_through.label"),   # Settings().mode
                               used=Message("sidebar.mode.option.sentence")))
        st.session_state[keys.MODE] = Settings().mode
        params.pop(EDITS_PARAM, None)     # they were made for that model's weights
    checked = Settings.from_mapping(st.session_state)
    for name in (keys.MODE, keys.PRESET, keys.INIT, keys.MODEL, keys.ROPE_BASE):
        if name in params and getattr(checked, name) != st.session_state.get(name):
            notices.append(Message("link.not_a_choice", name=name,
                                   value=repr(cut(params[name], 40)),
                                   used=repr(getattr(checked, name))))
            st.session_state[name] = getattr(checked, name)
    _layer_of_model(checked, params, notices)
    if EDITS_PARAM in params:
        try:
            st.session_state.setdefault(keys.EDITS, {})[weights_signature(checked)] = \
                edits.decode(params[EDITS_PARAM], lambda: _generated(checked))
        except AttnvizInputError:
            notices.append(Message("link.edits_unreadable"))
    elif LEFT_OUT_PARAM in params:
        st.session_state[keys.LINK_LOST_EDITS] = _left_out_names(params[LEFT_OUT_PARAM])
        st.session_state[keys.LINK_LOST_EDITS_TOAST] = True      # said where one is looking, once
    st.session_state[keys.LINK_SENT] = {name: (sent[name], st.session_state[name])
                                        for name in seeded if name in sent}
    st.session_state[keys.LINK_NOTICES] = notices
    st.session_state[keys.LINK_ASKED] = {     # switches and free texts are used as they are
        n: v for n, v in asked.items()
        if _kind(n, keys.link_default(n)[1]) not in (bool, str) and not isinstance(v, bool)}


def keep_first_click() -> None:
    """At the end of a session's first run, once its widgets are drawn: a widget the link set
    whose value, as the browser sent it, is not the link's was changed by the click that
    started the run (the first click after a server restart, on a page still showing the old
    session's view). Session state, which the link set, wins over a widget's value, so the
    click would be lost: the page runs again with it (a widget drawn in this run cannot be
    set in this run; read_once sets it at the next run's start)."""
    clicked = {}
    for name, (state, linked) in st.session_state.pop(keys.LINK_SENT, {}).items():
        drawn, value = streamlit_compat.widget_value_sent(state)
        if drawn and value != linked:
            clicked[name] = value
    if clicked:
        st.session_state[keys.LINK_CLICKED] = clicked
        st.rerun()


def say_replaced() -> None:
    """After the first run of a session opened by a link: the page picks the page could not
    use as the link gave them (a layer beyond the model's, a tab or a choice it does not have,
    a number beyond its widget's range), said as the other notices are (also in the sidebar
    now: the page drew after them). Switches are never replaced; texts are kept as typed."""
    asked = st.session_state.pop(keys.LINK_ASKED, None)
    if not asked:
        return
    said = []
    for name, value in asked.items():
        used = st.session_state.get(name, value)
        if not _same(used, value) and not _one_message(used, value):
            said.append(Message("link.not_a_choice", name=name,
                                value=repr(cut(_format(value), 40)),
                                used=repr(cut(_format(used), 40))))
    st.session_state[keys.LINK_NOTICES] = [*st.session_state.get(keys.LINK_NOTICES, []), *said]
    with st.sidebar:
        for notice in said:
            st.warning(t("link.notice", notice=literal(notice)))


def _one_message(used, value) -> bool:
    """Whether `used` is the words of `value` in the page's language (a tab's label the page
    gave again in its language: pretrained_view.keep_tab)."""
    from attnviz.i18n import catalogue, language as page_language

    if not (isinstance(used, str) and isinstance(value, str)):
        return False
    here = catalogue(page_language())
    return any(value in entry.forms and used in here[msg_id].forms
               for lang in languages() for msg_id, entry in catalogue(lang).items()
               if msg_id in here)


def _same(used, value) -> bool:
    if isinstance(used, float) or isinstance(value, float):
        try:
            return abs(float(used) - float(value)) <= 1e-9 * max(1.0, abs(float(value)))
        except (TypeError, ValueError):
            return False
    return used == value


def _layer_of_model(s: Settings, params: dict, notices: list) -> None:
    """A link's layer beyond its model's layers (layer=20 with MiniLM's 6) is the model's
    last, with a notice."""
    from attnviz.session.settings import layer_bounds

    found = layer_bounds(s.model)
    if found is None:                    # not installed: the page that runs it says so
        return
    low, high = found
    if keys.LAYER in params and not low <= s.layer <= high:
        notices.append(Message("link.layer_of_model", layer=s.layer, model=s.model_entry.shown,
                               high=high))
        st.session_state[keys.LAYER] = high if s.layer > high else low


def _generated(s: Settings) -> dict:
    """The matrices settings `s` make, before any edit (by catalogue name)."""
    from attnviz.session.build import build_view
    from attnviz.session.view import current_matrices

    return current_matrices(build_view(s))


def _left_out_names(raw: str) -> list[str]:
    """The shown names ("X", "W_Q") a link says it left out; only catalogue names count."""
    shown = {e.shown for e in edits.CATALOGUE.values()}
    names = [n for n in raw[:200].split(",") if n in shown]
    return names or [Message("link.your_matrices")]


def _clamped(name: str, raw: str, value, notices: list[str], default=0, param: str = ""):
    """`value` within its setting's bounds (a page's pick: at least 0, or its default when that
    is below, as "every token" is; or its page's bounds), with a notice when it had to move
    (naming the link's parameter `param`, `name` if not given)."""
    floor = min(0, default) if isinstance(default, int) else 0
    low, high = bounds(name) or _page_bounds().get(name, (floor, None))
    clamped = max(low, value) if high is None else min(max(low, value), high)
    if clamped != value:
        notices.append(Message("link.clamped", name=param or name, value=repr(raw[:40]), low=low,
                               high="…" if high is None else high, used=clamped))
    return clamped


def _page_bounds() -> dict:
    """The numbers a page bounds itself (Generate's sampling and count, the flow's threshold,
    Experiments' sliders: a value beyond a slider's range would stop the page), by key."""
    from attnviz.app.generate import generate_state
    from attnviz.tutorials import experiments

    sliders = {keys.EXP_DK: (1, experiments.MAX_SCALING_D_K),
               keys.EXP_ROPE_OFFSET: (1, experiments.MAX_ROPE_OFFSET)}
    return {**generate_state.LINK_BOUNDS, **sliders, **keys.LINK_BOUNDS}


def _parse(name: str, raw: str, default):
    """The link's `raw` text as a value of the setting `name` (whose default is `default`, or
    whose kind keys.LINK_KINDS says); ValueError saying why not."""
    kind = _kind(name, default)
    if len(raw) > MAX_CHARS[kind]:
        raise ValueError(Message("link.why.too_long", chars=MAX_CHARS[kind]))
    if kind is list:
        parts = [p.strip() for p in raw.split(",") if p.strip()]
        if not all(re.fullmatch(r"[0-9]+", p) for p in parts):
            raise ValueError(Message("link.why.not_whole"))
        return [int(p) for p in parts]
    if kind is float:
        if not re.fullmatch(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)", raw.strip()):
            raise ValueError(Message("link.why.not_number"))
        return float(raw)
    if kind is bool:
        if raw.lower() in ("1", "true", "yes", "on"):
            return True
        if raw.lower() in ("0", "false", "no", "off"):
            return False
        raise ValueError(Message("link.why.not_on_off"))
    if kind is int:
        if not re.fullmatch(r"[+-]?[0-9]+", raw.strip()):
            raise ValueError(Message("link.why.not_whole"))
        return int(raw)
    if name in MATRIX_TEXTS:
        try:
            parse_matrix(raw, max_rows=MAX_TOKENS, max_cols=MAX_D_MODEL)
        except AttnvizInputError as exc:
            raise ValueError(Message("link.why.not_matrix", problem=cut(str(exc), 120))) \
                from None
    return raw


def _kind(name: str, default):
    """What a link's value of `name` is read as (see keys.LINK_KINDS), hence its longest; a
    page's own name for a pick's value (keys.LINK_STAND_INS) is a name."""
    if name in NAMES or any(name == asked for _, asked, _ in keys.LINK_STAND_INS.values()):
        return "name"
    return keys.LINK_KINDS.get(name, type(default))


def write() -> None:
    """Put the current state into the URL (only what differs from the defaults)."""
    s = Settings.from_mapping(st.session_state)
    params = {name: _format(value) for name, value in s.__dict__.items()
              if language.in_link(name, value, getattr(Settings(), name))}
    too_long = [name for name, value in params.items() if len(value) > MAX_LINK_TEXT_CHARS]
    for name in too_long:
        del params[name]
    st.session_state[keys.LINK_TOO_LONG] = too_long
    for name, default in _picks():
        value = st.session_state.get(name)
        stand_in = keys.LINK_STAND_INS.get(name)
        if stand_in is not None and st.session_state.get(stand_in[2]) is not None:
            value = st.session_state[stand_in[2]]     # the page's own name for its value
        if value is None or not language.in_link(name, value, default) \
                or not _linkable(value):
            continue
        if name in keys.LINK_CHOSEN and not st.session_state.get(keys.LINK_CHOSEN[name]):
            continue                               # the page's own choice: not the learner's
        shown = _format(value)
        if len(shown) <= MAX_CHARS[_kind(name, default)]:      # what read_once accepts back
            params[name] = shown
        elif len(shown) > MAX_LINK_TEXT_CHARS:     # said as a too long setting is (a longer
            too_long.append(name)                  # name or tab is no choice the page offers)
    made = _generated_tokens()
    if made:
        params[GEN_TOKENS_PARAM] = str(made)
    if language.link_value():
        params[keys.LANG] = language.link_value()
    # a toy run cannot travel in a link (a link with its mode says so), nor edits of its weights
    stored = None if s.mode == TOY_MODE else \
        st.session_state.get(keys.EDITS, {}).get(weights_signature(s))
    had = st.session_state.get(keys.LINK_HAS_EDITS)
    st.session_state[keys.LINK_HAS_EDITS] = None
    if stored:
        encoded = edits.encode(stored)
        if len(encoded) > MAX_EDITS_CHARS:            # the typed cells alone, if they fit
            encoded = edits.encode(stored, _generated(s))
        if len(encoded) <= MAX_EDITS_CHARS:
            params[EDITS_PARAM] = encoded
            st.session_state[keys.LINK_HAS_EDITS] = True
        else:                  # the link says which edits it could not carry (see read_once)
            params[LEFT_OUT_PARAM] = ",".join(edits.entry(n).shown for n in stored)
            st.session_state[keys.LINK_HAS_EDITS] = False
            if had is not False:                     # the moment it happens, wherever one is
                st.toast(literal(_too_large_text(stored)), icon=":material/warning:",
                         duration="long")
        st.session_state.pop(keys.LINK_LOST_EDITS, None)         # edits again: the old loss is past
    if params != st.query_params.to_dict():
        st.query_params.from_dict(params)


def to_page(name: str, **params) -> str:
    """A link opening page `name` (its url_path) with `params` — settings and picks as a copied
    link names them — in this page's language: relative (so it holds under any base path), read
    by :func:`read_once` as any copied link is."""
    query = {param: _format(value) for param, value in params.items()}
    if language.link_value():
        query[keys.LANG] = language.link_value()
    return f"{name}?{urlencode(query, quote_via=quote)}"


def _picks():
    """(key, default) of every page pick session state holds that a link carries."""
    yield from keys.LINK_DEFAULTS.items()
    for name in list(st.session_state.keys()):
        found, default = keys.link_default(name)
        if found and name not in keys.LINK_DEFAULTS:
            yield name, default


def _linkable(value) -> bool:
    """A value a link can carry: a number, a switch, a text or a list of whole numbers."""
    if isinstance(value, list):
        return all(isinstance(v, int) and not isinstance(v, bool) for v in value)
    return isinstance(value, (int, float, str))


def _format(value) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, list):
        return ",".join(str(v) for v in value)
    return str(value)


def _generated_tokens() -> int:
    """How many tokens the Generate page shows for its prompt and settings (0: none)."""
    if keys.GENERATE_RUN not in st.session_state:
        return 0
    from attnviz.app.generate import generate_state

    gen = generate_state.current(*generate_state.recipe())
    return 0 if gen is None else len(gen.steps)


def _names(stored) -> str:
    return ", ".join(edits.entry(n).shown for n in stored)


def _too_large_text(stored) -> str:
    return t("link.edits_session_only", names=_names(stored), npz=t("downloads.npz"),
             downloads=t("downloads.label"))


def show_notices() -> None:
    """Everything the link says: what it could not use (`show_link_notices`), what could not
    be written into it, the edits it left out."""
    show_link_notices()
    if st.session_state.get(keys.LINK_TOO_LONG):
        names = t("link.and").join(st.session_state[keys.LINK_TOO_LONG])
        st.caption(t("link.too_long", names=names, chars=MAX_LINK_TEXT_CHARS))
    if st.session_state.get(keys.LINK_HAS_EDITS) is False:
        s = Settings.from_mapping(st.session_state)
        stored = dict(st.session_state[keys.EDITS][weights_signature(s)])
        st.warning(literal(_too_large_text(stored)), icon=":material/warning:")
        st.download_button(t("link.keep_edits"), _npz_maker(s, stored),
                           "attnviz_trace.npz", "application/octet-stream",
                           key=keys.KEEP_EDITS_NPZ, on_click="ignore",
                           icon=":material/download:")
    if st.session_state.get(keys.LINK_RESTORED):
        st.success(literal(st.session_state.pop(keys.LINK_RESTORED)))
    if st.session_state.get(keys.LINK_LOST_EDITS):
        _lost_edits(st.session_state[keys.LINK_LOST_EDITS])


def show_link_notices() -> None:
    """What the opened link could not use, as read at the session's first run (read_once):
    on every page, the page the link opened included (one with its own settings, Generate or
    Train, shows only these: it writes no settings into the link)."""
    for notice in st.session_state.get(keys.LINK_NOTICES, []):
        st.warning(t("link.notice", notice=literal(notice)))


def _npz_maker(s: Settings, stored: dict):
    """The .npz of the view with these edits, made when the button is clicked (the button
    keeps the settings and the edits, never a trace)."""
    def npz() -> bytes:
        import io

        from attnviz.session.build import build_view

        view, buf = build_view(s, stored), io.BytesIO()
        view.trace.to_npz(buf, view.tokens_q, view.tokens_k)
        return buf.getvalue()
    return npz


def _lost_edits(names: list[str]) -> None:
    """After a reload or a server restart: say which edits the link could not carry, and take
    the .npz the page exported back."""
    shown = ", ".join(map(str, names))
    st.warning(literal(t("link.edits_lost", names=shown)), icon=":material/warning:")
    if st.session_state.pop(keys.LINK_LOST_EDITS_TOAST, False):
        st.toast(literal(t("link.edits_lost_toast", names=shown)), icon=":material/warning:",
                 duration="long")
    st.file_uploader(t("link.restore.label"), type=["npz"], key=keys.RESTORE_EDITS_NPZ,
                     on_change=_restore_uploaded)
    st.button(t("link.restore.dismiss"), key=keys.DISMISS_LOST_EDITS,
              on_click=lambda: st.session_state.pop(keys.LINK_LOST_EDITS, None))
    if st.session_state.get(keys.RESTORE_EDITS_NPZ_ERROR):
        st.error(literal(st.session_state[keys.RESTORE_EDITS_NPZ_ERROR]))


def _restore_uploaded() -> None:
    file = st.session_state.get(keys.RESTORE_EDITS_NPZ)
    if file is None:
        return
    try:
        restored = restore_edits(file.getvalue(), file.name)
    except AttnvizInputError as exc:
        st.session_state[keys.RESTORE_EDITS_NPZ_ERROR] = exc.message or str(exc)
        return
    st.session_state.pop(keys.RESTORE_EDITS_NPZ_ERROR, None)
    st.session_state.pop(keys.LINK_LOST_EDITS, None)
    st.session_state[keys.LINK_RESTORED] = (
        Message("link.restored", file=file.name, names=_names(restored)) if restored else
        Message("link.restored_nothing", file=file.name))


def restore_edits(data: bytes, name: str | None = None) -> dict:
    """Put back, as edits of the current settings, every editable matrix of an .npz the page
    exported (attnviz.io.files.to_npz) that differs from the generated one; the restored
    {name: Edit}. AttnvizInputError when the file is not such an .npz or was made with other
    sizes or tokens."""
    import io

    import numpy as np

    from attnviz.session.build import build_view
    from attnviz.session.view import current_matrices

    name = Message("link.restore.the_file") if name is None else name
    s = Settings.from_mapping(st.session_state)
    if s.mode == TOY_MODE:
        raise AttnvizInputError("error.restore.toy")
    generated = build_view(s)
    matrices = current_matrices(generated)
    if not matrices:
        raise AttnvizInputError("error.restore.view", error=generated.error) if generated.error \
            else AttnvizInputError("error.restore.no_matrices")
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as npz:
            found = {n: np.asarray(npz[n]) for n in edits.CATALOGUE if n in npz.files}
            tokens = [str(t) for t in npz["tokens_q"]] if "tokens_q" in npz.files else None
    except Exception as exc:  # noqa: BLE001 - any unreadable file is the user's input
        raise AttnvizInputError("error.restore.not_export", name=name, problem=str(exc)) \
            from None
    if not found:
        raise AttnvizInputError("error.restore.no_matrices_in_file", name=name)
    restored = {}
    for key, array in found.items():
        if key not in matrices:
            continue
        if array.shape != matrices[key].shape or not np.issubdtype(array.dtype, np.number):
            raise AttnvizInputError("error.restore.shape", name=name,
                                    matrix=edits.shown_name(key),
                                    shape=" × ".join(map(str, array.shape)),
                                    want=" × ".join(map(str, matrices[key].shape)))
        if key == "x" and tokens is not None and tokens != list(generated.tokens_q):
            raise AttnvizInputError("error.restore.tokens", name=name)
        if not np.array_equal(array, matrices[key]):
            restored[key] = edits.make_edit(key, array, generated.tokens_q)
    st.session_state.setdefault(keys.EDITS, {}).setdefault(generated.signature, {}).update(restored)
    st.session_state[keys.MATRICES_VERSION] = st.session_state.get(keys.MATRICES_VERSION, 0) + 1
    return restored
