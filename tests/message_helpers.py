"""An error asserted by its message id and parameters (the names and numbers it gives), not by
its English wording: ``with raises_message("error.whole_number", name="head"): …``."""

from __future__ import annotations

import re
import string
from contextlib import contextmanager

import pytest

from attnviz import i18n
from attnviz.core.errors import AttnvizInputError
from attnviz.i18n import Message


@contextmanager
def raises_message(msg_id: str, /, **params):
    """pytest.raises(AttnvizInputError), whose message is `msg_id` with `params` among its
    parameters (each equal: a number, a name, a nested Message)."""
    with pytest.raises(AttnvizInputError) as caught:
        yield caught
    message = caught.value.message
    assert message is not None and message.msg_id == msg_id, message
    for name, value in params.items():
        assert name in message.params and message.params[name] == value, (name, message)


def between(low: int, high: int) -> Message:
    """The bounds of an ``error.whole_number``: from `low` to `high`."""
    return Message("error.whole_number.between", low=low, high=high)


def at_least(low: int) -> Message:
    """The bounds of an ``error.whole_number``: `low` or more."""
    return Message("error.whole_number.at_least", low=low)


def cell_at(row: int, col: int, matrix: str | Message | None = None) -> Message:
    """Where a cell is, as an error names it: row and column counted from 1, in `matrix`."""
    where = dict(row=Message("cell.row", row=row), col=Message("cell.col", col=col))
    return Message("cell.in_matrix", matrix=matrix, **where) if matrix else \
        Message("cell.at", **where)


def message_pattern(msg_id: str, /, **known) -> re.Pattern:
    """The message `msg_id` as the active language's catalogue writes it, as a regex: the
    parameters in `known` filled in as the message renders them, any other placeholder any
    text; every plural form. For a page that shows a message whose other numbers the test
    need not recompute: ``message_pattern("notice.pretrained.truncated", limit=16)``."""
    entry = i18n.catalogue(i18n.language())[msg_id]
    forms = []
    for text in entry.forms:
        parts = []
        for literal, name, spec, _ in string.Formatter().parse(text):
            parts.append(re.escape(literal))
            if name is None:
                continue
            if name in known:
                value = known[name]
                value = value.render() if isinstance(value, Message) else value
                parts.append(re.escape(format(value, spec or "")))
            else:
                parts.append(".+?")
        forms.append("".join(parts))
    return re.compile("|".join(f"(?:{f})" for f in forms), re.S)


def lead(msg_id: str, /, **known) -> str:
    """The message `msg_id` as the active language's catalogue writes it, up to its first
    placeholder not in `known` (those filled in as the message renders them): the part a
    browser test can find on the page as text (``page.get_by_text(lead("status.cannot_compute"))``)
    without the parameters it need not recompute."""
    text = i18n.catalogue(i18n.language())[msg_id].forms[-1]
    parts = []
    for literal, name, spec, _ in string.Formatter().parse(text):
        parts.append(literal)
        if name is None:
            continue
        if name not in known:
            break
        value = known[name]
        value = value.render() if isinstance(value, Message) else value
        parts.append(format(value, spec or ""))
    return "".join(parts).strip()
