"""The "Toy model" input in AppTest: the step pages show the Train page's run (its own residual
stream and weights), an edit of its weights changes the model's answer as ToyRun.predict says,
and without a run, or from a link, the pages explain instead of failing."""

import numpy as np
import pytest


from attnviz.session.settings import TOY_MODE
from attnviz.session.view import NO_TOY_RUN
from attnviz.i18n import t
from attnviz.app import keys
from attnviz.app.shared.toy_view import EDITED_ROW as EDITED_ID
from attnviz.i18n import render
from tests.apptest_helpers import (PAGES, apply_paste, charts, decode, heatmap_z,
                                   no_exceptions, open_page, plain, shows)
from tests.lazy import LazyModule

toy = LazyModule("attnviz.models.trainer.toy")      # torch with it: imported by the first test

pytestmark = pytest.mark.usefixtures("torch")    # one torch thread
EDITED_ROW = render(EDITED_ID, "en")          # the row's name as the English page shows it
INPUT_ROW, RIGHT_ROW, TRAINED_ROW = (render(f"toy_view.row.{row}", "en")
                                     for row in ("input", "right", "trained"))


@pytest.fixture(scope="module")
def run():
    return toy.train("reverse", steps=60)


def toy_state(run, **extra):
    return {"mode": TOY_MODE, keys.TOY_RUN: run, **extra}


def answers(at) -> dict[str, list[str]]:
    """The answer table (row name → one text per position)."""
    frame = next(d.value for d in at.dataframe if EDITED_ROW in d.value.index)
    return {name: list(row) for name, row in frame.iterrows()}


def as_text(values) -> list[str]:
    return [str(int(v)) for v in values]


@pytest.mark.slow
def test_step_by_step_shows_the_layer_at_the_chosen_step_and_sequence(run):
    step = run.checkpoint_steps[-3]
    at = open_page("pages/steps.py", **toy_state(run, **{keys.TOY_VIEW_STEP: step,
                                                         keys.TOY_VIEW_EXAMPLE: 5}),
                   step="weights", head=1)
    no_exceptions(at)
    seq = run.test_inputs[5]
    expected = run.trace(seq, 0, step)
    np.testing.assert_array_equal(heatmap_z(charts(at)[0]), expected.weights[1])
    assert charts(at)[0]["data"][0]["x"] == [f"{i}: {t}" for i, t in enumerate(seq)]
    shown = answers(at)
    assert shown[INPUT_ROW] == as_text(seq)
    assert shown[RIGHT_ROW] == as_text(run.targets(seq))
    assert shown[TRAINED_ROW] == as_text(run.predict(seq, step=step))
    assert shown[EDITED_ROW] == shown[TRAINED_ROW]                # nothing edited yet


@pytest.mark.slow
def test_an_edited_w_o_changes_the_answer_as_the_model_computes_it(run):
    seq = run.test_inputs[2]
    at = open_page("pages/inputs.py", **toy_state(run, **{keys.TOY_VIEW_EXAMPLE: 2}), matrix="w_o")
    no_exceptions(at)
    w_o = np.zeros_like(run.params(0).w_o)    # no head's Z reaches the stream (both heads
                                              # learn the pattern: one alone changes nothing)
    area = next(a for a in at.text_area if a.key.startswith("paste_text_w_o"))
    area.input("\n".join(" ".join(repr(float(v)) for v in row) for row in w_o))
    apply_paste(at)
    no_exceptions(at)
    np.testing.assert_array_equal(heatmap_z(charts(at)[0]), w_o)
    edited = run.predict(seq, params={0: run.params(0).replace(w_o=w_o)})
    trained = run.predict(seq)
    assert not np.array_equal(edited, trained)     # else the test would show nothing
    shown = answers(at)
    assert shown[EDITED_ROW] == as_text(edited)
    assert shown[TRAINED_ROW] == as_text(trained)
    changed = np.nonzero(edited != trained)[0]
    where = render("toy_view.separator", "en").join(str(i) for i in changed)
    assert shows(at.caption, "toy_view.changed", count=len(changed), where=where)
    # the edit belongs to this run, layer and step: at step 0 the weights are the start's
    at.session_state[keys.TOY_VIEW_STEP] = 0
    at.run()
    np.testing.assert_array_equal(heatmap_z(charts(at)[0]), run.params(0, step=0).w_o)
    assert answers(at)[EDITED_ROW] == as_text(run.predict(seq, step=0))
    at.session_state[keys.TOY_VIEW_STEP] = run.steps       # back: the edit is still there
    at.run()
    np.testing.assert_array_equal(heatmap_z(charts(at)[0]), w_o)


@pytest.mark.parametrize("page", PAGES)
def test_without_a_trained_run_the_pages_say_to_train_one(page):
    at = open_page(page, mode=TOY_MODE)
    no_exceptions(at)
    assert any(t(NO_TOY_RUN) in plain(e) for e in at.error)


def test_the_sidebar_shows_the_runs_sizes_fixed_and_keeps_the_layer_in_range(run):
    at = open_page("pages/home.py", **toy_state(run), layer=4)    # the pretrained model's 4
    no_exceptions(at)
    numbers = {n.label: (n.value, n.disabled) for n in at.sidebar.number_input}
    assert numbers["d_model"] == (32, True) and numbers["Heads"] == (2, True)
    assert numbers["d_k"] == (16, True) and numbers["Layer"] == (0, True)   # one layer
    causal = next(c for c in at.sidebar.checkbox if c.label.startswith("Causal"))
    assert causal.disabled and causal.value is False and "reverse" in causal.help
    assert at.session_state["layer"] == 0
    assert not at.error


