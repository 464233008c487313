"""Issue 26: every text a visitor sends is bounded before any work. Each text box the app draws
has its limit (max_chars: the browser stops there, and Streamlit cuts a longer value a client
sends); a value longer than the box put in the session another way is cut before the box is
drawn, and a full box says so; a matrix whose exact text would not fit a box is not written
into one. (A real websocket client sending a 16 MB prompt: tests/test_server_limits.py.)"""

from __future__ import annotations

import io

import numpy as np
import pytest

from attnviz.app.shared import links
from attnviz.app.shared.text import MAX_MATRIX_CHARS, MAX_PROMPT_CHARS, MAX_TEXT_CHARS
from attnviz.io.matrix_files import matrix_to_text
from attnviz.i18n import t, use_language
from tests.apptest_helpers import no_exceptions, open_page, plain, shows

WORDS = " ".join(f"w{i}" for i in range(600))
WIDE = dict(sentence=WORDS, max_tokens=512, d_model=1024, num_heads=1)   # X is 512 × 1024


def text_boxes(at) -> dict[str, int]:
    """Every text box the run drew: its key (or label) → its max_chars (0: none)."""
    boxes = {}
    for kind in ("text_input", "text_area"):
        for box in at.get(kind):
            boxes[box.key or box.label] = box.proto.max_chars
    return boxes


@pytest.mark.slow
@pytest.mark.parametrize("page, lang, state, expected", [
    ("pages/home.py", "en", {}, {"sentence": MAX_TEXT_CHARS}),
    ("pages/home.py", "en", {"mode": "Matrix X"}, {"x_text": MAX_MATRIX_CHARS}),
    ("pages/home.py", "en", {"mode": "Q, K, V"},
     {"q_text": MAX_MATRIX_CHARS, "k_text": MAX_MATRIX_CHARS, "v_text": MAX_MATRIX_CHARS}),
    ("pages/inputs.py", "en", {"matrix": "w_q"}, {"sentence": MAX_TEXT_CHARS}),
    ("pages/generate.py", "en", {}, {"gen_prompt": MAX_PROMPT_CHARS}),
    ("pages/pretrained.py", "en", {}, {"pt_compare": MAX_TEXT_CHARS}),
    # (a tab is seeded by its label: the English page's)
    ("pages/reading.py", "en", {"rd_view": t("reading.tab.ablation")},
     {"ab_other": MAX_TEXT_CHARS}),
    ("pages/experiments.py", "en", {"experiment": t("experiments.tab.cross")},
     {"exp_cross_text": MAX_TEXT_CHARS}),
    ("pages/experiments.py", "en", {"experiment": t("experiments.tab.sink")},
     {"exp_sink_text": MAX_TEXT_CHARS}),
    ("pages/experiments.py", "en", {"experiment": t("experiments.tab.rope")},
     {"exp_rope_text": MAX_TEXT_CHARS}),
    ("pages/multihead.py", "en", {"mh_section": t("multihead.tab.second")},
     {"mh_compare": MAX_TEXT_CHARS}),
])
def test_every_text_box_has_its_limit(page, lang, state, expected):
    at = open_page(page, params={"lang": lang}, **state)
    boxes = text_boxes(at)
    for key, limit in expected.items():
        assert boxes.get(key) == limit, (key, boxes)
    unbounded = {k: v for k, v in boxes.items() if not 0 < v <= MAX_MATRIX_CHARS}
    assert unbounded == {}, "a text box without a limit"


def test_the_limits_are_what_the_app_can_use():
    from attnviz.core.inputs import MAX_D_MODEL, MAX_TOKENS
    from attnviz.io.matrix_files import MAX_UPLOAD_MB

    # the largest matrix the app reads, at 8 characters a number: "-0.1234,"
    assert MAX_MATRIX_CHARS == MAX_TOKENS * MAX_D_MODEL * 8
    assert MAX_MATRIX_CHARS < MAX_UPLOAD_MB * 2**20              # a larger one is uploaded
    assert links.MAX_CHARS[str] == MAX_TEXT_CHARS                # a link's text fits its box
    assert MAX_PROMPT_CHARS < MAX_TEXT_CHARS


