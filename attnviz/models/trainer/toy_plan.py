"""Before a toy run and after it: what it costs, how long it should take, and whether it learnt.

    work(config)            multiply-adds of the whole run (training steps and evaluations)
    max_steps(config)       the most steps the server trains at these sizes (MAX_WORK)
    RATE.estimate(config)   seconds, from a few steps timed on this machine, corrected by
                            every run that finishes
    verdict(run)            learnt, or why not and what to change

Work counts the multiply-adds of the model's matrix products, per sequence and layer:

    Q, K, V and the output projection   4 · n · d²        scores and weighted values  2 · n² · d
    the MLP (if any)                     8 · n · d²        the output layer            n · d · vocab

a training step is 3 forward passes' worth (forward, then backward's two products per weight)
on BATCH sequences; each held-out evaluation one forward pass on TEST_SEQUENCES.

Numpy-free and torch-free: the pool checks runs without loading torch (timing steps imports
``attnviz.models.trainer.toy`` when first asked).
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from dataclasses import dataclass
from types import SimpleNamespace

from attnviz.core.errors import AttnvizInputError
from attnviz.i18n import t
from attnviz.models.trainer.toy_tasks import task_name

# The same numbers as attnviz.models.trainer.toy's (not imported: toy loads torch); a test holds
# them equal.
BATCH, EVALUATIONS, TEST_SEQUENCES, LIBRARY_MAX_STEPS = 64, 50, 512, 100_000

LEARNT = 0.9              # held-out accuracy a run must reach to have learnt its task
CHANCE_MARGIN = 1.5       # at most this many times chance: the model only guesses
STILL_RISING = 0.05       # accuracy gained over the second half of training: not done yet
                          # (the learning rate decays to 0 at the end, so the very last
                          # steps flatten any curve)

# The largest run the server trains: the default induction run (1000 steps) at the Train
# page's largest sizes, about a minute on one core. Any run's work must fit.
LARGEST = SimpleNamespace(task="induction", length=16, vocab=50, layers=4, heads=8, d_model=128,
                          steps=1000, mlp=False)


def sequence_work(cfg) -> int:
    """Multiply-adds of one forward pass on one sequence."""
    n, d = cfg.length, cfg.d_model
    per_layer = 4 * n * d * d + 2 * n * n * d + (8 * n * d * d if cfg.mlp else 0)
    return cfg.layers * per_layer + n * d * cfg.vocab


def step_work(cfg) -> int:
    """Multiply-adds of one optimiser step (forward and backward on BATCH sequences)."""
    return 3 * BATCH * sequence_work(cfg)


def evaluation_work(cfg) -> int:
    """Multiply-adds of the run's held-out evaluations (one per history point, and the end)."""
    return (min(cfg.steps, EVALUATIONS) + 1) * TEST_SEQUENCES * sequence_work(cfg)


def work(cfg) -> int:
    """Multiply-adds of the whole run: its steps and its evaluations."""
    return cfg.steps * step_work(cfg) + evaluation_work(cfg)


MAX_WORK = work(LARGEST)


