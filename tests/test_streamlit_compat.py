"""Streamlit's internals that attnviz still uses, one test each, against the installed
Streamlit: where the name is, the signature used and the behaviour relied on
(attnviz/app/runtime/streamlit_compat.py); and at the end the ones the tests and benchmarks drive the
app with (tools/streamlit_compat.py). An upgrade that moves or changes one fails here, not
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
from tools import streamlit_compat as drivers

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


# ---- widget_values_sent, widget_value_sent: what the browser sent with a run -------------------


def test_the_widget_states_are_where_and_as_they_are_used():
    from streamlit.runtime.state.common import (WidgetMetadata, unpack_widget_state_value,
                                                user_key_from_element_id)
    from streamlit.runtime.state.safe_session_state import SafeSessionState
    from streamlit.runtime.state.session_state import Serialized, SessionState, WStates

    assert "_state" in SafeSessionState.__annotations__
    assert {f.name for f in dataclasses.fields(SessionState)} >= {"_new_widget_state"}
    assert "disabled" in {f.name for f in dataclasses.fields(WidgetMetadata)}
    assert {f.name for f in dataclasses.fields(WStates)} >= {"states", "widget_metadata"}
    assert [f.name for f in dataclasses.fields(Serialized)] == ["value"]
    assert user_key_from_element_id("$$ID-0123abcd-matrix") == "matrix"
    assert user_key_from_element_id("$$ID-0123abcd-None") is None
    assert list(inspect.signature(unpack_widget_state_value).parameters) == ["widget_state"]


def _sends() -> None:            # an AppTest script: what each run was sent, read once drawn
    import streamlit as st

    from attnviz.app.runtime import streamlit_compat

    sent = streamlit_compat.widget_values_sent()
    st.radio("pick", ["a", "b", "c"], key="pick")
    if st.session_state.get("draw_count", True):
        st.number_input("count", 0, 9, key="count")
    st.checkbox("fixed", key="fixed", disabled=st.session_state.get("fixed_now", False))
    st.session_state["seen"] = {key: streamlit_compat.widget_value_sent(state)
                                for key, state in sent.items()}


def test_a_new_session_knows_the_values_an_old_page_sent_and_reads_them_as_its_widgets_do():
    """A page still on screen from an earlier session (a server restart) sends its widgets'
    values with its first click: the new session's first run has them, by key."""
    old = shared_components(AppTest.from_function(_sends, default_timeout=TIMEOUT))
    old.run()
    no_exceptions(old)
    assert old.session_state["seen"] == {}           # a fresh tab sends nothing
    old.radio(key="pick").set_value("c")
    old.number_input(key="count").set_value(7)
    old.checkbox(key="fixed").check()
    page = drivers.widget_states(old)                # what the page on screen sends
    new = shared_components(AppTest.from_function(_sends, default_timeout=TIMEOUT))
    new.session_state["draw_count"] = False          # sent, but not drawn in this run
    new.session_state["fixed_now"] = True            # sent, but drawn disabled: no click
    drivers.run_with_states(new, page)
    no_exceptions(new)
    assert new.session_state["seen"] == {"pick": (True, "c"), "count": (False, None),
                                         "fixed": (False, None)}
    assert streamlit_compat.widget_values_sent() == {}      # outside a script run


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
              "train", "generate", "compare", "atlas"]


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


# ---- the drivers' uses: tools/streamlit_compat.py (tests/ and benchmarks/) ---------------------

