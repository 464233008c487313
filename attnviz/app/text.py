"""User text inside Streamlit's Markdown: shown as the characters typed, never as a link, an
image, emphasis or a formula."""

from __future__ import annotations

import re

import streamlit as st

from attnviz.core.inputs import CONTROL, INVISIBLE
from attnviz.describe.labels import HOVER_CHARS, cut, visible
from attnviz.i18n import t
from attnviz.app import keys

_MARKDOWN = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~$:&])")
# GFM turns bare web addresses and e-mail addresses in text into links, escapes or not: an
# invisible word joiner (U+2060) inside "://", after "www" and before "@" stops that.
_AUTOLINK = re.compile(r"(?i)(?<=:)(?=//)|(?<=www)(?=\.)|(?=@)")


def literal(text) -> str:
    """`text` with every Markdown-active character backslash-escaped, so st.error, st.info,
    st.caption… show it literally: ``[x](https://…)`` stays text, not a link, and a bare address
    is not made a link either."""
    return _MARKDOWN.sub(r"\\\1", _AUTOLINK.sub("\u2060", str(text)))


def code(text) -> str:
    """`text` as one Markdown code span, shown exactly as typed: the fence is one backtick more
    than the longest run of backticks inside, padded with a space where the text would touch
    it."""
    text = str(text)
    fence = "`" * (max((len(run) for run in re.findall(r"`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


# First-strong isolate … pop directional isolate: the text between them takes its own direction
# and gives none to its neighbours, so a right-to-left word never reorders the tokens around it.
ISOLATE, END_ISOLATE = "\u2068", "\u2069"


def token_line(tokens) -> str:
    """Tokens as one line of Markdown code spans: plain text, drawn at once (a table or a
    dataframe loads a grid component first, which delays the page's first chart). Each is
    isolated (FSI … PDI): the line keeps the tokens' order whatever their scripts; invisible
    characters are shown as their code and a long token is cut (labels.HOVER_CHARS)."""
    return " ".join(f"{ISOLATE}{code(cut(visible(t), HOVER_CHARS))}{END_ISOLATE}"
                    for t in tokens)


def drop_invisible(key: str) -> None:
    """on_change of a text box: take out of its text the characters that draw nothing (a
    right-to-left override U+202E would show the rest of the box reversed, a zero-width space
    hides inside a word) and turn control characters into spaces, as the tokenizer reads them
    anyway, so the box shows the text the tokens come from; `invisible_notice` says what went."""
    text = st.session_state.get(key)
    if not isinstance(text, str):
        return
    found = sorted({c for m in INVISIBLE.finditer(text) for c in m.group()}
                   | {c for m in CONTROL.finditer(text) for c in m.group()})
    if found:
        st.session_state[key] = CONTROL.sub(" ", INVISIBLE.sub("", text))
        st.session_state[keys.DROPPED(key)] = "".join(found)
    else:
        st.session_state.pop(keys.DROPPED(key), None)


def invisible_notice(key: str) -> None:
    """A caption under the text box naming what `drop_invisible` took out (⟨U+202E⟩ …)."""
    dropped = st.session_state.get(keys.DROPPED(key))
    if dropped:
        st.caption(literal(t("text.invisible_removed", chars=visible(dropped[:8])
                             + (" …" if len(dropped) > 8 else ""))))
