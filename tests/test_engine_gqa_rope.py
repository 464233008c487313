"""Grouped-query attention and rotary positions (issue 22), held to torch, transformers' Llama
and a direct cos/sin computation; the numbers never come from attnviz itself."""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import attnviz
from attnviz import MultiHeadWeights
from attnviz.core import engine
from tests.message_helpers import raises_message


@st.composite
def gqa_shapes(draw):
    h_kv = draw(st.integers(1, 3))
    h = h_kv * draw(st.integers(1, 3))
    d_k = 2 * draw(st.integers(1, 4))                 # even, so RoPE can turn pairs
    return dict(h=h, h_kv=h_kv, d_k=d_k, d_v=draw(st.integers(1, 5)),
                d_model=draw(st.integers(1, 9)), n_q=draw(st.integers(1, 7)),
                n_k=draw(st.integers(1, 7)), seed=draw(st.integers(0, 2**16)),
                bias=draw(st.booleans()), causal=draw(st.booleans()))


def _weights(s, dtype=np.float32):
    rng = np.random.default_rng(s["seed"])
    h, h_kv, d_k, d_v, d = s["h"], s["h_kv"], s["d_k"], s["d_v"], s["d_model"]
    sd, sd_o = 1 / math.sqrt(d), 1 / math.sqrt(h * d_v)   # outputs of size ~1, as in a model
    arrays = dict(w_q=rng.normal(0, sd, (h, d, d_k)), w_k=rng.normal(0, sd, (h_kv, d, d_k)),
                  w_v=rng.normal(0, sd, (h_kv, d, d_v)), w_o=rng.normal(0, sd_o, (h * d_v, d)))
    if s["bias"]:
        arrays.update(b_q=rng.normal(0, 0.1, (h, d_k)), b_k=rng.normal(0, 0.1, (h_kv, d_k)),
                      b_v=rng.normal(0, 0.1, (h_kv, d_v)), b_o=rng.normal(0, 0.1, d))
    arrays = {k: v.astype(dtype) for k, v in arrays.items()}
    return arrays, rng


def _torch_projection(x, w, b):
    """x (n, d) and per-head w (heads, d, d_out) → (1, heads, n, d_out), computed by torch."""
    import torch

    out = torch.einsum("nd,hde->hne", torch.tensor(x), torch.tensor(w))
    if b is not None:
        out = out + torch.tensor(b)[:, None, :]
    return out[None]


def _bottom_right_causal(n_q, n_k):
    """True = allowed: query i (the last n_q of n_k positions) sees keys ≤ its position."""
    import torch

    return torch.tensor(np.tril(np.ones((n_q, n_k), dtype=bool), k=n_k - n_q))


# ---- grouped-query attention ------------------------------------------------------------------

