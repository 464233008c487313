"""The trace itself: numerics, masks, steps, weight initialisation (no torch needed)."""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

import attnviz
from attnviz.core.errors import OverflowInStep
from tests.message_helpers import raises_message


def naive_attention(x, w, scale=None):
    """The tutorials' loop: per head, per query, scores → softmax → weighted sum. Independent of
    the engine's vectorised code."""
    zs = []
    for h in range(w.num_heads):
        q, k, v = x @ w.w_q[h], x @ w.w_k[h], x @ w.w_v[h]
        s = 1 / math.sqrt(q.shape[1]) if scale is None else scale
        rows = []
        for i in range(len(x)):
            scores = np.array([q[i] @ k[j] for j in range(len(x))]) * s
            e = np.exp(scores - scores.max())
            rows.append(sum(e[j] / e.sum() * v[j] for j in range(len(x))))
        zs.append(np.array(rows))
    return np.concatenate(zs, axis=1) @ w.w_o


def test_matches_a_loop_written_out_by_hand():
    w = attnviz.MultiHeadWeights.random(6, 2, seed=5)
    x = np.random.default_rng(5).standard_normal((4, 6))
    np.testing.assert_allclose(attnviz.trace_attention(x, w).output, naive_attention(x, w),
                               atol=1e-12)
    np.testing.assert_allclose(attnviz.trace_attention(x, w, scale=1.0).output,
                               naive_attention(x, w, scale=1.0), atol=1e-12)


def test_shapes_of_every_field():
    w = attnviz.MultiHeadWeights.random(12, 3, d_k=5, d_v=2, d_context=7, d_out=9, seed=1)
    x = np.ones((4, 12))
    c = np.ones((6, 7))
    t = attnviz.trace_attention(x, w, context=c)
    assert t.x.shape == (4, 12) and t.context.shape == (6, 7)
    assert t.q.shape == (3, 4, 5) and t.k.shape == (3, 6, 5) and t.v.shape == (3, 6, 2)
    for name in ("scores", "scaled_scores", "masked_scores", "weights"):
        assert getattr(t, name).shape == (3, 4, 6), name
    assert t.weighted_values(1).shape == (4, 6, 2)
    assert t.z.shape == (3, 4, 2) and t.concat.shape == (4, 6) and t.output.shape == (4, 9)


def test_concat_puts_heads_side_by_side_and_output_applies_w_o():
    w = attnviz.MultiHeadWeights.random(8, 4, seed=2, bias=True)
    t = attnviz.trace_attention(np.random.default_rng(2).standard_normal((3, 8)), w)
    np.testing.assert_array_equal(t.concat, np.concatenate(list(t.z), axis=1))
    np.testing.assert_allclose(t.output, t.concat @ w.w_o + w.b_o, atol=1e-12)


def test_weighted_values_sum_to_z_for_every_head():
    w = attnviz.MultiHeadWeights.random(8, 2, seed=3)
    t = attnviz.trace_attention(np.random.default_rng(3).standard_normal((5, 8)), w)
    for h in range(2):
        np.testing.assert_allclose(t.weighted_values(h).sum(axis=1), t.z[h], atol=1e-12)


def test_one_querys_weighted_values_are_its_weights_times_the_values():
    """What a page draws: one query's (n_k, d_v), the same products without the whole cube."""
    w = attnviz.MultiHeadWeights.random(8, 2, seed=4)
    t = attnviz.trace_attention(np.random.default_rng(4).standard_normal((5, 8)), w)
    for h in range(2):
        for q in range(5):
            np.testing.assert_array_equal(t.weighted_values(h, q),
                                          t.weights[h, q][:, None] * t.v[h])
    with pytest.raises(attnviz.AttnvizInputError):
        t.weighted_values(0, 5)