def test_the_protocols_messages_are_where_and_as_the_clients_use_them():
    """A rerun as tools/streamlit_client.py builds it, read back; the statuses it waits for;
    a widget's state; the toolbar mode of a session's config."""
    msg = drivers.back_msg()
    msg.rerun_script.page_name, msg.rerun_script.query_string = "steps", "head=1"
    msg.rerun_script.widget_states.widgets.append(drivers.widget_state("w", string_value="x"))
    msg.rerun_script.widget_states.widgets.append(drivers.widget_state("b", trigger_value=True))
    back = type(msg)()
    back.ParseFromString(msg.SerializeToString())
    assert (back.rerun_script.page_name, back.rerun_script.query_string) == ("steps", "head=1")
    assert [(w.id, w.WhichOneof("value")) for w in back.rerun_script.widget_states.widgets] == \
        [("w", "string_value"), ("b", "trigger_value")]
    statuses = {name: drivers.script_finished(name) for name in
                ("FINISHED_SUCCESSFULLY", "FINISHED_FRAGMENT_RUN_SUCCESSFULLY",
                 "FINISHED_EARLY_FOR_RERUN")}
    assert len(set(statuses.values())) == 3
    finished = drivers.forward_msg(b"")                  # an empty message parses to defaults
    finished.script_finished = statuses["FINISHED_SUCCESSFULLY"]
    again = drivers.forward_msg(finished.SerializeToString())
    assert again.WhichOneof("type") == "script_finished"
    assert again.script_finished == statuses["FINISHED_SUCCESSFULLY"]
    assert {"new_session", "navigation", "delta"} <= {
        f.name for f in again.DESCRIPTOR.oneofs_by_name["type"].fields}
    config = drivers.forward_msg(b"").new_session.config
    config.toolbar_mode = drivers.toolbar_mode("MINIMAL")
    assert config.toolbar_mode != drivers.toolbar_mode("AUTO")


def _driven() -> None:            # an AppTest script: one of each thing the drivers reach into
    import streamlit as st

    st.text_input("name", key="name")
    st.segmented_control("one", ["a", "b"], key="one")
    st.pills("many", ["a", "b"], selection_mode="multi", key="many")
    with st.tabs(["first", "second"])[0]:
        st.button("go", key="go")
    st.download_button("file", data=lambda: b"made when clicked", file_name="made.txt",
                       key="file", on_click="ignore")
    st.session_state["seen"] = st.session_state.get("seen", 0) + 1


def test_apptests_insides_are_where_and_as_the_tests_use_them(monkeypatch):
    from tools import apptest

    made = drivers.record_deferred_files(monkeypatch)
    at = shared_components(AppTest.from_function(_driven, default_timeout=TIMEOUT))
    with pytest.raises(AssertionError):                  # given once, before the first run
        drivers.use_component_registry(at, drivers.new_component_registry())
    at.run()
    no_exceptions(at)
    assert at._bidi_component_manager is apptest._COMPONENTS[0]       # the shared registry kept
    assert made["made.txt"]() == b"made when clicked"    # the download's deferred maker
    keys_drawn = []

    def walk(node):
        if getattr(node, "key", None):
            keys_drawn.append(node.key)
        children = getattr(node, "children", None) or {}
        for child in (children.values() if isinstance(children, dict) else children):
            walk(child)
    walk(drivers.element_tree(at))
    assert {"name", "one", "many", "go", "file"} <= set(keys_drawn)   # the tab's button too
    assert drivers.is_single_select(at.button_group(key="one"))
    assert not drivers.is_single_select(at.button_group(key="many"))
    at.text_input(key="name").set_value("typed")
    assert drivers.widget_state_of(at.text_input(key="name")).string_value == "typed"
    name_id = at.text_input(key="name").id
    states = drivers.widget_states(at)
    assert name_id in {state.id for state in states.widgets}
    kept = [state for state in states.widgets if state.id != name_id]
    del states.widgets[:]
    states.widgets.extend([*kept, drivers.widget_state(name_id, string_value="sent")])
    at = drivers.run_with_states(at, states)
    no_exceptions(at)
    assert at.text_input(key="name").value == "sent" and at.session_state["seen"] == 2
    items = drivers.session_state_items(at)
    assert items["seen"] == 2 and items["name"] == "sent"          # widgets' keys too
    assert drivers.session_store(at).filtered_state == drivers.session_state_items(at)


def _navigated() -> None:         # an AppTest script: two pages in the navigation
    import streamlit as st

    def first():
        st.write("one")

    def second():
        st.write("two")

    st.navigation([st.Page(first, title="First page"),
                   st.Page(second, title="Second page")]).run()


def test_the_navigations_titles_are_where_the_tests_read_them():
    at = shared_components(AppTest.from_function(_navigated, default_timeout=TIMEOUT))
    at.run()
    no_exceptions(at)
    assert drivers.navigation_titles(at) == ["First page", "Second page"]
