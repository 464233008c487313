"""The pages' download buttons hand over the page's own tokens and settings (AppTest)."""

import io
import json

import numpy as np
import pytest

import attnviz
from attnviz.i18n import t
from tests.apptest_helpers import open_page, reachable, record_downloads
from tests.message_helpers import raises_message
from tools import streamlit_compat

SENTENCE = "Tom's <b>cat</b> sat"


@pytest.fixture
def downloads(monkeypatch):
    """file name → the callable a download button registered (it runs when clicked)."""
    return record_downloads(monkeypatch)


def _as_bytes(data) -> bytes:
    return data.encode() if isinstance(data, str) else data


@pytest.mark.slow
def test_step_page_downloads_carry_the_sentence_tokens_and_settings(downloads):
    at = open_page("pages/steps.py", sentence=SENTENCE, num_heads=2, d_model=8, causal=True,
                   bias=True)
    assert not at.exception
    tokens = attnviz.tokenize(SENTENCE)
    assert {"attnviz_trace.npz", "attnviz_trace.json", "attnviz_report.html"} <= set(downloads)

    npz = io.BytesIO(_as_bytes(downloads["attnviz_trace.npz"]()))
    with np.load(npz, allow_pickle=False) as data:
        assert data["tokens_q"].tolist() == tokens and data["tokens_k"].tolist() == tokens
        assert bool(data["causal"]) and int(data["num_heads"]) == 2
        assert {"w_q", "w_k", "w_v", "w_o", "b_q", "b_k", "b_v", "b_o"} <= set(data.files)
        x = data["x"]
    # the saved weights are the app's: the same settings through the engine give them
    expected = attnviz.MultiHeadWeights.random(8, 2, seed=0, bias=True)
    npz.seek(0)
    loaded = attnviz.MultiHeadWeights.from_npz(npz)
    np.testing.assert_array_equal(loaded.w_q, expected.w_q)
    np.testing.assert_array_equal(loaded.b_o, expected.b_o)
    np.testing.assert_allclose(x, attnviz.embed_tokens(tokens, 8, seed=0), rtol=1e-12)

    doc = json.loads(_as_bytes(downloads["attnviz_trace.json"]()))
    assert doc["tokens_q"] == tokens and doc["causal"] is True

    report = _as_bytes(downloads["attnviz_report.html"]()).decode()
    assert "Sentence: “Tom&#x27;s &lt;b&gt;cat&lt;/b&gt; sat”" in report
    assert "<b>cat</b>" not in report
    assert "<math" in report


@pytest.mark.slow
def test_preset_report_names_the_preset(downloads):
    at = open_page("pages/home.py", mode="Preset", preset="three_inputs")
    assert not at.exception
    report = _as_bytes(downloads["attnviz_report.html"]()).decode()
    assert "Preset: Three inputs, one head (no scaling)" in report
    with np.load(io.BytesIO(_as_bytes(downloads["attnviz_trace.npz"]())),
                 allow_pickle=False) as data:
        assert data["tokens_q"].tolist() == list(attnviz.load_preset("three_inputs").tokens)


@pytest.mark.slow
@pytest.mark.parametrize("page", ["pages/home.py", "pages/steps.py", "pages/multihead.py"])
def test_download_buttons_keep_no_trace_for_the_session(downloads, page):
    """What a button keeps lives as long as the session (minutes after the browser left): the
    settings and edits, not the trace with every intermediate (issue 14.4)."""
    at = open_page(page, sentence="a fairly long sentence for the memory check", num_heads=4,
                   d_model=16)
    assert not at.exception and len(downloads) == 4
    for name, maker in downloads.items():
        kept = [o for o in reachable(maker) if isinstance(o, attnviz.AttentionTrace)]
        assert not kept, f"the {name} button keeps a trace alive"
        assert _as_bytes(maker())                        # and still makes its file


@pytest.mark.slow
@pytest.mark.parametrize("page, state", [
    ("pages/steps.py", {}), ("pages/inputs.py", {}), ("pages/multihead.py", {}),
    ("pages/home.py", {}), ("pages/pretrained.py", {"pt_view": t("pretrained.tab.model_view")}),
    ("pages/reading.py", {})])
