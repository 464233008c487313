"""The weights' colour scale control (AppTest): on Home, Multi-head and the weights step, it
changes the chart sent, keeps the true weights for the hover, and the user's choice wins over
the length-based default."""

import numpy as np
import pytest

import attnviz
from tests.apptest_helpers import charts, decode, heatmap_z, no_exceptions, open_page

SENTENCE = "the cat sat on the mat"
TOKENS = SENTENCE.split()
LONG = " ".join(f"w{i}" for i in range(100))
PAGES = [("pages/home.py", {}), ("pages/multihead.py", {}),
         ("pages/steps.py", {"step": "weights"})]


def weights_chart(at) -> dict:
    """The first chart: the heads grid (Home, Multi-head) or the weights step's heatmap."""
    return charts(at)[0]


def colour_bar_title(fig: dict) -> str:
    layout_bar = fig["layout"].get("coloraxis", {}).get("colorbar", {})
    bar = layout_bar or fig["data"][0].get("colorbar", {})
    return bar["title"]["text"]


def expected_weights(tokens, heads=4, d_model=16):
    return attnviz.trace_attention(attnviz.embed_tokens(tokens, d_model),
                                   attnviz.MultiHeadWeights.random(d_model, heads)).weights


@pytest.mark.parametrize("page, state", PAGES)
def test_the_control_changes_the_chart_and_hover_keeps_the_true_weights(page, state):
    at = open_page(page, sentence=SENTENCE, **state)
    no_exceptions(at)
    control = at.segmented_control(key="weight_scale")
    assert control.label == "Colour scale" and control.value == "fixed"   # short input
    fixed = weights_chart(at)
    assert colour_bar_title(fixed) == "weight"
    want = expected_weights(TOKENS)[0]                           # head 0, by the engine
    np.testing.assert_allclose(heatmap_z(fixed), want, rtol=1e-6)

    control.set_value("row").run()
    no_exceptions(at)
    row = weights_chart(at)
    assert "row max" in colour_bar_title(row)
    z, true = heatmap_z(row), decode(row["data"][0]["customdata"])
    np.testing.assert_allclose(z.max(axis=1), 1.0, rtol=1e-6)   # each row's max is 1
    np.testing.assert_allclose(true, want, rtol=1e-6)            # hover: the true weights
    assert "customdata" in row["data"][0]["hovertemplate"]

    at.segmented_control(key="weight_scale").set_value("head").run()
    head = weights_chart(at)
    assert "head max" in colour_bar_title(head)
    np.testing.assert_allclose(heatmap_z(head), want / want.max(), rtol=1e-6)


def test_a_long_input_starts_on_each_rows_max_but_the_users_choice_wins():
    at = open_page("pages/home.py", sentence=LONG, max_tokens=100)
    no_exceptions(at)
    assert at.segmented_control(key="weight_scale").value == "row"
    assert np.nanmax(heatmap_z(weights_chart(at)), axis=1) == pytest.approx(1.0)
    at.segmented_control(key="weight_scale").set_value("fixed").run()
    assert colour_bar_title(weights_chart(at)) == "weight"
    at.session_state["sentence"] = LONG + " more words"          # a new long input
    at.run()
    assert at.segmented_control(key="weight_scale").value == "fixed"
    assert colour_bar_title(weights_chart(at)) == "weight"
