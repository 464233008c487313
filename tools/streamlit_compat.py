"""Every private part of Streamlit that the tests and the benchmarks drive the app with, in one
place: what AppTest and Streamlit's public API (``st.*``, ``streamlit.testing.v1.AppTest``, its
documented options) do not offer. Each function names what it reads and why no public API does;
``tests/test_streamlit_compat.py`` holds a test per use, so a Streamlit upgrade that changes one
fails there, by name, not as a puzzling failure in a page's test or a benchmark. No other
module of tests/, benchmarks/ or tools/ imports a ``streamlit.`` submodule but the public
``streamlit.testing.v1``, or reads an AppTest's underscored attributes
(tests/test_architecture.py; the compat tests themselves excepted).

It lives in tools/, beside the drivers that need it (the websocket client, the AppTest opener),
because benchmarks/ import those and may import nothing from tests/. The app's own uses of
Streamlit's internals are attnviz/app/runtime/streamlit_compat.py's (Streamlit 1.67 for both).

The browser's protocol (``streamlit.proto``): the websocket carries protobuf messages, a
``BackMsg`` from the browser (rerun a page, with the widgets' states), ``ForwardMsg`` from the
server. Streamlit publishes no client for it: its own frontend is TypeScript.
"""

from __future__ import annotations

# ---- the browser's protocol --------------------------------------------------------------------


def back_msg():
    """A new, empty ``BackMsg``: what the browser sends (``rerun_script`` with the page, the
    link's query string and the widgets' states).

    Streamlit: ``streamlit.proto.BackMsg_pb2.BackMsg``."""
    from streamlit.proto.BackMsg_pb2 import BackMsg

    return BackMsg()


def forward_msg(data: bytes):
    """The ``ForwardMsg`` the server sent as `data` (``new_session``, ``navigation``,
    ``delta``, ``script_finished`` …).

    Streamlit: ``streamlit.proto.ForwardMsg_pb2.ForwardMsg``."""
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    message = ForwardMsg()
    message.ParseFromString(data)
    return message


def script_finished(status: str) -> int:
    """The number of a ``script_finished`` status (``FINISHED_SUCCESSFULLY``,
    ``FINISHED_FRAGMENT_RUN_SUCCESSFULLY``, ``FINISHED_EARLY_FOR_RERUN`` …).

    Streamlit: the enum ``ForwardMsg.ScriptFinishedStatus``."""
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    return ForwardMsg.ScriptFinishedStatus.Value(status)


def widget_state(widget_id: str, **value):
    """One widget's state as the browser sends it: its id and one value field
    (``string_value=``, ``double_value=``, ``trigger_value=True`` for a button …).

    Streamlit: ``streamlit.proto.WidgetStates_pb2.WidgetState``."""
    from streamlit.proto.WidgetStates_pb2 import WidgetState

    return WidgetState(id=widget_id, **value)


def toolbar_mode(name: str) -> int:
    """The number of a toolbar mode (``MINIMAL`` …) in the session's config that the server
    sends in ``new_session`` (what ``client.toolbarMode`` became).

    Streamlit: the enum ``streamlit.proto.NewSession_pb2.Config.ToolbarMode``."""
    from streamlit.proto.NewSession_pb2 import Config

    return Config.ToolbarMode.Value(name)


# ---- AppTest's insides ---------------------------------------------------------------------------


def new_component_registry():
    """The installed packages' custom components, found once: a registry to share between
    AppTests. Each new AppTest finds them again at its first run (Streamlit 1.67, PR #15488:
    it reads the metadata of every installed distribution, 1-5 s here, often more than the page
    itself).

    Streamlit: ``streamlit.components.v2.component_manager.BidiComponentManager`` and its
    ``discover_and_register_components(start_file_watching=False)``."""
    from streamlit.components.v2.component_manager import BidiComponentManager

    registry = BidiComponentManager()
    registry.discover_and_register_components(start_file_watching=False)
    return registry


def use_component_registry(at, registry) -> None:
    """Give AppTest `at` (not yet run) the component `registry` instead of finding its own.

    Streamlit: ``AppTest._bidi_component_manager`` (None until the first run); AppTest takes
    no registry in its constructor."""
    assert getattr(at, "_bidi_component_manager", "absent") is None, "Streamlit changed AppTest"
    at._bidi_component_manager = registry


def element_tree(at):
    """The root of the page `at` drew (main area, sidebar, every nested block): to walk every
    element, which AppTest's public accessors (``at.button``, ``at.main`` …) give only by
    kind.

    Streamlit: ``AppTest._tree`` (an ``ElementTree``)."""
    return at._tree


def widget_state_of(widget):
    """The state AppTest sends for `widget` (an element of the tree) at the next run, its
    value as set with ``set_value``: a ``WidgetState`` proto.

    Streamlit: each widget element's ``_widget_state`` property."""
    return widget._widget_state


def is_single_select(button_group) -> bool:
    """Whether a button group (``st.segmented_control``, ``st.pills``) holds one choice or
    many.

    Streamlit: ``ButtonGroup._is_single_select``; the element's proto says it only as a
    click mode number."""
    return button_group._is_single_select


def widget_states(at):
    """Every widget's current state on the page `at` drew, as a run sends them (a
    ``WidgetStates`` proto, to add a state AppTest cannot set, such as a chart's selection).

    Streamlit: ``AppTest._tree.get_widget_states()``."""
    return at._tree.get_widget_states()


def run_with_states(at, states):
    """Run `at` again with these widget `states` (from :func:`widget_states`, changed), as
    the browser's rerun with them does; the AppTest after the run.

    Streamlit: ``AppTest._run(widget_state)``: ``AppTest.run()`` sends only the states of the
    widgets AppTest itself can set."""
    return at._run(states)


def navigation_titles(at) -> list[str]:
    """The titles of the pages ``st.navigation`` registered in `at`'s last run, in their order
    (the navigation a reader sees).

    Streamlit: ``AppTest._registered_pages`` (page script hash → page info with
    ``page_name``); AppTest has no public view of the navigation."""
    return [info["page_name"] for info in at._registered_pages.values()]


def session_state_items(at) -> dict:
    """Every key of `at`'s session state and its value, widgets' keys included (what
    ``at.session_state`` holds, without AppTest's wrapper).

    Streamlit: ``AppTest.session_state._state.filtered_state``; the public
    ``at.session_state`` has no way to list its keys."""
    return dict(at.session_state._state.filtered_state)


def session_store(at):
    """The object that holds `at`'s session state, widgets' metadata and all (to walk what a
    session keeps alive).

    Streamlit: ``AppTest.session_state._state`` (a ``SessionState``)."""
    return at.session_state._state


def record_deferred_files(monkeypatch) -> dict:
    """file name → the callable a download button registered to make its file when clicked
    (outside the script run), for every download button drawn after this call.

    Streamlit: ``streamlit.runtime.media_file_manager.MediaFileManager.add_deferred``,
    patched: AppTest cannot click a download button, and the callable is nowhere else."""
    from streamlit.runtime.media_file_manager import MediaFileManager

    made = {}
    original = MediaFileManager.add_deferred

    def record(self, data_callable, mimetype, coordinates, file_name=None, **kw):
        made[file_name] = data_callable
        return original(self, data_callable, mimetype, coordinates, file_name, **kw)

    monkeypatch.setattr(MediaFileManager, "add_deferred", record)
    return made
