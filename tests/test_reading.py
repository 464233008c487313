"""Rollout, head statistics and value norms on hand-made attentions whose answers are known
(worked out by hand below, or by a plain Python loop written here), never taken from attnviz.
The same functions on the real model's attentions, against torch, are in
test_pretrained_reading.py."""

import math

import numpy as np
import pytest

import attnviz
from attnviz import AttnvizInputError, attention_rollout, head_stats
from attnviz.core.reading import value_norms
from attnviz.i18n import Message

COLUMNS = ["layer", "head", "entropy", "max_weight", "on_cls", "on_sep", "on_self", "on_prev",
           "on_next"]


def random_attentions(layers=3, heads=4, n=6, seed=0, dtype=np.float64):
    """(layers, heads, n, n) rows drawn from a Dirichlet: positive, each summing to 1."""
    rng = np.random.default_rng(seed)
    return rng.dirichlet(np.ones(n), size=(layers, heads, n)).astype(dtype)


def prev_token_head(n):
    """Each query looks at the token before it; the first, having none, at itself."""
    a = np.zeros((n, n))
    a[0, 0] = 1
    a[np.arange(1, n), np.arange(n - 1)] = 1
    return a


def next_token_head(n):
    a = np.zeros((n, n))
    a[np.arange(n - 1), np.arange(1, n)] = 1
    a[n - 1, n - 1] = 1
    return a


# ---- rollout -------------------------------------------------------------------------------

def test_the_public_names():
    assert attnviz.attention_rollout is attention_rollout and attnviz.head_stats is head_stats
    assert {"attention_rollout", "head_stats"} <= set(dir(attnviz))


def test_rollout_by_hand_with_the_residual():
    # layer 0: A = [[1, 0], [.5, .5]]  →  ½A + ½I = [[1, 0], [.25, .75]] (rows sum to 1)
    # layer 1: A = [[0, 1], [1, 0]]    →  ½A + ½I = [[.5, .5], [.5, .5]]
    # R_1 = Â_1 R_0: each row is ½ [1, 0] + ½ [.25, .75] = [.625, .375]
    att = np.array([[[[1, 0], [0.5, 0.5]]], [[[0, 1], [1, 0]]]])     # (2 layers, 1 head, 2, 2)
    r = attention_rollout(att)
    np.testing.assert_allclose(r[0], [[1, 0], [0.25, 0.75]], atol=1e-15)
    np.testing.assert_allclose(r[1], [[0.625, 0.375], [0.625, 0.375]], atol=1e-15)


def test_rollout_by_hand_without_the_residual_averages_the_heads():
    # two heads, identity and swap: their mean is ½ everywhere; then the identity layer keeps it
    att = np.array([[np.eye(2), [[0, 1], [1, 0]]], [np.eye(2), np.eye(2)]])   # (2, 2, 2, 2)
    r = attention_rollout(att, residual=False)
    np.testing.assert_allclose(r, np.full((2, 2, 2), 0.5), atol=1e-15)
    # with the residual, layer 0 is ½ · ½ + ½ I = [[.75, .25], [.25, .75]]
    np.testing.assert_allclose(attention_rollout(att)[0], [[0.75, 0.25], [0.25, 0.75]])


@pytest.mark.parametrize("residual", [True, False])
def test_rollout_rows_sum_to_one_and_equal_the_product_written_out(residual):
    att = random_attentions(layers=4, heads=3, n=7, seed=1)
    r = attention_rollout(att, residual=residual)
    assert r.shape == (4, 7, 7)
    np.testing.assert_allclose(r.sum(axis=-1), 1.0, atol=1e-12)
    # the product written out as a loop over matrix cells
    n = 7
    expected = None
    for layer in range(4):
        mixed = [[sum(att[layer, h, i, j] for h in range(3)) / 3 for j in range(n)]
                 for i in range(n)]
        if residual:
            mixed = [[0.5 * mixed[i][j] + 0.5 * (i == j) for j in range(n)] for i in range(n)]
            mixed = [[x / sum(row) for x in row] for row in mixed]
        expected = mixed if expected is None else [
            [sum(mixed[i][m] * expected[m][j] for m in range(n)) for j in range(n)]
            for i in range(n)]
        np.testing.assert_allclose(r[layer], expected, atol=1e-12, err_msg=f"layer {layer}")


def test_rollout_renormalises_rows_that_are_off_by_rounding():
    att = random_attentions(layers=2, heads=2, n=4, seed=2)
    att[:, :, :, 0] += 4e-4                                     # rows now sum to 1.0004
    r = attention_rollout(att)
    np.testing.assert_allclose(r.sum(axis=-1), 1.0, atol=1e-12)


