"""Pieces of the Train page: the form, a training job in a background thread, its live progress,
and the finished run's views (the checkpoint slider, every head's weights, the head that learnt
the task's pattern).

Training runs in a thread of its own, so the page's script returns at once: the app answers
other pages (and other sessions) while the model trains, a fragment polls the job twice a
second, and Stop asks the job to end after its next evaluation (``on_step`` returns False),
keeping what it has learnt. A finished run stays in ``st.session_state[RUN_KEY]``.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import streamlit as st
from streamlit.errors import StreamlitPageNotFoundError

from .. import figures, toy
from ..errors import AttnvizInputError
from ..settings_view import TOY_MODE
from ..toy_tasks import NO_TARGET, TASKS, token_labels
from . import state, widgets
from .text import literal

JOB_KEY = "toy_job"           # the TrainingJob running (or just ended) in this session
RUN_KEY = state.TOY_RUN_KEY   # the last finished ToyRun
STEP_KEY = "toy_step"         # the checkpoint the views show
EXAMPLE_KEY = "toy_example"   # which held-out sequence the views show
MAX_PAGE_STEPS = 5000         # the page's limit on steps (the library allows more)
POLL_SECONDS = 1.0
GOOD_HIT_RATE = 0.5           # below this, no head is said to have learnt the pattern

FORM = {   # widget key → (label, default, lowest, highest)
    "toy_length": ("Length", 8, 3, 16),
    "toy_vocab": ("Vocabulary", 10, 2, 50),
    "toy_layers": ("Layers", 1, 1, toy.MAX_LAYERS),
    "toy_heads": ("Heads", 2, 1, 8),
    "toy_d_model": ("d_model", 32, 4, 128),
    "toy_seed": ("Seed", 0, 0, 2**31 - 1),
}


@dataclass(eq=False)
class TrainingJob:
    """One training run in a background thread; the page reads it, the thread writes it."""

    config: toy.ToyConfig
    history: list = field(default_factory=list)       # toy.Point, appended by the thread
    stop: threading.Event = field(default_factory=threading.Event)
    run: toy.ToyRun | None = None
    error: str | None = None
    thread: threading.Thread | None = None
    seconds: float | None = None                      # wall time of training, once ended

    @property
    def running(self) -> bool:
        return self.thread is not None and self.thread.is_alive()

    @property
    def steps_done(self) -> int:
        return self.history[-1].step if self.history else 0


def _train(job: TrainingJob) -> None:
    """The thread's work. One torch thread: the toy model's matrices are tiny (a second
    thread only waits for the first, and on a busy machine much longer), and the other core
    stays free for the app's other pages and sessions. This process is the app's own, where
    nothing else uses torch."""
    import torch

    torch.set_num_threads(1)

    def on_step(step, loss, accuracy):
        job.history.append(toy.Point(step, loss, accuracy))
        return not job.stop.is_set()

    start = time.perf_counter()
    try:
        job.run = toy.train(**dataclasses.asdict(job.config), on_step=on_step)
    except Exception as exc:      # a thread's error would vanish: the page shows it instead
        job.error = f"{type(exc).__name__}: {exc}"
    job.seconds = time.perf_counter() - start


# ---- the form ----------------------------------------------------------------------------------

def _task_changed() -> None:
    """A task that needs more layers (induction) gets them."""
    task = TASKS[st.session_state["toy_task"]]
    st.session_state["toy_layers"] = max(st.session_state.get("toy_layers", 1), task.min_layers)


def form() -> toy.ToyConfig | None:
    """The task and sizes; the checked configuration, or None with the problem shown."""
    for key, (_, default, low, high) in FORM.items():
        value = st.session_state.get(key)
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            st.session_state[key] = default
    if st.session_state.get("toy_task") not in TASKS:
        st.session_state["toy_task"] = "reverse"
    task = st.selectbox("Task", list(TASKS), key="toy_task", on_change=_task_changed,
                        format_func=lambda t: f"{t}: {TASKS[t].summary}")
    st.caption(f"Expected pattern: {TASKS[task].pattern}.")
    columns = st.columns(len(FORM) + 1)
    values = {}
    for column, (key, (label, _, low, high)) in zip(columns, FORM.items()):
        with column:
            values[key.removeprefix("toy_")] = st.number_input(label, low, high, key=key)
    with columns[-1]:
        steps = st.number_input("Steps", 1, MAX_PAGE_STEPS, value=None, key="toy_steps",
                                placeholder=f"default {toy.DEFAULT_STEPS[task]}",
                                help="Optimiser steps, each on 64 fresh sequences. Empty: the "
                                     "task's default.")
    try:
        return toy.make_config(task, steps=steps, **values)
    except AttnvizInputError as exc:
        st.error(literal(exc))
        return None


def current_job() -> TrainingJob | None:
    """The session's job; a finished one hands its run over to RUN_KEY (shown from then on)."""
    job = st.session_state.get(JOB_KEY)
    if not isinstance(job, TrainingJob):
        return None
    if not job.running and job.run is not None and st.session_state.get(RUN_KEY) is not job.run:
        st.session_state[RUN_KEY] = job.run
        st.session_state[STEP_KEY] = job.run.steps
    return job


