"""An edited cell so large that a step overflows (issue 18.3): the error names the cell and the
step, and the editor, Reset edits and the cell stay reachable. Which step overflows is checked
here with plain numpy, not read from the app."""

import numpy as np
import pytest

import attnviz
from attnviz.session.edits import Edit, encode
from attnviz.session.build import build_view
from attnviz.session.settings import Settings
from attnviz.session.view import current_matrices
from attnviz.i18n import Message, t
from tests.apptest_helpers import button, charts, heatmap_z, no_exceptions, open_page, plain

SENTENCE = "The animal didn't cross the street because it was too tired"   # the default
UNSCALED = dict(scaled=False)    # the default sentence, d_model 16, 4 heads, scaling off
SCORES = Message("overflow.step.scores")


def cell(matrix: str, head: int, row: int, row_label: str, col: int, col_label: str,
         value: str) -> str:
    """A cell as the editor names it: its matrix and head, row and column counted from 1 with
    their labels, and the number as typed."""
    return t("cell.in_matrix", matrix=t("edit.of_head", matrix=matrix, head=head),
             row=t("cell.row_labelled", row=row, label=row_label),
             col=t("cell.col_labelled", col=col, label=col_label)) + f" = {value}"


CELL = cell("W_Q", 0, 1, "d0", 1, "q0", "1e308")
SHOWN = t("status.cannot_compute",               # the page's error for that one cell
          error=t("error.overflow.edited", count=1, cells=CELL, step=SCORES))
RESET = ":material/restart_alt: " + t("widgets.reset_edits")
TO_CELL = ":material/edit: " + t("widgets.change_on_inputs",
                                 matrix=t("edit.of_head", matrix="W_Q", head=0))


def generated():
    """X and the parameters the app generates by default (seed 0, Xavier), from the engine."""
    return (attnviz.embed_tokens(attnviz.tokenize(SENTENCE), 16, seed=0),
            attnviz.MultiHeadWeights.random(16, 4, seed=0))


def w_q_with(value: float) -> np.ndarray:
    w_q = np.array(generated()[1].w_q)                 # (H, d_model, d_k)
    w_q[0, 0, 0] = value
    return w_q


def test_an_overflowing_edit_names_the_cell_and_the_step_and_keeps_the_matrices():
    x, w = generated()
    q, k = x @ w_q_with(1e308)[0], x @ w.w_k[0]        # head 0, plain numpy: the scores
    with np.errstate(over="ignore", invalid="ignore"):  # are the first step to overflow
        assert np.isfinite(q).all() and np.isfinite(k).all()
        assert not np.isfinite(q @ k.T).all()
    view = build_view(Settings(**UNSCALED), {"w_q": Edit(w_q_with(1e308))})
    assert view.trace is None
    assert view.error == Message("error.overflow.edited", count=1, cells=CELL, step=SCORES)
    assert [(b.name, b.head, b.text) for b in view.blamed_cells] == [("w_q", 0, CELL)]
    shown = current_matrices(view)                    # what the editor shows, to be fixed
    assert shown["w_q"][0, 0, 0] == 1e308
    np.testing.assert_array_equal(shown["w_k"], generated()[1].w_k)
    np.testing.assert_array_equal(shown["x"], generated()[0])


def test_two_cells_that_overflow_only_together_are_both_named_and_a_harmless_one_is_not():
    x, w = generated()
    w_q = w_q_with(1e200)
    w_k = np.array(w.w_k)
    w_k[0, 1, 0] = 1e200                              # q0 of every token × k0 of every token
    w_v = np.array(w.w_v)
    w_v[1, 2, 1] = 1e300                              # large, but V and Z stay finite
    with np.errstate(over="ignore", invalid="ignore"):
        assert np.isfinite(x @ w_v[1]).all()
        assert np.isfinite((x @ w_q[0]) @ (x @ w.w_k[0]).T).all()         # each alone: fine
        assert np.isfinite((x @ w.w_q[0]) @ (x @ w_k[0]).T).all()
        assert not np.isfinite((x @ w_q[0]) @ (x @ w_k[0]).T).all()       # together: not
    view = build_view(Settings(**UNSCALED), {"w_q": Edit(w_q), "w_k": Edit(w_k), "w_v": Edit(w_v)})
    both = (cell("W_Q", 0, 1, "d0", 1, "q0", "1e200"), cell("W_K", 0, 2, "d1", 1, "k0", "1e200"))
    assert view.error == Message("error.overflow.edited", count=2, cells=t("list.and").join(both),
                                 step=SCORES)
    assert [(b.name, b.head) for b in view.blamed_cells] == [("w_q", 0), ("w_k", 0)]   # no W_V


def test_an_overflow_without_edits_is_reported_as_before():
    view = build_view(Settings(mode="Matrix X", x_text="1e308 1e308\n1e308 1e308",
                               num_heads=1, init="identity", scaled=False))
    assert view.error == Message("error.overflow.scores") and not view.blamed_cells


def link_with_the_huge_cell() -> dict:
    """The app's link to this view with the edit in it (a reload opens the same)."""
    return {"scaled": "0", "matrix": "w_q", "edit_head": "0",
            "edits": encode({"w_q": Edit(w_q_with(1e308))})}


@pytest.mark.slow
def test_from_the_link_inputs_and_weights_shows_the_error_the_editor_and_reset_works():
    at = open_page("pages/inputs.py", params=link_with_the_huge_cell())
    no_exceptions(at)
    assert SHOWN in [plain(e) for e in at.error]
    editor = [d for d in at.dataframe if str(d.key).startswith("editor_w_q_0")]
    assert editor, "no data editor of W_Q, head 0, on the page"
    assert float(editor[0].value.iloc[0, 0]) == 1e308          # the cell, there to be fixed
    z = heatmap_z(charts(at)[0])                      # the matrix W_Q of head 0 itself
    assert z[0, 0] == 1e308
    reset = button(at, RESET)
    assert not reset.disabled
    reset.click().run()
    no_exceptions(at)
    assert not at.error
    np.testing.assert_array_equal(heatmap_z(charts(at)[0]), generated()[1].w_q[0])


@pytest.mark.slow
def test_other_pages_show_the_error_with_a_way_to_the_cell_and_to_reset():
    for page in ("pages/steps.py", "pages/multihead.py", "pages/experiments.py"):
        at = open_page(page, params=link_with_the_huge_cell())
        no_exceptions(at)
        assert SHOWN in [plain(e) for e in at.error], page
        assert button(at, TO_CELL)
    at = open_page(params=link_with_the_huge_cell())                       # Home
    assert not charts(at)
    button(at, RESET).click().run()
    no_exceptions(at)
    assert not at.error and charts(at)                  # the heatmaps are back
    x, w = generated()
    want = attnviz.trace_attention(x, w, scale=1.0).weights
    np.testing.assert_allclose(heatmap_z(charts(at)[0]), want[0], atol=1e-12)


@pytest.mark.slow
def test_the_button_to_the_cell_opens_inputs_and_weights_at_its_matrix_and_head():
    link = {**link_with_the_huge_cell(), "matrix": "w_v", "edit_head": "1"}
    at = open_page("pages/steps.py", params=link)
    button(at, TO_CELL).click().run()
    no_exceptions(at)
    assert at.session_state["matrix"] == "w_q" and at.session_state["edit_head"] == 0
    assert any(h.value == t("inputs.title") for h in at.title)