@pytest.mark.slow
@given(arrays(np.float64, (3, 4), elements=st.floats(-1e6, 1e6)))
def test_softmax_of_huge_scores_is_finite_and_sums_to_one(scores):
    q = scores  # Q Kᵀ with K = I gives these scores exactly
    t = attnviz.trace_qkv(q, np.eye(4), np.eye(4), scale=1.0)
    assert np.isfinite(t.weights).all()
    np.testing.assert_allclose(t.weights.sum(axis=-1), 1.0, atol=1e-12)
    # the largest score of each row gets the most weight
    at_top_score = t.weights[0][np.arange(3), scores.argmax(axis=1)]
    np.testing.assert_array_equal(at_top_score, t.weights[0].max(axis=1))


def test_float32_in_float32_out_and_int_input_computes_in_float64():
    w = attnviz.MultiHeadWeights.random(4, 2, seed=0, dtype=np.float32)
    t32 = attnviz.trace_attention(np.ones((2, 4), np.float32), w)
    assert all(a.dtype == np.float32 for a in (t32.q, t32.scores, t32.weights, t32.output))
    t64 = attnviz.trace_qkv(np.ones((2, 3), int), np.ones((2, 3), int), np.ones((2, 2), int))
    assert t64.weights.dtype == np.float64


def test_scale_none_is_one_over_sqrt_dk_and_a_float_is_used_as_given():
    q = np.array([[1.0, 2, 3, 4]])
    t = attnviz.trace_qkv(q, q, q)
    assert t.scale == pytest.approx(0.5)
    np.testing.assert_allclose(t.scaled_scores, t.scores * 0.5)
    t1 = attnviz.trace_qkv(q, q, q, scale=1.0)
    np.testing.assert_array_equal(t1.scaled_scores, t1.scores)
    t3 = attnviz.trace_qkv(q, q, q, scale=3.0)
    np.testing.assert_allclose(t3.scaled_scores, [[[90.0]]])


def test_causal_mask_gives_exact_zeros_above_the_diagonal():
    t = attnviz.trace_qkv(np.random.default_rng(0).standard_normal((5, 3)),
                          np.random.default_rng(1).standard_normal((5, 3)),
                          np.eye(5), causal=True)
    upper = np.triu(np.ones((5, 5), bool), k=1)
    assert (t.weights[0][upper] == 0).all()
    assert np.isneginf(t.masked_scores[0][upper]).all()
    np.testing.assert_allclose(t.weights.sum(-1), 1.0)
    assert t.mask[0][upper].all() and not t.mask[0][~upper].any()
    assert t.weights[0, 0, 0] == 1.0  # the first token sees only itself


def test_key_padding_mask_ignores_keys_and_all_masked_rows_are_zero_with_a_warning():
    q = np.ones((3, 2))
    kpm = np.array([False, True, True])
    t = attnviz.trace_qkv(q, q, np.eye(3, 2), key_padding_mask=kpm)
    assert (t.weights[0][:, 1:] == 0).all() and (t.weights[0][:, 0] == 1).all()
    assert t.warnings == []
    dead = attnviz.trace_qkv(q, q, np.eye(3, 2), attn_mask=np.array([[True] * 3, [False] * 3,
                                                                      [True] * 3]))
    assert not np.isnan(dead.weights).any() and not np.isnan(dead.output).any()
    assert (dead.weights[0][[0, 2]] == 0).all() and (dead.output[[0, 2]] == 0).all()
    assert len(dead.warnings) == 1 and "rows 1, 3" in dead.warnings[0]


def test_float_mask_is_added_to_the_scaled_scores():
    q = np.array([[1.0, 0], [0, 1]])
    add = np.array([[0.0, -1.5], [2.0, -np.inf]])
    t = attnviz.trace_qkv(q, q, q, attn_mask=add, scale=1.0)
    np.testing.assert_allclose(t.masked_scores[0], t.scaled_scores[0] + add)
    assert t.weights[0, 1, 1] == 0.0


