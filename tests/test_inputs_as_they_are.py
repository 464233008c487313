"""Issue 18, "inputs as they are", through the pages (AppTest): a 1 MB word, a long word's
labels, a spreadsheet's decimal commas, and edits too large for the link."""

import io

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

import attnviz
from attnviz.session.edits import Edit
from attnviz.session.build import build_view
from attnviz.session.settings import Settings, weights_signature
from attnviz.app.shared import links
from attnviz.i18n import t
from tests.apptest_helpers import (TIMEOUT, apply_paste, charts, heatmap_z, no_exceptions,
                                   open_page, plain, shared_components, shown_tokens, shows)

BUDGET = 3_000_000          # bytes of figures a page sends (SPEC), counted as UTF-8


def sent_bytes(at) -> int:
    return sum(len(c.proto.spec.encode("utf-8")) for c in at.get("plotly_chart"))


# ---- 13: one 1 MB word --------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("page", ["pages/home.py", "pages/inputs.py", "pages/steps.py",
                                  "pages/multihead.py", "pages/experiments.py"])
def test_a_one_megabyte_word_keeps_every_page_within_the_figure_budget(page):
    """A 1 MB sentence put in the session (no browser sends one: the box holds
    MAX_TEXT_CHARS, issue 26) is cut to the box's limit, saying so; the one long word left
    still keeps every page within the figure budget."""
    from attnviz.app.shared.text import MAX_TEXT_CHARS

    at = open_page(page, sentence="a " + "x" * 1_000_000 + " b")
    no_exceptions(at)
    assert at.session_state["sentence"] == "a " + "x" * (MAX_TEXT_CHARS - 2)
    if page == "pages/home.py":       # (AppTest runs another page alone, without the sidebar)
        assert shows(at.sidebar.warning, "text.at_limit", chars=f"{MAX_TEXT_CHARS:,}")
    assert charts(at), "the page draws"
    assert sent_bytes(at) <= BUDGET, f"{sent_bytes(at) / 1e6:.1f} MB of figures"
    assert sum(len(m.value) for m in at.markdown) < 20_000      # the token line, cut too


@pytest.mark.slow
@pytest.mark.parametrize("page", ["pages/home.py", "pages/multihead.py"])
def test_100_long_words_of_four_byte_letters_and_16_heads_stay_within_the_budget(page):
    """The worst the labels can weigh: every token long, in a script whose letters take four
    bytes (𝐀𝐁… mathematical bold), 16 facets repeating them, and few enough tokens (100) that
    the heads grid sends every token (beyond ~110 it pools them into numbered blocks)."""
    words = " ".join(chr(0x1D400 + i % 52) * 190 + str(i) for i in range(100))
    # (190 letters: labels are cut at describe.labels.HOVER_CHARS; 100 such words fit the box)
    from attnviz.app.shared.text import MAX_TEXT_CHARS
    assert len(words) <= MAX_TEXT_CHARS
    at = open_page(page, sentence=words, max_tokens=100, num_heads=16, d_model=64)
    no_exceptions(at)
    assert sent_bytes(at) <= BUDGET, f"{sent_bytes(at) / 1e6:.1f} MB of figures"


@pytest.mark.slow
def test_a_long_word_is_cut_on_the_axis_longer_in_the_hover_and_whole_in_the_table():
    word = "Donaudampfschifffahrt" + "x" * 279                       # 300 characters
    at = open_page("pages/steps.py", sentence=f"a {word} b", step="weights",
                   step_table_weights_shown=True)
    no_exceptions(at)
    fig = charts(at)[0]
    hover = fig["data"][0]["y"][1]                                  # the category: hover text
    assert hover.startswith("Donaudampfschifffahrt") and hover.endswith("…")
    assert len(hover) == attnviz.describe.labels.HOVER_CHARS
    ticks = fig["layout"]["yaxis"]["ticktext"]
    assert ticks == ["a", word[:attnviz.describe.labels.TICK_CHARS - 1] + "…", "b"]
    assert fig["layout"]["yaxis"]["tickvals"] == fig["layout"]["yaxis"]["categoryarray"]
    table = at.dataframe[0].value
    assert list(table.index) == ["a", word, "b"]                    # the table: every letter


