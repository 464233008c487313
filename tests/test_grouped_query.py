"""Which key/value head a query head reads, in one place (issue 36 item 4): core.grouped_query
against transformers' repeat_kv, written here as modeling_llama.py writes it."""

import numpy as np
import pytest

from attnviz.core.grouped_query import (group_heads, kv_head, query_heads, repeat_kv,
                                        shared_kv)

SHAPES = [(9, 3), (4, 1), (6, 6), (8, 2)]                  # (H, H_kv); SmolLM2 is (9, 3)


def _transformers_repeat_kv(a: np.ndarray, n_rep: int) -> np.ndarray:
    """modeling_llama.repeat_kv: (B, H_kv, n, d) → expand (B, H_kv, n_rep, n, d) → reshape."""
    b, h_kv, n, d = a.shape
    return np.broadcast_to(a[:, :, None], (b, h_kv, n_rep, n, d)).reshape(b, h_kv * n_rep, n, d)


@pytest.mark.parametrize("h, h_kv", SHAPES)
def test_repeat_kv_is_transformers_repeat_kv(h, h_kv):
    a = np.random.default_rng(h).normal(size=(2, h_kv, 3, 4))
    expected = _transformers_repeat_kv(a, h // h_kv)
    np.testing.assert_array_equal(repeat_kv(a, h, axis=1), expected)
    np.testing.assert_array_equal(repeat_kv(a[0], h), expected[0])          # the head axis first
    np.testing.assert_array_equal(shared_kv(expected, h_kv, axis=1), a)     # undone


@pytest.mark.parametrize("h, h_kv", SHAPES)
def test_kv_head_and_query_heads_name_the_rows_repeat_kv_gives(h, h_kv):
    a = np.arange(h_kv)[None, :, None, None] * np.ones((1, h_kv, 1, 1))    # row kv holds kv
    read = _transformers_repeat_kv(a, h // h_kv)[0, :, 0, 0]                 # (H,)
    assert [kv_head(q, h, h_kv) for q in range(h)] == read.astype(int).tolist()
    np.testing.assert_array_equal(kv_head(np.arange(h), h, h_kv), read)
    for kv in range(h_kv):
        assert list(query_heads(kv, h, h_kv)) == np.flatnonzero(read == kv).tolist()


def test_smollm2_heads_read_their_groups():
    """SmolLM2-135M: 9 query heads, 3 K/V heads; heads 0–2 read K/V head 0, 6–8 K/V head 2."""
    assert [kv_head(q, 9, 3) for q in range(9)] == [0, 0, 0, 1, 1, 1, 2, 2, 2]
    assert list(query_heads(2, 9, 3)) == [6, 7, 8]


@pytest.mark.parametrize("h, h_kv", SHAPES)
def test_grouped_queries_meet_the_keys_repeat_kv_gives_them(h, h_kv):
    """group_heads (a view) with keys broadcast over each group scores as the repeated keys."""
    rng = np.random.default_rng(h_kv)
    q, k = rng.normal(size=(2, h, 3, 4)), rng.normal(size=(2, h_kv, 5, 4))
    grouped = group_heads(q, h_kv)                                            # (B, H_kv, g, n, d)
    assert np.shares_memory(grouped, q)
    scores = (grouped @ k[:, :, None].swapaxes(-1, -2)).reshape(2, h, 3, 5)
    expected = q @ _transformers_repeat_kv(k, h // h_kv).swapaxes(-1, -2)
    np.testing.assert_allclose(scores, expected, rtol=1e-12)
