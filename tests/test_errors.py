"""Every bad argument raises AttnvizInputError (a ValueError) naming the argument and the
problem."""

import pickle

import numpy as np
import pytest

import attnviz
from attnviz import AttnvizInputError
from attnviz.core.errors import OverflowInStep

W = attnviz.MultiHeadWeights.random(4, 2, seed=0)
X = np.ones((3, 4))


def raises(match):
    return pytest.raises(AttnvizInputError, match=match)


def test_error_is_a_value_error():
    assert issubclass(AttnvizInputError, ValueError)


@pytest.mark.parametrize("x, match", [
    (np.ones((3, 5)), "x has 5 columns, but the weights expect 4"),
    (np.ones(4), "x must have 2 dimensions"),
    (np.ones((0, 4)), "x is empty"),
    ([[1, 2, 3, np.nan]] * 2, "x has a NaN entry at index"),
    ([[1, 2, 3, np.inf]], "x has an infinite entry"),
    ([["a", "b", "c", "d"]], "x must hold numbers"),
    ([[1, 2], [3]], "x is not an array of numbers"),
])
def test_bad_x(x, match):
    with raises(match):
        attnviz.trace_attention(x, W)


def test_bad_context_width():
    with raises("context has 3 columns"):
        attnviz.trace_attention(X, W, context=np.ones((2, 3)))


@pytest.mark.parametrize("kwargs, match", [
    (dict(key_padding_mask=np.zeros(2, bool)), r"key_padding_mask must have shape \(3,\)"),
    (dict(attn_mask=np.zeros((3, 2), bool)), r"attn_mask must have shape \(3, 3\)"),
    (dict(attn_mask=np.zeros((3, 3), int)), "attn_mask holds integers"),
    (dict(attn_mask=np.full((3, 3), np.nan)), "attn_mask may hold −inf .* not NaN"),
    (dict(scale=float("inf")), "scale must be a finite number"),
    (dict(scale="big"), "scale must be a finite number"),
])
def test_bad_masks_and_scale(kwargs, match):
    with raises(match):
        attnviz.trace_attention(X, W, **kwargs)


def test_wrong_weights_type():
    with raises("w must be a MultiHeadWeights"):
        attnviz.trace_attention(X, {"w_q": 1})


@pytest.mark.parametrize("kwargs, match", [
    (dict(d_model=10, num_heads=3), "d_model 10 does not divide by num_heads 3"),
    (dict(d_model=8, num_heads=2, init="uniform"), "init must be one of gaussian, xavier"),
    (dict(d_model=0, num_heads=1), "d_model must be a whole number from 1 to"),
    (dict(d_model=8, num_heads=2.5), "num_heads must be a whole number"),
    (dict(d_model=8, num_heads=2, d_context=3, tie_qk=True), "tie_qk needs"),
])
def test_bad_random_weights(kwargs, match):
    with raises(match):
        attnviz.MultiHeadWeights.random(**kwargs)


def test_inconsistent_weight_shapes():
    with raises("w_o must have 2 heads × d_v 2 = 4 rows"):
        attnviz.MultiHeadWeights(W.w_q, W.w_k, W.w_v, np.ones((3, 4)))
    with raises("w_k and w_v must have the same number of key/value heads"):
        attnviz.MultiHeadWeights(W.w_q, W.w_k[:1], W.w_v, W.w_o)
    with raises("w_k must give keys as wide"):
        attnviz.MultiHeadWeights(W.w_q, np.ones((2, 4, 3)), W.w_v, W.w_o)
    with raises(r"b_q must have shape \(2, 2\)"):
        attnviz.MultiHeadWeights(W.w_q, W.w_k, W.w_v, W.w_o, b_q=np.ones((2, 3)))
    with raises("w_v has a NaN entry"):
        attnviz.MultiHeadWeights(W.w_q, W.w_k, np.full((2, 4, 2), np.nan), W.w_o)


def test_bad_qkv():
    with raises("same length d_k"):
        attnviz.trace_qkv(np.ones((2, 3)), np.ones((2, 4)), np.ones((2, 2)))
    with raises("k has 2 rows and v has 3"):
        attnviz.trace_qkv(np.ones((2, 3)), np.ones((2, 3)), np.ones((3, 2)))
    with raises("must all be 2-D"):
        attnviz.trace_qkv(np.ones((2, 3)), np.ones((1, 2, 3)), np.ones((2, 2)))


def test_overflowing_scores_are_an_error_naming_the_step_not_nan():
    huge = np.full((2, 2), 1e200)
    big32 = np.full((2, 2), 1e20, dtype=np.float32)
    for q, v in ((huge, np.ones((2, 2))), (big32, np.ones((2, 2), np.float32))):
        with pytest.raises(OverflowInStep) as caught:
            attnviz.trace_qkv(q, q, v)
        assert caught.value.step == "scores" and caught.value.msg_id == "error.overflow.scores"
    again = pickle.loads(pickle.dumps(caught.value))        # e.g. from a worker, whole
    assert type(again) is OverflowInStep and again.step == "scores"
    assert again.message == caught.value.message


def test_bad_head_and_step():
    t = attnviz.trace_attention(X, W)
    with raises("head must be a whole number from 0 to 1"):
        t.weighted_values(2)
    with raises("no step named 'nope'"):
        t.step("nope")


@pytest.mark.parametrize("args, match", [
    ((["a"], 0), "d_model must be a whole number"),
    (([], 4), "no tokens"),
])
def test_bad_embedding_arguments(args, match):
    with raises(match):
        attnviz.embed_tokens(*args)


def test_bad_positions_and_sentence():
    with raises("n must be a whole number"):
        attnviz.sinusoidal_positions(0, 4)
    with raises("the sentence must be text"):
        attnviz.tokenize(None)