@pytest.mark.slow
def test_the_token_line_shows_a_long_token_cut():
    at = open_page("pages/home.py", sentence="a " + "y" * 5000 + " b")
    tokens = shown_tokens(at)
    assert tokens[0] == "a" and tokens[2] == "b"
    assert tokens[1] == "y" * (attnviz.describe.labels.HOVER_CHARS - 1) + "…"


# ---- 15: a spreadsheet's decimal commas, said --------------------------------------------------

@pytest.mark.slow
def test_a_semicolon_paste_with_decimal_commas_is_read_and_said_on_the_page():
    at = open_page("pages/steps.py", mode="Matrix X", x_text="1,5;2,5\n3,5;4,5", step="x",
                   num_heads=1)
    no_exceptions(at)
    np.testing.assert_array_equal(heatmap_z(charts(at)[0]), [[1.5, 2.5], [3.5, 4.5]])
    assert shows(at.info, "notice.matrix.decimal_comma", row=1, col=1, cell="1,5", dotted="1.5"), \
        [plain(i) for i in at.info]


@pytest.mark.slow
def test_matrix_x_reads_a_semicolon_on_one_line_as_the_end_of_a_row_and_says_so():
    # issue 27, item 9: "'1,2,3' is not a number" before
    for text in ("1,2,3;4,5,6", "1 2 3; 4 5 6", "１，２，３；４，５，６"):
        at = open_page("pages/steps.py", mode="Matrix X", x_text=text, step="x", num_heads=1)
        no_exceptions(at)
        assert not at.error, [e.value for e in at.error]
        np.testing.assert_array_equal(heatmap_z(charts(at)[0]), [[1, 2, 3], [4, 5, 6]])
    at = open_page("pages/home.py", mode="Matrix X", x_text="1,2,3;4,5,6", num_heads=1)
    no_exceptions(at)
    assert not at.error and "1,2,3;4,5,6" in at.sidebar.text_area(key="x_text").help


@pytest.mark.slow
def test_a_full_width_paste_in_q_k_v_is_read():
    at = open_page("pages/steps.py", mode="Q, K, V", q_text="１，０，１\n０，１，１",
                   k_text="0、0、1\n0、1、1", v_text="1；2\n3；4", step="scaled_scores")
    no_exceptions(at)
    # tutorial 002's scaled scores: [[0.577, 0.577], [0.577, 1.155]]
    np.testing.assert_allclose(heatmap_z(charts(at)[0]),
                               np.array([[1, 1], [1, 2]]) / np.sqrt(3), rtol=1e-12)


# ---- 17: edits too large for the link ----------------------------------------------------------

def _large_edit_session():
    """A session whose X (11 tokens × 64) is edited with numbers too many for the link."""
    state = dict(d_model=64, num_heads=4)
    s = Settings(**state)
    tokens = attnviz.tokenize(s.sentence)
    x = np.random.default_rng(7).standard_normal((len(tokens), 64))
    at = open_page(**state, edits={weights_signature(s): {"x": Edit(x, tuple(tokens))}})
    return at, s, x


@pytest.mark.slow
def test_edits_too_large_for_the_link_say_so_and_how_to_keep_them():
    at, _, _ = _large_edit_session()
    no_exceptions(at)
    link = dict(at.query_params)
    assert "edits" not in link and link[links.LEFT_OUT_PARAM] == "X"
    assert shows(at.sidebar.warning, "link.edits_session_only", names="X")
    assert shows(at.toast, "link.edits_session_only", names="X")


@pytest.mark.slow
def test_after_a_restart_the_link_says_which_edits_were_lost():
    """A new session (a reload, or the first run after a server restart) opened on the link
    of a session with too-large edits: the matrices are the generated ones, and the page says
    that the edits of X were lost and where the .npz loads back."""
    first, _, _ = _large_edit_session()
    again = open_page(params=dict(first.query_params))
    assert shows(again.sidebar.warning, "link.edits_lost", names="X")
    assert shows(again.toast, "link.edits_lost_toast", names="X")
    assert [u.proto.label for u in again.get("file_uploader")] == [t("link.restore.label")]
    assert not again.session_state["edits"].get(weights_signature(Settings(d_model=64,
                                                                           num_heads=4)))