def test_a_session_keeps_no_trace_after_its_run(page, state):
    """A session lives on for minutes after its browser left; what it keeps must not include
    a trace (a page lambda given to a widget, or a callback's arguments, kept one: issue 14.4)."""
    from attnviz.models.encoder.pretrained import PretrainedTrace

    at = open_page(page, sentence="a session that keeps nothing big", **state)
    assert not at.exception
    kept = [type(o).__name__ for o in reachable(streamlit_compat.session_store(at))   # widgets' metadata
            if isinstance(o, (attnviz.AttentionTrace, PretrainedTrace))]   # included
    assert kept == []


# ---- the file alone rebuilds the view (issue 18.18) --------------------------------------------

from attnviz.io.files import ARRAY_FIELDS, to_json  # noqa: E402
from attnviz.session.settings import Settings, weights_signature  # noqa: E402
from attnviz.session.view_files import recipe_from_file, view_from_file  # noqa: E402

REBUILT_CASES = {
    "sentence": dict(sentence="Tom's =cat= sat on 早上好", d_model=12, num_heads=3,
                     init="kaiming", seed=7, bias=True, positional=True, causal=True,
                     scaled=False, max_tokens=6),
    "matrix": dict(mode="Matrix X", x_text="1, 2, 3, 4\n0.5, -1, 2, 0\n3, 3, 1, 1",
                   num_heads=2, init="gaussian", seed=3),
    "qkv": dict(mode="Q, K, V", q_text="1, 0\n0, 2\n1, 1", k_text="0, 1\n1, 1\n2, 0",
                v_text="1, 2, 3\n4, 5, 6\n7, 8, 9", causal=True),
    "preset": dict(mode="Preset", preset="three_inputs", rounded=True),
    "raw_preset": dict(mode="Preset", preset="zao_shang_hao"),
    "pretrained": dict(mode="Pretrained model", sentence="Attention reads the sentence",
                       layer=2),
}


def _file_arrays(npz_bytes: bytes) -> dict:
    with np.load(io.BytesIO(npz_bytes), allow_pickle=False) as data:
        return {n: data[n] for n in data.files}


def _assert_same_view(rebuilt, saved: dict, settings: Settings) -> None:
    """The rebuilt view has the saved settings, tokens and every saved intermediate, exactly."""
    assert rebuilt.error is None and rebuilt.settings == settings
    assert rebuilt.tokens_q == saved["tokens_q"].tolist()
    assert rebuilt.tokens_k == saved["tokens_k"].tolist()
    for name in ARRAY_FIELDS:
        if name in saved:
            assert np.array_equal(getattr(rebuilt.trace, name), saved[name]), name
        else:
            assert getattr(rebuilt.trace, name) is None, name


@pytest.mark.slow
@pytest.mark.parametrize("case", REBUILT_CASES)
def test_the_downloaded_files_alone_rebuild_the_view(downloads, case):
    state = REBUILT_CASES[case]
    at = open_page("pages/steps.py", **state)
    assert not at.exception and not at.error
    npz = _as_bytes(downloads["attnviz_trace.npz"]())
    json_text = downloads["attnviz_trace.json"]()
    saved = _file_arrays(npz)
    settings = Settings(**state)
    # every setting is in both files, by name, with the page's own values
    assert json.loads(str(saved["settings"])) == json.loads(json_text)["settings"]
    assert {k: json.loads(json_text)["settings"][k] for k in state} == state
    for file in (npz, lambda: io.BytesIO(npz), json_text, json_text.encode()):
        rebuilt = view_from_file(file() if callable(file) else file)
        edits = recipe_from_file(file() if callable(file) else file)[1]
        _assert_same_view(rebuilt, saved, settings)
        assert edits == {}            # the settings alone made the input and the weights


