"""Pieces of the Train page: the form (every value checked, the run's time estimated), a
training job on the server's pool, its live place in the queue and progress, and the finished
run's views (whether it learnt, the checkpoint slider, every head's weights, the head that
learnt the task's pattern).

Training runs on the server's pool of trainers (``attnviz.models.trainer.training``: at most one run
per core, the rest queued in arrival order), so the page's script returns at once: the app answers
other pages (and other sessions) while the model trains, a fragment polls the job every second, and
Stop asks the job to end (or leave the queue), keeping what it has learnt. A run whose session
Streamlit has dropped stops too. A finished run stays in ``st.session_state[keys.TOY_RUN]``.
"""

from __future__ import annotations

import time

import numpy as np
import pandas as pd
import streamlit as st

from attnviz.plot import figures
from attnviz.models.trainer import toy, toy_plan, training
from attnviz.core.errors import AttnvizInputError
from attnviz.i18n import t
from attnviz.session.settings import TOY_MODE
from attnviz.models.trainer.toy_tasks import NO_TARGET, TASKS, task_name, token_labels
from attnviz.app import keys
from attnviz.app.runtime import streamlit_compat
from attnviz.app.shared import widgets
from attnviz.app.shared.text import literal

MAX_PAGE_STEPS = 5000         # the page's limit on steps (the library allows more)
POLL_SECONDS = 1.0
GOOD_HIT_RATE = 0.5           # below this, no head is said to have learnt the pattern

FORM = {   # widget key → (label's message id, or a name shown as written; default, lowest, highest)
    keys.TOY_LENGTH: ("train.field.length", 8, 3, 16),
    keys.TOY_VOCAB: ("train.field.vocab", 10, 2, 50),
    keys.TOY_LAYERS: ("train.field.layers", 1, 1, toy.MAX_LAYERS),
    keys.TOY_HEADS: ("train.field.heads", 2, 1, 8),
    keys.TOY_D_MODEL: ("d_model", 32, 4, 128),
    keys.TOY_SEED: ("train.field.seed", 0, 0, 2**31 - 1),
}


class LearnerThere:
    """Asked by the training pool's thread: is the learner who started a run still there?
    Yes while their browser is connected to the session, and for server.disconnectedSessionTTL
    seconds after it went (Streamlit keeps the session that long for a reconnect, then drops
    it); counted from the first time this finds it gone. Always yes without a Streamlit server
    (AppTest, a notebook)."""

    def __init__(self, session_id: str, grace: float):
        self.session_id, self.grace = session_id, grace
        self.gone_since: float | None = None

    def __call__(self) -> bool:
        if streamlit_compat.session_connected(self.session_id) is not False:
            self.gone_since = None
            return True
        now = time.monotonic()
        if self.gone_since is None:
            self.gone_since = now
        return now - self.gone_since < self.grace


def alive_check():
    """A callable telling the pool whether this page's learner is still there."""
    session_id = streamlit_compat.session_id()
    if session_id is None:
        return lambda: True
    return LearnerThere(session_id, float(st.get_option("server.disconnectedSessionTTL")))


# ---- the form ----------------------------------------------------------------------------------

def _task_changed() -> None:
    """A task that needs more layers (induction) gets them; steps that were a task's default
    become this one's."""
    task = TASKS[st.session_state[keys.TOY_TASK]]
    layers = st.session_state.get(keys.TOY_LAYERS, 1)
    if isinstance(layers, int) and not isinstance(layers, bool):
        st.session_state[keys.TOY_LAYERS] = max(layers, task.min_layers)
    if st.session_state.get(keys.TOY_STEPS) in toy.DEFAULT_STEPS.values():
        st.session_state[keys.TOY_STEPS] = toy.DEFAULT_STEPS[task.name]


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _whole(value) -> bool:
    return _number(value) and float(value).is_integer()


