"""Training for a class on one server: a bounded pool of trainers, a queue in arrival order,
a bound on each run's work, and runs that stop when their learner has gone.

    pool = TrainingPool(workers=2)
    job = pool.submit(config, alive=lambda: session_exists(session_id))
    pool.place(job)        # 0: training now; k ≥ 1: k-th in the queue; None: ended
    job.wait()             # then job.run (a ToyRun), job.ended, job.seconds

Each trainer is a thread of the server's process training one run at a time on one torch
thread (``toy.train_config``), so at most `workers` runs use the CPU at once whatever the
number of learners, and the app's pages keep answering. A queued run whose learner has gone
is skipped; a running one stops within `check_every` seconds (its learner's Stop button
likewise), keeping what it has learnt. A run over ``toy_plan.MAX_WORK`` is refused, whatever
the page sent.

torch is imported by the trainers only (``attnviz.models.trainer.toy`` on first use).
"""

from __future__ import annotations

import itertools
import logging
import os
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Callable

from attnviz.models.trainer import toy_plan
from attnviz.core.cache import per_process
from attnviz.core.errors import AttnvizInputError

WORKERS_VARIABLE = "ATTNVIZ_TRAIN_WORKERS"   # trainers of the server's pool (default: cores)
CHECK_EVERY = 1.0          # seconds between asking whether a running run's learner is there

log = logging.getLogger("attnviz.models.trainer.training")


def cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:                         # not Linux
        return os.cpu_count() or 1


def default_workers(variable: str = WORKERS_VARIABLE) -> int:
    """The environment's `variable` (ATTNVIZ_TRAIN_WORKERS; the heavy queue's is
    ATTNVIZ_HEAVY_WORKERS) if set (a whole number ≥ 1), else one worker per core."""
    raw = os.environ.get(variable, "").strip()
    if not raw:
        return cores()
    if not raw.isdigit() or int(raw) < 1:
        raise AttnvizInputError("error.training.workers", variable=variable,
                                value=repr(raw))
    return int(raw)


class WorkerThreads:
    """A pool's worker threads (the training pool's trainers, the heavy queue's workers): each
    runs `target`, started on first use, up to `count` of them named prefix-1, prefix-2 …, and
    joined within one deadline when the pool closes."""

    def __init__(self, count: int, target, prefix: str):
        if count < 1:
            raise AttnvizInputError("error.training.no_worker", workers=count)
        self.count, self._target, self._prefix = count, target, prefix
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        """Start the threads not started yet (the caller holds its pool's lock)."""
        while len(self._threads) < self.count:
            thread = threading.Thread(target=self._target, daemon=True,
                                      name=f"{self._prefix}-{len(self._threads) + 1}")
            self._threads.append(thread)
            thread.start()

    def join(self, timeout: float) -> None:
        """Wait up to `timeout` s in all for every thread to end."""
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))


def next_queued(cond: threading.Condition, queue: deque, running: list, closed) -> object | None:
    """The pools' one way to take work: wait on `cond` until `queue` holds a job or `closed()`
    says the pool closed; the job moved to `running`, or None once closed."""
    with cond:
        while not queue and not closed():
            cond.wait()
        if closed():
            return None
        job = queue.popleft()
        running.append(job)
        return job