@pytest.mark.slow
def test_the_exported_npz_brings_the_lost_edits_back():
    """restore_edits, run inside a session as the sidebar's uploader runs it: the X of the
    .npz the page exported comes back as the edit, exactly; unchanged matrices stay unedited."""
    at, s, x = _large_edit_session()
    view = build_view(s, {"x": Edit(x, tuple(attnviz.tokenize(s.sentence)))})
    buf = io.BytesIO()
    view.trace.to_npz(buf, view.tokens_q, view.tokens_k)
    script = f"""
import streamlit as st
from attnviz.app.shared import links
from attnviz.i18n import t
st.session_state.update(d_model=64, num_heads=4)
restored = links.restore_edits({buf.getvalue()!r}, "attnviz_trace.npz")
st.session_state["restored_names"] = sorted(restored)
"""
    fresh = shared_components(AppTest.from_string(script, default_timeout=TIMEOUT)).run()
    no_exceptions(fresh)
    assert fresh.session_state["restored_names"] == ["x"]
    stored = fresh.session_state["edits"][weights_signature(s)]["x"]
    np.testing.assert_array_equal(stored.array, x)


def test_an_npz_of_other_sizes_is_refused_naming_the_difference():
    other = build_view(Settings(d_model=8, num_heads=2))
    buf = io.BytesIO()
    other.trace.to_npz(buf, other.tokens_q, other.tokens_k)
    script = f"""
import streamlit as st
from attnviz.core.errors import AttnvizInputError
from attnviz.app.shared import links
from attnviz.i18n import t
st.session_state.update(d_model=64, num_heads=4)
try:
    links.restore_edits({buf.getvalue()!r}, "old.npz")
except AttnvizInputError as exc:
    st.session_state["why"] = exc.message.msg_id, {{k: str(v) for k, v in exc.message.params.items()}}
"""
    fresh = shared_components(AppTest.from_string(script, default_timeout=TIMEOUT)).run()
    msg_id, params = fresh.session_state["why"]
    assert msg_id == "error.restore.shape"
    assert {k: params[k] for k in ("name", "matrix", "shape", "want")} == \
        {"name": "old.npz", "matrix": "X", "shape": "11 × 8", "want": "11 × 64"}


# ---- 12: the HTML report ------------------------------------------------------------------------

@pytest.mark.slow
def test_the_report_shows_an_override_as_its_code_and_isolates_every_token():
    s = Settings(sentence="one \u202etwo שָׁלוֹם עוֹלָם", d_model=8, num_heads=2)
    view = build_view(s)
    html = attnviz.report_html(view.trace, view.tokens_q, settings=s)
    assert "\u202e" not in html                                   # nothing reverses the page
    assert t("report.source.sentence", sentence="one ⟨U+202E⟩two שָׁלוֹם עוֹלָם") in html
    for token in ("one", "two", "שָׁלוֹם", "עוֹלָם"):
        assert f"<bdi class='tok'>{token}</bdi>" in html


@pytest.mark.slow
def test_a_weight_pasted_with_decimal_commas_is_applied_and_said():
    at = open_page("pages/inputs.py", d_model=4, num_heads=2, matrix="w_q", edit_head=1)
    area = next(a for a in at.text_area if a.key.startswith("paste_text_w_q_1"))
    area.input("1,5;-2\n0,25;3\n4;5\n6;7,75")
    apply_paste(at)
    no_exceptions(at)
    assert shows(at.info, "notice.matrix.decimal_comma", row=1, col=1, cell="1,5", dotted="1.5"), \
        [plain(i) for i in at.info]
    s = Settings(d_model=4, num_heads=2)
    w_q = at.session_state["edits"][weights_signature(s)]["w_q"].array
    np.testing.assert_array_equal(w_q[1], [[1.5, -2], [0.25, 3], [4, 5], [6, 7.75]])
