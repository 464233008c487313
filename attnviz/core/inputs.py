"""From what a user types to the matrix X: tokens, embeddings, positions. A matrix typed or
pasted as text is read by attnviz.core.matrix_text."""

from __future__ import annotations

import hashlib
import unicodedata
from functools import lru_cache

import numpy as np
import regex

from attnviz.core.arrays import whole_number
from attnviz.core.errors import AttnvizInputError
from attnviz.i18n import Message

# CJK ideographs and Japanese kana: one token per character (早上好 → 早, 上, 好).
_CJK = (r"\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
        r"\U00020000-\U0002fa1f")
# A grapheme cluster (what a reader sees as one character, Unicode's extended grapheme
# cluster, the regex package's \X) that starts with a letter or digit and is not CJK: "स्ते",
# "שָׁ", "ดี" are one cluster each, so a word never loses its vowel signs, viramas or points.
_LETTER = rf"(?:(?=[\p{{L}}\p{{N}}])(?![{_CJK}])\X)"
_HYPHEN = "'’\\-\u2010\u2011\u05be"           # inside a word: didn't, well-known, בית־ספר
_TOKEN = regex.compile(
    rf"(?=[{_CJK}])\X"                              # one CJK character (with its marks)
    r"|\d+(?:[.,]\d+)+(?![\p{L}\p{N}\p{M}])"        # a number with a point: 42.5, 1,000
    rf"|{_LETTER}+(?:[{_HYPHEN}]{_LETTER}+)*"        # a word: didn't, well-known, नमस्ते
    r"|(?!\s)\X",                                   # any other cluster on its own: a
    regex.V1)                                        # punctuation mark, an emoji sequence 👩‍💻
# Characters that draw nothing and join nothing (Unicode's default-ignorable code points that
# do not extend a cluster, and invisible format controls): the soft hyphen, zero-width space,
# word joiner, byte-order mark, bidi controls such as U+202E (which would reverse the text
# after it), Hangul fillers. Dropped: "x\u00ady" is the word "xy". Joiners inside a cluster
# (ZWJ in 👩‍💻, ZWNJ in Persian words), variation selectors and emoji tags stay.
INVISIBLE = regex.compile(r"[[\p{Default_Ignorable_Code_Point}--[\p{Grapheme_Cluster_Break=Extend}"
                         r"\p{Grapheme_Cluster_Break=ZWJ}]][\p{Cf}&&\p{Grapheme_Cluster_Break=Control}]]",
                         regex.V1)
CONTROL = regex.compile(r"[\p{Cc}--\s]", regex.V1)   # NUL, BEL, ESC…: a break between words
_SURROGATE = regex.compile(r"\p{Cs}")                 # half of a character: not text
_EDGE_JOINERS = "\u200c\u200d"                       # a joiner with nothing to join
_DRAWN = regex.compile(r"[^\p{Default_Ignorable_Code_Point}\p{Cf}\p{Cc}\s]")   # draws something
DOTTED_CIRCLE = "\u25cc"                              # where a mark has no letter to sit on

MAX_TOKENS = 512            # the most any page will trace
MAX_D_MODEL = 1024          # the widest X (and weight) the app reads or makes
MAX_HEADS = 16              # the most heads (and key/value heads) the app and random() make
DEFAULT_MAX_TOKENS = 64     # the interactive pages' default limit


def tokenize(text: str) -> list[str]:
    """Split text into words, punctuation marks and CJK characters.

    Letters and digits with inner apostrophes or hyphens stay together (``didn't``); each
    punctuation mark and each CJK character is a token; whitespace never is. A token is made
    of whole grapheme clusters (``\\X``): "नमस्ते" is one word, never "नमस" and a lone virama.
    Invisible characters never make a token nor hide inside one: format controls (soft
    hyphen, zero-width space, byte-order mark, bidi overrides) are dropped, control
    characters (NUL, BEL …) separate words like a space, and a combining mark with no letter
    before it is shown on a dotted circle (◌́). An emoji sequence (👩‍💻, 👍🏽, 🇫🇷) is one token.
    """
    if not isinstance(text, str):
        raise AttnvizInputError("error.sentence.not_text", type=type(text).__name__)
    text = _SURROGATE.sub("\ufffd", text)
    text = CONTROL.sub(" ", INVISIBLE.sub("", unicodedata.normalize("NFC", text)))
    tokens = [_visible_token(t) for t in _TOKEN.findall(text)]
    tokens = [t for t in tokens if t]
    if not tokens:
        raise AttnvizInputError("error.sentence.empty")
    return tokens


def _visible_token(token: str) -> str:
    """A token as it is drawn: without a joiner at either end (nothing to join there), and a
    mark that starts it (no letter before it) on a dotted circle; "" if nothing is left."""
    token = token.strip(_EDGE_JOINERS)
    if not _DRAWN.search(token):
        return ""
    if unicodedata.category(token[0]).startswith("M"):
        token = DOTTED_CIRCLE + token
    return token


def truncate(tokens: list[str],
             max_tokens: int = DEFAULT_MAX_TOKENS) -> tuple[list[str], Message | None]:
    """The first `max_tokens` tokens, and a notice saying what was cut (None if nothing)."""
    max_tokens = whole_number(max_tokens, "max_tokens", low=1, high=MAX_TOKENS)
    if len(tokens) <= max_tokens:
        return list(tokens), None
    if max_tokens == MAX_TOKENS:               # nothing left to raise: say so, suggest nothing
        return list(tokens[:max_tokens]), Message(
            "notice.tokens.cut_at_maximum", count=len(tokens), used=max_tokens,
            maximum=MAX_TOKENS)
    return list(tokens[:max_tokens]), Message(
        "notice.tokens.cut_at_limit", count=len(tokens), used=max_tokens, maximum=MAX_TOKENS)


def embed_tokens(tokens: list[str], d_model: int, seed: int = 0) -> np.ndarray:
    """(n, d_model) float64: one N(0, 1) vector per token, the same for the same token string
    and seed on any machine and in any process (seeded from a BLAKE2 hash of the string)."""
    if not tokens:
        raise AttnvizInputError("error.tokens.none_to_embed")
    d_model = whole_number(d_model, "d_model")
    return np.stack([_token_vector(str(t), int(d_model), int(seed)) for t in tokens])


def _token_vector(token: str, d_model: int, seed: int) -> np.ndarray:
    digest = hashlib.blake2b(f"{seed}\x1f{token}".encode("utf-8"), digest_size=8).digest()
    return _seeded_vector(int.from_bytes(digest, "little"), d_model)


@lru_cache(maxsize=4096)       # keyed by the token's 8-byte hash: no token text is kept
def _seeded_vector(seed: int, d_model: int) -> np.ndarray:
    vec = np.random.default_rng(seed).standard_normal(d_model)
    vec.flags.writeable = False
    return vec


def sinusoidal_positions(n: int, d_model: int) -> np.ndarray:
    """(n, d_model): PE[pos, 2i] = sin(pos / 10000^(2i/d_model)), PE[pos, 2i+1] = cos(same)."""
    n, d_model = whole_number(n, "n"), whole_number(d_model, "d_model")
    pos = np.arange(n)[:, None]                                   # (n, 1)
    even = np.arange(0, d_model, 2)                               # 2i
    angle = pos / np.power(10000.0, even / d_model)               # (n, ceil(d/2))
    pe = np.empty((n, d_model))
    pe[:, 0::2] = np.sin(angle)
    pe[:, 1::2] = np.cos(angle[:, : d_model // 2])
    return pe