def train_button(config: toy.ToyConfig | None, job: TrainingJob | None) -> None:
    busy = job is not None and job.running
    if st.button("Train", type="primary", icon=":material/play_arrow:", key="toy_train",
                 disabled=config is None or busy,
                 help="Trains in the background: other pages keep answering meanwhile."):
        new = TrainingJob(config)
        new.thread = threading.Thread(target=_train, args=(new,), daemon=True,
                                      name="attnviz-toy-train")
        st.session_state[JOB_KEY] = new
        new.thread.start()
        st.rerun()


def job_status(job: TrainingJob) -> None:
    """While training: a live progress bar, the loss and accuracy so far, and Stop. After:
    how it ended, if not simply."""
    if job.running:
        _live(job)
    elif job.error:
        st.error("Training failed: " + literal(job.error))


@st.fragment(run_every=POLL_SECONDS)
def _live(job: TrainingJob) -> None:
    if not job.running:
        st.rerun()                        # the whole page, now with the finished run
    cfg = job.config
    st.progress(job.steps_done / cfg.steps,
                text=f"Training {cfg.task}: step {job.steps_done} of {cfg.steps}"
                     + (" (stopping…)" if job.stop.is_set() else ""))
    if job.history:
        history_chart(job.history)
    st.button("Stop", icon=":material/stop:", key="toy_stop", on_click=job.stop.set,
              disabled=job.stop.is_set(), help="End training after the next evaluation and "
                                               "keep what the model has learnt so far.")


def history_chart(history) -> None:
    """Training loss and held-out accuracy against the step."""
    frame = pd.DataFrame(list(history), columns=["step", "loss", "accuracy"])
    st.line_chart(frame, x="step", y=["loss", "accuracy"], height=220)


# ---- the finished run --------------------------------------------------------------------------

def finished_run() -> toy.ToyRun | None:
    run = st.session_state.get(RUN_KEY)
    return run if isinstance(run, toy.ToyRun) else None


def summary(run: toy.ToyRun, job: TrainingJob | None = None) -> None:
    """Accuracy, sizes, the training curve and the accuracy per position; with the job that
    trained the run, how long it took."""
    cfg = run.config
    how = (f"stopped at step {run.steps} of {cfg.steps}" if run.stopped
           else f"{run.steps} steps")
    if job is not None and job.run is run and job.seconds is not None:
        how += f" in {job.seconds:.1f} s"
    st.subheader(f"{cfg.task}: {run.mean_accuracy:.0%} right on held-out sequences")
    st.caption(f"{cfg.layers} layer(s), {cfg.heads} heads, d_model {cfg.d_model}, length "
               f"{cfg.length}, vocabulary {cfg.vocab}, {cfg.positions} positions"
               f"{', causal' if cfg.causal else ''}"
               f"{'' if cfg.residual else ', no residual connection'}; {how}, seed "
               f"{cfg.seed}. Accuracy is measured on {len(run.test_inputs)} sequences drawn "
               "with another seed than the training batches.")
    left, right = st.columns(2)
    with left:
        history_chart(run.history)
    with right:
        scored = ~np.isnan(run.accuracy)
        st.bar_chart(pd.DataFrame({"position": np.arange(cfg.length)[scored],
                                   "accuracy": run.accuracy[scored]}),
                     x="position", y="accuracy", height=220)


def checkpoint_slider(run: toy.ToyRun) -> int:
    """The training step whose weights the views show (one of the ~20 checkpoints)."""
    steps = run.checkpoint_steps
    if st.session_state.get(STEP_KEY) not in steps:
        st.session_state[STEP_KEY] = steps[-1]
    return st.select_slider("Weights after training step", steps, key=STEP_KEY,
                            help="Slide back to watch the heads go from their random start "
                                 "to the task's pattern.")


