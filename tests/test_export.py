"""Export: .npz, CSV zip and JSON round-trip to the same numbers; the HTML report is offline."""

import csv
import io
import json
import re
import zipfile

import numpy as np
import pytest

import attnviz
from attnviz.plot import figures
from tests.message_helpers import raises_message

TOKENS = ["the", "cat", "sat,", "the"]


@pytest.fixture
def trace():
    w = attnviz.MultiHeadWeights.random(8, 2, seed=0, bias=True)
    return attnviz.trace_attention(attnviz.embed_tokens(TOKENS, 8), w, causal=True)


FIELDS = ("x", "q", "k", "v", "scores", "scaled_scores", "masked_scores", "weights", "z",
          "concat", "output")


def test_npz_round_trip_to_a_path_and_a_file_object(trace, tmp_path):
    trace.to_npz(tmp_path / "t.npz")
    buf = io.BytesIO()
    trace.to_npz(buf)
    buf.seek(0)
    for source in (tmp_path / "t.npz", buf):
        with np.load(source) as data:
            for name in FIELDS:
                np.testing.assert_array_equal(data[name], getattr(trace, name), err_msg=name)
            np.testing.assert_array_equal(data["mask"], trace.mask)
            assert float(data["scale"]) == trace.scale


def test_json_round_trip_with_masked_cells_as_null(trace):
    doc = json.loads(trace.to_json())
    assert doc["num_heads"] == 2 and doc["scale"] == trace.scale
    for name in FIELDS:
        got = np.array(doc["arrays"][name], dtype=float)          # null → nan
        want = np.where(np.isneginf(getattr(trace, name)), np.nan, getattr(trace, name))
        np.testing.assert_array_equal(got, want, err_msg=name)
    assert [s["name"] for s in doc["steps"]] == [s.name for s in trace.steps]
    assert doc["arrays"]["masked_scores"][0][0][1] is None


def test_csv_zip_has_token_headers_and_the_numbers(trace, tmp_path):
    path = tmp_path / "t.zip"
    trace.to_csv_zip(path, tokens_q=TOKENS)
    with zipfile.ZipFile(path) as zf:
        names = set(zf.namelist())
        assert {"weights_head0.csv", "weights_head1.csv", "output.csv", "x.csv"} <= names
        rows = list(csv.reader(io.StringIO(zf.read("weights_head1.csv").decode())))
    assert rows[0] == [""] + TOKENS            # "sat," survives as one quoted header
    assert [r[0] for r in rows[1:]] == TOKENS
    np.testing.assert_array_equal(np.array([r[1:] for r in rows[1:]], dtype=float),
                                  trace.weights[1])
    with zipfile.ZipFile(path) as zf:
        masked = list(csv.reader(io.StringIO(zf.read("masked_scores_head0.csv").decode())))
    assert masked[1][2] == "-inf"


@pytest.mark.slow
def test_report_html_is_offline_and_holds_every_step(trace):
    page = attnviz.report_html(trace, TOKENS)
    assert page.startswith("<!DOCTYPE html>")
    # nothing is loaded from elsewhere: no script src, no stylesheet link
    assert not re.search(r"<script[^>]*\bsrc\s*=", page, re.I)
    assert not re.search(r"<link\b", page, re.I)
    # plotly.js is inlined (its own code mentions URLs); the rest of the page names none
    scripts = re.findall(r"<script[^>]*>.*?</script>", page, re.S)
    bundle = max(scripts, key=len)
    assert "plotly.js" in bundle[:2000] and len(bundle) > 1_000_000
    assert not re.search(r"https?://", page.replace(bundle, ""))
    for step in trace.steps:
        assert step.title.replace("&", "&amp;") in page or step.title in page
    assert page.count("Plotly.newPlot") >= len(trace.steps)


def test_step_figure_gives_the_steps_heatmap(trace):
    fig = figures.step_figure(trace, "weights", head=1, tokens_q=TOKENS)
    z = np.array(fig.data[0].z, dtype=float)
    np.testing.assert_array_equal(np.nan_to_num(z, nan=0.0), trace.weights[1])


# ---- the input travels with the export: tokens, every weight and bias, the settings ----------

