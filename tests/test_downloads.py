"""The pages' download buttons hand over the page's own tokens and settings (AppTest)."""

import io
import json

import numpy as np
import pytest
from streamlit.runtime.media_file_manager import MediaFileManager

import attnviz
from tests.apptest_helpers import open_page, reachable

SENTENCE = "Tom's <b>cat</b> sat"


@pytest.fixture
def downloads(monkeypatch):
    """file name → the callable a download button registered (it runs when clicked)."""
    made = {}
    original = MediaFileManager.add_deferred

    def record(self, data_callable, mimetype, coordinates, file_name=None, **kw):
        made[file_name] = data_callable
        return original(self, data_callable, mimetype, coordinates, file_name, **kw)

    monkeypatch.setattr(MediaFileManager, "add_deferred", record)
    return made


def _as_bytes(data) -> bytes:
    return data.encode() if isinstance(data, str) else data


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


def test_preset_report_names_the_preset(downloads):
    at = open_page("pages/home.py", mode="Preset", preset="three_inputs")
    assert not at.exception
    report = _as_bytes(downloads["attnviz_report.html"]()).decode()
    assert "Preset: Three inputs, one head (no scaling)" in report
    with np.load(io.BytesIO(_as_bytes(downloads["attnviz_trace.npz"]())),
                 allow_pickle=False) as data:
        assert data["tokens_q"].tolist() == list(attnviz.load_preset("three_inputs").tokens)


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


@pytest.mark.parametrize("page, state", [
    ("pages/steps.py", {}), ("pages/inputs.py", {}), ("pages/multihead.py", {}),
    ("pages/home.py", {}), ("pages/pretrained.py", {"pt_view": "Model view: every layer and head"}),
    ("pages/reading.py", {})])
def test_a_session_keeps_no_trace_after_its_run(page, state):
    """A session lives on for minutes after its browser left; what it keeps must not include
    a trace (a page lambda given to a widget, or a callback's arguments, kept one: issue 14.4)."""
    from attnviz.pretrained import PretrainedTrace

    at = open_page(page, sentence="a session that keeps nothing big", **state)
    assert not at.exception
    kept = [type(o).__name__ for o in reachable(at.session_state._state)   # widgets' metadata
            if isinstance(o, (attnviz.AttentionTrace, PretrainedTrace))]   # included
    assert kept == []
