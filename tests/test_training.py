"""The server's training pool (issue 19.2): bounded trainers, a queue in arrival order with each
run's place, runs that stop when their learner has gone, and a bound on each run's work."""

import threading
import time

import pytest

from attnviz.models.trainer import toy_plan, training
from tests.lazy import LazyModule
from tests.message_helpers import raises_message

toy = LazyModule("attnviz.models.trainer.toy")      # torch with it: imported by the first test


def gate():
    """An alive() that blocks its first caller until released: a run held at its start, so
    the test sees the queue behind it before anything finishes."""
    opened = threading.Event()

    def alive():
        opened.wait(60)
        return True

    return alive, opened.set


def started(pool, job, timeout: float = 30) -> None:
    """Wait until a trainer has taken `job`."""
    deadline = time.monotonic() + timeout
    while pool.place(job) != 0 and time.monotonic() < deadline:
        time.sleep(0.01)


@pytest.mark.slow
def test_a_pool_of_one_runs_three_runs_in_arrival_order_and_reports_their_places():
    pool = training.TrainingPool(1)
    hold, release = gate()
    configs = [toy.make_config("shift", steps=40, seed=s) for s in range(3)]
    jobs = [pool.submit(configs[0], hold)] + [pool.submit(c) for c in configs[1:]]
    started(pool, jobs[0])
    assert [pool.place(j) for j in jobs] == [0, 1, 2]
    assert pool.ahead(jobs[2]) == jobs[:2] and pool.status() == (1, 2)
    release()
    for job in jobs:
        assert job.wait(120)
    assert [j.ended for j in jobs] == ["finished"] * 3
    assert [pool.place(j) for j in jobs] == [None] * 3
    # one trainer: each run started after the one before it had ended
    for before, after in zip(jobs, jobs[1:]):
        assert after.started_at >= before.started_at + before.seconds
    assert [j.run.config.seed for j in jobs] == [0, 1, 2]
    assert all(j.run.steps == 40 for j in jobs)


@pytest.mark.slow
def test_a_pool_trains_at_most_its_workers_at_once():
    pool = training.TrainingPool(2)
    gates = [gate() for _ in range(2)]
    jobs = [pool.submit(toy.make_config("shift", steps=20), hold) for hold, _ in gates]
    jobs.append(pool.submit(toy.make_config("shift", steps=20)))
    deadline = time.monotonic() + 30
    while pool.status() != (2, 1) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert pool.status() == (2, 1) and pool.place(jobs[2]) == 1
    for _, release in gates:
        release()
    assert all(j.wait(120) for j in jobs)


@pytest.mark.slow
def test_a_run_whose_session_is_gone_stops_and_a_queued_one_is_skipped():
    pool = training.TrainingPool(1, check_every=0.1)
    here = threading.Event()
    here.set()
    long_run = toy.make_config("reverse", steps=toy.MAX_STEPS)            # minutes of work
    job = pool.submit(long_run, here.is_set)
    queued = pool.submit(toy.make_config("shift", steps=20), here.is_set)
    deadline = time.monotonic() + 60
    while not job.history and time.monotonic() < deadline:             # training is under way
        time.sleep(0.05)
    assert job.training and pool.place(queued) == 1
    here.clear()                                                       # the session has ended
    left = time.monotonic()
    assert job.wait(10) and queued.wait(10)
    assert time.monotonic() - left < 5
    assert job.ended == "left" and job.run.stopped and job.run.steps < long_run.steps
    assert queued.ended == "left" and queued.run is None


@pytest.mark.slow
def test_stop_takes_a_run_out_of_the_queue_at_once():
    pool = training.TrainingPool(1)
    hold, release = gate()
    first = pool.submit(toy.make_config("shift", steps=20), hold)
    second = pool.submit(toy.make_config("shift", steps=20))
    third = pool.submit(toy.make_config("shift", steps=20))
    started(pool, first)
    assert pool.place(third) == 2
    pool.cancel(second)
    assert not second.running and second.ended == "stopped" and second.run is None
    assert pool.place(third) == 1
    release()
    assert first.wait(60) and third.wait(60) and third.ended == "finished"


def test_a_run_over_the_work_bound_is_refused_whatever_the_page_sent():
    pool = training.TrainingPool(1)
    largest = dict(length=16, vocab=50, layers=4, heads=8, d_model=128)
    fits = toy.make_config("induction", **largest)          # the default 1000 steps fit
    assert toy_plan.work(fits) <= toy_plan.MAX_WORK
    too_much = toy.make_config("induction", steps=5000, **largest)
    with raises_message("error.toy.too_much_work", steps=5000, most=1000, d_model=128, count=4):
        pool.submit(too_much)
    assert pool.status() == (0, 0)
    small = toy.make_config("reverse", steps=toy.MAX_STEPS)  # the library's most, tiny model
    assert toy_plan.work(small) <= toy_plan.MAX_WORK
    with raises_message("error.toy.too_much_work", steps=toy.MAX_STEPS, d_model=256):
        pool.submit(toy.make_config("sort", steps=toy.MAX_STEPS, length=64, vocab=512,
                                    d_model=256, heads=8, layers=4))


def test_the_work_count_is_the_models_multiply_adds():
    """Against the model's own matrices: torch's parameter shapes give the projections'
    multiply-adds per token; the scores and weighted values add 2 · n · d per token."""
    from attnviz.models.trainer.toy import _fresh_model

    cfg = toy.make_config("reverse", length=8, vocab=10, layers=2, heads=2, d_model=32)
    model = _fresh_model(cfg)
    n = cfg.length
    per_token = sum(a.in_proj_weight.numel() + a.out_proj.weight.numel()
                    for a in model.attention) + model.unembed.weight.numel()
    forward = n * per_token + cfg.layers * 2 * n * n * cfg.d_model
    assert toy_plan.sequence_work(cfg) == forward
    assert toy_plan.step_work(cfg) == 3 * toy.BATCH * forward
    assert (toy_plan.BATCH, toy_plan.EVALUATIONS, toy_plan.TEST_SEQUENCES,
            toy_plan.LIBRARY_MAX_STEPS) == (toy.BATCH, toy.EVALUATIONS, toy.TEST_SEQUENCES,
                                            toy.MAX_STEPS)


def test_the_number_of_trainers_is_one_per_core_or_the_variable(monkeypatch):
    monkeypatch.delenv(training.WORKERS_VARIABLE, raising=False)
    assert training.default_workers() == training.cores()
    monkeypatch.setenv(training.WORKERS_VARIABLE, "3")
    assert training.TrainingPool().workers == 3
    monkeypatch.setenv(training.WORKERS_VARIABLE, "many")
    with raises_message("error.training.workers", variable="ATTNVIZ_TRAIN_WORKERS",
                        value="'many'"):
        training.default_workers()