def test_edits_travel_in_the_weights_and_come_back_as_edits(downloads, tmp_path):
    state = dict(sentence="edit me please", d_model=4, num_heads=2, seed=5)
    settings = Settings(**state)
    tokens = attnviz.tokenize(state["sentence"])
    w = attnviz.MultiHeadWeights.random(4, 2, seed=5)
    w_q = np.array(w.w_q)
    w_q[1, 0, 1] = 7.25
    x = attnviz.embed_tokens(tokens, 4, seed=5)
    x[2, 3] = -0.5
    at = open_page("pages/steps.py", **state, edits={weights_signature(settings): {
        "w_q": attnviz.session.edits.Edit(w_q), "x": attnviz.session.edits.Edit(x, tuple(tokens))}})
    assert not at.exception
    path = tmp_path / "t.npz"
    path.write_bytes(_as_bytes(downloads["attnviz_trace.npz"]()))
    saved = _file_arrays(path.read_bytes())
    assert saved["w_q"][1, 0, 1] == 7.25 and saved["x"][2, 3] == -0.5
    for file in (path, str(path), downloads["attnviz_trace.json"]()):
        _, edits, _ = recipe_from_file(file)
        assert set(edits) == {"w_q", "x"}
        np.testing.assert_array_equal(edits["w_q"].array, w_q)
        assert edits["x"].tokens == tuple(tokens)
        _assert_same_view(view_from_file(file), saved, settings)


def test_a_file_that_cannot_rebuild_a_view_says_why(tmp_path):
    t = attnviz.trace_attention(np.eye(3, 4), attnviz.MultiHeadWeights.random(4, 2, seed=1))
    t.to_npz(tmp_path / "plain.npz")                   # from Python, without app settings
    with raises_message("error.file.no_settings"):
        view_from_file(tmp_path / "plain.npz")
    for settings, msg_id, params in (
            ({"mode": "Toy model"}, "error.file.toy_view", {}),
            ({"seed": "7"}, "error.settings.type", dict(name="seed", type="int")),
            ({"scaled": 1}, "error.settings.type", dict(name="scaled", type="bool")),
            ({"d_model": 10**6}, "error.settings.range",
             dict(name="d_model", low=1, high=1024, value=10**6)),
            ({"init": "magic"}, "error.settings.value", dict(name="init", value="'magic'")),
            ({"warp": 9}, "error.settings.unknown", dict(count=1, names="warp"))):
        doc = json.loads(to_json(t, settings={**Settings().to_dict(), **settings}))
        with raises_message(msg_id, **params):
            view_from_file(json.dumps(doc))
    with raises_message("error.file.not_an_export"):
        view_from_file(b"\x00\x01 not a file")


@pytest.mark.slow
def test_a_language_models_file_carries_its_own_settings_not_the_toy_sidebars(decoder):
    """A SmolLM2 view's file says what made it (the model, its layer, causal as its trace),
    never the toy sidebar's d_model, heads or weights (issue 34.9), and still rebuilds it."""
    from attnviz.session.build import build_view
    from attnviz.session.view_files import view_to_json, view_to_npz

    state = dict(mode="Pretrained model", model="smollm2", sentence="The cat sat on it",
                 layer=3, d_model=16, num_heads=4, causal=False, seed=9)
    view = build_view(Settings(**state))
    assert view.error is None
    n = view.trace.n_q                     # the trace is causal: nothing above the diagonal
    assert (view.trace.mask == np.triu(np.ones((n, n), bool), 1)).all()
    doc = json.loads(view_to_json(view))["settings"]
    assert doc["model"] == "smollm2" and doc["layer"] == 3 and doc["causal"] is True
    assert not {"d_model", "num_heads", "kv_heads", "seed", "init", "x_text"} & set(doc)
    buf = io.BytesIO()
    view_to_npz(view, buf)
    saved = _file_arrays(buf.getvalue())
    assert json.loads(str(saved["settings"])) == doc
    rebuilt = view_from_file(buf.getvalue())
    assert rebuilt.error is None and rebuilt.settings.to_dict() == doc
    for name in ARRAY_FIELDS:
        if name in saved:
            assert np.array_equal(getattr(rebuilt.trace, name), saved[name]), name