def test_rollout_keeps_float32():
    att = random_attentions(seed=3, dtype=np.float32)
    assert attention_rollout(att).dtype == np.float32
    assert attention_rollout(att.astype(np.float64)).dtype == np.float64


@pytest.mark.parametrize("bad, message", [
    (np.full((2, 3, 3), 1 / 3), Message("error.attentions.one_layer", ndim=3, shape=(2, 3, 3))),
    (np.full((1, 1, 2, 3), 1 / 3), Message("error.attentions.not_square", queries=2, keys=3)),
    (np.array([[[[0.5, np.nan], [0.5, 0.5]]]]),
     Message("error.array.nan", name="attentions", index="(0, 0, 0, 1)")),
    (np.array([[[[1.2, -0.2], [0.5, 0.5]]]]), Message(
        "error.attentions.negative",
        where=Message("reading.position.cell", layer=0, head=0, query=0, key=1))),
    (np.array([[[[0.5, 0.5], [0.4, 0.4]]]]), Message(
        "error.attentions.row_sum",
        where=Message("reading.position.row", layer=0, head=0, query=1), total=0.8)),
    ([[[[0.5, 0.5], [1.0]]]], Message("error.attentions.not_numbers")),
    (np.array([[[["a", "b"], ["c", "d"]]]]),
     Message("error.array.dtype", name="attentions", dtype="<U1")),
])
def test_rollout_and_head_stats_explain_bad_attentions(bad, message):
    for read in (attention_rollout,
                 lambda a: head_stats(a, ["a", "b", "c"])):  # the attentions are checked first
        with pytest.raises(AttnvizInputError) as caught:
            read(bad)
        assert caught.value.message == message


# ---- head statistics -------------------------------------------------------------------------

def test_head_stats_of_heads_whose_answers_are_known():
    n = 5
    tokens = ["[CLS]", "the", "cat", "[SEP]", "[SEP]"]
    heads = [np.full((n, n), 1 / n),                         # uniform
             np.eye(n),                                      # each token on itself
             prev_token_head(n), next_token_head(n),
             np.tile(np.eye(n)[0], (n, 1))]                  # everything on [CLS]
    df = head_stats(np.array(heads)[None], tokens)
    assert list(df.columns) == COLUMNS and len(df) == 5
    uniform, identity, prev, nxt, cls = (df.iloc[i] for i in range(5))
    assert uniform.entropy == pytest.approx(math.log2(n))
    assert uniform.max_weight == pytest.approx(1 / n)
    for column in ("on_cls", "on_self", "on_prev", "on_next"):
        assert uniform[column] == pytest.approx(1 / n), column
    assert uniform.on_sep == pytest.approx(2 / n)            # two [SEP] tokens
    assert identity.entropy == 0 and identity.max_weight == 1 and identity.on_self == 1
    assert identity.on_prev == 0 and identity.on_next == 0
    assert identity.on_cls == pytest.approx(1 / n)           # only query 0 is [CLS] itself
    assert prev.on_prev == 1 and prev.on_self == pytest.approx(1 / n) and prev.on_next == 0
    assert nxt.on_next == 1 and nxt.on_self == pytest.approx(1 / n) and nxt.on_prev == 0
    assert cls.on_cls == 1 and cls.entropy == 0 and cls.on_sep == 0


def test_head_stats_rows_are_layer_major():
    # layer l, head h attends uniformly over its first l·3 + h + 1 keys: entropy log2 of that
    layers, heads, n = 2, 3, 8
    att = np.zeros((layers, heads, n, n))
    for layer in range(layers):
        for head in range(heads):
            width = layer * heads + head + 1
            att[layer, head, :, :width] = 1 / width
    df = head_stats(att, [f"t{i}" for i in range(n)])
    assert df[["layer", "head"]].values.tolist() == [[0, 0], [0, 1], [0, 2], [1, 0], [1, 1],
                                                     [1, 2]]
    np.testing.assert_allclose(df.entropy, np.log2(np.arange(1, 7)), atol=1e-12)
    assert df.on_cls.tolist() == [0.0] * 6                   # no [CLS] among the tokens