def _edited_weights():
    """Three heads with biases, one cell of W_Q and of b_O edited as a user would."""
    w = attnviz.MultiHeadWeights.random(6, 3, seed=4, bias=True)
    w_q = np.array(w.w_q)
    w_q[1, 2, 0] = 7.25
    b_o = np.array(w.b_o)
    b_o[3] = -1.5
    return w.replace(w_q=w_q, b_o=b_o)


PARAMS = ("w_q", "w_k", "w_v", "w_o", "b_q", "b_k", "b_v", "b_o")


def test_npz_carries_tokens_weights_and_settings_without_pickles(tmp_path):
    w = _edited_weights()
    x = attnviz.embed_tokens(TOKENS, 6)
    t = attnviz.trace_attention(x, w, causal=True)
    t.to_npz(tmp_path / "t.npz", tokens_q=TOKENS)
    with np.load(tmp_path / "t.npz", allow_pickle=False) as data:
        assert data["tokens_q"].dtype.kind == "U" and data["tokens_q"].tolist() == TOKENS
        assert data["tokens_k"].tolist() == TOKENS          # self-attention: keys are the tokens
        for name in PARAMS:                                  # float64 through npz: exact
            np.testing.assert_array_equal(data[name], getattr(w, name), err_msg=name)
        assert data["w_q"][1, 2, 0] == 7.25 and data["b_o"][3] == -1.5
        assert float(data["scale"]) == pytest.approx(1 / np.sqrt(2))   # d_k = 6 / 3
        assert int(data["num_heads"]) == 3 and bool(data["causal"]) is True
        np.testing.assert_array_equal(data["mask"][0], np.triu(np.ones((4, 4), bool), k=1))


def test_npz_without_biases_has_no_bias_keys_and_qkv_has_no_weights(tmp_path):
    w = attnviz.MultiHeadWeights.random(4, 2, seed=1)
    attnviz.trace_attention(np.eye(3, 4), w).to_npz(tmp_path / "a.npz")
    with np.load(tmp_path / "a.npz", allow_pickle=False) as data:
        assert {"w_q", "w_k", "w_v", "w_o"} <= set(data.files)
        assert not {"b_q", "b_k", "b_v", "b_o"} & set(data.files)
        assert bool(data["causal"]) is False and "mask" not in data.files
    q = [[1.0, 0, 1], [0, 1, 1]]
    attnviz.trace_qkv(q, q, [[1.0, 2], [3, 4]]).to_npz(tmp_path / "qkv.npz")
    with np.load(tmp_path / "qkv.npz", allow_pickle=False) as data:
        assert not {n for n in data.files if n.startswith(("w_", "b_"))}
        assert data["tokens_q"].tolist() == ["q1", "q2"]


def test_default_labels_are_the_figures_labels(tmp_path):
    w = attnviz.MultiHeadWeights.random(4, 1, seed=2)
    x = np.arange(12.0).reshape(3, 4) / 10
    ctx = np.arange(8.0).reshape(2, 4) / 10
    for t, want_q, want_k in ((attnviz.trace_attention(x, w), ["q1", "q2", "q3"],
                               ["k1", "k2", "k3"]),
                              (attnviz.trace_attention(x, w, context=ctx), ["q1", "q2", "q3"],
                               ["k1", "k2"])):
        fig = figures.step_figure(t, "scores")
        assert list(fig.layout.yaxis.categoryarray) == want_q
        assert list(fig.layout.xaxis.categoryarray) == want_k
        t.to_npz(tmp_path / "d.npz")
        with np.load(tmp_path / "d.npz", allow_pickle=False) as data:
            assert data["tokens_q"].tolist() == want_q and data["tokens_k"].tolist() == want_k
        doc = json.loads(t.to_json())
        assert doc["tokens_q"] == want_q and doc["tokens_k"] == want_k
        with zipfile.ZipFile(_zip_of(t)) as zf:
            rows = list(csv.reader(io.StringIO(zf.read("scores_head0.csv").decode())))
        assert rows[0] == [""] + want_k and [r[0] for r in rows[1:]] == want_q


def _zip_of(t, **kw):
    buf = io.BytesIO()
    t.to_csv_zip(buf, **kw)
    buf.seek(0)
    return buf