@dataclass(eq=False)
class TrainingJob:
    """One learner's run: queued, then trained by a trainer; the page reads it, the trainer
    writes it."""

    config: object                                    # toy.ToyConfig
    alive: Callable[[], bool] = field(default=lambda: True, repr=False)
    number: int = 0                                   # the pool's count, in arrival order
    history: list = field(default_factory=list)       # toy.Point, appended by the trainer
    stop: threading.Event = field(default_factory=threading.Event)
    run: object | None = None                         # the toy.ToyRun, once ended
    error: str | None = None
    ended: str | None = None        # "finished", "stopped" (Stop), "left" (learner gone),
                                    # "failed"
    queued_at: float = field(default_factory=time.monotonic)
    started_at: float | None = None
    seconds: float | None = None                      # wall time of training, once ended
    _done: threading.Event = field(default_factory=threading.Event, repr=False)

    @property
    def running(self) -> bool:
        """Queued or training: not ended yet."""
        return not self._done.is_set()

    @property
    def training(self) -> bool:
        return self.started_at is not None and self.running

    @property
    def steps_done(self) -> int:
        return self.history[-1].step if self.history else 0

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until the job has ended; False if `timeout` s passed first."""
        return self._done.wait(timeout)


class TrainingPool:
    """At most `workers` runs train at once; the others wait in arrival order."""

    def __init__(self, workers: int | None = None, *, max_work: float = toy_plan.MAX_WORK,
                 check_every: float = CHECK_EVERY):
        self.workers = default_workers() if workers is None else workers
        self._threads = WorkerThreads(self.workers, self._work, "attnviz-trainer")
        self.max_work, self.check_every = max_work, check_every
        self._queue: deque[TrainingJob] = deque()
        self._training: list[TrainingJob] = []
        self._cond = threading.Condition()
        self._count = itertools.count(1)
        self._closed = False

    # ---- for the page -------------------------------------------------------------------------
    def submit(self, config, alive: Callable[[], bool] | None = None) -> TrainingJob:
        """Queue a run of `config` (a toy.ToyConfig); AttnvizInputError if its work is over
        the pool's bound. `alive()` says whether its learner is still there."""
        toy_plan.check_work(config, self.max_work)
        with self._cond:
            if self._closed:
                raise AttnvizInputError("error.training.shutting_down")
            job = TrainingJob(config, alive=alive or (lambda: True), number=next(self._count))
            self._queue.append(job)
            self._threads.start()
            self._cond.notify()
        log.info("run %d queued (%s, %d steps): place %d", job.number, config.task,
                 config.steps, self.place(job))
        return job

    def cancel(self, job: TrainingJob) -> None:
        """The learner's Stop: a queued run leaves the queue at once; a training one ends
        after its current step, keeping what it has learnt."""
        job.stop.set()
        with self._cond:
            if job not in self._queue:
                return
            self._queue.remove(job)
        job.ended, job.seconds = "stopped", 0.0
        job._done.set()
        log.info("run %d left the queue (Stop)", job.number)

    def place(self, job: TrainingJob) -> int | None:
        """0 while `job` trains, k ≥ 1 while it is k-th in the queue, None otherwise (ended,
        or not this pool's)."""
        with self._cond:
            if job in self._training:
                return 0
            for k, queued in enumerate(self._queue, 1):
                if queued is job:
                    return k
            return None

    def ahead(self, job: TrainingJob | None) -> list[TrainingJob]:
        """The runs that train before `job`: those training now and those queued before it
        (None: before a run submitted now, i.e. every run training or queued)."""
        with self._cond:
            queued = list(itertools.takewhile(lambda j: j is not job, self._queue))
            return list(self._training) + queued

    def status(self) -> tuple[int, int]:
        """(runs training, runs queued)."""
        with self._cond:
            return len(self._training), len(self._queue)

    # ---- the trainers -------------------------------------------------------------------------
    def close(self, timeout: float = 10) -> None:
        """Stop every run (queued ones leave the queue, running ones end after their step)
        and wait up to `timeout` s for the trainers to end: a trainer thread still inside
        torch when Python exits aborts the process."""
        with self._cond:
            self._closed = True
            queued, running = list(self._queue), list(self._training)
            self._cond.notify_all()
        for job in queued:
            self.cancel(job)
        for job in running:
            job.stop.set()
        self._threads.join(timeout)

    def _next(self) -> TrainingJob | None:
        return next_queued(self._cond, self._queue, self._training, lambda: self._closed)

    def _work(self) -> None:
        while True:
            job = self._next()
            if job is None:
                return
            try:
                _train(job, self.check_every)
            finally:
                with self._cond:
                    self._training.remove(job)
                job._done.set()
            log.info("run %d %s at step %d of %d after %.1f s (waited %.1f s)", job.number,
                     job.ended, job.steps_done if job.run is None else job.run.steps,
                     job.config.steps, job.seconds or 0.0,
                     (job.started_at or job.queued_at) - job.queued_at)


def _train(job: TrainingJob, check_every: float) -> None:
    """Train `job` on this thread (or skip it: stopped or its learner gone while queued)."""
    job.started_at = time.monotonic()
    if job.stop.is_set() or not job.alive():
        job.ended, job.seconds = ("stopped" if job.stop.is_set() else "left"), 0.0
        return
    from attnviz.models.trainer import toy

    last_check = [time.monotonic()]

    def on_step(step, loss, accuracy):
        job.history.append(toy.Point(step, loss, accuracy))

    def should_stop() -> bool:
        if job.stop.is_set():
            return True
        now = time.monotonic()
        if now - last_check[0] < check_every:
            return False
        last_check[0] = now
        if job.alive():
            return False
        job.ended = "left"
        return True

    try:
        job.run = toy.train_config(job.config, on_step=on_step, should_stop=should_stop)
        job.ended = job.ended or ("stopped" if job.run.stopped else "finished")
    except Exception as exc:      # a thread's error would vanish: the page shows it instead
        job.error, job.ended = f"{type(exc).__name__}: {exc}", "failed"
    job.seconds = time.monotonic() - job.started_at
    toy_plan.RATE.record(job)


# the server's pool (one per process), made on first use with `default_workers()`
default_pool: Callable[[], TrainingPool] = per_process(TrainingPool)