def out_of_range(label: str, value, low: int, high: int, at_sizes: bool = False) -> str | None:
    """The message for a field whose value is not a whole number from low to high (in the
    active language; `at_sizes`: the bound is the one these sizes allow)."""
    if _whole(value) and low <= value <= high:
        return None
    shown = f"{value:g}" if isinstance(value, float) else str(value)
    return t("train.error.range_at_sizes" if at_sizes else "train.error.range", field=label,
             low=low, high=high, value=shown)


def task_summary(task: str) -> str:
    return t(f"toy.task.{task}.summary")


def pattern_text(run: toy.ToyRun, layer: int) -> str | None:
    """In words, what the task expects a head of `layer` to attend to (None: nothing): the
    task's pattern, or for a first layer that prepares it (induction) that layer's own."""
    pattern = run.pattern(layer)
    if pattern is None:
        return None
    task = TASKS[run.config.task]
    if task.first_layer is not None and pattern == task.first_layer[0]:
        return t(f"toy.task.{task.name}.first_layer")
    return t(f"toy.task.{task.name}.pattern")


def _size_problem(task: str, values: dict) -> str | None:
    """What toy.make_config would refuse in these sizes, said in the active language."""
    if values["d_model"] % values["heads"]:
        return t("train.error.heads_divide", d_model=values["d_model"], heads=values["heads"])
    if values["layers"] < TASKS[task].min_layers:
        return t("train.error.min_layers", task=task_name(task), count=TASKS[task].min_layers,
                 layers=values["layers"])
    return None


def form() -> toy.ToyConfig | None:
    """The task and sizes; the checked configuration, or None with every problem shown in the
    page, naming its field and range (typed values are kept as typed)."""
    for key, (_, default, _, _) in FORM.items():
        if not _number(st.session_state.get(key)):     # first visit, or a value from elsewhere
            st.session_state[key] = default
    if st.session_state.get(keys.TOY_TASK) not in TASKS:
        st.session_state[keys.TOY_TASK] = "reverse"
    steps = st.session_state.get(keys.TOY_STEPS, "first visit")
    if not (steps is None or _number(steps)):           # a cleared box stays empty (the default)
        st.session_state[keys.TOY_STEPS] = toy.DEFAULT_STEPS[st.session_state[keys.TOY_TASK]]
    task = st.selectbox(t("train.task.label"), list(TASKS), key=keys.TOY_TASK,
                        on_change=_task_changed,
                        format_func=lambda name: t("train.task.option", task=task_name(name),
                                                   summary=task_summary(name)))
    st.caption(t("train.task.pattern", pattern=t(f"toy.task.{task}.pattern")))
    columns = [*st.columns(4), *st.columns([1, 1, 1.4, 0.6])]   # two rows: labels and the
                                                                  # steps (with its ✕) fit
    values, problems = {}, []
    for column, (key, (label_id, _, low, high)) in zip(columns, FORM.items()):
        label = t(label_id) if "." in label_id else label_id
        with column:      # no min/max on the widget: a typed 99999 reaches the page and is
            value = st.number_input(label, step=1, key=key,        # refused here, in words
                                    help=t("train.field.help", low=low, high=high))
        values[key.removeprefix("toy_")] = int(value) if _whole(value) else value
        problems.append(out_of_range(label, value, low, high))
    with columns[len(FORM)]:
        steps = st.number_input(t("train.field.steps"), value=None, step=1, key=keys.TOY_STEPS,
                                placeholder=t("train.field.steps.placeholder",
                                              steps=toy.DEFAULT_STEPS[task]),
                                help=t("train.field.steps.help"))
    problems = [p for p in problems if p]
    config = None
    if not problems and (problem := _size_problem(task, values)):
        problems.append(problem)
    if not problems:
        try:
            config = toy.make_config(task, **values)        # sizes first: they bound the steps
        except AttnvizInputError as exc:
            problems.append(literal(exc).rstrip(".") + ".")
    if config is not None:
        most = min(MAX_PAGE_STEPS, toy_plan.max_steps(config))
        if steps is None:
            if config.steps > most:
                problems.append(t("train.error.default_too_many", steps=config.steps,
                                  most=most))
        elif problem := out_of_range(t("train.field.steps"), steps, 1, most,
                                     most < MAX_PAGE_STEPS):
            problems.append(problem)
        else:
            config = toy.make_config(task, steps=int(steps), **values)
    for problem in problems:
        st.error(problem)
    return None if problems else config


