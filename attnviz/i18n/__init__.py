"""Every sentence attnviz shows, in the active language: ``t("home.title")``.

Messages live in gettext catalogues, one per language, ``locales/<lang>.po`` (read with Babel),
keyed by a stable id (``home.title``, ``sidebar.mode.help``, ``error.attentions.not_4d``) —
code holds ids, never sentences. A message may have named placeholders, ``{row}``, ``{col}``,
``{total:.6g}``, the same in every language; a message with ``msgid_plural`` picks its form by
the ``count`` parameter (English "1 head" / "2 heads", Chinese one form). The languages are the
catalogues present: adding one is adding one file.

The active language is, in order: the innermost :func:`use_language` (or :func:`set_language`)
of the running context; else the app's session language (the app registers a
:func:`set_language_source`, which reads the Streamlit session's choice: page scripts,
callbacks and fragments all see it); else English. Library code (figures, step texts, errors)
calls :func:`t` or keeps a :class:`Message` and renders it when shown: it never imports
streamlit.

A missing id, an untranslated or fuzzy entry, or a placeholder the call does not fill is an
error, not a silent English fallback: when strict (``set_strict(True)``, which the tests'
conftest calls, or ``ATTNVIZ_I18N_STRICT=1``) it raises :class:`MissingMessage`; otherwise (a
running app, a notebook, whatever else it has imported) it is logged and the English text (or,
for an id no catalogue has, the id itself) is shown.
"""

from __future__ import annotations

import contextvars
import gettext
import logging
import os
import re
import string
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

LOCALES = Path(__file__).resolve().parent / "locales"
DEFAULT_LANGUAGE = "en"
# a message id: dotted lowercase words, at least two ("home.title", "error.matrix.ragged")
ID_PATTERN = re.compile(r"[a-z][a-z0-9_]*(?:\.[a-z0-9_]+)+")
NAME_ID = "language.name"            # each catalogue's own name for its language ("中文")

_log = logging.getLogger(__name__)
_active: contextvars.ContextVar[str | None] = contextvars.ContextVar("attnviz_language",
                                                                    default=None)
_source: Callable[[], str | None] | None = None
_warned: set[tuple[str, str]] = set()
_strict = False                      # see set_strict


class MissingMessage(LookupError):
    """A message id no catalogue has, a language without this message (or with it untranslated
    or fuzzy), or a call whose parameters do not fill the message's placeholders."""


# ---- the catalogues ----------------------------------------------------------------------------

@dataclass(frozen=True)
class Entry:
    """One message of one catalogue: its text, or its plural forms with the catalogue's rule."""

    text: str | tuple[str, ...]
    plural: Callable[[int], int] | None = None        # count → index into text (plurals only)
    fuzzy: bool = False
    comments: tuple[str, ...] = ()                    # the translator's comments (# …)

    @property
    def forms(self) -> tuple[str, ...]:
        return self.text if isinstance(self.text, tuple) else (self.text,)


def languages() -> tuple[str, ...]:
    """The languages there is a catalogue for: English first, then the others by code."""
    return _languages()


@lru_cache(maxsize=1)
def _languages() -> tuple[str, ...]:
    found = sorted(p.stem for p in LOCALES.glob("*.po"))
    return tuple(sorted(found, key=lambda lang: (lang != DEFAULT_LANGUAGE, lang)))


@lru_cache(maxsize=None)
def catalogue(lang: str) -> Mapping[str, Entry]:
    """id → Entry of the catalogue `lang` (read once per process)."""
    from babel.messages.pofile import read_po

    if lang not in languages():
        raise MissingMessage(f"no catalogue for language {lang!r}; there are "
                             f"{', '.join(languages())}")
    with open(LOCALES / f"{lang}.po", "rb") as f:
        po = read_po(f, locale=lang)
    rule = gettext.c2py(po.plural_expr or "0")
    entries = {}
    for message in po:
        if not message.id:                      # the header
            continue
        plural = isinstance(message.id, tuple)
        msg_id = message.id[0] if plural else message.id
        text = tuple(message.string) if plural else message.string
        entries[msg_id] = Entry(text, rule if plural else None, message.fuzzy,
                                tuple(message.user_comments))
    return entries


def placeholders(text: str) -> set[str]:
    """The names of the `{placeholders}` in a message ("{row}", "{total:.3g}" → row, total)."""
    return {name for _, name, _, _ in string.Formatter().parse(text) if name is not None}


def native_name(lang: str) -> str:
    """The language's name in itself, as the language switch shows it ("English", "中文")."""
    return render(NAME_ID, lang)


def best_language(locale: str | None) -> str:
    """The catalogue for a browser's language tag ("zh-CN", "zh-Hant-TW", "en_GB"): its primary
    language when there is a catalogue for it, else English."""
    primary = re.split(r"[-_]", (locale or "").strip().lower())[0]
    return primary if primary in languages() else DEFAULT_LANGUAGE


# ---- the active language -------------------------------------------------------------------