@pytest.mark.slow
def test_the_sidebar_without_a_run_says_so_and_keeps_working():
    at = open_page("pages/home.py", mode=TOY_MODE)
    no_exceptions(at)
    assert any(t(NO_TOY_RUN) in plain(i) for i in at.sidebar.info)
    at.sidebar.radio(key="mode").set_value("Sentence").run()
    no_exceptions(at)
    assert not at.error and charts(at)


@pytest.mark.slow
def test_a_link_to_the_toy_model_falls_back_with_a_notice():
    at = open_page(params={"mode": TOY_MODE, "edits": "not for this model"})
    assert at.session_state["mode"] == "Sentence"
    assert shows(at.warning, "link.toy_mode", mode=repr(TOY_MODE))
    assert not at.error and charts(at)


@pytest.mark.slow
def test_the_link_of_a_toy_view_has_no_edits(run):
    at = open_page("pages/inputs.py", **toy_state(run), matrix="b_o")
    area = next(a for a in at.text_area if a.key.startswith("paste_text_b_o"))
    area.input(" ".join(["0"] * 32))
    apply_paste(at)      # the sidebar writes the link
    no_exceptions(at)
    assert [k for k, v in at.session_state["edits"].items() if v] == [
        k for k in at.session_state["edits"] if k.startswith("toy:")]      # the edit is kept
    assert at.query_params["mode"] == TOY_MODE and "edits" not in at.query_params


@pytest.mark.slow
def test_step_through_this_layer_opens_it_on_step_by_step(run):
    at = open_page("pages/train.py", **{keys.TOY_RUN: run, "toy_example": 7}, step="weights")
    no_exceptions(at)
    at.select_slider(key="toy_step").set_value(run.checkpoint_steps[4]).run()
    at.button(key="toy_step_through_0").click().run()
    no_exceptions(at)
    assert at.title[0].value == render("steps.title", "en")
    state = at.session_state
    assert (state["mode"], state["layer"], state[keys.TOY_VIEW_STEP],
            state[keys.TOY_VIEW_EXAMPLE]) == (TOY_MODE, 0, run.checkpoint_steps[4], 7)
    best = run.head_scores(step=run.checkpoint_steps[4])[0].head
    assert state["head"] == best
    expected = run.trace(run.test_inputs[7], 0, run.checkpoint_steps[4])
    np.testing.assert_array_equal(heatmap_z(charts(at)[0]),
                                  expected.weights[best])


@pytest.mark.slow
@pytest.mark.parametrize("page", PAGES)
def test_every_page_draws_the_trained_layer(run, page):
    step = run.checkpoint_steps[-1]
    at = open_page(page, **toy_state(run, **{keys.TOY_VIEW_STEP: step, keys.TOY_VIEW_EXAMPLE: 3}))
    no_exceptions(at)
    assert not at.error and charts(at)
    assert shows(at.info, "notice.toy.layer_first", layer=0, task=run.config.task, step=step)
    expected = run.trace(run.test_inputs[3], 0, step)            # the run's own layer 0
    first = charts(at)[0]
    if page in ("pages/home.py", "pages/multihead.py"):          # the heads grid
        maps = [decode(tr["z"]) for tr in first["data"] if tr["type"] == "heatmap"
                and tr.get("name") != "masked"]
        assert len(maps) == expected.num_heads
        for h, shown in enumerate(maps):
            weights = expected.weights[h] if expected.mask is None else \
                np.where(expected.mask[h], np.nan, expected.weights[h])       # masked: grey
            np.testing.assert_allclose(shown, weights, rtol=1e-6, atol=1e-7, equal_nan=True)
    else:                                                         # X: the residual stream
        np.testing.assert_allclose(heatmap_z(first), expected.x, rtol=1e-6, atol=1e-7)


@pytest.mark.slow
def test_the_report_of_a_toy_view_names_it(run):
    from attnviz.io.report import report_html
    from attnviz.session.build import build_view
    from attnviz.session.settings import Settings, ToyChoice

    view = build_view(Settings(mode=TOY_MODE), {}, ToyChoice(run, run.steps, 0))
    html = report_html(view.trace, view.tokens_q, view.tokens_k, settings=view.settings)
    assert t("report.source.toy", layer=0) in html


@pytest.mark.slow
def test_a_baseline_pinned_on_the_toy_model_compares_with_the_same_run(run):
    """Pin as baseline on the Toy model input rebuilds the pinned view with the run (not as
    'train a model first'), so an unedited view differs from it by exactly 0."""

    at = open_page("pages/steps.py", **toy_state(run), step="weights")
    no_exceptions(at)
    at.button(key=keys.PIN(keys.STEPS_BASELINE)).click().run()
    no_exceptions(at)
    assert at.session_state[keys.BASELINE].toy is not None
    assert not shows(at.info, "baseline.cannot_rebuild")
    change = next(f for f in charts(at) if "baseline" in str(f["layout"]["title"]).lower())
    assert np.all(heatmap_z(change) == 0)
