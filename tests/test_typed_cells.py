"""What the weight editor stores from its cumulative edits (attnviz.session.edits.typed_cells): the
base it was opened on with every typed cell, as written; a refused text keeps the stored value
of its cell and is named, while the other cells land."""

import numpy as np

from attnviz.session.edits import typed_cells

BASE = np.array([[0.5, -1.0, 2.0], [3.0, 4.0, -0.25]])      # the slice the editor opened on
ROWS, COLS = ["d0", "d1"], ["q0", "q1", "q2"]


def test_every_typed_cell_lands_as_written_over_the_base():
    changes = {0: {"q0": "2"}, 1: {"q1": "-3", "q2": "1.5E3"}}
    new, problems = typed_cells(BASE, BASE, "w_q", 1, changes, ROWS, COLS)
    assert problems == []
    np.testing.assert_array_equal(new, [[2.0, -1.0, 2.0], [3.0, -3.0, 1500.0]])
    np.testing.assert_array_equal(BASE, [[0.5, -1.0, 2.0], [3.0, 4.0, -0.25]])  # not changed


def test_a_cell_no_longer_in_the_edits_is_the_base_again():
    stored = np.array([[7.0, -1.0, 2.0], [3.0, 4.0, -0.25]])   # q0 of d0 was typed before
    new, _ = typed_cells(BASE, stored, "w_q", 0, {1: {"q0": "1"}}, ROWS, COLS)
    np.testing.assert_array_equal(new, [[0.5, -1.0, 2.0], [1.0, 4.0, -0.25]])


def test_a_refused_text_keeps_the_stored_value_names_the_cell_and_the_rest_lands():
    stored = np.array([[9.0, -1.0, 2.0], [3.0, 4.0, -0.25]])   # d0/q0 holds an earlier 9
    changes = {0: {"q0": "abc", "q2": "0.125"}, 1: {"q1": "1,5"}}
    new, problems = typed_cells(BASE, stored, "w_k", 2, changes, ROWS, COLS)
    np.testing.assert_array_equal(new, [[9.0, -1.0, 0.125], [3.0, 4.0, -0.25]])
    assert problems == [
        "W_K of head 2, row 1 (d0), column 1 (q0): 'abc' is not a number",
        "W_K of head 2, row 2 (d1), column 2 (q1): '1,5' is not a number (write the decimal "
        "point as a dot: 1.5)"]


def test_a_bias_is_one_row_and_a_matrix_without_heads_is_named_without_one():
    new, problems = typed_cells(BASE[:1], BASE[:1], "b_o", None, {0: {"q1": "1e400"}}, ["bias"],
                                COLS)
    np.testing.assert_array_equal(new, BASE[:1])
    assert problems == ["b_O, row 1 (bias), column 2 (q1): '1e400' is too large (the largest "
                        "number is about 1.8e308)"]


def test_a_cell_shows_four_digits_and_keeps_its_exact_value_when_closed_unchanged():
    """Issue 34.10: a cell shows -9.023e-05, not -9.022799322427888e-05 cut by its border; a
    cell opened and closed as shown keeps every digit, and a new number typed lands."""
    from attnviz.session.edits import cell_text

    exact = -9.022799322427888e-05
    assert [cell_text(v) for v in (exact, 0.5, 250.0, 1e308)] == ["-9.023e-05", "0.5", "250",
                                                                    "1e+308"]
    base = np.array([[exact, 1 / 3]])
    changes = {0: {"q0": "-9.023e-05", "q1": "0.3"}}           # q0 as shown; q1 typed anew
    new, problems = typed_cells(base, base, "w_q", 0, changes, ["d0"], ["q0", "q1"])
    assert problems == []
    assert new.tolist() == [[exact, 0.3]]