def queue_wait(jobs: list[training.TrainingJob], workers: int) -> float:
    """Seconds until a trainer is free for a run queued behind `jobs`: their estimated time
    left (a training run's by its progress), shared among the trainers."""
    left = sum(toy_plan.RATE.estimate(j.config) * (1 - j.steps_done / j.config.steps)
               for j in jobs)
    return left / workers


def estimate(config: toy.ToyConfig | None, pool: training.TrainingPool,
             job: training.TrainingJob | None = None) -> None:
    """How long the run should take (timed on this machine), and the queue it would join
    (unless the session's own `job` is already training or waiting: its status says)."""
    if config is None:
        return
    seconds = toy_plan.RATE.estimate(config)
    text = t("train.estimate", time=toy_plan.describe_seconds(seconds), steps=config.steps)
    ahead = pool.ahead(None)
    if len(ahead) >= pool.workers and (job is None or not job.running):
        text += t("train.busy", count=pool.workers, runs=len(ahead),
                  time=toy_plan.describe_seconds(queue_wait(ahead, pool.workers)))
    st.caption(text)


def current_job() -> training.TrainingJob | None:
    """The session's job; a finished one hands its run over to keys.TOY_RUN (shown from then on)."""
    job = st.session_state.get(keys.TOY_JOB)
    if not isinstance(job, training.TrainingJob):
        return None
    finished = not job.running and job.run is not None
    if finished and st.session_state.get(keys.TOY_RUN) is not job.run:
        st.session_state[keys.TOY_RUN] = job.run
        st.session_state[keys.TOY_STEP] = job.run.steps
    return job


def _submit(config: toy.ToyConfig) -> None:
    """on_click of Train: queue the run on the server's pool (which checks its work again)."""
    try:
        st.session_state[keys.TOY_JOB] = training.default_pool().submit(config, alive_check())
    except AttnvizInputError as exc:
        st.session_state[keys.TOY_REFUSED] = exc          # said when shown, in that language


def train_button(config: toy.ToyConfig | None, job: training.TrainingJob | None) -> None:
    busy = job is not None and job.running
    reason = (t("train.button.fix_first") if config is None
              else t("train.button.busy") if busy else None)
    left, right = st.columns([1, 5], vertical_alignment="center")
    with left:
        st.button(t("train.button.train"), type="primary", icon=":material/play_arrow:",
                  key=keys.TOY_TRAIN, disabled=reason is not None, on_click=_submit,
                  args=(config,), help=reason or t("train.button.help"))
    if reason and config is None:
        with right:
            st.caption(t("train.button.off"))
    refused = st.session_state.pop(keys.TOY_REFUSED, None)
    if refused:
        st.error(t("train.error.refused", error=literal(refused)))


def job_status(job: training.TrainingJob) -> None:
    """While queued: the place in the queue, live; while training: a progress bar, the loss
    and accuracy so far, and Stop. After: how it ended, if not simply."""
    if job.running:
        _live(job)
    elif job.error:
        st.error(t("train.error.failed", error=literal(job.error)))


def _stop(job: training.TrainingJob) -> None:
    training.default_pool().cancel(job)


