"""The app's navigation, built the same way by both entry points: the checkout's ``app.py``
(``streamlit run app.py``) and the installed package's ``main.py`` (``attnviz app``); both run
:func:`attnviz.app.main.run` (language, page config, this navigation, the shared sidebar, the
page).

Every page is a folder of attnviz/app, its ``render()`` in ``attnviz/app/<name>/page.py``. Each
page's title is the message ``nav.<name>``, its URL path its name (``/steps``; Home is ``/``).
app.py registers the checkout's thin files ``pages/<name>.py`` (each runs its ``render()`` inside
the app, see :func:`attnviz.app.main.page_file`), so AppTest's ``switch_page("pages/steps.py")``
finds them by path; ``attnviz app``, whose package has no such files, registers the ``render``
functions themselves.

The ``st.Page`` objects are built once per run and kept for that run (:func:`app_navigation`):
links between pages (:func:`page`) hand Streamlit the very objects its navigation registered.
"""

from __future__ import annotations

import importlib
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path

import streamlit as st

from attnviz.app import keys
from attnviz.i18n import t

# (name, icon), in the navigation's order; the first is the default page
PAGES = [
    ("home", ":material/home:"),
    ("inputs", ":material/edit:"),
    ("steps", ":material/footprint:"),
    ("multihead", ":material/view_module:"),
    ("experiments", ":material/science:"),
    ("pretrained", ":material/neurology:"),
    ("reading", ":material/insights:"),
    ("trace", ":material/route:"),
    ("train", ":material/model_training:"),
    ("generate", ":material/auto_awesome:"),
    ("compare", ":material/compare:"),
    ("atlas", ":material/scatter_plot:"),
]
ICONS = dict(PAGES)

# name → st.Page of the app run going on in this thread (Streamlit runs each session's script
# in a thread of its own, which starts with an empty context); None outside an app run
_RUN_PAGES: ContextVar[dict[str, st.Page] | None] = ContextVar("attnviz_run_pages",
                                                               default=None)


def render_function(name: str):
    """Page `name`'s ``render`` (its module is imported now)."""
    return importlib.import_module(f"attnviz.app.{name}.page").render


def pages(pages_dir: Path | None = None) -> dict[str, st.Page]:
    """name → st.Page of every page, titles in the session's language. `pages_dir`: where the
    thin page files are (app.py's pages/); None: the pages' ``render`` functions."""
    return {name: st.Page(render_function(name) if pages_dir is None
                          else pages_dir / f"{name}.py",
                          title=t(f"nav.{name}"), icon=icon, url_path=name, default=i == 0)
            for i, (name, icon) in enumerate(PAGES)}


@contextmanager
def app_navigation(pages_dir: Path | None = None):
    """st.navigation of every page (:func:`pages`); yields the page to run. Inside the block
    :func:`page` gives this run's pages and :func:`in_app_run` is True.

    st.navigation also switches off, for the whole process, Streamlit's old folder-based
    multipage mode, which a folder named ``pages`` beside the main script (app.py's) starts
    and which runs ``pages/<name>.py`` by itself for a fresh server's first request to
    ``/<name>`` (attnviz.app.main.page_file).

    Streamlit's own navigation is hidden (``client.showSidebarNavigation = false`` in the
    app's config): in that folder mode a fresh server's first page would list the files of
    ``pages/`` by name until this navigation ran. The app draws its own links instead
    (:func:`sidebar_links`), in the session's language from the first moment they show."""
    registered = pages(pages_dir)
    token = _RUN_PAGES.set(registered)
    try:
        yield st.navigation(list(registered.values()), position="hidden")
    finally:
        _RUN_PAGES.reset(token)


def sidebar_links() -> None:
    """A link to every page at the top of the sidebar, in the navigation's order; the page
    shown is highlighted (st.page_link marks the current page)."""
    with st.sidebar.container(key=keys.NAV_LINKS):
        for name, icon in PAGES:
            st.page_link(page(name), label=t(f"nav.{name}"), icon=icon)


def in_app_run() -> bool:
    """Whether the app's navigation ran in this run, around the code calling this."""
    return _RUN_PAGES.get() is not None


def page(name: str) -> st.Page:
    """Page `name` as this run's navigation registered it, for st.page_link and
    st.switch_page. Every page runs inside the app's run (attnviz.app.main), but a fragment's
    own rerun runs the fragment alone: a link there is a RuntimeError."""
    registered = _RUN_PAGES.get()
    if registered is None:
        raise RuntimeError(f"navigation.page({name!r}) outside the app's run (in a fragment?)")
    return registered[name]
