"""Hostile use of the Python API (issue 14): random shapes, dtypes (float16 to float64 and
integers), huge values and masks. Every call either gives finite numbers in every step (a
masked score is −∞ and nothing else is) or refuses with AttnvizInputError; nothing else
escapes. Bounded: a fixed number of examples, no deadline."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import attnviz
from attnviz import AttnvizInputError

DTYPES = [np.float16, np.float32, np.float64, np.int64]
MAGNITUDES = [1e-300, 1e-5, 1.0, 1e3, 6e4, 1e20, 3e38, 1e150, 1e300, 1.7e308]


def _array(draw, shape, dtype):
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    scale = draw(st.sampled_from(MAGNITUDES))
    with np.errstate(over="ignore", invalid="ignore"):
        a = rng.standard_normal(shape) * scale
        if draw(st.booleans()):                   # sometimes one extreme entry
            a.flat[draw(st.integers(0, a.size - 1))] = draw(st.sampled_from(MAGNITUDES)) * \
                draw(st.sampled_from([-1, 1]))
        return a.astype(dtype)


def _mask(draw, n_q, n_k):
    kind = draw(st.sampled_from(["none", "bool", "float", "causal"]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    if kind == "bool":
        return {"attn_mask": rng.random((n_q, n_k)) < draw(st.sampled_from([0.0, 0.5, 1.0]))}
    if kind == "float":
        with np.errstate(over="ignore"):
            m = rng.standard_normal((n_q, n_k)) * draw(st.sampled_from(MAGNITUDES))
        if draw(st.booleans()):
            m[rng.random((n_q, n_k)) < 0.3] = -np.inf
        return {"attn_mask": m}
    if kind == "causal":
        return {"causal": True}
    return {}


def _check(trace) -> None:
    """Every step finite, except −∞ scores where the mask says so; weights rows sum to 1."""
    for step in trace.steps:
        a = np.asarray(step.array, dtype=np.float64)
        if step.name == "masked_scores":
            assert not np.isnan(a).any() and not np.isposinf(a).any(), step.name
        else:
            assert np.isfinite(a).all(), f"{step.name} holds NaN or inf"
        if step.name == "weights":                # 1, or 0 where every key is masked (said)
            sums = a.sum(-1)
            assert np.all((np.abs(sums - 1) < 1e-2) | ((sums == 0) & bool(trace.warnings)))


@st.composite
def qkv_calls(draw):
    h = draw(st.integers(1, 3))
    n_q, n_k, d = draw(st.integers(1, 6)), draw(st.integers(1, 6)), draw(st.integers(1, 5))
    dtype = draw(st.sampled_from(DTYPES))
    q, k, v = (_array(draw, (h, n, d), dtype) for n in (n_q, n_k, n_k))
    scale = draw(st.sampled_from([None, 1.0, 1e-300, 1e300, 0.0, -1.0, float("nan")]))
    return q, k, v, {**_mask(draw, n_q, n_k), "scale": scale}


@st.composite
def projected_calls(draw):
    h = draw(st.integers(1, 3))
    d_model, n = h * draw(st.integers(1, 3)), draw(st.integers(1, 6))
    dtype = draw(st.sampled_from(DTYPES[:3]))
    w = attnviz.MultiHeadWeights.random(d_model, h, seed=draw(st.integers(0, 99)),
                                        bias=draw(st.booleans()))
    factor = draw(st.sampled_from(MAGNITUDES))
    with np.errstate(over="ignore"):
        fields = {name: (a * factor).astype(dtype) for name, a in vars(w).items()
                  if isinstance(a, np.ndarray)}
    x = _array(draw, (n, d_model), dtype)
    return x, fields, _mask(draw, n, n)


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(qkv_calls())
def test_trace_qkv_gives_finite_steps_or_a_clear_error(call):
    q, k, v, options = call
    try:
        trace = attnviz.trace_qkv(q, k, v, **options)
    except AttnvizInputError as exc:
        assert str(exc)
        return
    _check(trace)


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(projected_calls())
def test_trace_attention_gives_finite_steps_or_a_clear_error(call):
    x, fields, options = call
    try:
        w = attnviz.MultiHeadWeights(**fields)
        trace = attnviz.trace_attention(x, w, **options)
    except AttnvizInputError as exc:
        assert str(exc)
        return
    _check(trace)


# ---- text as people paste it (issue 18.12–15) ----------------------------------------------------

ANY_CHARACTER = st.characters(exclude_categories=())          # surrogates and controls too
PASTE_PIECES = st.sampled_from(["1", "-2.5", "1e3", ",", ";", "，", "；", "、", "\t", " ", "\n",
                                '"', "'", "[", "]", "{", "}", "\ufeff", "\u202e", "１", "．",
                                "nan", "1,5", "x", "\x00"])


@settings(max_examples=400, deadline=None)
@given(st.text(ANY_CHARACTER, max_size=40))
def test_tokenize_gives_drawn_tokens_or_a_clear_error(text):
    try:
        tokens = attnviz.tokenize(text)
    except AttnvizInputError as exc:
        assert exc.msg_id == "error.sentence.empty"
        return
    for t in tokens:
        assert t and t == t.strip()
        t.encode("utf-8")                        # no half character: it can be sent and hashed
    attnviz.embed_tokens(tokens, 4)


@pytest.mark.slow
@settings(max_examples=400, deadline=None)
@given(st.one_of(st.text(ANY_CHARACTER, max_size=40),
                 st.lists(PASTE_PIECES, max_size=30).map("".join)))
def test_parse_matrix_gives_finite_numbers_or_a_clear_error(text):
    try:
        m = attnviz.parse_matrix(text, max_rows=512, max_cols=1024)
    except AttnvizInputError as exc:
        assert str(exc)
        return
    assert m.ndim == 2 and m.size and np.isfinite(m).all()


# ---- valid input is never refused (issue 20 item 6) ---------------------------------------------
# The tests above accept AttnvizInputError for anything; these draw only input the engine must
# take — finite numbers small enough that no step can overflow in its dtype (float16's largest
# is 65504), any finite scale, bool masks, float masks with −inf, causal — and fail on any error.

def _bounded(draw, shape, dtype, bound):
    """Uniform in ±bound (sometimes one entry at ±bound, sometimes tiny): no overflow."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    a = rng.uniform(-1.0, 1.0, shape) * bound * draw(st.sampled_from([1e-30, 1e-3, 1.0]))
    if draw(st.booleans()):
        a.flat[draw(st.integers(0, a.size - 1))] = bound * draw(st.sampled_from([-1, 1]))
    return a.astype(dtype) if dtype != np.int64 else np.rint(a).astype(np.int64)