def language() -> str:
    """The active language (see the module's docstring)."""
    lang = _active.get()
    if lang is None and _source is not None:
        lang = _source()
    return lang if lang in languages() else DEFAULT_LANGUAGE


def set_language(lang: str) -> None:
    """Make `lang` the active language of the running context (a notebook: for the session)."""
    _active.set(_checked(lang))


@contextmanager
def use_language(lang: str) -> Iterator[str]:
    """Within the block, `lang` is the active language (of this context only)."""
    token = _active.set(_checked(lang))
    try:
        yield lang
    finally:
        _active.reset(token)


def set_language_source(source: Callable[[], str | None] | None
                        ) -> Callable[[], str | None] | None:
    """Where the active language comes from when no :func:`use_language` is in force: the app
    registers one reading its session's choice (None outside a session's run). Returns the
    source it replaces."""
    global _source
    previous, _source = _source, source
    return previous


def _checked(lang: str) -> str:
    if lang not in languages():
        raise MissingMessage(f"no catalogue for language {lang!r}; there are "
                             f"{', '.join(languages())}")
    return lang


# ---- rendering ---------------------------------------------------------------------------------

def set_strict(on: bool) -> bool:
    """Whether a missing or untranslated message, or a placeholder left unfilled, raises
    :class:`MissingMessage` (on: the tests, tests/conftest.py) or is logged while English is
    shown (off, the default). ``ATTNVIZ_I18N_STRICT=1`` / ``0`` overrides it. Returns the
    previous setting."""
    global _strict
    previous, _strict = _strict, bool(on)
    return previous


def strict() -> bool:
    """True when a missing or untranslated message raises: ATTNVIZ_I18N_STRICT=1 (0: never),
    else :func:`set_strict`'s setting."""
    flag = os.environ.get("ATTNVIZ_I18N_STRICT")
    return flag == "1" if flag in ("0", "1") else _strict


def t(msg_id: str, /, **params) -> str:
    """The message `msg_id` in the active language, its placeholders filled from `params` (a
    :class:`Message` among them is rendered in the same language; ``count`` picks a plural)."""
    return render(msg_id, language(), **params)


def render(msg_id: str, lang: str, /, **params) -> str:
    """The message `msg_id` in `lang` (see :func:`t`)."""
    entry = _entry(msg_id, lang)
    if entry is None:
        return msg_id
    values = {name: value.render(lang) if isinstance(value, Message) else value
              for name, value in params.items()}
    text = entry.forms[0]
    if entry.plural is not None:
        if not isinstance(values.get("count"), int):
            return _fail(msg_id, lang, f"{msg_id!r} has plural forms: pass count=<int>",
                         text)
        text = entry.forms[min(entry.plural(values["count"]), len(entry.forms) - 1)]
    wanted = placeholders(text)
    if wanted - values.keys() or (strict() and values.keys() - wanted - {"count"}):
        return _fail(msg_id, lang,
                     f"{msg_id!r} ({lang}) has the placeholders {sorted(wanted)}, the call "
                     f"gave {sorted(values)}", text)
    return text.format_map(values)


def _entry(msg_id: str, lang: str) -> Entry | None:
    """The usable entry of `msg_id` in `lang`; else (not strict) the English one, logged; None
    when no catalogue has it (not strict)."""
    entry = catalogue(lang).get(msg_id)
    if entry is not None and all(entry.forms) and not entry.fuzzy:
        return entry
    why = "has no message" if entry is None else "has not translated (or fuzzy)"
    problem = f"the {lang} catalogue {why} {msg_id!r}"
    if strict():
        raise MissingMessage(problem)
    _warn_once(lang, msg_id, problem)
    if lang != DEFAULT_LANGUAGE:
        return _entry(msg_id, DEFAULT_LANGUAGE)
    return None


def _fail(msg_id: str, lang: str, problem: str, text: str) -> str:
    if strict():
        raise MissingMessage(problem)
    _warn_once(lang, msg_id, problem)
    return text


def _warn_once(lang: str, msg_id: str, problem: str) -> None:
    if (lang, msg_id) not in _warned:
        _warned.add((lang, msg_id))
        _log.warning("attnviz i18n: %s", problem)


class Message:
    """A message id and its parameters, rendered when shown (``str(m)``: in the active
    language), so it can be made in one place and shown in another, in the reader's language:
    an error raised in a callback, a notice kept in the session, a reason kept in a dataclass.
    Equal when id and parameters are equal."""

    __slots__ = ("msg_id", "params")

    def __init__(self, msg_id: str, /, **params) -> None:
        self.msg_id = msg_id
        self.params = params

    def render(self, lang: str | None = None) -> str:
        return render(self.msg_id, lang or language(), **self.params)

    def __str__(self) -> str:
        return self.render()

    def __repr__(self) -> str:
        args = "".join(f", {k}={v!r}" for k, v in self.params.items())
        return f"Message({self.msg_id!r}{args})"

    def __eq__(self, other) -> bool:
        return isinstance(other, Message) and (self.msg_id, self.params) == \
            (other.msg_id, other.params)

    def __hash__(self) -> int:
        return hash(self.msg_id)
