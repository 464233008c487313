"""How the pages, figures and files label rows and columns: one place for every rule.

Queries and keys are labelled by their tokens (default ``q1, q2, …`` and ``k1, k2, …``, the
same in charts, tables and files); features by ``d0, d1, …`` (or ``q0 …`` for a projection's
columns); a repeated label made unique by its 1-based position. A label is shown as what it is:
invisible characters as their code (``⟨U+202E⟩``), and a long one cut after whole characters
(grapheme clusters) with "…": a chart's axis shows TICK_CHARS characters, its hover
HOVER_CHARS, a table LABEL_CHARS; the token itself (its embedding, the files) keeps them all.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np
import regex

from attnviz.core.errors import AttnvizInputError
from attnviz.core.inputs import CONTROL, INVISIBLE

TICK_CHARS = 20          # a label on a chart's axis
HOVER_CHARS = 64         # in a chart's hover, a token line
LABEL_CHARS = 1000       # in a table, a list: the most of one label the app ever shows
_CLUSTER = regex.compile(r"\X")


def trace_tokens(trace, tokens_q=None, tokens_k=None) -> tuple[list[str], list[str]]:
    """Raw (unescaped) query and key labels, checked against the trace's n_q and n_k.
    Self-attention with only `tokens_q` given labels the keys with the same tokens."""
    self_attention = trace.context is None and trace.n_k == trace.n_q
    if tokens_q is None:
        tokens_q = [f"q{i + 1}" for i in range(trace.n_q)]
    elif tokens_k is None and self_attention:
        tokens_k = tokens_q
    if tokens_k is None:
        tokens_k = [f"k{j + 1}" for j in range(trace.n_k)]
    for name, tokens, n in (("tokens_q", tokens_q, trace.n_q), ("tokens_k", tokens_k, trace.n_k)):
        if isinstance(tokens, str) or len(tokens) != n:
            if isinstance(tokens, str):
                raise AttnvizInputError("error.labels.not_a_list", name=name, n=n)
            raise AttnvizInputError("error.labels.count", name=name, n=n, count=len(tokens))
    return [str(s) for s in tokens_q], [str(s) for s in tokens_k]


def feature_labels(n: int, prefix: str = "d") -> list[str]:
    """Feature columns: d0, d1, … (a projection's own columns: q0 …, k0 …, v0 …)."""
    return [f"{prefix}{j}" for j in range(n)]


def unique(labels, max_chars: int = LABEL_CHARS) -> list[str]:
    """Labels made distinct for table headers and chart axes: a repeated (or blank) label gets
    its 1-based position, "the (1)", "the (5)"; a collision with a given label gets a prime.
    Each is first made `visible` and `cut` to `max_chars` characters; one of white space only
    (a token of spaces, a line break) is written in the tokens' notation, "␣ (5)", "↵ (8)"."""
    labels = [token_shown(s, max_chars) if str(s) and not str(s).strip()
              else cut(visible(s), max_chars) for s in labels]
    counts = Counter(labels)
    out, seen = [], set()
    for i, s in enumerate(labels):
        if counts[s] > 1 or not s.strip():
            s = f"{s} ({i + 1})".lstrip()
        while s in seen:                                     # "a (2)" given and made
            s += "′"
        seen.add(s)
        out.append(s)
    return out


# white space no token shows as a space: a line break ↵, a tab ⇥, a carriage return ␍, a
# vertical tab ␋, a form feed ␌ (the last three Unicode's control pictures); the rest as its code
BREAKS = {"\n": "↵", "\t": "⇥", "\r": "␍", "\x0b": "␋", "\x0c": "␌"}
_OTHER_BREAKS = regex.compile(r"[\x1c-\x1f\x85\u2028\u2029]")


def token_shown(token: str, max_chars: int = 16) -> str:
    """A model's token as every page writes it (one notation: Generate, the experiments, Read
    the model, Trace the answer): a space at its start or end as ␣ (" Paris" → "␣Paris", a
    token of spaces "␣␣"), a line break as ↵, a tab as ⇥, \\r \\x0b \\x0c as ␍ ␋ ␌ (BREAKS),
    invisible characters and other breaks as their code points, at most `max_chars`
    characters (whole grapheme clusters). A character split over tokens is written by the
    model's labels with its part, 国[1/2] (``DecoderModel.labels``, ``piece_text``)."""
    text = _OTHER_BREAKS.sub(_code_point, "".join(BREAKS.get(c, c) for c in str(token)))
    core = text.strip(" ")
    if core:
        start = text.index(core[0])
        text = "␣" * start + core + "␣" * (len(text) - start - len(core))
    else:
        text = "␣" * len(text)
    return cut(visible(text), max_chars)


def visible(text) -> str:
    """`text` with every character that draws nothing shown as its code point: a bidi control
    (which would reverse the text after it), a soft hyphen, a zero-width space, NUL … become
    "⟨U+202E⟩"; joiners inside a character (👩‍💻) stay."""
    text = str(text)
    return CONTROL.sub(_code_point, INVISIBLE.sub(_code_point, text))


def _code_point(match) -> str:
    return "".join(f"⟨U+{ord(c):04X}⟩" for c in match.group())


def cut(text: str, max_chars: int) -> str:
    """`text` in at most `max_chars` characters (code points): whole grapheme clusters, then
    "…" where it was cut (a cluster longer than the limit is cut inside)."""
    if len(text) <= max_chars:
        return text
    end = 0
    for m in _CLUSTER.finditer(text):                        # lazily: a long text costs nothing
        if m.end() > max_chars - 1:
            break
        end = m.end()
    return text[:end or max_chars - 1] + "…"


def concat_labels(num_heads: int, d_v: int) -> list[str]:
    """The columns of the concatenation (rows of W_O): h0·d0 … h0·d(d_v−1), h1·d0, …"""
    return [f"h{h}·d{j}" for h in range(num_heads) for j in range(d_v)]


def matrix_labels(name: str, shape: tuple[int, int], tokens, num_heads: int,
                  d_v: int) -> tuple[list[str], list[str]]:
    """Row and column labels of one shown slice of an editable matrix (see attnviz.session.edits):
    X by token (made unique, cut to TICK_CHARS) and feature; W_Q/W_K/W_V by input feature and
    q/k/v feature; W_O by concatenation column and output feature; a bias is one row."""
    n_rows, n_cols = shape
    prefix = {"w_q": "q", "w_k": "k", "w_v": "v", "b_q": "q", "b_k": "k", "b_v": "v"}
    if name == "x":
        rows = unique(tokens, TICK_CHARS)     # as the heatmap beside the editor shows them
    elif name.startswith("b_"):
        rows = ["bias"]
    elif name == "w_o":
        rows = concat_labels(num_heads, d_v)
    else:
        rows = feature_labels(n_rows)
    return rows, feature_labels(n_cols, prefix.get(name, "d"))


# the steps whose features are a projection's columns, labelled as that projection's are
STEP_FEATURES = {"q": "q", "q_normed": "q", "q_rotated": "q", "k": "k", "k_normed": "k",
                 "k_rotated": "k", "v": "v"}


@dataclass(frozen=True)
class Layout:
    """One step of one head as a table: a 2-D array with its raw (unescaped) labels."""

    array: np.ndarray            # (rows, columns)
    rows: list[str]
    cols: list[str]
    row_axis: str                # "query", "key" or "feature"
    col_axis: str


def step_layout(trace, step_name: str, head: int = 0, tokens_q=None, tokens_k=None,
                query: int | None = None) -> Layout:
    """The step `step_name` of `head` laid out as (array, row labels, column labels): queries
    and keys by their tokens, the concatenation's columns by head (h0·d0 …), Q's, K's and V's
    features as their projections' columns (q0 …, k0 …, v0 …), other features d0, d1, …;
    weighted values (n_q, n_k, d_v) as one query's keys × features. Figures,
    tables, the CSV files and the vector view all lay steps out here."""
    step = trace.step(step_name)
    tokens_q, tokens_k = trace_tokens(trace, tokens_q, tokens_k)
    if step.on_demand:                          # weighted values: one query's (n_k, d_v)
        a, axes = trace.weighted_values(head, 0 if query is None else query), step.axes[2:]
    else:
        a = trace.step_array(step.name, head)
        axes = step.axes[1:] if step.per_head else step.axes
    names = {"query": tokens_q, "key": tokens_k}
    prefix = STEP_FEATURES.get(step.name, "d")        # Q's columns are W_Q's: q0, q1, …
    rows, cols = (names.get(ax) or feature_labels(n, prefix) for ax, n in zip(axes, a.shape))
    if step.name == "concat":
        cols = concat_labels(trace.num_heads, trace.d_v)
    return Layout(a, rows, cols, axes[0], axes[1])
