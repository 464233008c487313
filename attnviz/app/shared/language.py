"""The page's language (中文 / English): chosen in the sidebar, kept in the session under
``lang`` and in the link as ``lang=zh`` / ``lang=en`` (when it differs from the browser's own
language, which a first visit follows). Library code reads it through
:func:`attnviz.i18n.language`, which :func:`follow_session` points at the session when the app
starts (attnviz.app.runtime.startup)."""

from __future__ import annotations

import streamlit as st

from attnviz import i18n
from attnviz.i18n import best_language, languages, native_name, t
from attnviz.app import keys
from attnviz.app.runtime import streamlit_compat


def browser_language() -> str:
    """The language a first visit gets: the browser's (``st.context.locale``), else English."""
    return best_language(st.context.locale)


def activate() -> str:
    """At the top of every run of the app (attnviz.app.main.run): the session's language,
    set on its first run from the link's ``lang`` or else the browser's language (a ``lang``
    that names no catalogue: links.read_once says so)."""
    lang = st.session_state.get(keys.LANG)
    if lang not in languages():
        raw = st.query_params.get(keys.LANG)
        lang = raw if raw in languages() else browser_language()
        st.session_state[keys.LANG] = lang
    shown = st.session_state.get(keys.LANG_DRAWN)
    if shown != lang:
        if shown is not None:    # a switch: redraw the translated options (keys.FORMATTED)
            for key in keys.FORMATTED:
                if key in st.session_state:
                    st.session_state[key] = st.session_state[key]
        st.session_state[keys.LANG_DRAWN] = lang
    return lang


# What a page starts with when it is in Chinese (only these: the tutorials' presets keep their
# own texts and numbers). A link carries any of them that differs from the English default.
ZH_DEFAULTS = {
    keys.SENTENCE: "动物没有过马路，因为它太累了",        # tutorial 000's sentence
    keys.GEN_PROMPT: "中国的首都是",
    keys.EXP_CROSS_TEXT: "猫坐在垫子上",
    keys.TR_PAIR: "weekday_zh",
}


def default(key: str, value):
    """The default of `key` on this page: `value` (the English one), or its Chinese one
    (ZH_DEFAULTS) when the session's language is Chinese."""
    if st.session_state.get(keys.LANG) == "zh":
        return ZH_DEFAULTS.get(key, value)
    return value


def in_link(key: str, value, english) -> bool:
    """Whether a link carries `value` of `key`, whose English default is `english`: when it is
    not that default, and always for a key whose default depends on the language in a Chinese
    session (opened elsewhere, the link may be read in either language; its receiver's default
    is that language's, not necessarily this session's)."""
    if value != english:
        return True
    return key in ZH_DEFAULTS and st.session_state.get(keys.LANG) == "zh"


def link_value() -> str | None:
    """What the link carries: the session's language when it is not the browser's own."""
    lang = st.session_state.get(keys.LANG)
    return lang if lang in languages() and lang != browser_language() else None


def switch() -> None:
    """The language switch (one button per catalogue, each named in its own language)."""
    st.segmented_control(t("sidebar.language.label"), list(languages()), key=keys.LANG,
                         persist_state="session", required=True, format_func=native_name,
                         help=t("sidebar.language.help"))


def _session_language() -> str | None:
    """The running session's language; None outside a script run (a training thread, a
    notebook), where English (or the context's own :func:`i18n.use_language`) applies."""
    if not streamlit_compat.in_script_run():
        return None
    lang = st.session_state.get(keys.LANG)
    return lang if isinstance(lang, str) else None


def follow_session() -> None:
    """Point :func:`attnviz.i18n.language` at the running session's choice (the app's start-up
    calls it; a second call changes nothing)."""
    i18n.set_language_source(_session_language)