def test_steps_are_in_order_with_formulas_and_arrays_of_the_fields():
    w = attnviz.MultiHeadWeights.random(4, 2, seed=0)
    t = attnviz.trace_attention(np.ones((3, 4)), w, causal=True)
    names = [s.name for s in t.steps]
    assert names == ["x", "q", "k", "v", "scores", "scaled_scores", "masked_scores", "weights",
                     "weighted_values", "z", "concat", "output"]
    for s in t.steps:
        assert s.title and s.formula and s.explanation
        if not s.on_demand:
            assert s.array is getattr(t, s.name)
    np.testing.assert_array_equal(t.step_array("weighted_values", 1), t.weighted_values(1))
    np.testing.assert_array_equal(t.step_array("weights", 1), t.weights[1])
    qkv = attnviz.trace_qkv(np.ones((2, 3)), np.ones((2, 3)), np.ones((2, 2)))
    assert [s.name for s in qkv.steps][-1] == "concat" and qkv.output is qkv.concat
    assert "x" not in [s.name for s in qkv.steps]


def test_cross_attention_adds_a_context_step_and_keys_from_the_context():
    w = attnviz.MultiHeadWeights.random(4, 1, d_context=3, seed=0)
    c = np.arange(6.0).reshape(2, 3)
    t = attnviz.trace_attention(np.ones((5, 4)), w, context=c)
    assert "context" in [s.name for s in t.steps]
    np.testing.assert_allclose(t.k[0], c @ w.w_k[0])
    assert t.weights.shape == (1, 5, 2)


def test_trace_arrays_are_read_only():
    t = attnviz.trace_qkv(np.ones((2, 2)), np.ones((2, 2)), np.ones((2, 2)))
    with pytest.raises(ValueError):
        t.weights[0, 0, 0] = 5


def test_three_d_qkv_is_one_trace_per_head():
    rng = np.random.default_rng(0)
    q, k, v = rng.standard_normal((3, 2, 4, 5))
    t = attnviz.trace_qkv(q, k, v)
    for h in range(2):
        single = attnviz.trace_qkv(q[h], k[h], v[h])
        np.testing.assert_allclose(t.z[h], single.z[0])
    np.testing.assert_allclose(t.concat, np.concatenate([t.z[0], t.z[1]], axis=1))


# ---- weights ------------------------------------------------------------------------------------

def test_random_defaults_follow_the_spec():
    w = attnviz.MultiHeadWeights.random(512, 8)
    assert (w.num_heads, w.d_model, w.d_k, w.d_v, w.d_context, w.d_out) == \
        (8, 512, 64, 64, 512, 512)
    assert not w.has_bias


def test_random_is_seeded():
    a = attnviz.MultiHeadWeights.random(8, 2, seed=7)
    b = attnviz.MultiHeadWeights.random(8, 2, seed=7)
    c = attnviz.MultiHeadWeights.random(8, 2, seed=8)
    np.testing.assert_array_equal(a.w_q, b.w_q)
    assert not np.array_equal(a.w_q, c.w_q)


def test_init_schemes_have_their_distributions():
    d, h = 256, 4
    xavier = attnviz.MultiHeadWeights.random(d, h, init="xavier").w_q
    assert np.abs(xavier).max() <= math.sqrt(6 / (d + d)) + 1e-12
    kaiming = attnviz.MultiHeadWeights.random(d, h, init="kaiming").w_q
    assert kaiming.std() == pytest.approx(math.sqrt(2 / d), rel=0.05)
    gaussian = attnviz.MultiHeadWeights.random(d, h, init="gaussian").w_q
    assert gaussian.std() == pytest.approx(1.0, rel=0.05)


def test_identity_init_gives_each_head_its_slice_of_x():
    w = attnviz.MultiHeadWeights.random(6, 3, init="identity")
    x = np.arange(12.0).reshape(2, 6)
    t = attnviz.trace_attention(x, w)
    for h in range(3):
        np.testing.assert_array_equal(t.q[h], x[:, 2 * h:2 * h + 2])
    np.testing.assert_array_equal(w.w_o, np.eye(6))


