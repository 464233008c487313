"""The Train page in AppTest: train with few steps, the checkpoint slider redraws the heads, Stop
keeps a partial run, a run seeded in session state is shown without training; a typed value out
of range is named in the page and turns Train off, the time is estimated before Train, a run
says whether it learnt (and if not, why), and a queued learner sees their place."""

import threading
import time

import numpy as np
import pytest

from attnviz.app import keys
from attnviz.i18n import t
from attnviz.models.trainer.toy_tasks import task_name
from tests.apptest_helpers import charts, charts_keyed, heatmap_z, no_exceptions, open_page, shows
from tests.lazy import LazyModule
from tests.message_helpers import message_pattern

toy = LazyModule("attnviz.models.trainer.toy")      # torch with it: imported by the first test

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
    """The chart of every head of `layer` (keys.TOY_HEADS_OF)."""
    [chart] = charts_keyed(at, keys.TOY_HEADS_OF(layer))
    return chart


def heads_title(at, layer: int = 0, /, **known) -> bool:
    """Whether `layer`'s heads chart is titled as a layer after a step (with or without the
    causal mask), with the parameters `known`."""
    title = heads_chart(at, layer)["layout"]["title"]["text"]
    return any(message_pattern(msg_id, layer=layer, **known).fullmatch(title)
               for msg_id in ("figure.train.heads.causal", "figure.train.heads.no_mask"))


def train_button(at):
    return at.button(key=keys.TOY_TRAIN)


@pytest.mark.slow
def test_the_page_alone_asks_for_training():
    at = open_page(PAGE)
    no_exceptions(at)
    assert shows(at.info, "train.start")
    assert not charts(at)


@pytest.mark.slow
def test_train_with_few_steps_then_the_slider_changes_the_heatmap():
    at = open_page(PAGE, toy_task="reverse", toy_steps=60)
    train_button(at).click().run()
    no_exceptions(at)
    at = finish_training(at)
    no_exceptions(at)
    run = at.session_state[keys.TOY_RUN]
    assert run.steps == 60 and run.config.task == "reverse"
    final = heatmap_z(heads_chart(at), trace=0)                     # head 0, (n, n)
    np.testing.assert_allclose(final, run.trace(run.test_inputs[0]).weights[0], atol=1e-6)
    assert shows(at.markdown, "train.head.shows", step=60)
    at.select_slider(key="toy_step").set_value(0).run()
    start = heatmap_z(heads_chart(at), trace=0)
    np.testing.assert_allclose(start, run.trace(run.test_inputs[0], step=0).weights[0],
                               atol=1e-6)
    assert not np.allclose(start, final, atol=0.05)
    assert heads_title(at, 0, step=0)


@pytest.mark.slow
def test_stop_ends_training_early_and_keeps_the_run():
    at = open_page(PAGE, toy_task="copy", toy_steps=5000)
    train_button(at).click().run()
    job = at.session_state[keys.TOY_JOB]
    deadline = time.monotonic() + 30          # a free trainer takes it (a thread's wake-up)
    while not job.training and time.monotonic() < deadline:
        time.sleep(0.02)
    at.run()
    training = message_pattern("train.progress", task=task_name("copy"), steps=5000)
    assert job.running and any(training.fullmatch(p.proto.text) for p in at.get("progress"))
    at.button(key=keys.TOY_STOP).click().run()
    at = finish_training(at)
    no_exceptions(at)
    run = at.session_state[keys.TOY_RUN]
    assert run.stopped and run.steps < 5000 and run.checkpoint_steps[-1] == run.steps
    assert shows(at.caption, "train.summary.stopped", step=run.steps, steps=5000)


@pytest.mark.slow
def test_a_seeded_run_is_shown_with_its_causal_mask_and_the_head_named(shift_run):
    at = open_page(PAGE, **{keys.TOY_RUN: shift_run, "toy_example": 3})
    no_exceptions(at)
    fig = heads_chart(at)
    assert message_pattern("figure.train.heads.causal", layer=0).fullmatch(
        fig["layout"]["title"]["text"])
    z = heatmap_z(fig, trace=0)
    assert np.isnan(z[np.triu_indices(8, k=1)]).all()          # future keys: masked cells
    best = shift_run.head_scores()[0]
    assert shows(at.markdown, "train.head.shows", head=best.head)
    seq = shift_run.test_inputs[3]                             # "position: token" labels
    assert fig["data"][0]["x"] == [f"{i}: {token}" for i, token in enumerate(seq)]


@pytest.mark.slow
def test_induction_gets_two_layers_and_shows_both():
    at = open_page(PAGE)
    at.selectbox(key="toy_task").set_value("induction").run()
    assert at.number_input(key="toy_layers").value == 2
    at.number_input(key="toy_steps").set_value(20).run()
    train_button(at).click().run()
    at = finish_training(at)
    no_exceptions(at)
    assert len(charts_keyed(at, keys.TOY_HEADS_OF)) == len(charts(at)) == 2
    assert heads_title(at, 0) and heads_title(at, 1)
    assert shows(at.markdown, "train.layer.expected",
                 pattern=t("toy.task.induction.first_layer"))


