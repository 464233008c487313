"""Pin as baseline, edit, see the difference (issue 11.7). Expected numbers are computed here
from two traces built with attnviz, never read back from the page."""

import numpy as np
import pytest

import attnviz
from attnviz.plot.diff_figures import change_heatmap, kl_bars
from attnviz.app import keys
from attnviz.app.shared.baseline import Pin
from attnviz.session.settings import Settings
from attnviz.i18n import t
from tests.apptest_helpers import (apply_paste, charts, charts_keyed, decode, heatmap_z,
                                   no_exceptions, open_page, plain, reachable, shows)
from tools import streamlit_compat

TOKENS = ["Thinking", "Machines", "think"]
SMALL = dict(sentence=" ".join(TOKENS), d_model=4, num_heads=2)
NEW_CELL = 7.5                            # W_Q of head 0, row d0, column q0, after the edit


def traces() -> tuple[attnviz.AttentionTrace, attnviz.AttentionTrace]:
    """The baseline (the app's default seed 0 and Xavier weights) and the trace after the
    edit of one W_Q cell, built here from the same settings."""
    x = attnviz.embed_tokens(TOKENS, 4, seed=0)
    w = attnviz.MultiHeadWeights.random(4, 2, seed=0)
    w_q = np.array(w.w_q)                                       # (H, d_model, d_k)
    w_q[0, 0, 0] = NEW_CELL
    return attnviz.trace_attention(x, w), attnviz.trace_attention(x, w.replace(w_q=w_q))


def click(at, msg_id: str):
    """Press the button whose label says the message `msg_id` (after its icon) and run."""
    text = t(msg_id)
    found = [b for b in at.button if b.label.endswith(text)]
    assert found, f"no button {msg_id}; the buttons are {[b.label for b in at.button]}"
    found[0].click().run()
    no_exceptions(at)
    return at


def pin_and_edit_w_q():
    """Pin on Inputs & weights, then change one cell of W_Q (head 0) and apply it as the page
    does (its paste box: the same store as a typed cell, state.set_matrix)."""
    at = open_page("pages/inputs.py", matrix="w_q", edit_head=0, **SMALL)
    click(at, "baseline.pin")
    assert shows(at.info, "baseline.status.pinned")
    w_q = np.array(attnviz.MultiHeadWeights.random(4, 2, seed=0).w_q[0])     # (4, 2)
    w_q[0, 0] = NEW_CELL
    area = next(a for a in at.text_area if a.key.startswith("paste_text_w_q_0"))
    area.input("\n".join(" ".join(repr(float(v)) for v in row) for row in w_q))
    apply_paste(at)
    no_exceptions(at)
    return at


def change_chart(at) -> dict:
    """The step's change from the baseline (its chart, keys.DELTA_MAP)."""
    found = charts_keyed(at, keys.DELTA_MAP)
    assert len(found) == 1, [c["layout"]["title"]["text"] for c in charts(at)]
    return found[0]


def no_change_chart(at) -> bool:
    return not charts_keyed(at, keys.DELTA_MAP)


def metric(at, msg_id: str, /, **params) -> str:
    """The value of the metric labelled with the message `msg_id`."""
    return next(m.value for m in at.metric if m.label == t(msg_id, **params))


