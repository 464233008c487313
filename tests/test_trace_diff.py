"""attnviz.diff on hand-made traces: every expected change is worked out here (by hand or with
a plain softmax and KL written in the test), never read off attnviz's own diff."""

import math

import numpy as np
import pytest

import attnviz
from attnviz import MultiHeadWeights, diff, trace_attention, trace_qkv
from tests.message_helpers import raises_message

X = np.array([[1.0, 0.0, 1.0, 0.0], [0.0, 2.0, 0.0, 2.0], [1.0, 1.0, 1.0, 1.0]])  # (3, 4)


def plain_softmax(row):
    m = max(row)
    e = [math.exp(s - m) for s in row]
    return [v / sum(e) for v in e]


def plain_kl_bits(p, q):
    """Σ p log2(p / q) over the p > 0, +inf where q is 0 but p is not."""
    total = 0.0
    for a, b in zip(p, q):
        if a > 0:
            total += math.inf if b == 0 else a * math.log2(a / b)
    return total


def test_diff_is_public():
    assert attnviz.diff is diff and "diff" in dir(attnviz)


def test_a_trace_against_itself_changes_nothing():
    t = trace_attention(X, MultiHeadWeights.random(4, 2, seed=0, bias=True))
    d = diff(t, t)
    assert d.names == [s.name for s in t.steps]
    assert all(v == 0.0 for v in d.max_abs.values())
    for s in d.steps:
        assert not s.delta.any(), s.name
        assert s.delta.shape == t.step(s.name).array.shape
    assert d.kl.shape == (2, 3) and not d.kl.any()
    assert d.only_in_a == d.only_in_b == ()


def test_one_changed_value_moves_only_what_it_should():
    # one head; v[1, 0] goes from 5 to 7: the weights stay, Z's column 0 moves by A[i, 1] · 2
    q = np.array([[1.0, 0.0], [0.0, 1.0]])
    k = np.array([[1.0, 1.0], [0.0, 2.0]])
    v_a = np.array([[1.0, 2.0], [5.0, 3.0]])
    v_b = v_a.copy()
    v_b[1, 0] = 7.0
    d = diff(trace_qkv(q, k, v_a), trace_qkv(q, k, v_b))
    weights = [plain_softmax([sum(qi * kj for qi, kj in zip(q[i], k[j])) / math.sqrt(2)
                              for j in range(2)]) for i in range(2)]
    expected_v = np.zeros((1, 2, 2))
    expected_v[0, 1, 0] = 2.0
    np.testing.assert_array_equal(d["v"].delta, expected_v)
    for name in ("q", "k", "scores", "scaled_scores", "weights"):
        assert d[name].max_abs == 0.0, name
    expected_z = [[[weights[i][1] * 2.0, 0.0] for i in range(2)]]
    np.testing.assert_allclose(d["z"].delta, expected_z, atol=1e-12)
    assert d["z"].max_abs == pytest.approx(2.0 * max(weights[0][1], weights[1][1]))
    expected_wv = np.zeros((1, 2, 2, 2))                      # (head, query, key, feature)
    expected_wv[0, :, 1, 0] = [2.0 * weights[i][1] for i in range(2)]
    wv = d["weighted_values"]
    assert wv.stored is None and wv.axes == ("head", "query", "key", "feature")
    np.testing.assert_allclose(wv.delta, expected_wv, atol=1e-12)
    assert wv.max_abs == pytest.approx(expected_wv.max())
    np.testing.assert_array_equal(d.kl, 0.0)


def test_one_changed_query_weight_against_the_formula_written_out():
    w_a = MultiHeadWeights.random(4, 2, seed=3)
    w_q = np.array(w_a.w_q)
    w_q[1, 2, 0] += 0.5                                      # head 1, input row 2, column 0
    w_b = w_a.replace(w_q=w_q)
    d = diff(trace_attention(X, w_a), trace_attention(X, w_b))

    expected_q = np.zeros((2, 3, 2))
    expected_q[1, :, 0] = 0.5 * X[:, 2]
    np.testing.assert_allclose(d["q"].delta, expected_q, atol=1e-12)
    assert d["k"].max_abs == d["v"].max_abs == d["x"].max_abs == 0.0

    def weights_of(w):                                       # (H, n, n), written out
        out = []
        for h in range(2):
            q, k = X @ np.array(w.w_q[h]), X @ np.array(w.w_k[h])
            out.append([plain_softmax([float(q[i] @ k[j]) / math.sqrt(2) for j in range(3)])
                        for i in range(3)])
        return np.array(out)

    a, b = weights_of(w_a), weights_of(w_b)
    np.testing.assert_allclose(d["weights"].delta, b - a, atol=1e-12)
    assert d["weights"].max_abs == pytest.approx(np.abs(b - a).max())
    assert not d["weights"].delta[0].any()                   # head 0 did not change
    expected_kl = [[plain_kl_bits(a[h, i], b[h, i]) for i in range(3)] for h in range(2)]
    np.testing.assert_allclose(d.kl, expected_kl, atol=1e-12)
    assert d.kl[1, 0] > 0 and d.kl[1, 2] > 0 and not d.kl[0].any()
    assert d.kl[1, 1] == 0.0                                 # X[1, 2] = 0: query 1 is unchanged