def test_tie_qk_makes_keys_equal_queries_and_scores_symmetric():
    w = attnviz.MultiHeadWeights.random(8, 2, tie_qk=True, bias=True, seed=4)
    np.testing.assert_array_equal(w.w_q, w.w_k)
    np.testing.assert_array_equal(w.b_q, w.b_k)
    t = attnviz.trace_attention(np.random.default_rng(4).standard_normal((5, 8)), w)
    np.testing.assert_allclose(t.scores, t.scores.transpose(0, 2, 1), atol=1e-12)


def test_bias_option_draws_biases_of_the_right_shapes():
    w = attnviz.MultiHeadWeights.random(8, 2, d_out=3, bias=True)
    assert w.b_q.shape == (2, 4) and w.b_v.shape == (2, 4) and w.b_o.shape == (3,)
    assert np.abs(w.b_q).max() > 0


def test_replace_changes_one_matrix_and_rechecks():
    w = attnviz.MultiHeadWeights.random(4, 1, seed=0)
    new = w.replace(w_q=np.zeros((1, 4, 4)))
    assert (new.w_q == 0).all() and np.array_equal(new.w_k, w.w_k)
    with raises_message("error.weights.key_width", d_k=3, width=4):   # q 3 wide, k 4
        w.replace(w_q=np.zeros((1, 4, 3)))


def test_weighted_values_step_is_computed_on_access_and_never_kept():
    w = attnviz.MultiHeadWeights.random(6, 3, seed=6)
    t = attnviz.trace_attention(np.random.default_rng(6).standard_normal((4, 6)), w)
    step = t.step("weighted_values")
    assert step.on_demand and step.stored is None
    a, b = step.array, step.array
    assert a.shape == (3, 4, 4, 2) and a is not b
    for h in range(3):
        np.testing.assert_array_equal(a[h], t.weighted_values(h))