STEP_FIELDS = FIELDS + ("context",)


@pytest.mark.parametrize("kind", ["causal", "cross_with_padding", "unscaled"])
def test_saved_weights_reproduce_the_saved_trace(kind, tmp_path):
    """Save an edited, biased, 3-head trace; load only x, settings and weights; run attention
    again: every saved intermediate comes back."""
    w = _edited_weights()
    x = attnviz.embed_tokens(TOKENS, 6, seed=3)
    kwargs = {"causal": {"causal": True},
              "cross_with_padding": {"context": attnviz.embed_tokens(["a", "b", "c"], 6),
                                     "key_padding_mask": np.array([False, True, False])},
              "unscaled": {"scale": 1.0}}[kind]
    saved = attnviz.trace_attention(x, w, **kwargs)
    path = tmp_path / "t.npz"
    saved.to_npz(path, tokens_q=TOKENS)

    loaded = attnviz.MultiHeadWeights.from_npz(path)
    for name in PARAMS:
        np.testing.assert_array_equal(getattr(loaded, name), getattr(w, name), err_msg=name)
    with np.load(path, allow_pickle=False) as data:
        again = attnviz.trace_attention(
            data["x"], loaded, scale=float(data["scale"]),
            context=data["context"] if "context" in data.files else None,
            attn_mask=data["mask"] if "mask" in data.files else None)
        for name in STEP_FIELDS:
            if name in data.files:
                np.testing.assert_allclose(getattr(again, name), data[name], rtol=1e-12,
                                           atol=1e-12, err_msg=name)
        assert ("context" in data.files) == (kind == "cross_with_padding")
        assert ("mask" in data.files) == (kind != "unscaled")
    # the numbers checked are the tutorial's formula, not only the engine agreeing with itself
    q = x @ w.w_q[2] + w.b_q[2]
    ctx = kwargs.get("context", x)
    k = ctx @ w.w_k[2] + w.b_k[2]
    s = q @ k.T * (1.0 if kind == "unscaled" else 1 / np.sqrt(2))
    if kind == "causal":
        s[np.triu(np.ones_like(s, bool), k=1)] = -np.inf
    if kind == "cross_with_padding":
        s[:, 1] = -np.inf
    a = np.exp(s - s.max(axis=1, keepdims=True))
    np.testing.assert_allclose(again.weights[2], a / a.sum(axis=1, keepdims=True), rtol=1e-10)


def test_from_npz_names_what_is_missing_or_unreadable(tmp_path):
    q = [[1.0, 0, 1], [0, 1, 1]]
    attnviz.trace_qkv(q, q, q).to_npz(tmp_path / "qkv.npz")
    with raises_message("error.npz.no_weights", missing="w_q, w_k, w_v, w_o"):
        attnviz.MultiHeadWeights.from_npz(tmp_path / "qkv.npz")
    w = attnviz.MultiHeadWeights.random(4, 2, seed=0)
    np.savez(tmp_path / "no_wo.npz", w_q=w.w_q, w_k=w.w_k, w_v=w.w_v)
    with raises_message("error.npz.no_weights", missing="w_o"):
        attnviz.MultiHeadWeights.from_npz(tmp_path / "no_wo.npz")
    np.savez(tmp_path / "pickled.npz", w_q=np.array([{"evil": 1}], dtype=object), w_k=w.w_k,
             w_v=w.w_v, w_o=w.w_o)
    with raises_message("error.npz.bad_weights"):
        attnviz.MultiHeadWeights.from_npz(tmp_path / "pickled.npz")
    with raises_message("error.npz.unreadable"):
        attnviz.MultiHeadWeights.from_npz(io.BytesIO(b"not a zip at all"))
    np.save(tmp_path / "one.npy", w.w_o)
    with raises_message("error.npz.single_array"):
        attnviz.MultiHeadWeights.from_npz(tmp_path / "one.npy")


