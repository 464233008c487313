"""A page's heavy job on the server's queue (``attnviz.models.heavy``) as a learner sees it: one
way for every page (Trace the answer's patching, Read the model's ranking and tuned lens, the
Head atlas's build) to join a job, leave it, find it again, and watch it.

    heavy_jobs.join(key, work, total, job_key=keys.TR_JOB, stopped_key=keys.TR_STOPPED_FOR)
    job, token = heavy_jobs.mine(keys.TR_JOB, key)
    heavy_jobs.live(job, token, "trace.patch", heavy_jobs.counted("trace.patch", total),
                    heavy_jobs.leave, (key, job, token, keys.TR_STOPPED_FOR), keys.TR_STOP)

A job is shared by every learner asking for the same key; it stops when no learner wants it,
its partial result kept for a Resume (``join`` again: it goes on from the partial)."""

from __future__ import annotations

import uuid

import streamlit as st

from attnviz.i18n import t
from attnviz.models import heavy
from attnviz.app.shared import widgets

POLL_SECONDS = 1.0          # a job under way, polled
STOP_WAIT = 30.0            # s a Stop waits for the piece under way (its partial result)


def join(key: tuple, work, total: int, *, job_key: str, stopped_key: str) -> None:
    """on_click of a start or Resume: this learner joins the server's job for `key` (a new
    one, resumed from a stopped one's partial result, when none is queued or running), kept
    under `job_key` as (key, job, token); `stopped_key` cleared."""
    from attnviz.app.train.train_view import alive_check

    queue = heavy.default_queue()
    token = uuid.uuid4().hex
    partial = queue.partial(key)
    job = queue.submit(key, work, total=total, learner=token, alive=alive_check(),
                       done=0 if partial is None else partial.done)
    st.session_state[job_key] = (key, job, token)
    st.session_state[stopped_key] = None


def leave(key: tuple, job, token: str, stopped_key: str) -> None:
    """on_click of Stop: this learner leaves the job (it stops when nobody wants it), its key
    kept under `stopped_key`."""
    heavy.default_queue().leave(job, token)
    st.session_state[stopped_key] = key


def mine(job_key: str, key: tuple) -> tuple:
    """(job, token) this session joined for `key` (under `job_key`), else (None, None)."""
    kept = st.session_state.get(job_key)
    return kept[1:] if isinstance(kept, tuple) and kept[0] == key else (None, None)


def stopped_partial(key: tuple, job):
    """After a Stop: (the partial result kept for `key`, or None; the count done). A job
    nobody else wants ends its piece under way first (at most STOP_WAIT)."""
    if job is not None and job.stop.is_set():
        job.wait(STOP_WAIT)
    partial = heavy.default_queue().partial(key)
    done = partial.done if partial is not None else 0 if job is None else job.done
    return partial, done


def counted(messages: str, total: int):
    """A job's progress as `live` shows it: the share of `total` done, in the words of
    `messages`.progress (done, total)."""
    def progress(job) -> tuple[float, str]:
        return job.done / max(total, 1), t(f"{messages}.progress", done=job.done, total=total)
    return progress


@st.fragment(run_every=POLL_SECONDS)
def live(job, token: str, messages: str, progress, stop, stop_args: tuple, stop_key: str, *,
         other_tabs: bool = False) -> None:
    """A job under way, polled: its place in the server's queue, or `progress(job)` (share
    done, in words) while it computes; with `other_tabs`, that the page's other tabs stay
    usable; how many learners still there wait for it (``HeavyQueue.present``); the button
    leaving it (`stop(*stop_args)`, widget key `stop_key`). The whole page again once the job
    has ended or this learner left it.
    `messages`: the prefix of its .queue, .other_tabs, .shared and .stop message ids."""
    queue = heavy.default_queue()
    if not (job.running and queue.wants(job, token)):
        st.rerun()
    place = queue.place(job)
    if place:
        st.info(t(f"{messages}.queue", place=place, workers=queue.workers),
                icon=":material/hourglass_top:")
    else:
        share, words = progress(job)
        st.progress(min(1.0, share), text=words)
    if other_tabs:
        st.caption(t(f"{messages}.other_tabs"))
    present = queue.present(job)
    if present > 1:
        st.caption(t(f"{messages}.shared", count=present))
    widgets.action_button(t(f"{messages}.stop"), stop, stop_args, key=stop_key,
                          icon=":material/stop:")
