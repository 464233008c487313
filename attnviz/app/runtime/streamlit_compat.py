"""Every use of Streamlit's internals, in one place: what Streamlit's public API (``st.*``, its
documented options and command line) does not offer. Each function names what it reads, and
``tests/test_streamlit_compat.py`` holds a test per use (the name, the signature used and the
behaviour relied on), so a Streamlit upgrade that changes one fails there, not silently in a
page. No other module of attnviz imports from a ``streamlit.`` submodule
(tests/test_architecture.py).

What needs no internals any more (Streamlit 1.67, see docs/architecture.md): the folder-based
multipage mode that a top-level ``pages/`` starts is switched off by ``st.navigation`` itself
(``attnviz.app.main.page_file``), links use the ``st.Page`` objects the run registered
(``attnviz.app.shared.navigation.page``), ``attnviz app`` starts ``python -m streamlit run``,
and the training pool's log lines go through :mod:`logging` with Streamlit's own options.
"""

from __future__ import annotations


def in_script_run() -> bool:
    """Whether this thread runs a session's script (a page, a callback, a fragment): only then
    may it read ``st.session_state``. False in a training thread or a notebook.

    Streamlit: ``streamlit.runtime.scriptrunner.get_script_run_ctx(suppress_warning=True)``
    (the thread's ScriptRunContext, None outside a script run; no warning logged)."""
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    return get_script_run_ctx(suppress_warning=True) is not None


def session_id() -> str | None:
    """The id of the session whose script this thread runs; None outside a script run.

    Streamlit: the ScriptRunContext's ``session_id`` (the id
    ``Runtime.is_active_session`` takes)."""
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    ctx = get_script_run_ctx(suppress_warning=True)
    return None if ctx is None else ctx.session_id


def _widget_state():
    """This run's widget states (a ``WStates``), None outside a script run: the
    ScriptRunContext's ``session_state`` (a ``SafeSessionState``) holds the ``SessionState`` as
    ``_state``, whose ``_new_widget_state`` they are."""
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    ctx = get_script_run_ctx(suppress_warning=True)
    return None if ctx is None else ctx.session_state._state._new_widget_state


def widget_values_sent() -> dict[str, object]:
    """What the browser sent with this run's request for each keyed widget, by key, as it came
    (read it with :func:`widget_value_sent` once the widget is drawn). A page still on screen
    from an earlier session sends every widget's value with its first click (after a server
    restart: the clicked one new), so those values are newer than the page's link; a fresh
    tab sends none. Empty outside a script run.

    Streamlit: the ScriptRunContext's ``session_state`` (a ``SafeSessionState``) holds the
    ``SessionState`` as ``_state``; its ``_new_widget_state`` (``WStates``) has, before the
    script runs (``on_script_will_rerun``), the browser's values by widget id in ``states``,
    each a ``Serialized`` (a WidgetState proto) while no widget of this session has read it;
    a keyed widget's id ends with its key (``common.user_key_from_element_id``)."""
    from streamlit.runtime.state.common import user_key_from_element_id
    from streamlit.runtime.state.session_state import Serialized

    widgets = _widget_state()
    sent = {} if widgets is None else widgets.states
    return {key: (widget_id, state.value) for widget_id, state in sent.items()
            if isinstance(state, Serialized) and (key := user_key_from_element_id(widget_id))}


def widget_value_sent(sent: object) -> tuple[bool, object]:
    """`sent` (an entry of :func:`widget_values_sent`) read as the widget drawn in this run
    reads its values: (True, value), or (False, None) when no such widget has been drawn or
    it is drawn disabled (no click can have changed it).

    Streamlit: ``WStates.widget_metadata`` by widget id (set when the widget is drawn, by
    ``register_widget``), whose ``deserializer`` takes the proto's value as
    ``common.unpack_widget_state_value`` gives it, and whose ``disabled`` says the widget is
    drawn disabled."""
    from streamlit.runtime.state.common import unpack_widget_state_value

    widget_id, proto = sent
    widgets = _widget_state()
    metadata = None if widgets is None else widgets.widget_metadata.get(widget_id)
    if metadata is None or metadata.disabled:
        return False, None
    return True, metadata.deserializer(unpack_widget_state_value(proto))


def session_connected(session_id: str) -> bool | None:
    """Whether a browser is connected to session `session_id` now; None without a Streamlit
    server in this process (a notebook, a test without AppTest). A session whose browser went
    away is not connected, though Streamlit keeps it for a reconnect
    (``server.disconnectedSessionTTL``). Safe from any thread.

    Streamlit: ``Runtime.exists()``, ``Runtime.instance()`` and
    ``Runtime.is_active_session(session_id)`` (documented as safe on any thread)."""
    from streamlit.runtime import Runtime

    if not Runtime.exists():
        return None
    return bool(Runtime.instance().is_active_session(session_id))