def test_head_stats_equal_a_plain_loop():
    att = random_attentions(layers=2, heads=3, n=6, seed=4)
    tokens = ["[CLS]", "a", "b", "[SEP]", "c", "[SEP]"]
    df = head_stats(att, tokens)
    row = 0
    for layer in range(2):
        for head in range(3):
            a = att[layer, head].tolist()
            expected = {
                "entropy": sum(-sum(p * math.log2(p) for p in r if p > 0) for r in a) / 6,
                "max_weight": sum(max(r) for r in a) / 6,
                "on_cls": sum(r[0] for r in a) / 6,
                "on_sep": sum(r[3] + r[5] for r in a) / 6,
                "on_self": sum(a[i][i] for i in range(6)) / 6,
                "on_prev": sum(a[i][i - 1] for i in range(1, 6)) / 5,
                "on_next": sum(a[i][i + 1] for i in range(5)) / 5,
            }
            got = df.iloc[row]
            assert (got["layer"], got["head"]) == (layer, head)
            for column, value in expected.items():
                assert got[column] == pytest.approx(value, abs=1e-12), (layer, head, column)
            row += 1


def test_head_stats_of_one_token_leave_previous_and_next_undefined():
    df = head_stats(np.ones((1, 2, 1, 1)), ["[CLS]"])
    assert df.entropy.tolist() == [0.0, 0.0] and df.on_self.tolist() == [1.0, 1.0]
    assert df.on_prev.isna().all() and df.on_next.isna().all()


@pytest.mark.parametrize("tokens, message", [
    (["a", "b"], Message("error.tokens.count", tokens=2, positions=3)),
    ("abc", Message("error.tokens.not_a_list", type="str")),
    ([1, 2, 3], Message("error.tokens.not_strings")),
])
def test_head_stats_explain_bad_tokens(tokens, message):
    with pytest.raises(AttnvizInputError) as caught:
        head_stats(np.full((1, 1, 3, 3), 1 / 3), tokens)
    assert caught.value.message == message


# ---- value norms ----------------------------------------------------------------------------

def test_value_norms_by_hand():
    # two heads, d_v = 1, d_out = 2: head 0 meets W_O's row 0, head 1 its row 1
    v = np.array([[[3.0], [-4.0]], [[1.0], [2.0]]])          # (H=2, n_k=2, d_v=1)
    w_o = np.array([[1.0, 1.0], [0.0, 2.0]])                 # (H·d_v = 2, d_out = 2)
    weights = np.array([[[0.25, 0.75]], [[0.5, 0.5]]])       # (H, n_q=1, n_k)
    # head 0: f = 3·[1, 1], −4·[1, 1] → norms 3√2, 4√2; head 1: f = [0, 2], [0, 4] → 2, 4
    expected = [[[0.25 * 3 * math.sqrt(2), 0.75 * 4 * math.sqrt(2)]], [[0.5 * 2, 0.5 * 4]]]
    np.testing.assert_allclose(value_norms(weights, v, w_o), expected, atol=1e-15)


def test_row_metrics_equal_the_plain_reading_of_causal_weights():
    """row_metrics' blocks and running sums against the plain reading written here: log₂ of
    every weight (0 log 0 = 0), each row sorted over all n keys and np.cumsum along it, in the
    weights' float32. Causal softmax rows of 75 queries (more than one block of rows), some
    sharp enough that weights underflow to 0 and tie; the counts are the same, not close."""
    from attnviz.core.reading import row_metrics

    rng = np.random.default_rng(1)
    heads, n = 3, 75
    logits = rng.normal(size=(heads, n, n)) * rng.choice([1.0, 8.0, 60.0], size=(heads, n, 1))
    logits[np.broadcast_to(np.triu(np.ones((n, n), bool), k=1), logits.shape)] = -np.inf
    a = np.exp(logits - logits.max(axis=-1, keepdims=True)).astype(np.float32)
    a /= a.sum(axis=-1, keepdims=True)                                   # (H, n, n) float32
    punctuation = rng.random(n) < 0.3
    assert (a == 0).sum() > heads * n * (n - 1) // 2                     # underflowed zeros too
    got = row_metrics(a, punctuation)
    logs = np.log2(np.where(a > 0, a, 1)).astype(np.float64)
    ranked = np.sort(a, axis=-1)
    held = np.cumsum(ranked, axis=-1)                                    # float32, as the rows
    i = np.arange(n)
    expected = {"entropy": -(a * logs).sum(axis=-1),
                "sparsity": n - (held <= np.float32(0.1) * held[..., -1:]).sum(axis=-1),
                "sink": a[..., 0], "distance": i - a.astype(np.float64) @ i,      # rows sum to 1
                "punctuation": a[..., punctuation].sum(axis=-1, dtype=np.float64),
                "max_weight": ranked[..., -1]}
    for m, (name, values) in enumerate(expected.items()):
        if name in ("sparsity", "sink", "max_weight"):
            np.testing.assert_array_equal(got[m], values, err_msg=name)
        else:
            np.testing.assert_allclose(got[m], values, rtol=1e-12, atol=1e-12, err_msg=name)
