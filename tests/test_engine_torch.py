"""The engine against torch.nn.MultiheadAttention: the reference for every shape, bias and mask;
and the round trip to and from it (core/torch_interop)."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import attnviz
from tests.message_helpers import raises_message

pytestmark = pytest.mark.usefixtures("torch")        # imported here, on one thread


def torch_reference(w, x, context=None, value=None, key_padding_mask=None, attn_mask=None):
    """torch's output (n_q, d_out) and per-head weights (H, n_q, n_k) for the same weights."""
    import torch

    mha = w.to_torch().eval()
    context = x if context is None else context
    value = context if value is None else value
    dtype = torch.float64 if x.dtype == np.float64 else torch.float32

    def t(a):
        return None if a is None else torch.tensor(np.array(a), dtype=None if a.dtype == bool
                                                   else dtype)

    with torch.no_grad():
        out, weights = mha(t(x), t(context), t(value), key_padding_mask=t(key_padding_mask),
                           attn_mask=t(attn_mask), need_weights=True,
                           average_attn_weights=False)
    return out.numpy(), weights.numpy()


@st.composite
def configurations(draw):
    """Random shapes, heads, biases, self or cross attention (with torch's kdim/vdim), masks."""
    heads = draw(st.integers(1, 4))
    d_k = draw(st.integers(1, 6))
    d_model = heads * d_k
    n_q = draw(st.integers(1, 7))
    cross = draw(st.booleans())
    n_k = draw(st.integers(1, 7)) if cross else n_q
    kdim = draw(st.integers(1, 9)) if cross else d_model
    vdim = draw(st.sampled_from([kdim, draw(st.integers(1, 9))])) if cross else d_model
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    w = attnviz.MultiHeadWeights.from_torch(_torch_mha(d_model, heads, kdim, vdim,
                                                       draw(st.booleans()), seed))
    x = rng.standard_normal((n_q, d_model)).astype(np.float32)
    context = rng.standard_normal((n_k, kdim)).astype(np.float32) if cross else None
    value = rng.standard_normal((n_k, vdim)).astype(np.float32) if cross else None
    kpm = rng.random(n_k) < 0.3 if draw(st.booleans()) else None
    mask_kind = draw(st.sampled_from(["none", "bool", "float", "causal"]))
    attn_mask = {"none": None,
                 "bool": rng.random((n_q, n_k)) < 0.3,
                 "float": rng.standard_normal((n_q, n_k)).astype(np.float32),
                 "causal": np.triu(np.ones((n_q, n_k), dtype=bool), k=1)}[mask_kind]
    return dict(w=w, x=x, context=context, value=value, kpm=kpm, attn_mask=attn_mask,
                causal=mask_kind == "causal")


def _torch_mha(d_model, heads, kdim, vdim, bias, seed):
    import torch

    torch.manual_seed(seed)
    mha = torch.nn.MultiheadAttention(d_model, heads, bias=bias, kdim=kdim, vdim=vdim)
    if bias:  # torch starts biases at 0; make them matter
        with torch.no_grad():
            mha.in_proj_bias.normal_()
            mha.out_proj.bias.normal_()
    return mha


@pytest.mark.reference
@given(configurations())
def test_agrees_with_torch_for_any_shapes_biases_and_masks(cfg):
    w, x = cfg["w"], cfg["x"]
    t = attnviz.trace_attention(
        x, w, context=cfg["context"], value=cfg["value"], key_padding_mask=cfg["kpm"],
        attn_mask=None if cfg["causal"] else cfg["attn_mask"], causal=cfg["causal"])
    out, weights = torch_reference(w, x, cfg["context"], cfg["value"], cfg["kpm"],
                                   cfg["attn_mask"])
    dead = np.isnan(weights)  # torch gives NaN where every key of a row is masked
    assert t.weights.dtype == np.float32 and t.output.dtype == np.float32
    np.testing.assert_allclose(t.weights[~dead], weights[~dead], atol=1e-5, rtol=0)
    assert not np.isnan(t.weights).any() and not np.isnan(t.output).any()
    if dead.any():
        assert (t.weights[dead] == 0).all()
        assert t.warning_messages and t.warning_messages[0].msg_id == "notice.masked_rows"
    else:
        assert t.warnings == []
        np.testing.assert_allclose(t.output, out, atol=1e-5, rtol=1e-5)


@pytest.mark.reference
@pytest.mark.parametrize("n", [1, 5, 40])
def test_float64_agrees_with_torch_to_machine_precision(n):
    w = attnviz.MultiHeadWeights.random(24, 3, seed=n, bias=True)
    x = np.random.default_rng(n).standard_normal((n, 24))
    t = attnviz.trace_attention(x, w)
    out, weights = torch_reference(w, x)
    assert t.output.dtype == np.float64
    np.testing.assert_allclose(t.weights, weights, atol=1e-12)
    np.testing.assert_allclose(t.output, out, atol=1e-12)


def test_torch_round_trip_keeps_every_parameter(torch):
    mha = _torch_mha(12, 3, kdim=5, vdim=7, bias=True, seed=1)
    back = attnviz.MultiHeadWeights.from_torch(mha).to_torch()
    for (name, a), (_, b) in zip(sorted(mha.state_dict().items()),
                                 sorted(back.state_dict().items())):
        assert torch.equal(a, b), name


def test_from_torch_reads_separate_kdim_vdim_projections():
    w = attnviz.MultiHeadWeights.from_torch(_torch_mha(8, 2, kdim=3, vdim=5, bias=False, seed=2))
    assert (w.num_heads, w.d_model, w.d_context, w.d_value_in, w.d_k, w.d_v, w.d_out) == \
        (2, 8, 3, 5, 4, 4, 8)
    assert not w.has_bias


def test_from_torch_refuses_extra_key_bias(torch):
    mha = torch.nn.MultiheadAttention(8, 2, add_bias_kv=True)
    with raises_message("error.torch.extra_keys"):
        attnviz.MultiHeadWeights.from_torch(mha)


def test_to_torch_refuses_layouts_torch_cannot_hold():
    w = attnviz.MultiHeadWeights.random(8, 2, d_k=3)
    with raises_message("error.torch.sizes", d_model=8, heads=2, d_k=3, d_v=4):
        w.to_torch()


@pytest.mark.reference
def test_large_case_uses_threaded_blocks_and_still_agrees_with_torch():
    # 12 heads × 256 × 256 cells is above the threshold where blocks run on every core
    w = attnviz.MultiHeadWeights.random(96, 12, seed=3, bias=True, dtype=np.float32)
    x = np.random.default_rng(3).standard_normal((256, 96)).astype(np.float32)
    kpm = np.zeros(256, dtype=bool)
    kpm[-10:] = True
    t = attnviz.trace_attention(x, w, key_padding_mask=kpm, causal=False)
    out, weights = torch_reference(w, x, key_padding_mask=kpm)
    np.testing.assert_allclose(t.weights, weights, atol=1e-5)
    np.testing.assert_allclose(t.output, out, atol=1e-5)
