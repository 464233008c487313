"""What the page shows is what the engine computed and what the user set (issue 9).

Expected numbers come from the tutorials (003's printed outputs, 002's key rows) or from the
inputs themselves (X's column count), never from the page's own code.
"""

import io

import numpy as np
import pytest


import attnviz
from attnviz.io import matrix_files
from attnviz.i18n import Message, t
from tests.message_helpers import cell_at, message_pattern, raises_message

from tests.apptest_helpers import (ROOT, apply_paste, charts, heatmap_z, no_exceptions, open_page,
                                   plain, shows)

ARTICLE_003_OUTPUT = [[2, 7, 1.5], [2, 8, 0], [2, 7.8, 0.3]]      # tutorial 003, as printed


# Sidebar checks open Home with the state seeded (every page has the sidebar; Home is the
# quickest).

def sidebar_numbers(at) -> dict:
    return {n.label: (n.value, n.disabled) for n in at.sidebar.number_input}


def sidebar_checkboxes(at) -> dict:
    return {c.label: (c.value, c.disabled) for c in at.sidebar.checkbox}


def test_a_preset_shows_its_own_sizes_and_scaling_disabled_with_the_reason():
    at = open_page("pages/home.py", mode="Preset", preset="three_inputs")
    no_exceptions(at)
    numbers = sidebar_numbers(at)
    assert numbers["d_model"] == (4, True)      # tutorial 003: inputs of 4 numbers
    assert numbers[t("sidebar.heads.label")] == (1, True)
    assert numbers["d_k"] == (3, True)          # its W_Q is 4 × 3
    scaled = [c for c in at.sidebar.checkbox if c.label == t("sidebar.scaled.label")][0]
    assert scaled.value is False and scaled.disabled
    assert "003" in scaled.help


def test_the_two_queries_preset_divides_by_root_3_and_says_so():
    at = open_page("pages/home.py", mode="Preset", preset="two_queries")
    assert sidebar_checkboxes(at)[t("sidebar.scaled.label")] == (True, True)
    assert sidebar_numbers(at)["d_k"] == (3, True)


def test_ticking_scaling_in_a_preset_cannot_change_what_the_page_shows():
    # The control is disabled; even a value forced into the state leaves tutorial 003 unscaled.
    at = open_page("pages/steps.py", mode="Preset", preset="three_inputs",
                   step="scaled_scores", scaled=True)
    np.testing.assert_array_equal(heatmap_z(charts(at)[0]),
                                  [[2, 4, 4], [4, 16, 12], [4, 12, 10]])


def test_matrix_x_mode_shows_the_width_of_x_as_d_model():
    at = open_page("pages/home.py", mode="Matrix X", x_text="1 2 3 4 5\n6 7 8 9 10",
                   num_heads=1)
    assert sidebar_numbers(at)["d_model"] == (5, True)
    assert sidebar_numbers(at)["d_k"] == (5, True)        # 5 / 1 head, derived


def test_q_k_v_mode_shows_one_head_and_the_width_of_q():
    at = open_page("pages/home.py", mode="Q, K, V", q_text="1 2 3 4\n5 6 7 8",
                   k_text="1 0 0 0\n0 1 0 0", v_text="1\n2")
    numbers = sidebar_numbers(at)
    assert numbers[t("sidebar.heads.label")] == (1, True) and numbers["d_k"] == (4, True)


@pytest.mark.slow
def test_d_k_shows_the_derived_value_not_zero_or_the_users_choice():
    # (AppTest loses the sidebar after a click on it, so the choices are seeded.)
    at = open_page("pages/home.py", d_model=12, num_heads=3)
    assert sidebar_numbers(at)["d_k"] == (4, True)
    assert sidebar_checkboxes(at)[t("sidebar.d_k_auto.label")] == (True, False)
    chosen = dict(d_model=12, num_heads=3, d_k=6)
    at = open_page("pages/home.py", **chosen)
    assert sidebar_numbers(at)["d_k"] == (6, False)
    assert sidebar_checkboxes(at)[t("sidebar.d_k_auto.label")] == (False, False)
    at = open_page("pages/steps.py", step="q", **chosen)
    assert heatmap_z(charts(at)[0]).shape == (11, 6)       # 11 tokens × d_k 6


