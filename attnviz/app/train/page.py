"""Train: a tiny transformer learns a toy task in seconds; then a slider over training steps
redraws every head's weights on a held-out sequence, from the random start to the pattern."""

import streamlit as st

from attnviz.i18n import t
from attnviz.models.trainer import training
from attnviz.app import keys
from attnviz.app.train import train_view
from attnviz.app.shared import state


def render() -> None:
    """The page (its file in pages/ calls this; `attnviz app` registers it)."""
    state.init()
    st.title(t("train.title"))
    st.caption(t("train.caption"))

    config = train_view.form()
    job = train_view.current_job()
    train_view.estimate(config, training.default_pool(), job)
    train_view.train_button(config, job)
    if job is not None:
        train_view.job_status(job)

    run = train_view.finished_run()
    if run is None:
        if job is None and st.session_state.get(keys.TOY_STEP) is not None:   # from a link
            st.info(t("train.link.retrain", button=t("train.button.train")))
        elif job is None or not job.running:
            st.info(t("train.start"))
        st.stop()

    st.divider()
    train_view.summary(run, job)
    st.subheader(t("train.heads.subheader"))
    step = train_view.checkpoint_slider(run)
    sequence = train_view.test_sequence(run)
    train_view.answers(run, sequence, step)
    scores = run.head_scores(step=step)
    for layer in range(run.config.layers):
        train_view.layer_heads(run, sequence, layer, step, scores)