@st.fragment(run_every=POLL_SECONDS)
def _live(job: training.TrainingJob) -> None:
    if not job.running:
        st.rerun()                        # the whole page, now with the finished run
    cfg = job.config
    pool = training.default_pool()
    place = pool.place(job)
    if place:
        ahead = pool.ahead(job)
        st.info(t("train.queue", place=place, count=len(ahead), workers=pool.workers,
                  time=toy_plan.describe_seconds(queue_wait(ahead, pool.workers))),
                icon=":material/hourglass_top:")
    else:
        st.progress(min(1.0, job.steps_done / cfg.steps),
                    text=t("train.progress.stopping" if job.stop.is_set()
                           else "train.progress", task=task_name(cfg.task), step=job.steps_done,
                           steps=cfg.steps))
        if job.history:
            history_chart(job.history)
    st.button(t("train.button.stop"), icon=":material/stop:", key=keys.TOY_STOP, on_click=_stop,
              args=(job,), disabled=job.stop.is_set(), help=t("train.button.stop.help"))


def history_chart(history) -> None:
    """Training loss and held-out accuracy against the step."""
    step, loss, accuracy = (t("train.chart.step"), t("train.chart.loss"),
                            t("train.chart.accuracy"))
    frame = pd.DataFrame(list(history), columns=[step, loss, accuracy])
    st.line_chart(frame, x=step, y=[loss, accuracy], height=220)


# ---- the finished run --------------------------------------------------------------------------

def finished_run() -> toy.ToyRun | None:
    run = st.session_state.get(keys.TOY_RUN)
    return run if isinstance(run, toy.ToyRun) else None


def summary(run: toy.ToyRun, job: training.TrainingJob | None = None) -> None:
    """Accuracy, whether the run learnt its task (and if not, why and what to change), sizes,
    the training curve and the accuracy per position; with the job that trained the run, how
    long it took."""
    cfg = run.config
    how = (t("train.summary.stopped", step=run.steps, steps=cfg.steps) if run.stopped
           else t("train.summary.steps", steps=run.steps))
    if job is not None and job.run is run and job.seconds is not None:
        how = t("train.summary.took", how=how, seconds=job.seconds)
    st.subheader(t("train.summary.subheader", task=task_name(cfg.task), accuracy=run.mean_accuracy))
    verdict = toy_plan.verdict(cfg, run.history, run.mean_accuracy,
                               run.steps if run.stopped else None, most_steps=MAX_PAGE_STEPS)
    (st.success if verdict.learnt else st.warning)(verdict.text)
    sizes = t("train.summary.sizes", count=cfg.layers, heads=cfg.heads, d_model=cfg.d_model,
              length=cfg.length, vocab=cfg.vocab,
              positions=t(f"train.summary.positions.{cfg.positions}"))
    if cfg.causal:
        sizes += t("train.summary.causal")
    if not cfg.residual:
        sizes += t("train.summary.no_residual")
    st.caption(t("train.summary.caption", sizes=sizes, how=how, seed=cfg.seed,
                 sequences=len(run.test_inputs)))
    left, right = st.columns(2)
    with left:
        if run.history:
            history_chart(run.history)
        else:
            st.caption(t("train.summary.no_curve"))
    with right:
        scored = ~np.isnan(run.accuracy)
        position, accuracy = t("train.chart.position"), t("train.chart.accuracy")
        st.bar_chart(pd.DataFrame({position: np.arange(cfg.length)[scored],
                                   accuracy: run.accuracy[scored]}),
                     x=position, y=accuracy, height=220)


def checkpoint_slider(run: toy.ToyRun) -> int:
    """The training step whose weights the views show (one of the ~20 checkpoints)."""
    steps = run.checkpoint_steps
    if st.session_state.get(keys.TOY_STEP) not in steps:
        st.session_state[keys.TOY_STEP] = steps[-1]
    return st.select_slider(t("train.checkpoint.label"), steps, key=keys.TOY_STEP,
                            help=t("train.checkpoint.help"))


