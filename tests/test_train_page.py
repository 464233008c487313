"""The Train page in AppTest: train with few steps, the checkpoint slider redraws the heads, Stop
keeps a partial run, a run seeded in session state is shown without training; a typed value out
of range is named in the page and turns Train off, the time is estimated before Train, a run
says whether it learnt (and if not, why), and a queued learner sees their place."""

import threading
import time

import numpy as np
import pytest

from attnviz.app import keys
from tests.apptest_helpers import button, charts, heatmap_z, no_exceptions, open_page
from tests.lazy import LazyModule

toy = LazyModule("attnviz.models.toy")      # torch with it: imported by the first test

PAGE = "pages/train.py"

pytestmark = pytest.mark.usefixtures("torch")    # one torch thread


@pytest.fixture(scope="module")
def shift_run():
    return toy.train("shift", steps=120)


@pytest.fixture(scope="module")
def shift_page(shift_run):
    """The page showing `shift_run`, one run shared by the tests that only read it."""
    return open_page(PAGE, **{keys.TOY_RUN: shift_run})


def finish_training(at, timeout: float = 120):
    """Wait for the job on the server's pool, then rerun: the page picks up the finished run."""
    assert at.session_state[keys.TOY_JOB].wait(timeout)
    return at.run()


def heads_chart(at, layer: int = 0) -> dict:
    return next(c for c in charts(at) if c["layout"]["title"]["text"].startswith(f"Layer {layer}"))


@pytest.mark.slow
def test_the_page_alone_asks_for_training():
    at = open_page(PAGE)
    no_exceptions(at)
    assert any("press **Train**" in i.value for i in at.info)
    assert not charts(at)


@pytest.mark.slow
def test_train_with_few_steps_then_the_slider_changes_the_heatmap():
    at = open_page(PAGE, toy_task="reverse", toy_steps=60)
    button(at, "Train").click().run()
    no_exceptions(at)
    at = finish_training(at)
    no_exceptions(at)
    run = at.session_state[keys.TOY_RUN]
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


@pytest.mark.slow
def test_stop_ends_training_early_and_keeps_the_run():
    at = open_page(PAGE, toy_task="copy", toy_steps=5000)
    button(at, "Train").click().run()
    job = at.session_state[keys.TOY_JOB]
    deadline = time.monotonic() + 30          # a free trainer takes it (a thread's wake-up)
    while not job.training and time.monotonic() < deadline:
        time.sleep(0.02)
    at.run()
    assert job.running and any("Training copy" in p.proto.text for p in at.get("progress"))
    button(at, "Stop").click().run()
    at = finish_training(at)
    no_exceptions(at)
    run = at.session_state[keys.TOY_RUN]
    assert run.stopped and run.steps < 5000 and run.checkpoint_steps[-1] == run.steps
    assert any(f"stopped at step {run.steps} of 5000" in c.value for c in at.caption)


@pytest.mark.slow
def test_a_seeded_run_is_shown_with_its_causal_mask_and_the_head_named(shift_run):
    at = open_page(PAGE, **{keys.TOY_RUN: shift_run, "toy_example": 3})
    no_exceptions(at)
    fig = heads_chart(at)
    assert "causal mask" in fig["layout"]["title"]["text"]
    z = heatmap_z(fig, trace=0)
    assert np.isnan(z[np.triu_indices(8, k=1)]).all()          # future keys: masked cells
    best = shift_run.head_scores()[0]
    assert any(f"**Head {best.head}** shows it" in m.value for m in at.markdown)
    seq = shift_run.test_inputs[3]                             # "position: token" labels
    assert fig["data"][0]["x"] == [f"{i}: {t}" for i, t in enumerate(seq)]


@pytest.mark.slow
def test_induction_gets_two_layers_and_shows_both():
    at = open_page(PAGE)
    at.selectbox(key="toy_task").set_value("induction").run()
    assert at.number_input(key="toy_layers").value == 2
    at.number_input(key="toy_steps").set_value(20).run()
    button(at, "Train").click().run()
    at = finish_training(at)
    no_exceptions(at)
    titles = [c["layout"]["title"]["text"] for c in charts(at)]
    assert [t.split(" after")[0] for t in titles] == ["Layer 0", "Layer 1"]
    assert any("previous-token head" in m.value for m in at.markdown)


@pytest.mark.slow
def test_a_bad_size_is_explained_and_train_is_disabled():
    at = open_page(PAGE, toy_d_model=30, toy_heads=4)
    assert any("does not divide" in e.value for e in at.error)
    assert button(at, "Train").disabled


