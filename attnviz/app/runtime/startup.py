"""What the server process switches on when the app first runs (``start_once``, from
attnviz.app.main), once. No module of attnviz/app acts when it is imported: a test, a benchmark
or a notebook importing a page's pieces gets none of this.

- the threads (attnviz.app.runtime.threads): one BLAS thread, the engine's blocks, the caches'
  memory sweeper;
- the language: :func:`attnviz.i18n.language` reads the running session's choice
  (attnviz.app.shared.language.follow_session), so scripts, callbacks and fragments all see it;
- the log: the training pool's lines (a run starts, ends, is left) in the server's log,
  formatted and filtered as Streamlit's own.
"""

from __future__ import annotations

import logging

import streamlit as st

from attnviz.app.runtime import threads
from attnviz.app.shared import language

_started = False


def start_once() -> None:
    """Switch on the threads, the session's language and the training pool's log, once per
    process."""
    global _started
    if _started:
        return
    threads.start_once()
    language.follow_session()
    from attnviz.models.trainer import training

    log_as_streamlit_does(training.log.name)
    _started = True


def log_as_streamlit_does(name: str) -> None:
    """Logger `name`'s lines in the server's log, formatted and filtered as Streamlit's own
    (its options logger.messageFormat and logger.level), once."""
    log = logging.getLogger(name)
    if log.handlers:
        return
    formatter = logging.Formatter(st.get_option("logger.messageFormat"))
    formatter.default_msec_format = "%s.%03d"
    handler = logging.StreamHandler()
    handler.setFormatter(formatter)
    log.addHandler(handler)
    log.setLevel(str(st.get_option("logger.level")).upper())
    log.propagate = False
