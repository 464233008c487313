"""A SmolLM2 token shown alone (a candidate, an answer; issue 34.8): byte-level pieces of a
character as the part of a character they hold, never as <0xE5><0x9B> bytes. The expected
labels are derived here from the vocabulary's own spelling (equal to transformers', see
test_decoder.py) through the GPT-2 byte alphabet and Python's UTF-8 decoder, not from attnviz.
"""

from itertools import product

import pytest


def _byte_alphabet() -> dict[str, int]:
    """GPT-2's byte-level alphabet (each byte spelled as one printable character), inverted."""
    drawn = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1),
             *range(ord("®"), ord("ÿ") + 1)]
    chars, extra = {}, 0
    for b in range(256):
        if b in drawn:
            chars[chr(b)] = b
        else:
            chars[chr(256 + extra)] = b
            extra += 1
    return chars


BYTES = _byte_alphabet()


def raw(decoder, token_id: int) -> bytes:
    return bytes(BYTES[c] for c in decoder.piece(token_id))


def expected_alone(data: bytes) -> str:
    """The label of a lone token's bytes: whole characters as text; a character begun and not
    finished as the first and last character its bytes can start, with [1/2] when one byte
    is left (one token more), [1/?] when two or three are; bytes ending a character begun
    before as ?[?/?]. (Enough for the tokens tested: no stray byte.)"""
    head = len(data) - len(data.lstrip(bytes(range(0x80, 0xC0))))
    out = "?[?/?]" if head else ""
    rest = data[head:]
    for cut in range(len(rest), -1, -1):                     # the longest whole prefix
        try:
            out += rest[:cut].decode("utf-8")
            break
        except UnicodeDecodeError:
            continue
    tail = rest[cut:]
    if tail:
        size = {0xC: 2, 0xD: 2, 0xE: 3, 0xF: 4}[tail[0] >> 4]
        chars = []
        for more in product(range(0x80, 0xC0), repeat=size - len(tail)):
            try:
                chars.append((tail + bytes(more)).decode("utf-8"))
            except UnicodeDecodeError:
                pass
        left = size - len(tail)
        out += f"{min(chars)}–{max(chars)}[1/{2 if left == 1 else '?'}]"
    return out


@pytest.mark.parametrize("text", ["四", "六", "国", "北京", "首都", "é"])
def test_the_first_piece_of_a_split_character_alone_names_what_it_can_start(decoder, text):
    ids = decoder.encode(text)
    data = text.encode("utf-8")
    assert b"".join(raw(decoder, int(i)) for i in ids) == data       # the pieces are its bytes
    for i in ids:
        shown = decoder.piece_text(int(i))
        assert shown == expected_alone(raw(decoder, int(i)))
        assert "<0x" not in shown and "\ufffd" not in shown


def test_every_token_alone_is_text_or_a_part_of_a_character(decoder):
    """No token of the vocabulary is shown as bytes or U+FFFD; the bytes stay available."""
    for i in range(decoder.vocab_size):
        shown = decoder.piece_text(i)
        replacement = "\ufffd".encode("utf-8") in raw(decoder, i)      # U+FFFD itself, as text
        assert "<0x" not in shown and ("\ufffd" not in shown or replacement), (i, shown)
    first = int(decoder.encode("四")[0])
    assert decoder.byte_text(first) == "".join(f"<0x{b:02X}>" for b in raw(decoder, first))


def test_a_piece_whose_character_is_known_reads_as_that_character(decoder):
    """After the tokens before it (piece_after) or in a run of ids (labels), a piece is the
    character it belongs to; ids that end inside a character show its start as alone."""
    ids = [int(i) for i in decoder.encode("中国的首都是北")]
    beijing = "北".encode("utf-8")
    assert raw(decoder, ids[-2]) + raw(decoder, ids[-1]) == beijing
    assert decoder.piece_after(ids[:-1], ids[-1]) == "北[2/2]"
    tokens = decoder.labels(ids[:-1])[0]
    assert tokens[-1] == expected_alone(raw(decoder, ids[-2]))
    assert decoder.labels(ids)[0][-2:] == ["北[1/2]", "北[2/2]"]
