"""Streamlit's internals that attnviz still uses, one test each, against the installed
Streamlit: where the name is, the signature used and the behaviour relied on
(attnviz/app/runtime/streamlit_compat.py). An upgrade that moves or changes one fails here, not
silently in a page. Then what the app relies on Streamlit's public API for instead of the
internals it used before (docs/architecture.md, "Streamlit"): a page file run first (Streamlit's
folder mode) runs the whole app around itself, and ``attnviz app``'s script has no ``pages``
folder beside it."""

from __future__ import annotations

import dataclasses
import inspect
import os
import subprocess
import sys
import time

import pytest
from streamlit.testing.v1 import AppTest

from attnviz.app import keys
from attnviz.app.runtime import streamlit_compat
from attnviz.i18n import t, use_language
from tests.apptest_helpers import ROOT, TIMEOUT, no_exceptions, open_page, shared_components
from tests.browser_helpers import free_port, running_app, stop_process, wait_healthy
from tests.stream_client import open_page as open_streamed

# ---- in_script_run, session_id: the thread's ScriptRunContext ---------------------------------


def test_the_script_run_context_is_where_and_as_it_is_used():
    from streamlit.runtime.scriptrunner import get_script_run_ctx
    from streamlit.runtime.scriptrunner_utils.script_run_context import ScriptRunContext

    assert list(inspect.signature(get_script_run_ctx).parameters) == ["suppress_warning"]
    assert "session_id" in {f.name for f in dataclasses.fields(ScriptRunContext)}


def _script_and_a_thread() -> None:      # an AppTest script: what each side sees
    import threading

    import streamlit as st

    from attnviz.app.runtime import streamlit_compat

    seen = {}

    def in_a_thread():
        seen["thread"] = (streamlit_compat.in_script_run(), streamlit_compat.session_id())

    worker = threading.Thread(target=in_a_thread)
    worker.start()
    worker.join()
    seen["script"] = (streamlit_compat.in_script_run(), streamlit_compat.session_id())
    st.session_state["seen"] = seen


def test_a_script_run_has_a_session_id_and_a_thread_it_starts_has_none():
    at = shared_components(AppTest.from_function(_script_and_a_thread, default_timeout=TIMEOUT))
    at.run()
    no_exceptions(at)
    seen = at.session_state["seen"]
    in_run, session = seen["script"]
    assert in_run is True and isinstance(session, str) and session
    assert seen["thread"] == (False, None)      # a training thread: no session state to read
    assert (streamlit_compat.in_script_run(), streamlit_compat.session_id()) == (False, None)


# ---- session_connected: Runtime.is_active_session ----------------------------------------------


def test_the_runtime_is_where_and_as_it_is_used():
    from streamlit.runtime import Runtime

    assert isinstance(inspect.getattr_static(Runtime, "exists"), classmethod)
    assert isinstance(inspect.getattr_static(Runtime, "instance"), classmethod)
    assert list(inspect.signature(Runtime.is_active_session).parameters) == \
        ["self", "session_id"]
    # the pool's thread asks it: Streamlit documents it as safe from any thread
    assert "Threading: SAFE" in Runtime.is_active_session.__doc__


def test_without_a_server_no_session_is_known():
    assert streamlit_compat.session_connected("no such session") is None


WATCHER = '''
import threading, time
from pathlib import Path

import streamlit as st

from attnviz.app.runtime import streamlit_compat
from attnviz.app.train.train_view import LearnerThere

if "watching" not in st.session_state:       # one watcher: the session's first run
    st.session_state["watching"] = True
    session = streamlit_compat.session_id()
    learner = LearnerThere(session, grace=GRACE)

    def watch(out=Path(__file__).with_suffix(".log")):
        while True:
            line = f"{time.monotonic()} {streamlit_compat.session_connected(session)} {learner()}"
            with open(out, "a") as f:
                f.write(line + "\\n")
            time.sleep(0.05)

    threading.Thread(target=watch, daemon=True).start()
st.write("watching")
'''