def test_kl_is_in_bits_and_not_symmetric():
    rng = np.random.default_rng(7)
    q, k, v = (rng.standard_normal((2, 4, 3)) for _ in range(3))
    a, b = trace_qkv(q, k, v), trace_qkv(q * 1.7, k, v)
    ab, ba = diff(a, b).kl, diff(b, a).kl
    for h in range(2):
        for i in range(4):
            assert ab[h, i] == pytest.approx(plain_kl_bits(a.weights[h, i], b.weights[h, i]))
            assert ba[h, i] == pytest.approx(plain_kl_bits(b.weights[h, i], a.weights[h, i]))
    assert not np.allclose(ab, ba)


def test_switching_a_mask_on_lists_the_new_step_and_gives_infinite_kl():
    w = MultiHeadWeights.random(4, 1, seed=1)
    d = diff(trace_attention(X, w), trace_attention(X, w, causal=True))
    assert d.only_in_b == ("masked_scores",) and d.only_in_a == ()
    assert "masked_scores" not in d.names
    # rows 0 and 1 attended to keys that the causal mask now removes: KL(a‖b) = ∞; row 2 keeps
    # every key, and the weights did not change there
    assert np.isinf(d.kl[0, :2]).all() and d.kl[0, 2] == 0.0


def test_masked_cells_in_both_traces_do_not_change():
    w_a = MultiHeadWeights.random(4, 1, seed=2)
    w_b = w_a.replace(w_q=np.array(w_a.w_q) * 2)
    d = diff(trace_attention(X, w_a, causal=True), trace_attention(X, w_b, causal=True))
    delta = d["masked_scores"].delta
    assert np.isfinite(delta).all() and np.isfinite(d["masked_scores"].max_abs)
    assert delta[0, 0, 1] == delta[0, 0, 2] == delta[0, 1, 2] == 0.0   # masked in both
    np.testing.assert_allclose(delta[0, 2], d["scaled_scores"].delta[0, 2])


def test_a_cell_masked_in_only_one_trace_is_an_infinite_change():
    w = MultiHeadWeights.random(4, 1, seed=4)
    only_01, only_02 = np.zeros((3, 3), bool), np.zeros((3, 3), bool)
    only_01[0, 1], only_02[0, 2] = True, True
    d = diff(trace_attention(X, w, attn_mask=only_01), trace_attention(X, w, attn_mask=only_02))
    delta = d["masked_scores"].delta[0]
    assert delta[0, 1] == np.inf and delta[0, 2] == -np.inf    # unmasked, masked
    assert d["masked_scores"].max_abs == np.inf
    assert np.count_nonzero(delta) == 2


def test_a_trace_without_projections_is_compared_on_the_steps_both_have():
    w = MultiHeadWeights.random(4, 2, seed=5)
    full = trace_attention(X, w)
    entered = trace_qkv(full.q, full.k, full.v)
    d = diff(full, entered)
    assert d.only_in_a == ("x", "output") and d.only_in_b == ()
    assert all(v == 0.0 for v in d.max_abs.values())


def test_traces_of_different_shapes_are_refused_naming_the_step():
    w = MultiHeadWeights.random(4, 2, seed=6)
    with raises_message("error.diff.shapes", name="'x'", shape_a="(3, 4)", shape_b="(2, 4)"):
        diff(trace_attention(X, w), trace_attention(X[:2], w))
    one_head = MultiHeadWeights.random(4, 1, seed=6)
    with raises_message("error.diff.shapes", name="'q'", shape_a="(2, 3, 2)",
                        shape_b="(1, 3, 4)"):
        diff(trace_attention(X, w), trace_attention(X, one_head))
    q = np.ones((1, 3, 2))
    with raises_message("error.diff.shapes", name="'v'", shape_a="(1, 3, 2)",
                        shape_b="(1, 3, 5)"):
        diff(trace_qkv(q, q, np.ones((1, 3, 2))), trace_qkv(q, q, np.ones((1, 3, 5))))


def test_bad_arguments_are_explained():
    t = trace_attention(X, MultiHeadWeights.random(4, 1, seed=0))
    with raises_message("error.diff.not_a_trace", name="trace_b", type="ndarray"):
        diff(t, t.weights)
    with raises_message("error.diff.no_step", name="'nope'"):
        diff(t, t)["nope"]


def test_the_weighted_values_change_is_the_max_over_every_query_block(monkeypatch):
    """Compared a block of queries at a time (here 3 queries a block, the last one short): the
    max of the whole change, written out over every (query, key, feature)."""
    import attnviz.core.diff as diff_module

    x = np.random.default_rng(5).standard_normal((7, 4))
    w_a = MultiHeadWeights.random(4, 2, seed=5)
    w_b = w_a.replace(w_v=np.array(w_a.w_v) * 1.5)
    a, b = trace_attention(x, w_a), trace_attention(x, w_b)
    monkeypatch.setattr(diff_module, "BLOCK_CELLS", 3 * 7 * 2)        # 3 queries × n_k × d_v
    expected = max(abs(b.weights[h, i, j] * b.v[h, j, f] - a.weights[h, i, j] * a.v[h, j, f])
                   for h in range(2) for i in range(7) for j in range(7) for f in range(2))
    assert diff(a, b)["weighted_values"].max_abs == expected