def test_the_change_of_the_scores_is_the_difference_of_two_independent_traces():
    at = pin_and_edit_w_q()
    at.switch_page("pages/steps.py")
    at.session_state["step"] = "scores"
    at.session_state["head"] = 0
    at.run()
    no_exceptions(at)
    base, now = traces()
    expected = now.step_array("scores", 0) - base.step_array("scores", 0)   # (n_q, n_k)
    assert np.abs(expected).max() > 0.1                    # the edit does change the scores
    np.testing.assert_allclose(heatmap_z(change_chart(at)), expected, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(heatmap_z(charts(at)[0]), now.scores[0], rtol=1e-9)
    assert metric(at, "baseline.metric.head", head=0) == f"{np.abs(expected).max():.4g}"
    all_heads = np.abs(now.scores - base.scores).max()     # head 1 is not edited: the same
    assert metric(at, "baseline.metric.all_heads") == f"{all_heads:.4g}"
    details = [t("baseline.detail.tokens", count=3), t("baseline.detail.heads", count=2),
               "d_model 4", t("baseline.detail.seed", seed=0)]
    pinned = t("baseline.what.details", details=", ".join(details),
               what=t("baseline.what.sentence", text=" ".join(TOKENS)))
    assert shows(at.info, "baseline.without_edits", what=pinned), "pinned before the edit"

    state = streamlit_compat.session_state_items(at)                # every key, widgets too
    assert keys.BASELINE in state and len(state) > 20
    kept = [(k, o) for k, value in state.items() for o in reachable(value)
            if isinstance(o, attnviz.AttentionTrace)]
    assert not kept, "the session keeps a trace"
    assert isinstance(at.session_state[keys.BASELINE], Pin)


def test_the_weights_step_shows_each_querys_kl_divergence_in_bits():
    at = pin_and_edit_w_q()
    at.switch_page("pages/steps.py")
    at.session_state["step"] = "weights"
    at.session_state["head"] = 0
    at.run()
    base, now = traces()
    a, b = base.weights[0], now.weights[0]                                  # (n_q, n_k)
    kl = [sum(p * np.log2(p / q) for p, q in zip(row_a, row_b)) for row_a, row_b in zip(a, b)]
    [bars] = charts_keyed(at, keys.DELTA_KL)
    np.testing.assert_allclose(decode(bars["data"][0]["y"]), kl, rtol=1e-9)
    np.testing.assert_allclose(heatmap_z(change_chart(at)), b - a, atol=1e-12)


def test_unpin_removes_the_change():
    at = pin_and_edit_w_q()
    at.switch_page("pages/steps.py")
    at.session_state["step"] = "q"
    at.run()
    change_chart(at)
    click(at, "baseline.unpin")
    assert no_change_chart(at)
    assert keys.BASELINE not in at.session_state
    assert not any(shows(at.info, f"baseline.status.{how}")
                   for how in ("pinned", "compact", "problem"))
    assert [b for b in at.button if b.label.endswith(t("baseline.pin"))]


def test_a_sentence_of_another_length_asks_to_pin_again_and_the_page_still_works():
    at = open_page("pages/steps.py", step="weights", **SMALL)
    click(at, "baseline.pin")
    change_chart(at)
    at.session_state["sentence"] = "only two"     # what the sidebar's box holds
    at.run()
    no_exceptions(at)
    assert not at.error
    has = t("baseline.has", parts=t("baseline.size.tokens", count=3, new=2))
    assert shows(at.info, "baseline.mismatch", why=has), [plain(i) for i in at.info]
    assert no_change_chart(at)
    two = attnviz.trace_attention(attnviz.embed_tokens(["only", "two"], 4, seed=0),
                                  attnviz.MultiHeadWeights.random(4, 2, seed=0))
    np.testing.assert_allclose(heatmap_z(charts(at)[0]), two.weights[0], rtol=1e-9)
    click(at, "baseline.pin_again")                         # the new input is the baseline
    np.testing.assert_array_equal(heatmap_z(change_chart(at)), np.zeros((2, 2)))


def test_a_step_only_the_current_trace_has_is_named():
    at = open_page("pages/steps.py", step="scores", **SMALL)
    click(at, "baseline.pin")
    at.session_state["causal"] = True              # the sidebar's "Causal mask"
    at.run()
    at.session_state["step"] = "masked_scores"
    at.run()
    no_exceptions(at)
    masked = t("step.masked_scores.title")
    assert shows(at.caption, "baseline.only_in_current", steps=f"“{masked}”")
    assert shows(at.caption, "baseline.step_only_now", title=masked)
    assert no_change_chart(at)


@pytest.mark.slow
def test_the_page_alone_works_from_a_seeded_pin():
    pinned = Pin(Settings(**SMALL), {})
    at = open_page("pages/steps.py", baseline=pinned, step="z", **SMALL)
    no_exceptions(at)
    np.testing.assert_array_equal(heatmap_z(change_chart(at)), np.zeros((3, 2)))
    at = open_page("pages/multihead.py", baseline=pinned, **SMALL)
    no_exceptions(at)
    assert shows(at.caption, "baseline.summary", title=t("step.weights.title"), change="0")


@pytest.mark.slow
def test_multihead_names_the_max_change_of_each_section():
    at = pin_and_edit_w_q()
    at.switch_page("pages/multihead.py")
    at.run()
    no_exceptions(at)
    base, now = traces()
    want_weights = np.abs(now.weights - base.weights).max()
    want_z = np.abs(now.z - base.z).max()
    lines = [plain(c) for c in at.caption]
    assert shows(at.caption, "baseline.summary", title=t("step.weights.title"),
                 change=f"{want_weights:.4g}"), lines
    assert shows(at.caption, "baseline.summary", title=t("step.z.title"),
                 change=f"{want_z:.4g}"), lines


@pytest.mark.parametrize("kl, text", [([0.0, 0.5], ["0", "0.5"]),
                                      ([np.inf, 0.25], ["∞", "0.25"])])
def test_kl_bars_show_infinity_as_a_marked_bar_of_height_zero(kl, text):
    fig = kl_bars(kl, ["a", "a"])
    assert list(fig.data[0].x) == ["a (1)", "a (2)"]
    assert list(fig.data[0].text) == text
    assert np.isfinite(np.asarray(fig.data[0].y, dtype=float)).all()


def test_change_heatmap_is_signed_and_centred_on_zero():
    fig = change_heatmap(np.array([[1.0, -2.0]]), row_labels=["<b>"], col_labels=["k1", "k2"])
    assert fig.data[0].zmid == 0.0 and fig.data[0].colorscale[0][1] != "rgb(247,251,255)"
    assert list(fig.data[0].y) == ["&lt;b&gt;"]