@pytest.mark.slow
def test_a_session_is_connected_until_its_browser_goes_and_the_learner_there_for_the_grace(
        tmp_path):
    """A real server: a thread of the session's script (as the training pool's) watches
    session_connected and LearnerThere while a websocket client opens the page and leaves."""
    grace = 1.5
    script = tmp_path / "watcher.py"
    script.write_text(WATCHER.replace("GRACE", str(grace)), encoding="utf-8")
    port = free_port()
    with open(tmp_path / "server.log", "wb") as log:
        server = subprocess.Popen(
            [sys.executable, "-m", "streamlit", "run", str(script), "--server.port", str(port),
             "--server.address", "127.0.0.1", "--server.headless", "true",
             "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none"],
            cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        url = f"http://127.0.0.1:{port}"
        wait_healthy(url, server)
        seen = open_streamed(url, "home")          # returns when the run ends, and leaves
        left = time.monotonic()                    # the same clock as the server's
        assert not seen["exceptions"], seen["exceptions"]
        time.sleep(grace + 2)
    finally:
        stop_process(server)
    rows = [line.split() for line in (tmp_path / "watcher.log").read_text().splitlines()]
    rows = [(float(when), connected, there) for when, connected, there in rows]
    assert rows[0][1:] == ("True", "True")         # connected while the page is open
    gone = next(when for when, connected, _ in rows if connected == "False")
    assert left - 0.1 <= gone < left + 1.0         # noticed within a second of leaving
    assert all(connected == "False" for when, connected, _ in rows if when >= gone)
    assert all(there == "True" for when, _, there in rows if when < gone + grace - 0.1)
    assert all(there == "False" for when, _, there in rows if when > gone + grace + 0.2)
    assert rows[-1][0] > gone + grace + 0.5        # watched long enough to see it


# ---- the public way: a page file run first is the whole app ------------------------------------


def test_a_page_file_run_first_runs_the_app_around_itself():
    """AppTest starts every run in Streamlit's folder mode (a pages/ folder beside app.py), as
    a fresh server's first request: pages/steps.py runs by itself, then, through
    attnviz.app.main.page_file, the app's navigation (which picks this page) and sidebar."""
    at = open_page("pages/steps.py")
    no_exceptions(at)
    assert at.title[0].value == t("steps.title")
    assert at.sidebar.text_input(key=keys.SENTENCE).label == t("sidebar.sentence.label")
    at.run()                                        # and every run after it
    no_exceptions(at)
    assert at.title[0].value == t("steps.title")
    assert at.sidebar.text_input(key=keys.SENTENCE).label == t("sidebar.sentence.label")


NAVIGATION = ["home", "inputs", "steps", "multihead", "experiments", "pretrained", "reading", "trace",
              "train", "generate"]


@pytest.mark.slow
def test_a_fresh_servers_first_request_to_a_page_gets_the_whole_app():
    """`streamlit run app.py`, its first request /multihead (a shared link, the first click
    after a restart), then a second session's /steps: each the page asked for, with every page
    in the navigation (titles in the catalogue's words) and the sidebar."""
    with use_language("en"):
        titles = {name: t(f"nav.{name}") for name in NAVIGATION}
        sentence = t("sidebar.sentence.label")
    with running_app() as url:
        for page, heading in (("multihead", "multihead.title"), ("steps", "steps.title")):
            seen = open_streamed(url, page)
            assert not seen["exceptions"], seen["exceptions"]
            with use_language("en"):
                assert t(heading) in seen["titles"], seen["titles"]
            # (Home, the default page, is the root: its URL path is empty)
            assert seen["navigation"] == [(titles[name], "" if name == "home" else name)
                                          for name in NAVIGATION]
            assert seen["current"] == page and not seen["not_found"]
            assert sentence in seen["sidebar_text_inputs"]


def test_attnviz_apps_script_has_no_pages_folder_beside_it():
    """A folder named pages beside the main script puts Streamlit 1.67 in its old folder mode
    (PagesManager); for ``attnviz app`` it would run attnviz/app/pages/<name>.py as scripts.
    Each page's body lives in attnviz/app/<name>/page.py."""
    from attnviz import cli

    assert cli.MAIN.is_file()
    assert not (cli.MAIN.parent / "pages").exists()
