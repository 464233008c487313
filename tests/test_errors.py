"""Every bad argument raises AttnvizInputError (a ValueError) naming the argument and the
problem: asserted by the message's id and the names and numbers it carries (their wording in
each language is tests/test_i18n.py's)."""

import pickle

import numpy as np
import pytest

import attnviz
from attnviz import AttnvizInputError
from attnviz.core.errors import OverflowInStep
from tests.message_helpers import at_least, between, raises_message

W = attnviz.MultiHeadWeights.random(4, 2, seed=0)
X = np.ones((3, 4))


def test_error_is_a_value_error():
    assert issubclass(AttnvizInputError, ValueError)


@pytest.mark.parametrize("x, msg_id, params", [
    (np.ones((3, 5)), "error.engine.width", dict(name="x", cols=5, width=4)),
    (np.ones(4), "error.array.ndim", dict(name="x", want="2", ndim=1)),
    (np.ones((0, 4)), "error.array.empty", dict(name="x", shape="(0, 4)")),
    ([[1, 2, 3, np.nan]] * 2, "error.array.nan", dict(name="x", index="(0, 3)")),
    ([[1, 2, 3, np.inf]], "error.array.infinite", dict(name="x", index="(0, 3)")),
    ([["a", "b", "c", "d"]], "error.array.dtype", dict(name="x")),
    ([[1, 2], [3]], "error.array.not_numbers", dict(name="x")),
])
def test_bad_x(x, msg_id, params):
    with raises_message(msg_id, **params):
        attnviz.trace_attention(x, W)


def test_bad_context_width():
    with raises_message("error.engine.width", name="context", cols=3, width=4):
        attnviz.trace_attention(X, W, context=np.ones((2, 3)))


@pytest.mark.parametrize("kwargs, msg_id, params", [
    (dict(key_padding_mask=np.zeros(2, bool)), "error.engine.mask_shape",
     dict(name="key_padding_mask", want="(3,)", shape="(2,)")),
    (dict(attn_mask=np.zeros((3, 2), bool)), "error.engine.mask_shape",
     dict(name="attn_mask", want="(3, 3) or (2, 3, 3)", shape="(3, 2)")),
    (dict(attn_mask=np.zeros((3, 3), int)), "error.engine.mask_integers", dict(name="attn_mask")),
    (dict(attn_mask=np.full((3, 3), np.nan)), "error.engine.mask_nan", dict(name="attn_mask")),
    (dict(scale=float("inf")), "error.engine.scale", dict(value="inf")),
    (dict(scale="big"), "error.engine.scale", {}),
])
def test_bad_masks_and_scale(kwargs, msg_id, params):
    with raises_message(msg_id, **params):
        attnviz.trace_attention(X, W, **kwargs)


def test_wrong_weights_type():
    with raises_message("error.engine.not_weights", type="dict"):
        attnviz.trace_attention(X, {"w_q": 1})


@pytest.mark.parametrize("kwargs, msg_id, params", [
    (dict(d_model=10, num_heads=3), "error.weights.head_dim", dict(d_model=10, heads=3)),
    (dict(d_model=8, num_heads=2, init="uniform"), "error.weights.init",
     dict(schemes="gaussian, xavier, kaiming, identity", init="'uniform'")),
    (dict(d_model=0, num_heads=1), "error.whole_number",
     dict(name="d_model", bounds=between(1, 4096), value="0")),
    (dict(d_model=8, num_heads=2.5), "error.whole_number", dict(name="num_heads", value="2.5")),
    (dict(d_model=8, num_heads=2, d_context=3, tie_qk=True), "error.weights.tie_qk_width",
     dict(d_context=3, d_model=8)),
])
def test_bad_random_weights(kwargs, msg_id, params):
    with raises_message(msg_id, **params):
        attnviz.MultiHeadWeights.random(**kwargs)


def test_inconsistent_weight_shapes():
    with raises_message("error.weights.w_o_rows", heads=2, d_v=2, rows=4, got=3):
        attnviz.MultiHeadWeights(W.w_q, W.w_k, W.w_v, np.ones((3, 4)))
    with raises_message("error.weights.kv_heads_differ", k=1, v=2):
        attnviz.MultiHeadWeights(W.w_q, W.w_k[:1], W.w_v, W.w_o)
    with raises_message("error.weights.key_width", d_k=2, width=3):
        attnviz.MultiHeadWeights(W.w_q, np.ones((2, 4, 3)), W.w_v, W.w_o)
    with raises_message("error.weights.shape", name="b_q", want="(2, 2)", shape="(2, 3)"):
        attnviz.MultiHeadWeights(W.w_q, W.w_k, W.w_v, W.w_o, b_q=np.ones((2, 3)))
    with raises_message("error.array.nan", name="w_v"):
        attnviz.MultiHeadWeights(W.w_q, W.w_k, np.full((2, 4, 2), np.nan), W.w_o)


def test_bad_qkv():
    with raises_message("error.engine.qk_width", q=3, k=4):
        attnviz.trace_qkv(np.ones((2, 3)), np.ones((2, 4)), np.ones((2, 2)))
    with raises_message("error.engine.kv_rows", k=2, v=3):
        attnviz.trace_qkv(np.ones((2, 3)), np.ones((2, 3)), np.ones((3, 2)))
    with raises_message("error.engine.qkv_ndim"):
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
    with raises_message("error.whole_number", name="head", bounds=between(0, 1), value="2"):
        t.weighted_values(2)
    with raises_message("error.trace.no_step", name="'nope'"):
        t.step("nope")


@pytest.mark.parametrize("args, msg_id, params", [
    ((["a"], 0), "error.whole_number", dict(name="d_model", bounds=at_least(1), value="0")),
    (([], 4), "error.tokens.none_to_embed", {}),
])
def test_bad_embedding_arguments(args, msg_id, params):
    with raises_message(msg_id, **params):
        attnviz.embed_tokens(*args)


def test_bad_positions_and_sentence():
    with raises_message("error.whole_number", name="n", bounds=at_least(1), value="0"):
        attnviz.sinusoidal_positions(0, 4)
    with raises_message("error.sentence.not_text", type="NoneType"):
        attnviz.tokenize(None)
