"""Export: .npz, CSV zip and JSON round-trip to the same numbers; the HTML report is offline."""

import csv
import io
import json
import re
import zipfile

import numpy as np
import pytest

import attnviz

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


def test_figure_method_gives_the_steps_heatmap(trace):
    fig = trace.figure("weights", head=1, tokens_q=TOKENS)
    z = np.array(fig.data[0].z, dtype=float)
    np.testing.assert_array_equal(np.nan_to_num(z, nan=0.0), trace.weights[1])