def test_text_put_in_the_session_beyond_the_box_is_cut_before_the_box_is_drawn():
    at = open_page("pages/home.py", params={"lang": "en"}, mode="Matrix X",
                   x_text="1 2\n" * 2_000_000)
    no_exceptions(at)
    assert len(at.session_state["x_text"]) == MAX_MATRIX_CHARS
    assert shows(at.sidebar.warning, "text.at_limit", chars=f"{MAX_MATRIX_CHARS:,}"), \
        [plain(w) for w in at.sidebar.warning]


@pytest.mark.slow
def test_a_full_box_says_so_and_a_shorter_one_does_not():
    at = open_page("pages/home.py", params={"lang": "en"}, sentence="a " * (MAX_TEXT_CHARS // 2))
    assert len(at.session_state["sentence"]) == MAX_TEXT_CHARS
    assert shows(at.sidebar.warning, "text.at_limit", chars="20,000")
    at = open_page("pages/home.py", params={"lang": "en"},
                   sentence="a " * (MAX_TEXT_CHARS // 2 - 1))
    assert not shows(at.sidebar.warning, "text.at_limit")
    at = open_page("pages/home.py", params={"lang": "zh"}, sentence="a " * (MAX_TEXT_CHARS // 2))
    with use_language("zh"):
        assert shows(at.sidebar.warning, "text.at_limit", chars="20,000")


@pytest.mark.slow
def test_a_matrix_too_long_for_a_paste_box_is_not_written_into_it():
    at = open_page("pages/inputs.py", **WIDE, matrix="x")
    no_exceptions(at)
    paste = [a for a in at.text_area if a.key.startswith("paste_text_x")]
    assert len(paste) == 1 and paste[0].value == ""
    assert paste[0].proto.max_chars == MAX_MATRIX_CHARS
    assert shows(at.caption, "edit.paste.too_long", numbers=f"{512 * 1024:,}",
                 limit=f"{MAX_MATRIX_CHARS:,}")
    # the first row's text as the box would have held it: the whole matrix would not fit
    x = at.session_state["weight_editor"].full
    assert x.shape == (512, 1024) and len(matrix_to_text(x[:1])) * 512 > MAX_MATRIX_CHARS


def _npy(array: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, array)
    return buf.getvalue()


def _upload_x(name: str, array: np.ndarray):
    """Matrix X's uploader given `array` as an .npy (a fresh session: AppTest draws the sidebar
    at the first run only)."""
    at = open_page("pages/home.py", mode="Matrix X")
    before = at.session_state["x_text"]
    at.file_uploader(key="x_text_upload").set_value(
        (name, _npy(array), "application/octet-stream")).run()
    no_exceptions(at)
    return at, before


@pytest.mark.slow
def test_an_upload_whose_exact_text_would_not_fit_its_box_is_refused():
    big = np.random.default_rng(0).standard_normal((400, 1024))     # ~21 characters a number
    written = len(matrix_to_text(big))
    assert written > MAX_MATRIX_CHARS
    at, before = _upload_x("big.npy", big)
    assert at.session_state["x_text"] == before
    # (the error the sidebar shows, as kept: AppTest draws no sidebar after the first run)
    error = at.session_state["x_text_upload_error"]
    assert error.msg_id == "upload.too_long_for_box"
    said = error.render("en")
    assert f"big.npy: its 400 × 1024 numbers, written exactly, take {written:,}" in said
    assert f"{MAX_MATRIX_CHARS:,}" in said and f"{MAX_MATRIX_CHARS:,}" in error.render("zh")
    # the same shape with numbers written shorter fits, and becomes the box's text
    short = np.round(big, 2)
    assert len(matrix_to_text(short)) <= MAX_MATRIX_CHARS
    at, _ = _upload_x("short.npy", short)
    assert at.session_state["x_text"] == matrix_to_text(short)
    assert "x_text_upload_error" not in at.session_state