def test_sequence(run: toy.ToyRun) -> np.ndarray:
    """One held-out sequence, chosen by number."""
    last = len(run.test_inputs) - 1
    value = st.session_state.get(EXAMPLE_KEY)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= last:
        st.session_state[EXAMPLE_KEY] = 0
    index = st.number_input("Held-out sequence", 0, last, key=EXAMPLE_KEY,
                            help="One of the sequences the model never trained on.")
    return run.test_inputs[index]


def answers(run: toy.ToyRun, sequence, step: int) -> None:
    """The input, the right answer and the model's answer at this step, position by
    position."""
    target = run.targets(sequence)
    predicted = run.predict(sequence, step=step)
    rows = {"input": sequence, "right answer": target, f"model at step {step}": predicted}
    frame = pd.DataFrame({name: ["–" if t == NO_TARGET and name == "right answer" else str(v)
                                 for v, t in zip(values, target)]
                          for name, values in rows.items()}).T
    frame.columns = [str(i) for i in range(len(sequence))]
    right = int(((predicted == target) & (target != NO_TARGET)).sum())
    st.dataframe(frame, width="stretch")
    st.caption(f"{right} of {int((target != NO_TARGET).sum())} answers right on this sequence."
               + (" “–”: nothing to predict there." if (target == NO_TARGET).any() else ""))


def layer_heads(run: toy.ToyRun, sequence, layer: int, step: int,
                scores: list[toy.HeadScore]) -> None:
    """One layer: what the task expects of it, which head learnt it, every head's weights."""
    layers = run.config.layers
    if layers > 1:
        st.subheader(f"Layer {layer}")
    pattern = run.pattern(layer)
    if pattern is not None:
        st.markdown(f"**Expected:** {pattern}.")
        st.markdown(head_verdict([s for s in scores if s.layer == layer], step))
    trace = run.trace(sequence, layer=layer, step=step)
    fig = figures.heads_grid(trace, token_labels(sequence), token_labels(sequence))
    fig.layout.title.text = (f"Layer {layer} after step {step}: attention weights, every head"
                             f" ({'causal mask' if trace.has_mask else 'no mask'})")
    widgets.chart(fig, key=f"toy_heads_{layer}")
    best = [s.head for s in scores if s.layer == layer][:1]        # scores: best first
    step_through_button(layer, step, best[0] if best else 0)


def _open_in_steps(layer: int, step: int, example: int, head: int) -> None:
    """on_click: make the step pages show this layer of the trained run (widget keys can only
    be set before their widgets are drawn, so this runs as a callback)."""
    st.session_state["mode"] = TOY_MODE
    st.session_state["layer"] = layer
    st.session_state["head"] = head
    st.session_state[state.TOY_STEP_KEY] = step
    st.session_state[state.TOY_EXAMPLE_KEY] = example


def step_through_button(layer: int, step: int, head: int) -> None:
    """"Step through this layer": Step by step on this layer at this checkpoint and held-out
    sequence, its weights editable like any others (the input becomes "Toy model")."""
    example = st.session_state.get(EXAMPLE_KEY, 0)
    if widgets.action_button("Step through this layer", _open_in_steps,
                             (layer, step, example, head), key=f"toy_step_through_{layer}",
                             rerun=False, icon=":material/footprint:",
                             help="Opens Step by step with the input set to this toy model: "
                                  "this layer's real X, Q, K, V, scores, weights and output "
                                  "on this sequence, after this step. Edit its weights on "
                                  "Inputs & weights and watch the model's answer change."):
        try:
            st.switch_page("pages/steps.py")
        except StreamlitPageNotFoundError:
            st.info(f"The input is now the toy model, layer {layer}, after step {step}: open "
                    "Step by step to walk through it.")


def head_verdict(scores: list[toy.HeadScore], step: int) -> str:
    """A sentence naming the head that learnt the pattern, and how sharply."""
    best = max(scores, key=lambda s: (s.hit_rate, s.mean_weight))
    measured = (f"its largest weight is on the expected key for {best.hit_rate:.0%} of "
                f"queries, with {best.mean_weight:.2f} of its weight there on average")
    if best.hit_rate >= GOOD_HIT_RATE:
        return f"**Head {best.head}** shows it at step {step}: {measured}."
    return (f"No head shows it at step {step} (closest: head {best.head}, {measured}). "
            "The model may have found another way to the answer, or not learnt it yet.")
