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