def test_json_carries_tokens_weights_and_settings():
    w = _edited_weights()
    t = attnviz.trace_attention(attnviz.embed_tokens(TOKENS, 6), w, causal=True)
    doc = json.loads(t.to_json(tokens_q=TOKENS))
    assert doc["tokens_q"] == TOKENS and doc["tokens_k"] == TOKENS
    assert doc["arrays"]["tokens_q"] == TOKENS
    assert doc["num_heads"] == 3 and doc["causal"] is True
    assert doc["scale"] == pytest.approx(1 / np.sqrt(2))
    for name in PARAMS:            # JSON writes float64 by repr: it reads back exactly
        np.testing.assert_array_equal(np.array(doc["arrays"][name]), getattr(w, name),
                                      err_msg=name)
    rebuilt = attnviz.MultiHeadWeights(**{n: np.array(doc["arrays"][n]) for n in PARAMS})
    again = attnviz.trace_attention(np.array(doc["arrays"]["x"]), rebuilt, causal=doc["causal"])
    np.testing.assert_allclose(again.output, np.array(doc["arrays"]["output"]), rtol=1e-12)


def test_csv_zip_holds_every_weight_and_bias():
    w = _edited_weights()
    t = attnviz.trace_attention(attnviz.embed_tokens(TOKENS, 6), w)
    with zipfile.ZipFile(_zip_of(t, tokens_q=TOKENS)) as zf:
        def read(name):
            rows = list(csv.reader(io.StringIO(zf.read(name).decode())))
            return rows[0], [r[0] for r in rows[1:]], np.array([r[1:] for r in rows[1:]],
                                                               dtype=float)
        for name in ("w_q", "w_k", "w_v"):
            for h in range(3):
                _, _, a = read(f"{name}_head{h}.csv")
                np.testing.assert_array_equal(a, getattr(w, name)[h], err_msg=f"{name}{h}")
        header, rows, a = read("w_o.csv")
        np.testing.assert_array_equal(a, w.w_o)
        assert header == [""] + [f"d{j}" for j in range(6)]
        # rows as the Inputs & weights page labels W_O: head h's feature j of the concat
        assert rows == [f"h{h}·d{j}" for h in range(3) for j in range(w.d_v)]
        assert read("w_k_head1.csv")[0] == [""] + [f"k{j}" for j in range(w.d_k)]
        header, rows, a = read("b_q.csv")
        assert rows == ["head0", "head1", "head2"]
        np.testing.assert_array_equal(a, w.b_q)
        _, rows, a = read("b_o.csv")
        np.testing.assert_array_equal(a[0], w.b_o)
        assert a[0][3] == -1.5


# ---- CSV a spreadsheet opens safely (issue 18.19) ---------------------------------------------

FORMULA_TOKENS = ['=HYPERLINK("http://evil.example","x")', "+1+cmd|' /C calc'!A0", "-2+3",
                  "@SUM(A1:A9)", "\tx", "\r=1", "\0=1", "plain", "'quoted", "a=b"]


def test_csv_labels_that_start_like_a_formula_get_a_quote_and_numbers_stay_numbers():
    """OWASP's advice against CSV injection: a cell starting with =, +, -, @, tab, CR (or NUL,
    ASVS) gets a leading single quote, so a spreadsheet shows it as text; the numbers, negative
    ones included, are written as numbers."""
    n = len(FORMULA_TOKENS)
    x = np.random.default_rng(0).standard_normal((n, 4))
    t = attnviz.trace_attention(x, attnviz.MultiHeadWeights.random(4, 1, seed=0))
    with zipfile.ZipFile(_zip_of(t, tokens_q=FORMULA_TOKENS)) as zf:
        text = zf.read("scores_head0.csv").decode()
    rows = list(csv.reader(io.StringIO(text, newline="")))
    assert len(rows) == n + 1                         # CR and tab inside a label split nothing
    want = ["'" + t if t[0] in "=+-@\t\r\0" else t for t in FORMULA_TOKENS]
    assert want[-3:] == ["plain", "'quoted", "a=b"]   # only the first character counts
    assert rows[0] == [""] + want
    assert [r[0] for r in rows[1:]] == want
    cells = [c for r in rows[1:] for c in r[1:]]
    negative = [c for c in cells if float(c) < 0]
    assert negative and all(re.fullmatch(r"-[0-9][0-9.e+-]*", c) for c in negative)
    np.testing.assert_array_equal(np.array([r[1:] for r in rows[1:]], dtype=float), t.scores[0])