@pytest.mark.reference
@given(gqa_shapes())
def test_gqa_agrees_with_torch_sdpa_enable_gqa(torch, s):
    arrays, rng = _weights(s)
    w = MultiHeadWeights(**arrays)
    x = rng.standard_normal((s["n_q"], s["d_model"])).astype(np.float32)
    ctx = rng.standard_normal((s["n_k"], s["d_model"])).astype(np.float32)
    causal = s["causal"] and s["n_q"] <= s["n_k"]
    # torch's is_causal is top-left aligned, as attnviz's causal=True
    t = attnviz.trace_attention(x, w, context=ctx, causal=causal)
    q = _torch_projection(x, arrays["w_q"], arrays.get("b_q"))
    k = _torch_projection(ctx, arrays["w_k"], arrays.get("b_k"))
    v = _torch_projection(ctx, arrays["w_v"], arrays.get("b_v"))
    z = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal,
                                                         enable_gqa=True)[0]
    np.testing.assert_allclose(t.z, z.numpy(), atol=1e-5)
    concat = z.permute(1, 0, 2).reshape(s["n_q"], -1)
    out = concat @ torch.tensor(arrays["w_o"])
    if s["bias"]:
        out = out + torch.tensor(arrays["b_o"])
    np.testing.assert_allclose(t.output, out.numpy(), atol=1e-5)
    # the weights: torch's repeat_interleave of the key heads, softmax
    k_rep = k.repeat_interleave(s["h"] // s["h_kv"], dim=1)
    scores = q @ k_rep.transpose(-1, -2) / math.sqrt(s["d_k"])
    if causal:
        scores = scores.masked_fill(~torch.tensor(
            np.tril(np.ones((s["n_q"], s["n_k"]), dtype=bool))), float("-inf"))
    np.testing.assert_allclose(t.weights, torch.softmax(scores, -1)[0].numpy(), atol=1e-5)
    assert t.k.shape == (s["h"], s["n_k"], s["d_k"])
    assert t.k_shared.shape == (s["h_kv"], s["n_k"], s["d_k"])
    np.testing.assert_allclose(t.k_shared, k[0].numpy(), atol=1e-5)
    np.testing.assert_allclose(t.v_shared, v[0].numpy(), atol=1e-5)


def test_query_head_h_reads_key_value_head_h_over_group():
    s = dict(h=6, h_kv=2, d_k=4, d_v=3, d_model=5, seed=1, bias=True)
    arrays, rng = _weights(s, np.float64)
    w = MultiHeadWeights(**arrays)
    assert (w.num_heads, w.num_kv_heads) == (6, 2)
    assert [w.kv_head(h) for h in range(6)] == [0, 0, 0, 1, 1, 1]
    x = rng.standard_normal((4, 5))
    t = attnviz.trace_attention(x, w)
    assert t.num_kv_heads == 2 and [t.kv_head(h) for h in range(6)] == [0, 0, 0, 1, 1, 1]
    for h in range(6):   # head h alone, written out: x W_q[h] against x W_k[h // 3]
        q = x @ arrays["w_q"][h] + arrays["b_q"][h]
        k = x @ arrays["w_k"][h // 3] + arrays["b_k"][h // 3]
        v = x @ arrays["w_v"][h // 3] + arrays["b_v"][h // 3]
        e = np.exp(q @ k.T / 2.0)
        a = e / e.sum(1, keepdims=True)
        np.testing.assert_allclose(t.weights[h], a, atol=1e-12)
        np.testing.assert_allclose(t.z[h], a @ v, atol=1e-12)
        np.testing.assert_allclose(t.step_array("k", h), k, atol=1e-12)


@pytest.mark.parametrize("h, h_kv", [(4, 3), (9, 2), (6, 4)])
def test_key_value_heads_that_do_not_divide_the_query_heads_are_refused(h, h_kv):
    rng = np.random.default_rng(0)
    with raises_message("error.weights.kv_heads_divide", kv=h_kv, heads=h):
        MultiHeadWeights(rng.standard_normal((h, 4, 2)), rng.standard_normal((h_kv, 4, 2)),
                         rng.standard_normal((h_kv, 4, 2)), rng.standard_normal((2 * h, 4)))
    with raises_message("error.weights.num_kv_heads_divide", kv=h_kv, heads=h):
        MultiHeadWeights.random(4 * h, h, num_kv_heads=h_kv)


def test_key_and_value_heads_must_match_each_other_and_their_biases():
    rng = np.random.default_rng(0)
    with raises_message("error.weights.kv_heads_differ", k=2, v=1):
        MultiHeadWeights(rng.standard_normal((4, 4, 2)), rng.standard_normal((2, 4, 2)),
                         rng.standard_normal((1, 4, 2)), rng.standard_normal((8, 4)))
    with raises_message("error.weights.shape", name="b_k", want="(2, 2)", shape="(4, 2)"):
        MultiHeadWeights(rng.standard_normal((4, 4, 2)), rng.standard_normal((2, 4, 2)),
                         rng.standard_normal((2, 4, 2)), rng.standard_normal((8, 4)),
                         b_k=np.zeros((4, 2)))


def test_random_draws_key_value_heads_and_keeps_ordinary_weights_as_before():
    w = MultiHeadWeights.random(12, 6, num_kv_heads=2, seed=3, bias=True)
    assert w.w_q.shape == (6, 12, 2) and w.w_k.shape == (2, 12, 2) and w.w_v.shape == (2, 12, 2)
    assert w.b_k.shape == (2, 2) and w.b_v.shape == (2, 2) and w.w_o.shape == (12, 12)
    # num_kv_heads=None and num_kv_heads=num_heads draw the same numbers
    a = MultiHeadWeights.random(12, 6, seed=3, bias=True)
    b = MultiHeadWeights.random(12, 6, num_kv_heads=6, seed=3, bias=True)
    for name in ("w_q", "w_k", "w_v", "w_o", "b_k"):
        assert np.array_equal(getattr(a, name), getattr(b, name))
    assert a.num_kv_heads == 6
    with raises_message("error.weights.tie_qk_heads", kv=3, heads=6):
        MultiHeadWeights.random(12, 6, num_kv_heads=3, tie_qk=True)


def test_gqa_weights_cannot_become_torch_multihead_attention():
    w = MultiHeadWeights.random(8, 4, num_kv_heads=2)
    with raises_message("error.torch.gqa", heads=4, kv_heads=2):
        w.to_torch()


def test_gqa_trace_saves_and_its_weights_load_back(tmp_path):
    w = MultiHeadWeights.random(8, 4, num_kv_heads=2, seed=5, bias=True)
    x = np.random.default_rng(5).standard_normal((3, 8))
    t = attnviz.trace_attention(x, w, rope=10000.0, causal=True)
    t.to_npz(tmp_path / "t.npz")
    back = MultiHeadWeights.from_npz(tmp_path / "t.npz")
    assert back.num_kv_heads == 2
    again = attnviz.trace_attention(x, back, rope=10000.0, causal=True)
    np.testing.assert_array_equal(again.weights, t.weights)
    with np.load(tmp_path / "t.npz") as f:
        assert f["q_rotated"].shape == (4, 3, 2) and f["k_rotated"].shape == (4, 3, 2)
    assert '"q_rotated"' in t.to_json()


def test_from_qkv_uses_a_read_only_memory_map_in_place(tmp_path):
    rng = np.random.default_rng(2)
    fused = rng.standard_normal((6, (4 + 2 * 2) * 2)).astype(np.float32)   # H 4, H_kv 2, d_k 2
    np.save(tmp_path / "qkv.npy", fused)
    mapped = np.load(tmp_path / "qkv.npy", mmap_mode="r")
    w_o = rng.standard_normal((8, 6)).astype(np.float32)
    w = MultiHeadWeights.from_qkv(mapped, w_o, num_heads=4, num_kv_heads=2)
    assert np.shares_memory(w.w_q, mapped) and np.shares_memory(w.w_k, mapped)
    assert np.shares_memory(w.stacked("qkv", np.float32)[0], mapped)
    plain = MultiHeadWeights(fused[:, :8].reshape(6, 4, 2).transpose(1, 0, 2),
                             fused[:, 8:12].reshape(6, 2, 2).transpose(1, 0, 2),
                             fused[:, 12:].reshape(6, 2, 2).transpose(1, 0, 2), w_o)
    x = rng.standard_normal((5, 6)).astype(np.float32)
    np.testing.assert_allclose(attnviz.trace_attention(x, w).output,
                               attnviz.trace_attention(x, plain).output, atol=1e-6)
    writable = MultiHeadWeights.from_qkv(fused, w_o, num_heads=4, num_kv_heads=2)
    fused[:] = 0                                       # the caller's array changes later…
    assert not np.shares_memory(writable.w_q, fused)   # …but the weights were copied
    assert np.abs(writable.w_q).sum() > 0


# ---- rotary positions ----------------------------------------------------------------------

def _rope_by_hand(x, positions, base):
    """Each pair (i, i + d/2) of row p turned by p · base^(−2i/d), one pair at a time."""
    d = x.shape[-1]
    out = np.empty_like(x, dtype=np.float64)
    for p_index, p in enumerate(positions):
        for i in range(d // 2):
            angle = p * base ** (-2.0 * i / d)
            a, b = x[..., p_index, i], x[..., p_index, i + d // 2]
            out[..., p_index, i] = a * math.cos(angle) - b * math.sin(angle)
            out[..., p_index, i + d // 2] = b * math.cos(angle) + a * math.sin(angle)
    return out


@given(gqa_shapes(), st.sampled_from([10000.0, 100000.0, 500.0]), st.integers(0, 40))
def test_rope_turns_each_feature_pair_by_position_times_frequency(s, base, offset):
    arrays, rng = _weights(s, np.float64)
    w = MultiHeadWeights(**arrays)
    x = rng.standard_normal((s["n_q"], s["d_model"]))
    t = attnviz.trace_attention(x, w, rope=base, positions=offset, causal=s["causal"])
    positions = np.arange(offset, offset + s["n_q"])
    np.testing.assert_allclose(t.q_rotated, _rope_by_hand(t.q, positions, base), atol=1e-12)
    np.testing.assert_allclose(t.k_rotated, _rope_by_hand(t.k, positions, base), atol=1e-12)
    np.testing.assert_array_equal(t.q_positions, positions)
    # the scores are the rotated q and k's dot products; the unrotated q and k stay
    np.testing.assert_allclose(t.scores, t.q_rotated @ t.k_rotated.transpose(0, 2, 1),
                               atol=1e-10)
    plain = attnviz.trace_attention(x, w, causal=s["causal"])
    np.testing.assert_array_equal(t.q, plain.q)
    np.testing.assert_array_equal(t.k, plain.k)
    # the angles a page shows
    expected = np.array([[p * base ** (-2 * i / s["d_k"]) for i in range(s["d_k"] // 2)]
                         for p in positions])
    np.testing.assert_allclose(t.rope_angles, expected, rtol=1e-12)


@pytest.mark.reference
@given(gqa_shapes(), st.integers(0, 60))
def test_rope_agrees_with_transformers_apply_rotary_pos_emb(torch, s, offset):
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import (LlamaRotaryEmbedding,
                                                          apply_rotary_pos_emb)

    arrays, rng = _weights(s)
    w = MultiHeadWeights(**arrays)
    x = rng.standard_normal((s["n_q"], s["d_model"])).astype(np.float32)
    ctx = rng.standard_normal((s["n_k"], s["d_model"])).astype(np.float32)
    # a new token after a cache: queries at offset …, keys at 0 … n_k − 1
    t = attnviz.trace_attention(x, w, context=ctx, rope=100000.0, positions=offset)
    config = LlamaConfig(hidden_size=s["h"] * s["d_k"], num_attention_heads=s["h"],
                         num_key_value_heads=s["h_kv"], head_dim=s["d_k"],
                         rope_theta=100000.0, max_position_embeddings=128)
    rotary = LlamaRotaryEmbedding(config)
    q = _torch_projection(x, arrays["w_q"], arrays.get("b_q"))
    k = _torch_projection(ctx, arrays["w_k"], arrays.get("b_k"))
    cos_q, sin_q = rotary(q, torch.arange(offset, offset + s["n_q"])[None])
    cos_k, sin_k = rotary(k, torch.arange(s["n_k"])[None])
    q_rot, _ = apply_rotary_pos_emb(q, q, cos_q, sin_q)
    _, k_rot = apply_rotary_pos_emb(k, k, cos_k, sin_k)
    np.testing.assert_allclose(t.q_rotated, q_rot[0].numpy(), atol=1e-5)
    np.testing.assert_allclose(t.k_shared, k[0].numpy(), atol=1e-5)
    np.testing.assert_allclose(t.k_rotated[::s["h"] // s["h_kv"]], k_rot[0].numpy(), atol=1e-5)
    z = torch.nn.functional.scaled_dot_product_attention(
        q_rot, k_rot, _torch_projection(ctx, arrays["w_v"], arrays.get("b_v")), enable_gqa=True)
    np.testing.assert_allclose(t.z, z[0].numpy(), atol=1e-5)


@pytest.mark.reference
@given(gqa_shapes())
def test_a_layer_agrees_with_transformers_llama_attention(torch, s):
    """GQA, RoPE and the causal mask together, against transformers' own LlamaAttention
    (eager) with the same weights: its attention weights and its output."""
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaAttention, LlamaRotaryEmbedding

    h, h_kv, d_k, n = s["h"], s["h_kv"], s["d_k"], s["n_q"]
    d_model = h * d_k
    s = dict(s, d_model=d_model, d_v=d_k, bias=False)
    arrays, rng = _weights(s)
    config = LlamaConfig(hidden_size=d_model, num_attention_heads=h, num_key_value_heads=h_kv,
                         head_dim=d_k, rope_theta=10000.0, attention_bias=False,
                         max_position_embeddings=64, _attn_implementation="eager")
    layer = LlamaAttention(config, layer_idx=0).eval()
    with torch.no_grad():   # torch's Linear keeps (out, in): per-head (in, d) blocks, stacked
        for name, proj in (("w_q", layer.q_proj), ("w_k", layer.k_proj), ("w_v", layer.v_proj)):
            proj.weight.copy_(torch.tensor(arrays[name]).permute(0, 2, 1).reshape(-1, d_model))
        layer.o_proj.weight.copy_(torch.tensor(arrays["w_o"]).T)
    x = rng.standard_normal((n, d_model)).astype(np.float32)
    hidden = torch.tensor(x)[None]
    cos_sin = LlamaRotaryEmbedding(config)(hidden, torch.arange(n)[None])
    mask = torch.zeros(1, 1, n, n).masked_fill(
        torch.triu(torch.ones(n, n, dtype=torch.bool), 1), float("-inf"))
    with torch.no_grad():
        out, weights = layer(hidden, position_embeddings=cos_sin, attention_mask=mask)
    t = attnviz.trace_attention(x, MultiHeadWeights(**arrays), causal=True, rope=10000.0)
    np.testing.assert_allclose(t.weights, weights[0].numpy(), atol=1e-5)
    np.testing.assert_allclose(t.output, out[0].numpy(), atol=1e-5)


def test_rope_scores_depend_on_the_distance_only():
    # the same q and k at positions (m, n) and (m + s, n + s): the same score
    rng = np.random.default_rng(7)
    q, k, v = rng.standard_normal((1, 1, 8)), rng.standard_normal((1, 1, 8)), np.ones((1, 1, 1))
    scores = [attnviz.trace_qkv(q, k, v, rope=10000.0, positions=[m],
                                context_positions=[m - 3]).scores[0, 0, 0]
              for m in (3, 10, 57, 400)]
    np.testing.assert_allclose(scores, scores[0], rtol=1e-12)
    # …and not a constant: another distance gives another score
    other = attnviz.trace_qkv(q, k, v, rope=10000.0, positions=[10],
                              context_positions=[2]).scores[0, 0, 0]
    assert abs(other - scores[0]) > 1e-3


def test_a_new_token_after_a_cache_sees_what_the_full_sequence_shows_for_its_row():
    w = MultiHeadWeights.random(16, 4, num_kv_heads=2, seed=4)
    x = np.random.default_rng(4).standard_normal((6, 16))
    full = attnviz.trace_attention(x, w, causal=True, rope=10000.0)
    last = attnviz.trace_attention(x[-1:], w, context=x, rope=10000.0, positions=5)
    np.testing.assert_allclose(last.weights[:, 0], full.weights[:, -1], atol=1e-12)
    np.testing.assert_allclose(last.output[0], full.output[-1], atol=1e-12)
    np.testing.assert_array_equal(last.k_positions, np.arange(6))


def test_rope_steps_come_after_the_projections_and_plain_traces_are_unchanged():
    w = MultiHeadWeights.random(8, 2, seed=0)
    x = np.random.default_rng(0).standard_normal((3, 8))
    plain = attnviz.trace_attention(x, w)
    assert [s.name for s in plain.steps] == [
        "x", "q", "k", "v", "scores", "scaled_scores", "weights", "weighted_values", "z",
        "concat", "output"]
    assert plain.q_rotated is None and plain.rope_angles is None and plain.kv_group == 1
    rotated = attnviz.trace_attention(x, w, rope=10000.0)
    names = [s.name for s in rotated.steps]
    assert names[:6] == ["x", "q", "k", "v", "q_rotated", "k_rotated"]
    step = rotated.step("q_rotated")
    assert "10000" in step.formula and r"\cos" in step.formula and step.explanation
    assert step.per_head and rotated.step_array("k_rotated", 1).shape == (3, 4)
    assert r"\tilde{Q}_h" in rotated.step("weights").formula


def test_tied_q_and_k_stay_exactly_symmetric_with_rope():
    w = MultiHeadWeights.random(8, 2, seed=0, tie_qk=True)
    x = np.random.default_rng(1).standard_normal((9, 8))
    t = attnviz.trace_attention(x, w, rope=10000.0)
    for h in range(2):
        assert np.array_equal(t.scores[h], t.scores[h].T)


@pytest.mark.parametrize("kwargs, msg_id, params", [
    (dict(rope=True), "error.engine.rope_base", dict(value="True")),
    (dict(rope=float("nan")), "error.engine.rope_base", dict(value="nan")),
    (dict(rope=0.5), "error.engine.rope_base", dict(value="0.5")),
    (dict(positions=3), "error.engine.positions_without_rope", {}),
    (dict(rope=10000.0, positions=[0, 1]), "error.engine.positions",
     dict(name="positions", n=3)),
    (dict(rope=10000.0, positions=-1), "error.engine.positions_negative",
     dict(name="positions", value=-1)),
    (dict(rope=10000.0, context_positions=[0, 1, 2]), "error.engine.context_positions", {}),
])
def test_bad_rotary_settings_say_what_is_wrong(kwargs, msg_id, params):
    w = MultiHeadWeights.random(8, 2, seed=0)
    with raises_message(msg_id, **params):
        attnviz.trace_attention(np.ones((3, 8)), w, **kwargs)


def test_rope_needs_an_even_d_k():
    w = MultiHeadWeights.random(6, 2, seed=0)              # d_k 3
    with raises_message("error.engine.rope_odd", d_k=3):
        attnviz.trace_attention(np.ones((3, 6)), w, rope=10000.0)


def test_the_plain_formula_and_the_trace_agree_with_gqa():
    rng = np.random.default_rng(3)
    q, k, v = rng.standard_normal((6, 5, 4)), rng.standard_normal((2, 5, 4)), \
        rng.standard_normal((2, 5, 3))
    t = attnviz.trace_qkv(q, k, v, causal=True)
    z, weights = engine.attention(q, np.repeat(k, 3, axis=0), np.repeat(v, 3, axis=0),
                                  mask=np.triu(np.ones((5, 5), dtype=bool), 1))
    np.testing.assert_allclose(t.weights, weights, atol=1e-12)
    np.testing.assert_allclose(t.z, z, atol=1e-12)


def test_one_array_as_q_and_k_at_other_positions_is_rotated_at_each():
    x = np.random.default_rng(8).standard_normal((1, 2, 4))
    t = attnviz.trace_qkv(x, x, x, rope=10000.0, positions=[5, 6], context_positions=[0, 1])
    np.testing.assert_allclose(t.q_rotated, _rope_by_hand(x, [5, 6], 10000.0), atol=1e-12)
    np.testing.assert_allclose(t.k_rotated, _rope_by_hand(x, [0, 1], 10000.0), atol=1e-12)


def test_qk_norm_of_a_huge_query_is_its_norm_not_zeros():
    """QK-norm divides each head's q by its RMS, so W_Q × 1e20 (an edit a learner can type)
    gives the same normed q as W_Q, computed here in float64 — not zeros from q² overflowing
    float32 — and the same scores, finite."""
    rng = np.random.default_rng(7)
    h, d, d_k, n = 2, 8, 4, 3
    arrays = {name: rng.standard_normal(shape).astype(np.float32) for name, shape in
              (("w_q", (h, d, d_k)), ("w_k", (h, d, d_k)), ("w_v", (h, d, d_k)),
               ("w_o", (h * d_k, d)))}
    x = rng.standard_normal((n, d)).astype(np.float32)
    g_q, g_k = (rng.uniform(0.5, 1.5, d_k).astype(np.float32) for _ in range(2))
    eps = 1e-6
    plain = attnviz.trace_attention(x, MultiHeadWeights(**arrays), causal=True, rope=10000.0,
                                    qk_norm=(g_q, g_k, eps))
    arrays["w_q"] = arrays["w_q"] * np.float32(1e20)
    huge = attnviz.trace_attention(x, MultiHeadWeights(**arrays), causal=True, rope=10000.0,
                                   qk_norm=(g_q, g_k, eps))
    q = np.einsum("nd,hde->hne", x.astype(np.float64), arrays["w_q"].astype(np.float64))
    with np.errstate(over="ignore"):
        assert np.isinf((q.astype(np.float32) ** 2).sum())               # float32 overflows
    expected = q / np.sqrt((q * q).mean(axis=-1, keepdims=True) + eps) * g_q
    np.testing.assert_allclose(huge.q_normed, expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(huge.q_normed, plain.q_normed, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(huge.weights, plain.weights, rtol=1e-5, atol=1e-6)
