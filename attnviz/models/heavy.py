"""The server's queue for heavy work (activation patching today): a bounded number of workers,
each job keyed by its inputs and computed once for every learner who asks for it, work measured
in units (patches), not wall time.

    queue = HeavyQueue(workers=2)
    job = queue.submit(key, work, total=270, learner=token, alive=there)
    queue.place(job)       # 0: computing now; k ≥ 1: k-th in the queue; None: ended
    queue.present(job)     # how many of its learners are still there
    job.done, job.total    # live progress, in units
    queue.leave(job, token)  # the learner's Stop: the job stops when no learner wants it
    job.wait()             # then job.result, job.ended ("finished", "stopped", "left", "failed")

``work(resume, progress, should_stop)`` runs once, on a worker thread: `resume` is the partial
result a stopped job of the same key left (None the first time), ``progress(done, total)`` is
called as units are done and ``should_stop()`` before each unit of work. It is never a clock:
it becomes true only when every learner has pressed Stop or gone, so a worker always gets on
with its job however loaded the machine. A stopped job's result is kept (``partial(key)``) and
the next job of that key resumes it; at most ``max_partials`` are kept.

The same request from many learners is one job: ``submit`` with the key of a queued or running
job adds the learner to it. A learner's ``alive()`` (its browser still connected) is asked every
`check_every` seconds; a job no learner wants any more is stopped (queued: skipped).

The workers follow the training pool's pattern (``attnviz.models.trainer.training``): threads of the
server's process started on first use, ``ATTNVIZ_HEAVY_WORKERS`` of them (default one per core).
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field

from attnviz.core.cache import per_process
from attnviz.core.errors import AttnvizInputError
from attnviz.models.trainer.training import WorkerThreads, default_workers, next_queued

__all__ = ["HeavyJob", "HeavyQueue", "WORKERS_VARIABLE", "default_queue"]

WORKERS_VARIABLE = "ATTNVIZ_HEAVY_WORKERS"    # the queue's workers (default: one per core)
CHECK_EVERY = 1.0          # seconds between asking whether a running job's learners are there
MAX_PARTIALS = 32          # stopped jobs' partial results kept for a resume

log = logging.getLogger("attnviz.models.heavy")

Work = Callable[[object, Callable[[int, int], None], Callable[[], bool]], object]


@dataclass(eq=False)
class HeavyJob:
    """One computation, for every learner who asked for it; the page reads it, a worker
    writes it."""

    key: Hashable
    work: Work = field(repr=False)
    total: int                                        # units of work in all
    done: int = 0                                     # units done (a resumed job's included)
    number: int = 0                                   # the queue's count, in arrival order
    learners: dict = field(default_factory=dict, repr=False)   # token → alive()
    stop: threading.Event = field(default_factory=threading.Event)
    result: object | None = None
    error: str | None = None
    ended: str | None = None        # "finished", "stopped" (every learner's Stop), "left"
                                    # (every learner gone), "failed"
    queued_at: float = field(default_factory=time.monotonic)
    started_at: float | None = None
    _done: threading.Event = field(default_factory=threading.Event, repr=False)

    @property
    def running(self) -> bool:
        """Queued or computing: not ended yet."""
        return not self._done.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until the job has ended; False if `timeout` s passed first."""
        return self._done.wait(timeout)