def test_the_core_never_imports_streamlit():
    import subprocess
    import sys

    code = ("import sys; import attnviz, attnviz.tutorials.experiments, attnviz.io.report, "
            "attnviz.session.view_files, attnviz.session.in_use, attnviz.plot.model_figures; "
            "print('streamlit' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=__file__.rsplit("/tests/", 1)[0])
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize("n, d_model, heads, dtype", [(5, 10, 1, np.float64),
                                                       (37, 24, 3, np.float64),
                                                       (300, 64, 4, np.float32)])
def test_tied_q_and_k_give_scores_equal_to_their_transpose_bit_for_bit(n, d_model, heads,
                                                                       dtype):
    # Equal W_Q and W_K, given as two separate arrays (not one object), on inputs where BLAS
    # would round s_ij and s_ji differently: the engine still gives an exactly symmetric S.
    rng = np.random.default_rng(n)
    w_q = rng.standard_normal((heads, d_model, 8)).astype(dtype)
    w = attnviz.MultiHeadWeights(w_q, w_q.copy(), rng.standard_normal((heads, d_model, 8)),
                                 np.eye(heads * 8))
    x = rng.standard_normal((n, d_model)).astype(dtype)
    t = attnviz.trace_attention(x, w)
    for h in range(heads):
        assert np.array_equal(t.scores[h], t.scores[h].T)
        assert np.array_equal(t.scaled_scores[h], t.scaled_scores[h].T)
    # and still the same numbers as separate projections, to rounding: within what any
    # summation order may give (a fixed tolerance failed with other BLAS builds, issue 18.21)
    untied = attnviz.trace_attention(x, w.replace(w_k=w_q.copy() + 0.0), context=x.copy())
    logits, weights = _rounding_bounds(x, w_q, 1 / math.sqrt(8), dtype)
    assert (np.abs(t.scaled_scores - untied.scaled_scores.astype(np.float64)) <= logits).all()
    assert (np.abs(t.weights - untied.weights.astype(np.float64)) <= weights).all()


def _rounding_bounds(x, w_q, scale, dtype):
    """How far two evaluations of softmax(scale · (X W)(X W)ᵀ) in `dtype` may differ, whatever
    order BLAS sums in: |fl(a·b) − a·b| ≤ γ_m |a|·|b|, γ_m = m u / (1 − m u) (Higham, Accuracy
    and Stability of Numerical Algorithms, 2nd ed., (3.5)), through the projections, Q Kᵀ and
    the scaling; softmax moves no weight by more than half its row's largest change of logit,
    and its own rounding (exp, sum, divide) adds γ_(n+8) at most. Returns the bounds of the
    scaled scores (H, n, n) and of the weights (H, n, 1), in float64."""
    u = np.finfo(dtype).eps / 2

    def gamma(m):
        return m * u / (1 - m * u)

    d_model, d_k = w_q.shape[1:]
    p = np.abs(x.astype(np.float64)) @ np.abs(w_q.astype(np.float64))   # (H, n, d_k) ≥ |Q|
    dq = gamma(d_model) * p                                   # |Q̂ − Q|
    pa = p + dq                                               # ≥ |Q̂|
    pp = p @ pa.transpose(0, 2, 1)                            # (H, n, n)
    ds = gamma(d_k) * pa @ pa.transpose(0, 2, 1) + 2 * gamma(d_model) * pp   # |Ŝ − S|
    one = scale * ds + u * scale * (pp + ds)                  # one evaluation's scaled scores
    logits = 2 * one                                          # two evaluations apart
    n = x.shape[0]
    weights = 0.5 * logits.max(axis=2, keepdims=True) + 2 * gamma(n + 8)
    return logits, weights


def _formula(t, name):
    return t.step(name).formula


def test_formulas_follow_the_scale_and_the_mask():
    w = attnviz.MultiHeadWeights.random(8, 2, seed=0)
    x = np.random.default_rng(0).standard_normal((4, 8))
    plain = attnviz.trace_attention(x, w)
    assert r"\sqrt{d_k}" in _formula(plain, "weights")
    assert "M_h" not in _formula(plain, "weights")
    unscaled = attnviz.trace_attention(x, w, scale=1.0)
    for name in ("scaled_scores", "weights"):
        assert r"\sqrt" not in _formula(unscaled, name)
        assert r"\frac" not in _formula(unscaled, name)
    other = attnviz.trace_attention(x, w, scale=0.3)
    assert "0.3" in _formula(other, "weights") and r"\sqrt" not in _formula(other, "weights")
    causal = attnviz.trace_attention(x, w, causal=True)
    assert "M_h" in _formula(causal, "weights")
    assert r"-\infty" in _formula(causal, "masked_scores")
    added = attnviz.trace_attention(x, w, attn_mask=np.zeros((4, 4)))
    assert "M_h" in _formula(added, "weights")
    assert r"-\infty" not in _formula(added, "masked_scores")


def test_a_float_mask_that_overflows_is_an_error_not_nan_weights():
    q = k = v = np.ones((2, 2))
    with pytest.raises(OverflowInStep) as caught:                      # 1e308 + 1e308 = inf
        attnviz.trace_qkv(q, k, v, attn_mask=np.full((2, 2), 1e308),
                          key_padding_mask=np.array([1e308, 0.0]))
    assert caught.value.step == "masked_scores"


def test_values_and_w_o_that_overflow_name_the_step():
    big = attnviz.MultiHeadWeights(np.eye(2)[None], np.eye(2)[None], 1e200 * np.eye(2)[None],
                                   1e200 * np.eye(2))
    with pytest.raises(OverflowInStep) as caught:
        attnviz.trace_attention(np.eye(2), big)
    assert caught.value.step == "output"


def test_float16_values_that_overflow_name_v():
    w = attnviz.MultiHeadWeights(np.eye(2)[None], np.eye(2)[None], np.full((1, 2, 2), 6e4),
                                 np.eye(2))
    x = np.full((2, 2), 10.0, dtype=np.float16)
    with pytest.raises(OverflowInStep) as caught:
        attnviz.trace_attention(x, w.replace(w_v=w.w_v.astype(np.float16)))
    assert caught.value.step == "v"
