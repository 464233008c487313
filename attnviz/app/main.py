"""The app around the page asked for: language, page config, navigation, the sidebar every page
shares, then the page. ``attnviz app`` runs this file as Streamlit's script, registering the
pages as the functions of attnviz.app.page_bodies (an installed package has no top-level
pages/ files); the checkout's app.py calls ``run`` with its pages/ folder, whose files call
``page_file``."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from attnviz.app import gc_tuning, language, links, navigation, sidebar, threads
from attnviz.i18n import t

# a local file: a ":material/…:" page icon is fetched from a font host on the internet
ICON = Path(__file__).resolve().parent / "static" / "favicon.svg"
OWN_SETTINGS = {"train", "generate"}   # pages with their settings on the page: no sidebar input
REAL_MODEL = {"pretrained", "reading", "trace"}   # pages that run the real model on the sentence


def run(pages_dir: Path | None = None) -> None:
    """One run of the app. `pages_dir`: the folder of the thin page files (app.py's pages/);
    None: the pages' render functions (see attnviz.app.navigation)."""
    threads.start_once()           # one BLAS thread, the memory sweeper (see attnviz.app.threads)
    language.activate()            # first: the page titles below are in the session's language
    st.set_page_config(page_title=t("app.page_title"), page_icon=str(ICON), layout="wide")
    with navigation.app_navigation(pages_dir) as page:
        gc_tuning.freeze_long_lived()      # the modules' objects out of Streamlit's collection
        # before the page: a page that stops (st.stop) ends the run
        sidebar.render(inputs=page.url_path not in OWN_SETTINGS,
                       real_model=page.url_path in REAL_MODEL)
        try:
            page.run()
        finally:
            # again after the page: its own picks (a layer, a tab, Generate's tokens) are
            # final only now; a page that stopped early (st.stop) still has its link
            links.say_replaced()
            links.write()


def page_file(path: str) -> None:
    """The body of the checkout's page file `path` (``pages/<name>.py``, which passes its
    ``__file__``): inside the app's run (app.py's navigation running the file), the page's
    ``render()``; otherwise the whole app, this file's folder its pages.

    The file runs outside the app when a fresh server's first request is ``/<name>`` (a shared
    link, the first click after a restart): the folder ``pages/`` beside app.py puts Streamlit
    in its old folder-based multipage mode, which runs ``pages/<name>.py`` by itself until
    st.navigation first runs in the process; and in AppTest, which starts every run in that
    mode. The app's navigation then picks this page from the request, as for any other run,
    and switches the folder mode off."""
    file = Path(path).resolve()
    if navigation.in_app_run():
        navigation.render_function(file.stem)()
    else:
        run(pages_dir=file.parent)


if __name__ == "__main__":            # as Streamlit's script (attnviz app)
    run()
