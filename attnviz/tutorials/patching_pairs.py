"""Prompt pairs for activation patching on SmolLM2-135M-Instruct (``DecoderModel.patch``): a
clean and a corrupted prompt of the same number of tokens, each of which the model answers
right (greedy) — checked against transformers running the same GGUF in tests/test_patching.py.

Each pair: (name, clean, corrupted, clean's answer, corrupted's answer). The answers are the
words the model writes next; for the Chinese pair the first token of the answer is a piece of
the character's UTF-8 bytes: the page compares each answer's first token (the first piece of 四
and of 六, each prompt's own most likely next token).
"""

from __future__ import annotations

__all__ = ["PATCHING_PAIRS", "PatchingPair", "patching_pair"]

from typing import NamedTuple


class PatchingPair(NamedTuple):
    name: str
    clean: str
    corrupted: str
    clean_answer: str
    corrupted_answer: str


PATCHING_PAIRS = (
    # indirect object identification (Wang et al. 2022): the name that did not give; the
    # corrupted prompt swaps who gives, so the answer flips (14 tokens each)
    PatchingPair("ioi", "When Mary and John went to the store, John gave a drink to",
                 "When Mary and John went to the store, Mary gave a drink to",
                 " Mary", " John"),
    # factual recall: a landmark's city (9 tokens each)
    PatchingPair("factual", "The Eiffel Tower is in the city of",
                 "The Colosseum is in the city of", " Paris", " Rome"),
    # the day after: 星期三 → 星期四, 星期五 → 星期六 (30 tokens each)
    PatchingPair("weekday_zh", "星期一之后是星期二，星期三之后是星期",
                 "星期一之后是星期二，星期五之后是星期", "四", "六"),
)


def patching_pair(name: str) -> PatchingPair:
    """The pair called `name` ("ioi", "factual", "weekday_zh")."""
    return {p.name: p for p in PATCHING_PAIRS}[name]