def test_sequence(run: toy.ToyRun) -> np.ndarray:
    """One held-out sequence, chosen by number."""
    last = len(run.test_inputs) - 1
    value = st.session_state.get(keys.TOY_EXAMPLE)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= last:
        st.session_state[keys.TOY_EXAMPLE] = 0
    index = st.number_input(t("train.sequence.label"), 0, last, key=keys.TOY_EXAMPLE,
                            help=t("train.sequence.help"))
    return run.test_inputs[index]


def answers(run: toy.ToyRun, sequence, step: int) -> None:
    """The input, the right answer and the model's answer at this step, position by
    position."""
    target = run.targets(sequence)
    predicted = run.predict(sequence, step=step)
    answer = t("train.answers.right")
    rows = {t("train.answers.input"): sequence, answer: target,
            t("train.answers.model", step=step): predicted}
    frame = pd.DataFrame({name: ["–" if y == NO_TARGET and name == answer else str(v)
                                 for v, y in zip(values, target)]
                          for name, values in rows.items()}).T
    frame.columns = [str(i) for i in range(len(sequence))]
    right = int(((predicted == target) & (target != NO_TARGET)).sum())
    st.dataframe(frame, width="stretch")
    st.caption(t("train.answers.caption", right=right, total=int((target != NO_TARGET).sum()))
               + (t("train.answers.dash") if (target == NO_TARGET).any() else ""))


def layer_heads(run: toy.ToyRun, sequence, layer: int, step: int,
                scores: list[toy.HeadScore]) -> None:
    """One layer: what the task expects of it, which head learnt it, every head's weights."""
    layers = run.config.layers
    if layers > 1:
        st.subheader(t("train.layer.subheader", layer=layer))
    pattern = pattern_text(run, layer)
    if pattern is not None:
        st.markdown(t("train.layer.expected", pattern=pattern))
        st.markdown(head_verdict([s for s in scores if s.layer == layer], step))
    trace = run.trace(sequence, layer=layer, step=step)
    fig = figures.heads_grid(trace, token_labels(sequence), token_labels(sequence))
    fig.layout.title.text = t("figure.train.heads.causal" if trace.has_mask
                              else "figure.train.heads.no_mask", layer=layer, step=step)
    widgets.chart(fig, key=keys.TOY_HEADS_OF(layer))
    best = [s.head for s in scores if s.layer == layer][:1]        # scores: best first
    step_through_button(layer, step, best[0] if best else 0)


def _open_in_steps(layer: int, step: int, example: int, head: int) -> None:
    """on_click: make the step pages show this layer of the trained run (widget keys can only
    be set before their widgets are drawn, so this runs as a callback)."""
    st.session_state[keys.MODE] = TOY_MODE
    st.session_state[keys.LAYER] = layer
    st.session_state[keys.HEAD] = head
    st.session_state[keys.TOY_VIEW_STEP] = step
    st.session_state[keys.TOY_VIEW_EXAMPLE] = example


def step_through_button(layer: int, step: int, head: int) -> None:
    """"Step through this layer": Step by step on this layer at this checkpoint and held-out
    sequence, its weights editable like any others (the input becomes "Toy model")."""
    example = st.session_state.get(keys.TOY_EXAMPLE, 0)
    if widgets.action_button(t("train.step_through.label"), _open_in_steps,
                             (layer, step, example, head), key=keys.TOY_STEP_THROUGH(layer),
                             rerun=False, icon=":material/footprint:",
                             help=t("train.step_through.help")):
        widgets.switch_page("steps")


def head_verdict(scores: list[toy.HeadScore], step: int) -> str:
    """A sentence naming the head that learnt the pattern, and how sharply."""
    best = max(scores, key=lambda s: (s.hit_rate, s.mean_weight))
    measured = t("train.head.measured", hit_rate=best.hit_rate, weight=best.mean_weight)
    if best.hit_rate >= GOOD_HIT_RATE:
        return t("train.head.shows", head=best.head, step=step, measured=measured)
    return t("train.head.none", head=best.head, step=step, measured=measured)
