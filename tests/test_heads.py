"""Heads typed as L3H2, L5, L*H2 (attnviz.core.heads): read exactly, never as a search that
also matches L13H2 and L23H2 (issue 27.6)."""

import numpy as np
import pytest

from attnviz.core.errors import AttnvizInputError
from attnviz.core.heads import heads_text, parse_heads


def named(layers: int, heads: int, *cells) -> np.ndarray:
    out = np.zeros((layers, heads), dtype=bool)
    for layer, head in cells:
        out[layer, head] = True
    return out


def test_a_head_is_that_head_only():
    np.testing.assert_array_equal(parse_heads("L3H2", 30, 9), named(30, 9, (3, 2)))
    np.testing.assert_array_equal(parse_heads("l1h1", 6, 12), named(6, 12, (1, 1)))


def test_whole_layers_every_layers_head_and_ranges():
    every_of_5 = np.zeros((30, 9), dtype=bool)
    every_of_5[5] = True
    np.testing.assert_array_equal(parse_heads("L5", 30, 9), every_of_5)
    np.testing.assert_array_equal(parse_heads("L5H*", 30, 9), every_of_5)
    head_2 = np.zeros((30, 9), dtype=bool)
    head_2[:, 2] = True
    np.testing.assert_array_equal(parse_heads("L*H2", 30, 9), head_2)
    block = np.zeros((30, 9), dtype=bool)
    block[3:6, 0:3] = True
    np.testing.assert_array_equal(parse_heads("L3-5H0-2", 30, 9), block)


@pytest.mark.parametrize("text", ["L0H3, L5H11, L2", "L0H3 L5H11 L2", "L0H3;L5H11;L2",
                                  "L0H3，L5H11、L2", "  L0H3,,L5H11  L2 "])
def test_any_separator(text):
    expected = named(6, 12, (0, 3), (5, 11))
    expected[2] = True
    np.testing.assert_array_equal(parse_heads(text, 6, 12), expected)


def test_empty_names_none():
    assert not parse_heads("", 6, 12).any() and not parse_heads("  ", 6, 12).any()


@pytest.mark.parametrize("text, msg_id, params", [
    ("L3H", "error.heads.unknown", {"item": "L3H"}),
    ("layer 0", "error.heads.unknown", {"item": "layer"}),
    ("H2", "error.heads.unknown", {"item": "H2"}),
    ("L30H0", "error.heads.layer_range", {"item": "L30H0", "high": 29}),
    ("L3H9", "error.heads.head_range", {"item": "L3H9", "high": 8}),
    ("L5-3", "error.heads.backwards", {"item": "L5-3", "low": 5, "high": 3}),
])
def test_what_is_not_a_head_is_named(text, msg_id, params):
    with pytest.raises(AttnvizInputError) as caught:
        parse_heads(text, 30, 9)
    assert caught.value.msg_id == msg_id
    assert {k: caught.value.params[k] for k in params} == params


def test_the_text_of_a_map_reads_back_as_the_same_map():
    rng = np.random.default_rng(0)
    for _ in range(50):
        off = rng.random((30, 9)) < 0.1
        off[rng.integers(30)] = True                     # a whole layer
        np.testing.assert_array_equal(parse_heads(heads_text(off), 30, 9), off)
    assert heads_text(named(30, 9, (3, 2), (20, 5))) == "L3H2, L20H5"