@pytest.mark.slow
def test_the_page_is_in_the_apps_navigation(shift_page):
    assert charts(shift_page)


# ---- issue 18.6: a typed value out of range is shown, and Train says why it is off -------------

@pytest.mark.slow
@pytest.mark.parametrize("key, label, low, high", [
    ("toy_length", "Length", 3, 16), ("toy_vocab", "Vocabulary", 2, 50),
    ("toy_d_model", "d_model", 4, 128), ("toy_steps", "Steps", 1, 5000)])
def test_a_typed_value_out_of_range_is_shown_in_the_page_and_train_is_off(key, label, low,
                                                                          high):
    at = open_page(PAGE)
    at.number_input(key=key).set_value(99999).run()
    no_exceptions(at)
    assert at.number_input(key=key).value == 99999                  # kept as typed
    errors = [e.value for e in at.error]
    assert f"{label} must be a whole number from {low:,} to {high:,}, not 99999." in errors
    train = button(at, "Train")
    assert train.disabled and "Fix the values in red" in train.help
    assert any("Train is off" in c.value for c in at.caption)
    assert keys.TOY_JOB not in at.session_state
    at.number_input(key=key).set_value(low).run()                  # fixed: Train is back
    assert not at.error and not button(at, "Train").disabled


def test_steps_over_the_servers_bound_at_the_largest_sizes_name_the_most_allowed():
    at = open_page(PAGE, toy_task="induction", toy_length=16, toy_vocab=50, toy_layers=4,
                   toy_heads=8, toy_d_model=128, toy_steps=5000)
    no_exceptions(at)
    assert ("Steps must be a whole number from 1 to 1,000 at these sizes, not 5000."
            in [e.value for e in at.error])
    assert button(at, "Train").disabled


# ---- issue 18.7: the time before training, and whether the run learnt ------------------------

def test_the_page_estimates_the_time_before_train_is_pressed():
    at = open_page(PAGE)
    estimate = [c.value for c in at.caption if c.value.startswith("Estimated time:")]
    assert len(estimate) == 1 and "for 600 steps" in estimate[0]        # reverse's default
    at.number_input(key="toy_steps").set_value(60).run()
    assert any(c.value.startswith("Estimated time:") and "for 60 steps" in c.value
               for c in at.caption)


@pytest.mark.slow
def test_a_run_that_learnt_says_so(shift_page):
    at = shift_page
    assert any(s.value.startswith("Learnt: ") for s in at.success)
    assert not at.warning


@pytest.mark.slow
def test_a_run_that_did_not_learn_says_why_and_what_to_change():
    run = toy.train("reverse", length=16, vocab=50, d_model=4, heads=1)   # 600 steps, ~1 s
    assert run.mean_accuracy < 0.5
    at = open_page(PAGE, **{keys.TOY_RUN: run})
    no_exceptions(at)
    warnings = [w.value for w in at.warning]
    assert len(warnings) == 1 and warnings[0].startswith(
        f"Not learnt: {run.mean_accuracy:.0%} right on held-out sequences")
    assert "d_model 4 is small for a vocabulary of 50" in warnings[0]
    assert not at.success


# ---- issue 19.2: a queued learner sees their place, live ---------------------------------------

@pytest.mark.slow
def test_a_queued_run_shows_its_place_and_starts_when_a_trainer_frees():
    from attnviz.models import training

    pool = training.default_pool()
    opened = threading.Event()
    held = [pool.submit(toy.make_config("shift", steps=20), lambda: opened.wait(60) or True)
            for _ in range(pool.workers)]                  # every trainer busy, held at start
    deadline = time.monotonic() + 30
    while any(pool.place(h) != 0 for h in held) and time.monotonic() < deadline:
        time.sleep(0.02)
    try:
        at = open_page(PAGE, toy_task="shift", toy_steps=20)
        button(at, "Train").click().run()
        job = at.session_state[keys.TOY_JOB]
        assert pool.place(job) == 1
        runs = "run" if pool.workers == 1 else "runs"
        assert any(f"your run is number 1 in the queue ({pool.workers} {runs} before it"
                   in i.value for i in at.info)
        assert button(at, "Train").disabled
    finally:
        opened.set()
    at = finish_training(at)
    no_exceptions(at)
    assert at.session_state[keys.TOY_RUN] is job.run and job.ended == "finished"
    assert all(h.wait(60) for h in held)
