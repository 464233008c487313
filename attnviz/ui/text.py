"""User text inside Streamlit's Markdown: shown as the characters typed, never as a link, an
image, emphasis or a formula."""

from __future__ import annotations

import re

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


def token_line(tokens) -> str:
    """Tokens as one line of Markdown code spans: plain text, drawn at once (a table or a
    dataframe loads a grid component first, which delays the page's first chart)."""
    return " ".join(code(t) for t in tokens)