class HeavyQueue:
    """At most `workers` jobs compute at once; the others wait in arrival order."""

    def __init__(self, workers: int | None = None, *, check_every: float = CHECK_EVERY,
                 max_partials: int = MAX_PARTIALS):
        self.workers = default_workers(WORKERS_VARIABLE) if workers is None else workers
        self._threads = WorkerThreads(self.workers, self._loop, "attnviz-heavy")
        self.check_every, self.max_partials = check_every, max_partials
        self.started = 0                    # jobs a worker began computing (a counter)
        self._jobs: dict[Hashable, HeavyJob] = {}          # queued or computing, by key
        self._queue: deque[HeavyJob] = deque()
        self._computing: list[HeavyJob] = []
        self._partials: OrderedDict[Hashable, object] = OrderedDict()
        self._cond = threading.Condition()
        self._count = itertools.count(1)
        self._closed = False

    # ---- for the page -------------------------------------------------------------------------
    def submit(self, key: Hashable, work: Work, *, total: int, learner: Hashable,
               alive: Callable[[], bool] | None = None, done: int = 0) -> HeavyJob:
        """The job computing `key` with `learner` among those who want it: the queued or
        running one of that key if there is one (its `work` is not run again), else a new one
        at the end of the queue. `done`: the units a resumed partial result already has."""
        with self._cond:
            if self._closed:
                raise AttnvizInputError("error.training.shutting_down")
            job = self._jobs.get(key)
            if job is None or job.stop.is_set():
                job = HeavyJob(key, work, total=total, done=done, number=next(self._count))
                self._jobs[key] = job
                self._queue.append(job)
                self._threads.start()
                self._cond.notify()
                log.info("job %d queued (%d units): place %d", job.number, total,
                         len(self._queue))
            job.learners[learner] = alive or (lambda: True)
            return job

    def leave(self, job: HeavyJob, learner: Hashable) -> None:
        """`learner` no longer wants `job` (their Stop): when nobody does, a queued job leaves
        the queue at once and a computing one stops before its next unit, its partial result
        kept for a resume."""
        with self._cond:
            job.learners.pop(learner, None)
            if job.learners or not job.running:
                return
            job.stop.set()
            job.ended = job.ended or "stopped"
            if job not in self._queue:
                return
            self._queue.remove(job)
            self._forget(job)
        job._done.set()
        log.info("job %d left the queue (Stop)", job.number)

    def wants(self, job: HeavyJob, learner: Hashable) -> bool:
        """Whether `learner` is among those waiting for `job`."""
        with self._cond:
            return learner in job.learners

    def present(self, job: HeavyJob) -> int:
        """How many learners waiting for `job` are still there (their ``alive()`` true now):
        ``job.learners`` also holds those gone whom the workers have not yet dropped (a queued
        job's, or a running one's between two checks)."""
        with self._cond:
            return sum(1 for alive in job.learners.values() if alive())

    def place(self, job: HeavyJob) -> int | None:
        """0 while `job` computes, k ≥ 1 while it is k-th in the queue, None otherwise."""
        with self._cond:
            if job in self._computing:
                return 0
            for k, queued in enumerate(self._queue, 1):
                if queued is job:
                    return k
            return None

    def partial(self, key: Hashable):
        """The partial result a stopped job of `key` left (None: none kept)."""
        with self._cond:
            return self._partials.get(key)

    def status(self) -> tuple[int, int]:
        """(jobs computing, jobs queued)."""
        with self._cond:
            return len(self._computing), len(self._queue)

    def wait_idle(self, timeout: float) -> bool:
        """Wait until no job is queued or computing; False if `timeout` s passed first."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._jobs:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(min(left, 0.05))
            return True

    # ---- the workers --------------------------------------------------------------------------
    def close(self, timeout: float = 10) -> None:
        """Stop every job and wait up to `timeout` s for the workers to end."""
        with self._cond:
            self._closed = True
            jobs = list(self._jobs.values())
            self._cond.notify_all()
        for job in jobs:
            for learner in list(job.learners):
                self.leave(job, learner)
        self._threads.join(timeout)

    def _forget(self, job: HeavyJob) -> None:
        """`job` is no longer the one computing its key (under self._cond)."""
        if self._jobs.get(job.key) is job:
            del self._jobs[job.key]
        self._cond.notify_all()

    def _take(self) -> HeavyJob | None:
        job = next_queued(self._cond, self._queue, self._computing, lambda: self._closed)
        if job is not None:
            with self._cond:
                self.started += 1
        return job

    def _loop(self) -> None:
        while True:
            job = self._take()
            if job is None:
                return
            try:
                self._compute(job)
            finally:
                with self._cond:
                    self._computing.remove(job)
                    self._forget(job)
                    if job.ended in ("stopped", "left") and job.result is not None:
                        self._partials[job.key] = job.result
                        self._partials.move_to_end(job.key)
                        while len(self._partials) > self.max_partials:
                            self._partials.popitem(last=False)
                    elif job.ended == "finished":
                        self._partials.pop(job.key, None)
                job._done.set()
            log.info("job %d %s at %d of %d units after %.1f s (waited %.1f s)", job.number,
                     job.ended, job.done, job.total,
                     time.monotonic() - (job.started_at or job.queued_at),
                     (job.started_at or job.queued_at) - job.queued_at)

    def _compute(self, job: HeavyJob) -> None:
        """Run `job`'s work on this thread, once."""
        job.started_at = time.monotonic()
        last_check = [job.started_at]

        def progress(done: int, total: int) -> None:
            job.done = max(job.done, int(done))

        def should_stop() -> bool:
            if job.stop.is_set():
                return True
            now = time.monotonic()
            if now - last_check[0] < self.check_every:
                return False
            last_check[0] = now
            with self._cond:
                gone = [k for k, alive in job.learners.items() if not alive()]
                for k in gone:
                    del job.learners[k]
                if job.learners:
                    return False
                job.ended = "left"
                job.stop.set()
                return True

        with self._cond:
            resume = self._partials.get(job.key)
        try:
            job.result = job.work(resume, progress, should_stop)
            job.ended = job.ended or ("stopped" if job.stop.is_set() else "finished")
        except Exception as exc:      # a thread's error would vanish: the page shows it instead
            job.error, job.ended = exc, "failed"


# the server's queue (one per process), made on first use
default_queue: Callable[[], HeavyQueue] = per_process(HeavyQueue)