def _valid_mask(draw, n_q, n_k):
    kind = draw(st.sampled_from(["none", "bool", "float", "causal"]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    if kind == "bool":
        return {"attn_mask": rng.random((n_q, n_k)) < draw(st.sampled_from([0.0, 0.5, 1.0]))}
    if kind == "float":
        m = rng.uniform(-100.0, 100.0, (n_q, n_k))
        if draw(st.booleans()):
            m[rng.random((n_q, n_k)) < 0.3] = -np.inf
        return {"attn_mask": m}
    return {"causal": True} if kind == "causal" else {}


@st.composite
def valid_qkv_calls(draw):
    h = draw(st.integers(1, 3))
    n_q, n_k, d = draw(st.integers(1, 6)), draw(st.integers(1, 6)), draw(st.integers(1, 5))
    dtype = draw(st.sampled_from(DTYPES))
    # |q·k| ≤ d·bound² ≤ 5·100² and |scale| ≤ 1 keep every score within float16
    q, k, v = (_bounded(draw, (h, n, d), dtype, 100.0) for n in (n_q, n_k, n_k))
    scale = draw(st.sampled_from([None, 1.0, 0.5, 1e-300, 0.0, -1.0]))
    return q, k, v, {**_valid_mask(draw, n_q, n_k), "scale": scale}


@st.composite
def valid_projected_calls(draw):
    h = draw(st.integers(1, 3))
    d_model, n = h * draw(st.integers(1, 3)), draw(st.integers(1, 6))
    dtype = draw(st.sampled_from(DTYPES[:3]))
    w = attnviz.MultiHeadWeights.random(d_model, h, seed=draw(st.integers(0, 99)),
                                        bias=draw(st.booleans()), dtype=dtype)
    x = _bounded(draw, (n, d_model), dtype, 1.0)          # |x W| stays far below 65504
    return x, w, _valid_mask(draw, n, n)


@pytest.mark.slow
@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(valid_qkv_calls())
def test_trace_qkv_takes_every_valid_call(call):
    q, k, v, options = call
    _check(attnviz.trace_qkv(q, k, v, **options))          # no AttnvizInputError either


@pytest.mark.slow
@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(valid_projected_calls())
def test_trace_attention_takes_every_valid_call(call):
    x, w, options = call
    _check(attnviz.trace_attention(x, w, **options))


WORDS = st.text(st.characters(categories=("L", "N")), min_size=1, max_size=8)


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(st.lists(WORDS, min_size=1, max_size=8), st.sampled_from([" ", "  ", "\t", "\n"]))
def test_tokenize_takes_any_text_with_a_word(words, gap):
    tokens = attnviz.tokenize(gap.join(words))         # (normalised: 丽 U+2F800 → 丽 U+4E3D)
    assert len(tokens) >= len(words) and all(t and t == t.strip() for t in tokens)


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(st.integers(1, 6).flatmap(lambda cols: st.lists(
           st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=cols, max_size=cols),
           min_size=1, max_size=6)),
       st.sampled_from([",", ", ", " ", "\t", ";"]))
def test_parse_matrix_reads_every_well_formed_matrix_exactly(rows, sep):
    text = "\n".join(sep.join(repr(v) for v in row) for row in rows)
    m = attnviz.parse_matrix(text, max_rows=512, max_cols=1024)
    np.testing.assert_array_equal(m, np.array(rows, dtype=np.float64))
