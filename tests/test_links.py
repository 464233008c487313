"""Shared links: the URL's query string reopens the same view; garbage never raises."""

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

import attnviz
import attnviz.edits
import attnviz.settings_view
from tests.apptest_helpers import ROOT, TIMEOUT, charts, heatmap_z, no_exceptions, plain

EVERY_SETTING = {
    "mode": "Sentence", "sentence": "早上好 the cat", "d_model": "12", "num_heads": "3",
    "d_k": "5", "init": "kaiming", "seed": "7", "bias": "1", "scaled": "0", "causal": "1",
    "positional": "1", "max_tokens": "4", "step": "weights", "head": "2",
}


def open_link(params: dict, page: str | None = None) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT)
    for key, value in params.items():
        at.query_params[key] = value
    at.run()
    if page:
        at.switch_page(page)
        at.run()
    return at


def expected_weights_every_setting() -> np.ndarray:
    """The same view computed straight from the engine, not through the app."""
    tokens = attnviz.tokenize("早上好 the cat")[:4]
    x = attnviz.embed_tokens(tokens, 12, seed=7) + attnviz.sinusoidal_positions(4, 12)
    w = attnviz.MultiHeadWeights.random(12, 3, d_k=5, d_v=5, init="kaiming", seed=7, bias=True)
    return attnviz.trace_attention(x, w, causal=True, scale=1.0).weights[2]


def test_a_link_with_every_setting_reproduces_the_trace():
    at = open_link(EVERY_SETTING, "pages/steps.py")
    no_exceptions(at)
    assert at.session_state["step"] == "weights" and at.session_state["head"] == 2
    shown = heatmap_z(charts(at)[0])
    want = expected_weights_every_setting()
    np.testing.assert_allclose(np.nan_to_num(shown, nan=0.0), want, atol=1e-12)
    assert any("only the first 4" in plain(i) for i in at.info)


def test_the_app_writes_what_differs_from_the_defaults_into_the_url():
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT)
    at.session_state["sentence"] = "hello world"
    at.session_state["num_heads"] = 2
    at.session_state["causal"] = True
    at.run()
    assert dict(at.query_params) == {"sentence": "hello world", "num_heads": "2",
                                     "causal": "1"}


def test_edited_matrices_travel_in_the_link():
    first = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT)
    state = {"sentence": "a b", "d_model": 2, "num_heads": 1}
    for key, value in state.items():
        first.session_state[key] = value
    signature = attnviz.settings_view.weights_signature(attnviz.settings_view.Settings(**state))
    w_v = np.array([[[0.5, -1.0], [2.0, 0.25]]])
    first.session_state["edits"] = {signature: {
        "x": attnviz.edits.Edit(np.array([[1.0, 2], [3, 4]]), ("a", "b")),
        "w_v": attnviz.edits.Edit(w_v)}}
    first.run()
    link = dict(first.query_params)
    assert "edits" in link and link["sentence"] == "a b"
    again = open_link({**link, "step": "v"}, "pages/steps.py")
    np.testing.assert_allclose(heatmap_z(charts(again)[0]), np.array([[1, 2], [3, 4]]) @ w_v[0])


def _encoded(doc_text: str) -> str:
    import base64
    import zlib

    raw = zlib.compress(doc_text.encode("utf-8"), 9)
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


HOSTILE = [
    {"edits": _encoded('{"w_q": {"values": ' + "[" * 5000 + "]" * 5000 + "}}")},   # deep
    {"edits": _encoded('{"w_q": {"values": [' + "0," * 3_000_000 + "0]}}")},        # a bomb
    {"edits": "A" * 400_000},              # (Streamlit drops a query string over 512 K chars)
    {"sentence": "x" * 400_000},
    {"x_text": "1 " * 200_000, "mode": "Matrix X"},
    {"[Your session expired](https://evil.example/login)": "1", "a" * 5000: "b"},
]


@pytest.mark.parametrize("params", HOSTILE)
def test_a_hostile_link_gives_a_notice_and_the_page_still_draws(params):
    at = open_link(params, "pages/steps.py")
    no_exceptions(at)
    home = open_link(params)
    no_exceptions(home)
    assert home.sidebar.warning, "a notice says what was ignored"
    assert charts(home), "the page still draws"


def test_a_link_over_streamlits_limit_opens_the_default_view():
    home = open_link({"sentence": "x" * 1_000_000})
    no_exceptions(home)
    assert home.session_state["sentence"] == attnviz.settings_view.DEFAULT_SENTENCE
    assert charts(home)


@pytest.mark.parametrize("params", [
    {"d_model": "lots", "num_heads": "-3", "seed": "1e99"},
    {"mode": "<script>", "preset": "nope", "init": "0", "bias": "maybe"},
    {"edits": "not base64!", "step": "nope", "head": "99", "query": "x"},
    {"edits": "eJzLSM3JyVcozy_KSQEAGgQEXQ", "max_tokens": "100000"},
    {"sentence": "x" * 30_000, "unknown": "1", "layer": "42", "d_k": "999999999999"},
])
def test_garbage_in_the_link_falls_back_with_a_notice(params):
    for page in (None, "pages/steps.py", "pages/multihead.py", "pages/inputs.py"):
        at = open_link(params, page)
        no_exceptions(at)
    at = open_link(params)
    assert at.warning or at.error
