"""Heads named as a learner types them, read exactly.

    L3H2          layer 3, head 2 (both counted from 0) — that head only, never L13H2
    L5H*  or L5   every head of layer 5
    L*H2          head 2 of every layer
    L3-5H0-2      ranges, both ends included

Items are separated by commas, semicolons or spaces (also the full-width ，；、 and 　);
letters may be lower case. ``parse_heads`` gives the (layers, heads) boolean map of the heads
named; ``heads_text`` writes such a map back as the shortest list of items.
"""

from __future__ import annotations

import numpy as np
import regex

from attnviz.core.errors import AttnvizInputError

MAX_TEXT_CHARS = 2000        # 270 heads written one by one fit in about 1,600 characters
_SEPARATORS = regex.compile(r"[\s,;，；、]+")
_ITEM = regex.compile(r"L(\*|\d+(?:-\d+)?)(?:H(\*|\d+(?:-\d+)?))?", regex.IGNORECASE)


def parse_heads(text: str, layers: int, heads: int) -> np.ndarray:
    """(layers, heads) bool: True for every head `text` names (an empty text names none).

    Raises AttnvizInputError naming the first item that is not a head, a layer or a head
    outside the model, or a range written backwards."""
    if not isinstance(text, str):
        raise AttnvizInputError("error.text.not_text", type=type(text).__name__)
    if len(text) > MAX_TEXT_CHARS:
        raise AttnvizInputError("error.heads.too_long", chars=MAX_TEXT_CHARS)
    named = np.zeros((layers, heads), dtype=bool)
    for item in _SEPARATORS.split(text.strip()):
        if not item:
            continue
        match = _ITEM.fullmatch(item)
        if match is None:
            raise AttnvizInputError("error.heads.unknown", item=item)
        rows = _span(match.group(1), layers, item, layer=True)
        cols = _span(match.group(2) or "*", heads, item, layer=False)
        named[rows, cols] = True
    return named


def heads_text(named: np.ndarray) -> str:
    """The heads of a (layers, heads) bool map as items: a whole layer as "L5", else each
    head "L3H2", layer by layer."""
    named = np.asarray(named, dtype=bool)
    items = []
    for layer, row in enumerate(named):
        if row.all():
            items.append(f"L{layer}")
        else:
            items += [f"L{layer}H{head}" for head in np.flatnonzero(row)]
    return ", ".join(items)


def _span(part: str, size: int, item: str, *, layer: bool) -> slice:
    """The positions `part` ("*", "3" or "3-5") names among `size`, as a slice."""
    if part == "*":
        return slice(0, size)
    low, _, high = part.partition("-")
    low, high = int(low), int(high or low)
    if low > high:
        raise AttnvizInputError("error.heads.backwards", item=item, low=low, high=high)
    if high >= size and layer:
        raise AttnvizInputError("error.heads.layer_range", item=item, high=size - 1)
    if high >= size:
        raise AttnvizInputError("error.heads.head_range", item=item, high=size - 1)
    return slice(low, high + 1)