@pytest.mark.slow
def test_positional_encoding_is_shown_off_where_it_cannot_apply():
    at = open_page("pages/home.py", mode="Preset", preset="it", positional=True)
    assert sidebar_checkboxes(at)[t("sidebar.positional.label")] == (False, True)


def formula_of(at) -> str:
    return at.get("latex")[0].value


@pytest.mark.slow
@pytest.mark.parametrize("state, present, absent", [
    (dict(scaled=True), [r"\sqrt{d_k}"], ["M_h"]),
    (dict(scaled=False), [], [r"\sqrt", "M_h"]),
    (dict(scaled=True, causal=True), [r"\sqrt{d_k}", "M_h"], []),
    (dict(scaled=False, causal=True), ["M_h"], [r"\sqrt"]),
])
def test_the_weights_formula_on_the_page_follows_scaling_and_mask(state, present, absent):
    at = open_page("pages/steps.py", step="weights", **state)
    formula = formula_of(at)
    for part in present:
        assert part in formula
    for part in absent:
        assert part not in formula


@pytest.mark.slow
def test_tutorial_003_notes_the_rounding_and_the_switch_gives_the_printed_output():
    at = open_page("pages/steps.py", mode="Preset", preset="three_inputs", step="output")
    assert shows(at.info, "notice.rounded.tick")
    exact = heatmap_z(charts(at)[0])
    np.testing.assert_allclose(exact[0], [1.936621, 6.683105, 1.595068], atol=1e-6)
    home = open_page("pages/home.py", mode="Preset", preset="three_inputs")
    assert sidebar_checkboxes(home)[t("sidebar.rounded.label")] == (False, False)
    at = open_page("pages/steps.py", mode="Preset", preset="three_inputs", step="output",
                   rounded=True)
    no_exceptions(at)
    np.testing.assert_allclose(heatmap_z(charts(at)[0]), ARTICLE_003_OUTPUT, atol=1e-12)
    at.session_state["step"] = "weights"
    at.run()
    assert message_pattern("step.weights.title_given").search(at.subheader[0].value)
    np.testing.assert_array_equal(heatmap_z(charts(at)[0]),
                                  [[0, .5, .5], [0, 1, 0], [0, .9, .1]])


def test_two_queries_labels_its_keys_as_keys():
    at = open_page("pages/steps.py", mode="Preset", preset="two_queries", step="weights")
    fig = charts(at)[0]
    assert list(fig["data"][0]["x"]) == ["key 1", "key 2"]
    assert list(fig["data"][0]["y"]) == ["query 1", "query 2"]
    at.session_state["step"] = "k"
    at.run()
    assert list(charts(at)[0]["data"][0]["y"]) == ["key 1", "key 2"]
    assert "query" not in " ".join(s.value for s in at.subheader)


@pytest.mark.slow
@pytest.mark.parametrize("param, raw, used", [
    ("d_model", "999999", 1024), ("num_heads", "-3", 1), ("num_heads", "999999", 16),
    ("max_tokens", "100000", 512), ("seed", "-1", 0), ("layer", "9", 5), ("d_k", "-2", 0),
])
def test_out_of_range_numbers_in_a_link_are_clamped_with_a_notice(param, raw, used):
    at = open_page(params={param: raw})
    assert at.session_state[param] == used
    notices = [plain(w) for w in at.sidebar.warning]
    assert any(param in n and raw in n and str(used) in n for n in notices), notices


@pytest.mark.slow
def test_a_long_sentence_is_kept_out_of_the_link_with_a_note_and_still_cut_to_the_limit():
    sentence = "word " * 3000                                   # 15,000 characters
    at = open_page("pages/home.py", sentence=sentence)
    no_exceptions(at)
    assert "sentence" not in dict(at.query_params)
    assert shows(at.sidebar.caption, "link.too_long")
    assert shows(at.info, "notice.tokens.cut_at_limit", count=3000, used=64, maximum=512)


