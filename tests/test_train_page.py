"""The Train page in AppTest: train with few steps, the checkpoint slider redraws the heads, Stop
keeps a partial run, a run seeded in session state is shown without training."""

import numpy as np
import pytest
import torch

import attnviz.toy as toy
from attnviz.ui.train_view import JOB_KEY, RUN_KEY
from tests.apptest_helpers import (button, charts, heatmap_z, no_exceptions, open_page,
                                   page_alone)

PAGE = "pages/train.py"

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def shift_run():
    return toy.train("shift", steps=120)


def finish_training(at, timeout: float = 120):
    """Wait for the background job, then rerun: the page picks up the finished run."""
    at.session_state[JOB_KEY].thread.join(timeout)
    assert not at.session_state[JOB_KEY].running
    return at.run()


def heads_chart(at, layer: int = 0) -> dict:
    return next(c for c in charts(at) if c["layout"]["title"]["text"].startswith(f"Layer {layer}"))


def test_the_page_alone_asks_for_training():
    at = page_alone(PAGE)
    no_exceptions(at)
    assert any("press **Train**" in i.value for i in at.info)
    assert not charts(at)


def test_train_with_few_steps_then_the_slider_changes_the_heatmap():
    at = page_alone(PAGE, toy_task="reverse", toy_steps=60)
    button(at, "Train").click().run()
    no_exceptions(at)
    at = finish_training(at)
    no_exceptions(at)
    run = at.session_state[RUN_KEY]
    assert run.steps == 60 and run.config.task == "reverse"
    final = heatmap_z(heads_chart(at), trace=0)                     # head 0, (n, n)
    np.testing.assert_allclose(final, run.trace(run.test_inputs[0]).weights[0], atol=1e-6)
    assert any("**Head" in m.value and "shows it at step 60" in m.value for m in at.markdown)
    at.select_slider(key="toy_step").set_value(0).run()
    start = heatmap_z(heads_chart(at), trace=0)
    np.testing.assert_allclose(start, run.trace(run.test_inputs[0], step=0).weights[0],
                               atol=1e-6)
    assert not np.allclose(start, final, atol=0.05)
    assert "after step 0" in heads_chart(at)["layout"]["title"]["text"]


def test_stop_ends_training_early_and_keeps_the_run():
    at = page_alone(PAGE, toy_task="copy", toy_steps=5000)
    button(at, "Train").click().run()
    job = at.session_state[JOB_KEY]
    assert job.running and any("Training copy" in p.proto.text for p in at.get("progress"))
    button(at, "Stop").click().run()
    at = finish_training(at)
    no_exceptions(at)
    run = at.session_state[RUN_KEY]
    assert run.stopped and run.steps < 5000 and run.checkpoint_steps[-1] == run.steps
    assert any(f"stopped at step {run.steps} of 5000" in c.value for c in at.caption)


def test_a_seeded_run_is_shown_with_its_causal_mask_and_the_head_named(shift_run):
    at = page_alone(PAGE, **{RUN_KEY: shift_run, "toy_example": 3})
    no_exceptions(at)
    fig = heads_chart(at)
    assert "causal mask" in fig["layout"]["title"]["text"]
    z = heatmap_z(fig, trace=0)
    assert np.isnan(z[np.triu_indices(8, k=1)]).all()          # future keys: masked cells
    best = shift_run.head_scores()[0]
    assert any(f"**Head {best.head}** shows it" in m.value for m in at.markdown)
    seq = shift_run.test_inputs[3]                             # "position: token" labels
    assert fig["data"][0]["x"] == [f"{i}: {t}" for i, t in enumerate(seq)]


def test_induction_gets_two_layers_and_shows_both():
    at = page_alone(PAGE)
    at.selectbox(key="toy_task").set_value("induction").run()
    assert at.number_input(key="toy_layers").value == 2
    at.number_input(key="toy_steps").set_value(20).run()
    button(at, "Train").click().run()
    at = finish_training(at)
    no_exceptions(at)
    titles = [c["layout"]["title"]["text"] for c in charts(at)]
    assert [t.split(" after")[0] for t in titles] == ["Layer 0", "Layer 1"]
    assert any("previous-token head" in m.value for m in at.markdown)


def test_a_bad_size_is_explained_and_train_is_disabled():
    at = page_alone(PAGE, toy_d_model=30, toy_heads=4)
    assert any("does not divide" in e.value for e in at.error)
    assert button(at, "Train").disabled


def test_the_page_is_in_the_apps_navigation(shift_run):
    at = open_page(PAGE, **{RUN_KEY: shift_run})
    no_exceptions(at)
    assert charts(at)