@pytest.mark.slow
def test_a_bad_size_is_explained_and_train_is_disabled():
    at = open_page(PAGE, toy_d_model=30, toy_heads=4)
    assert shows(at.error, "train.error.heads_divide", d_model=30, heads=4)
    assert train_button(at).disabled


@pytest.mark.slow
def test_the_page_is_in_the_apps_navigation(shift_page):
    assert charts(shift_page)


# ---- issue 18.6: a typed value out of range is shown, and Train says why it is off -------------

@pytest.mark.slow
@pytest.mark.parametrize("key, field, low, high", [      # the field's label: a message, or a name
    ("toy_length", "train.field.length", 3, 16), ("toy_vocab", "train.field.vocab", 2, 50),
    ("toy_d_model", "d_model", 4, 128), ("toy_steps", "train.field.steps", 1, 5000)])
def test_a_typed_value_out_of_range_is_shown_in_the_page_and_train_is_off(key, field, low,
                                                                          high):
    at = open_page(PAGE)
    at.number_input(key=key).set_value(99999).run()
    no_exceptions(at)
    assert at.number_input(key=key).value == 99999                  # kept as typed
    errors = [e.value for e in at.error]
    label = t(field) if field.startswith("train.") else field
    assert t("train.error.range", field=label, low=low, high=high, value="99999") in errors
    train = train_button(at)
    assert train.disabled and train.help == t("train.button.fix_first")
    assert shows(at.caption, "train.button.off")
    assert keys.TOY_JOB not in at.session_state
    at.number_input(key=key).set_value(low).run()                  # fixed: Train is back
    assert not at.error and not train_button(at).disabled


def test_steps_over_the_servers_bound_at_the_largest_sizes_name_the_most_allowed():
    at = open_page(PAGE, toy_task="induction", toy_length=16, toy_vocab=50, toy_layers=4,
                   toy_heads=8, toy_d_model=128, toy_steps=5000)
    no_exceptions(at)
    assert (t("train.error.range_at_sizes", field=t("train.field.steps"), low=1, high=1000,
              value="5000") in [e.value for e in at.error])
    assert train_button(at).disabled


# ---- issue 18.7: the time before training, and whether the run learnt ------------------------

def test_the_page_estimates_the_time_before_train_is_pressed():
    at = open_page(PAGE)
    estimate = [c for c in at.caption if message_pattern("train.estimate").fullmatch(c.value)]
    assert len(estimate) == 1 and shows(estimate, "train.estimate", steps=600)   # reverse's
    at.number_input(key="toy_steps").set_value(60).run()
    assert shows(at.caption, "train.estimate", steps=60)


@pytest.mark.slow
def test_a_run_that_learnt_says_so(shift_page):
    at = shift_page
    assert shows(at.success, "toy.verdict.learnt")
    assert not at.warning


@pytest.mark.slow
def test_a_run_that_did_not_learn_says_why_and_what_to_change():
    run = toy.train("reverse", length=16, vocab=50, d_model=4, heads=1)   # 600 steps, ~1 s
    assert run.mean_accuracy < 0.5
    at = open_page(PAGE, **{keys.TOY_RUN: run})
    no_exceptions(at)
    warnings = [w.value for w in at.warning]
    assert len(warnings) == 1 and any(
        shows(at.warning, f"toy.verdict.{why}", accuracy=run.mean_accuracy)
        for why in ("not_learnt", "stopped", "unstable", "still_rising", "guessing", "settled"))
    assert t("toy.tip.small_d_model", d_model=4, vocab=50) in warnings[0]
    assert not at.success


# ---- issue 19.2: a queued learner sees their place, live ---------------------------------------

@pytest.mark.slow
def test_a_queued_run_shows_its_place_and_starts_when_a_trainer_frees():
    from attnviz.models.trainer import training

    pool = training.default_pool()
    opened = threading.Event()
    held = [pool.submit(toy.make_config("shift", steps=20), lambda: opened.wait(60) or True)
            for _ in range(pool.workers)]                  # every trainer busy, held at start
    deadline = time.monotonic() + 30
    while any(pool.place(h) != 0 for h in held) and time.monotonic() < deadline:
        time.sleep(0.02)
    try:
        at = open_page(PAGE, toy_task="shift", toy_steps=20)
        train_button(at).click().run()
        job = at.session_state[keys.TOY_JOB]
        assert pool.place(job) == 1
        assert shows(at.info, "train.queue", place=1, count=pool.workers, workers=pool.workers)
        assert train_button(at).disabled
    finally:
        opened.set()
    at = finish_training(at)
    no_exceptions(at)
    assert at.session_state[keys.TOY_RUN] is job.run and job.ended == "finished"
    assert all(h.wait(60) for h in held)