def test_the_paste_box_holds_every_number_exactly_so_applying_it_changes_nothing():
    at = open_page("pages/inputs.py", sentence="Thinking Machines", d_model=4, num_heads=1)
    x = attnviz.embed_tokens(["Thinking", "Machines"], 4)          # the page's X, from the engine
    area = next(a for a in at.text_area if a.key.startswith("paste_text_x"))
    np.testing.assert_array_equal(attnviz.parse_matrix(area.value), x)
    apply_paste(at)
    no_exceptions(at)
    np.testing.assert_array_equal(heatmap_z(charts(at)[0]), x)


@pytest.mark.slow
def test_a_bad_paste_names_the_matrix_and_head_as_the_page_does():
    at = open_page("pages/inputs.py", sentence="a b", d_model=2, num_heads=2, d_k=1,
                   matrix="w_k", edit_head=1)
    area = next(a for a in at.text_area if a.key.startswith("paste_text_w_k"))
    area.input("1\n1e400")
    apply_paste(at)
    where = cell_at(2, 1, Message("edit.of_head", matrix="W_K", head=1))
    assert shows(at.error, "error.cell.too_large_text", where=where, value="'1e400'"), \
        [plain(e) for e in at.error]


def test_an_uploaded_npy_with_nan_names_the_cell():
    buf = io.BytesIO()
    np.save(buf, np.array([[1.0, 2.0, 3.0], [4.0, 5.0, np.nan]]))
    with raises_message("error.cell.nan", where=cell_at(2, 3, "w.npy")):
        matrix_files.read_matrix_file("w.npy", buf.getvalue())


def test_an_npz_named_npy_and_a_complex_npy_are_refused_with_a_message():
    buf = io.BytesIO()
    np.savez(buf, a=np.eye(2), b=np.eye(3))
    with raises_message("error.npy.is_npz", name="w.npy"):
        matrix_files.read_matrix_file("w.npy", buf.getvalue())
    buf = io.BytesIO()
    np.save(buf, np.array([[1 + 2j, 3.0]]))
    with raises_message("error.npy.complex", name="c.npy"):
        matrix_files.read_matrix_file("c.npy", buf.getvalue())


def test_an_oversized_upload_is_refused_by_its_shape_before_it_is_parsed(monkeypatch):
    parsed = []
    monkeypatch.setattr(matrix_files, "parse_matrix_with_notes", lambda *a, **k: parsed.append(1))
    column = ("0.5\n" * 600_000).encode()                      # 600,000 × 1
    with raises_message("error.npy.too_large", name="tall.csv", rows=600_000, cols=1):
        matrix_files.read_matrix_file("tall.csv", column)
    assert not parsed                                          # judged before parsing
    buf = io.BytesIO()
    np.save(buf, np.zeros((2, 5000)))
    with raises_message("error.npy.too_large", name="wide.npy", rows=2, cols=5000):
        matrix_files.read_matrix_file("wide.npy", buf.getvalue())
    buf = io.BytesIO()
    np.save(buf, np.array([[1, "a"]], dtype=object), allow_pickle=True)
    with raises_message("error.npy.pickle", name="objects.npy"):
        matrix_files.read_matrix_file("objects.npy", buf.getvalue())


def test_the_server_accepts_no_upload_larger_than_the_app_can_use():
    import tomllib

    config = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    assert config["server"]["maxUploadSize"] == matrix_files.MAX_UPLOAD_MB
    assert 512 * 1024 * 25 <= matrix_files.MAX_UPLOAD_MB * 2**20     # 25 characters a number fit


@pytest.mark.slow
@pytest.mark.parametrize("state, present, absent", [
    (dict(scaled=False), [], [r"\sqrt"]),
    (dict(causal=True), ["M_h", r"\sqrt{d_k}"], []),
])
def test_the_multihead_formula_follows_scaling_and_mask(state, present, absent):
    at = open_page("pages/multihead.py", **state)
    formula = at.get("latex")[0].value
    assert "H-1" in formula
    for part in present:
        assert part in formula
    for part in absent:
        assert part not in formula
