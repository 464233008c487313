"""User text inside Streamlit's Markdown: shown as the characters typed, never as a link, an
image, emphasis or a formula."""

from __future__ import annotations

import re

import streamlit as st

from attnviz.core.inputs import CONTROL, INVISIBLE
from attnviz.describe.labels import HOVER_CHARS, cut, token_shown, visible
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
    return " ".join(f"{ISOLATE}{code(_readable(t))}{END_ISOLATE}" for t in tokens)


def _readable(token) -> str:
    """A token as the line shows it: one of spaces, line breaks or tabs only in the tokens'
    one notation (␣, ↵, ⇥: ``labels.token_shown``), not an empty box; any other as it is."""
    text = str(token)
    if not text.strip():
        return token_shown(text, HOVER_CHARS)
    return cut(visible(text), HOVER_CHARS)


def token_notation() -> None:
    """How a language model's tokens are written (␣, ↵, ⇥, a character's pieces 国[1/2], a
    lone piece 囀–囿[1/2]: ``labels.token_shown``, ``DecoderModel.labels``/``piece_text``),
    said in one place: a closed expander under the token lists of Read, Trace and Generate."""
    with st.expander(t("tokens.notation.title"), icon=":material/help:"):
        st.markdown(t("tokens.notation"))


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


# ---- how much text a visitor may send (issue 26) ------------------------------------------------
# Every text box has a limit in characters. The widget gets it (max_chars: the browser stops
# typing there, and Streamlit cuts a longer value that a client sends for the box to it before
# the script can read it: TextAreaSerde / TextInputSerde); `bound` cuts a value put in the
# session another way (a link, an upload, a test) before the box is drawn; `at_limit` says so
# under a box that is full. Nothing longer reaches a tokenizer or a parser, or stays in the
# session. The limits follow from what the pages can use:

# A sentence (the sidebar's, a second one to compare, the experiments' and Read the model's
# texts): the pages read at most 512 tokens of it (core.inputs.MAX_TOKENS, the pretrained
# model's 512). 512 English words are ~2,800 characters; 20,000 leave room for long words
# and are what a link may carry (links.MAX_CHARS). Measured: the three tokenizers read 20,000
# characters of any script in at most ~0.25 s (SmolLM2's, random Unicode, on a loaded core).
MAX_TEXT_CHARS = 20_000
# Generate's prompt: the model reads its last 512 tokens (models.decoders.decoder.MAX_TOKENS);
# English is ~4.8 characters a token (measured on SmolLM2's tokenizer), Chinese under 2: 8,000
# characters hold more than 512 tokens of either, and a rerun tokenizes the prompt a few times.
MAX_PROMPT_CHARS = 8_000
# A matrix typed or pasted (the sidebar's X, Q, K, V; a paste box): the largest the app reads
# is 512 × 1024 numbers (MAX_TOKENS × MAX_D_MODEL, core.matrix_text._check_raw_size); a box holds it
# at 8 characters a number with its separator ("-0.1234,", "0.12345 "), 4 Mi characters; a
# matrix written longer is uploaded as a file (io.matrix_files.MAX_UPLOAD_MB). Three full boxes
# (Q, K, V: 12.6 MB) make the largest message a browser sends for this app: the shipped config's
# server.maxMessageSize and server.maxWidgetStateSize (13 MB) are set from it.
MAX_MATRIX_CHARS = 512 * 1024 * 8


# the settings' text boxes (the sidebar's), bounded by state.init at every run
SETTINGS_LIMITS = {keys.SENTENCE: MAX_TEXT_CHARS, keys.X_TEXT: MAX_MATRIX_CHARS,
                   keys.Q_TEXT: MAX_MATRIX_CHARS, keys.K_TEXT: MAX_MATRIX_CHARS,
                   keys.V_TEXT: MAX_MATRIX_CHARS}


def bound(key: str, limit: int) -> None:
    """Before the text box `key` is drawn: its value in the session cut to `limit` characters
    (a value from the browser is never longer: Streamlit cut it to the box's max_chars)."""
    value = st.session_state.get(key)
    if isinstance(value, str) and len(value) > limit:
        st.session_state[key] = value[:limit]


def at_limit(text, limit: int) -> None:
    """Under a text box: a warning when its text fills the box's `limit` (what came after was
    cut, or could not be typed)."""
    if isinstance(text, str) and len(text) >= limit:
        st.warning(t("text.at_limit", chars=f"{limit:,}"))