def max_steps(cfg, max_work: float = MAX_WORK) -> int:
    """The most steps a run of these sizes may take within `max_work` (at least 1)."""
    spare = max_work - (EVALUATIONS + 1) * TEST_SEQUENCES * sequence_work(cfg)
    return max(1, int(spare // step_work(cfg)))


def check_work(cfg, max_work: float = MAX_WORK) -> None:
    """AttnvizInputError if the run's work is over `max_work`, naming the most steps allowed
    at these sizes."""
    if work(cfg) > max_work:
        raise AttnvizInputError("error.toy.too_much_work", steps=cfg.steps,
                                most=max_steps(cfg, max_work), d_model=cfg.d_model,
                                count=cfg.layers, length=cfg.length, vocab=cfg.vocab)


# ---- time -----------------------------------------------------------------------------------

class Rate:
    """Seconds a run takes on one trainer: a few optimiser steps of its configuration timed
    here (once per set of sizes), times its steps and evaluations (one evaluation costs about
    EVALUATION_STEPS steps), times a correction learnt from how long finished runs really took
    (the machine's load changes; other learners' runs share it)."""

    EVALUATION_STEPS = 2
    KEPT = 256                      # sizes whose step time is remembered

    def __init__(self):
        self._lock = threading.Lock()
        self._per_step: OrderedDict[tuple, float] = OrderedDict()
        self.correction = 1.0                           # measured / estimated, smoothed

    @staticmethod
    def _sizes(cfg) -> tuple:
        return (cfg.task, cfg.length, cfg.vocab, cfg.layers, cfg.heads, cfg.d_model,
                getattr(cfg, "mlp", False))

    def per_step(self, cfg, measure: bool = True) -> float | None:
        """Seconds of one optimiser step at these sizes (timed on first request; None if not
        timed yet and `measure` is False)."""
        key = self._sizes(cfg)
        with self._lock:
            if key in self._per_step:
                self._per_step.move_to_end(key)
                return self._per_step[key]
        if not measure:
            return None
        from attnviz.models.trainer import toy

        seconds = toy.seconds_per_step(cfg, steps=3)
        with self._lock:
            self._per_step[key] = seconds
            while len(self._per_step) > self.KEPT:
                self._per_step.popitem(last=False)
        return seconds

    def _steps(self, cfg) -> float:
        return cfg.steps + self.EVALUATION_STEPS * (min(cfg.steps, EVALUATIONS) + 1)

    def estimate(self, cfg) -> float:
        """Seconds the run should take once a trainer starts it."""
        return self.per_step(cfg) * self._steps(cfg) * self.correction

    def record(self, job) -> None:
        """A finished run's real time corrects the next estimates (runs stopped early or
        skipped say nothing)."""
        if job.ended != "finished" or not job.seconds:
            return
        per_step = self.per_step(job.config, measure=False)
        if per_step is None:
            return
        measured = job.seconds / (per_step * self._steps(job.config))
        with self._lock:
            self.correction = 0.7 * self.correction + 0.3 * measured


RATE = Rate()


def describe_seconds(seconds: float) -> str:
    """“about 4 s”, “about 40 s”, “about 3 min” (in the active language)."""
    if seconds < 1:
        return t("toy.time.under_a_second")
    if seconds < 90:
        return t("toy.time.seconds", seconds=max(1, round(seconds, -1 if seconds >= 20 else 0)))
    return t("toy.time.minutes", minutes=math.ceil(seconds / 60))


# ---- after a run ----------------------------------------------------------------------------

@dataclass(frozen=True)
class Verdict:
    """Whether a run learnt its task; if not, why (`reason`) and what to change (`advice`),
    said in the language active when :func:`verdict` made it."""

    learnt: bool
    reason: str
    advice: str = ""

    @property
    def text(self) -> str:
        return f"{self.reason} {self.advice}".strip()


def chance(cfg) -> float:
    """Accuracy of guessing a token of the vocabulary at random."""
    return 1 / cfg.vocab


def verdict(cfg, history, accuracy: float, stopped_at: int | None = None,
            most_steps: int | None = None) -> Verdict:
    """Did a run with configuration `cfg`, training history `history` (Points: step, loss,
    accuracy) and final held-out `accuracy` learn its task (≥ LEARNT)? If not, the first
    reason that fits: stopped early (at step `stopped_at`), unstable (the loss rose well above
    its best), still improving at the end, or settled (near chance, or above it) — with what
    to change. `most_steps`: the most steps the caller allows (default: the work bound's).
    Its words are in the active language."""
    if accuracy >= LEARNT:
        return Verdict(True, t("toy.verdict.learnt", accuracy=accuracy, bar=LEARNT))
    acc = dict(accuracy=accuracy, bar=LEARNT)
    most = min(max_steps(cfg), LIBRARY_MAX_STEPS, most_steps or LIBRARY_MAX_STEPS)
    if stopped_at is not None:
        return Verdict(False, t("toy.verdict.stopped", step=stopped_at, steps=cfg.steps, **acc),
                       t("toy.advice.let_it_finish"))
    if not history:
        return Verdict(False, t("toy.verdict.not_learnt", **acc), t("toy.advice.more_steps"))
    best = min(history, key=lambda p: p.loss)
    last = history[-1]
    if last.loss > 1.5 * best.loss + 0.1 and last.step > best.step:
        return Verdict(False, t("toy.verdict.unstable", best=best.loss, best_step=best.step,
                                last=last.loss, **acc),
                       _smaller(cfg))
    half = [p for p in history if p.step >= 0.5 * last.step] or [last]
    if last.accuracy - half[0].accuracy >= STILL_RISING or len(history) < 5:
        if cfg.steps < most:
            advice = t("toy.tip.more_steps", most=most)
        else:
            advice = t("toy.tip.no_more_steps", most=most)
        return Verdict(False, t("toy.verdict.still_rising", first=half[0].accuracy,
                                first_step=half[0].step, last=last.accuracy,
                                last_step=last.step, **acc),
                       _sentence([advice, *_tips(cfg)]))
    if accuracy <= CHANCE_MARGIN * chance(cfg):
        return Verdict(False, t("toy.verdict.guessing", chance=chance(cfg), **acc),
                       _sentence(_tips(cfg) or [t("toy.tip.defaults")]))
    return Verdict(False, t("toy.verdict.settled", **acc),
                   _sentence(_tips(cfg) or [t("toy.tip.other_seed")]))


def _smaller(cfg) -> str:
    if cfg.layers > 1 or cfg.d_model > 32:
        return t("toy.advice.smaller")
    return t("toy.advice.another_seed")


def _tips(cfg) -> list[str]:
    """What in these sizes stands in the way of learning, and what to change."""
    tips = []
    d_k = cfg.d_model // cfg.heads
    if not getattr(cfg, "residual", True) and cfg.layers > 1:
        tips.append(t("toy.tip.no_residual", task=task_name(cfg.task), layers=cfg.layers))
    if cfg.d_model < 16 and cfg.vocab > 2 * cfg.d_model:
        tips.append(t("toy.tip.small_d_model", d_model=cfg.d_model, vocab=cfg.vocab))
    if d_k < 4 and cfg.heads > 1:
        tips.append(t("toy.tip.small_d_k", count=d_k))
    return tips


def _sentence(parts: list[str]) -> str:
    """Parts joined as one sentence, in the active language (English: semicolons, the first
    letter capitalised unless it starts a name like d_model)."""
    text = t("toy.tip.separator").join(parts)
    if text[:1].islower() and not text.startswith("d_model"):
        text = text[0].upper() + text[1:]
    return t("toy.tip.sentence", text=text)
