"""The app around the page asked for: language, page config, navigation, the sidebar every page
shares, then the page. ``attnviz app`` runs this file as Streamlit's script, registering the
pages as their ``render`` functions (``attnviz/app/<name>/page.py``: an installed package has no
top-level pages/ files); the checkout's app.py calls ``run`` with its pages/ folder, whose files
call ``page_file``. No folder beside this file is named ``pages``: that name would put Streamlit
in its old folder-based multipage mode for ``attnviz app`` (docs/architecture.md)."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

# only what the first moments need: links and the sidebar (pandas, the figures: about a second
# on a fresh server) are imported in run(), once the loading notice is on the page
from attnviz.app import keys
from attnviz.app.runtime import gc_tuning, startup
from attnviz.app.shared import language, navigation
from attnviz.i18n import t

# a local file: a ":material/…:" page icon is fetched from a font host on the internet
ICON = Path(__file__).resolve().parent / "static" / "favicon.svg"
OWN_SETTINGS = {"train", "generate", "atlas"}   # their settings on the page: no sidebar input
REAL_MODEL = {"pretrained", "reading", "trace"}   # pages that run the real model on the sentence
LANGUAGE_MODEL = {"generate", "atlas"}   # own settings, and they run a language model
COMPARE = {"compare"}              # the page with two models in its sidebar


def run(pages_dir: Path | None = None) -> None:
    """One run of the app. `pages_dir`: the folder of the thin page files (app.py's pages/);
    None: the pages' render functions (see attnviz.app.shared.navigation)."""
    startup.start_once()           # threads, the session's language, the log (runtime.startup)
    language.activate()            # first: the page titles below are in the session's language
    st.set_page_config(page_title=t("app.page_title"), page_icon=str(ICON), layout="wide")
    st.html(APP_CSS)               # style sheets only: Streamlit gives them no place on the page
    notice = loading_notice()
    with navigation.app_navigation(pages_dir) as page:
        navigation.sidebar_links()
        from attnviz.app.shared import links   # after the notice and the links (see above)
        from attnviz.app.sidebar import panel as sidebar

        gc_tuning.freeze_long_lived()      # the modules' objects out of Streamlit's collection
        try:
            # before the page: a page that stops (st.stop) ends the run
            sidebar.render(inputs=page.url_path not in OWN_SETTINGS,
                           real_model=page.url_path in REAL_MODEL,
                           language_model=page.url_path in LANGUAGE_MODEL,
                           compare=page.url_path in COMPARE)
            try:
                page.run()
            finally:
                # again after the page: its own picks (a layer, a tab, Generate's tokens) are
                # final only now; a page that stopped early (st.stop) still has its link
                links.say_replaced()
                links.write()
            links.keep_first_click()       # the page ran to its end: its widgets are drawn
        finally:
            st.session_state.pop(keys.LINK_SENT, None)    # a first run that ended early too
            settle_notice(notice)


# a text box's counter of characters ("59/20000", drawn inside the box while it is edited) is
# kept clear of the text: the text stops before it
APP_CSS = """<style>
[data-testid="stTextInput"]:has([data-testid="InputInstructions"]) input
{ padding-right: 5rem; }
.st-key-experiment [role="tablist"] { flex-wrap: wrap; row-gap: 0.25rem; }
.st-key-experiment [data-baseweb="tab-highlight"] { display: none; }
.st-key-experiment [role="tab"][aria-selected="true"]
{ box-shadow: inset 0 -3px 0 currentColor; }
</style>"""

# hides the notice once the browser has drawn the main area: until then Streamlit draws a grey
# placeholder (stSkeleton) for each element whose code is still arriving (on a first visit, the
# charts' for seconds after the script has finished), then each chart's box stays empty until
# plotly has drawn it
_HIDE_WHEN_DRAWN = f"""<style>
body:not(:has([data-testid="stMain"] [data-testid="stSkeleton"],
              [data-testid="stMain"] [data-testid="stPlotlyChart"] > div:empty))
.st-key-{keys.LOADING_NOTICE} {{ display: none; }}
</style>"""

# the same, written with the notice itself: once the run has ended (Streamlit's "running" status
# gone) and the browser has drawn the main area. A page that stops early (st.stop) writes nothing
# after it, :func:`settle_notice`'s copy included, so the notice must carry its own end
_HIDE_WHEN_DONE = f"""<style>
body:not(:has([data-testid="stStatusWidget"],
              [data-testid="stMain"] [data-testid="stSkeleton"],
              [data-testid="stMain"] [data-testid="stPlotlyChart"] > div:empty))
.st-key-{keys.LOADING_NOTICE} {{ display: none; }}
</style>"""


def loading_notice():
    """The top of the main area: on a session's first run, a notice of what is loading (a
    fresh server's first page takes seconds: Python's libraries, the page's numbers, then the
    browser draws its charts); empty on every later run. Returns what :func:`settle_notice`
    needs at the end of the run."""
    slot = st.empty()               # made on every run: the page's elements keep their places
    if st.session_state.get(keys.APP_RAN):
        return None
    with slot.container(key=keys.LOADING_NOTICE):
        st.info(t("app.loading"), icon=":material/hourglass_top:")
        st.markdown(_HIDE_WHEN_DONE, unsafe_allow_html=True)       # the app's own CSS, no input
        return st.empty()           # for the CSS that hides the notice (settle_notice)


def settle_notice(css) -> None:
    """At the end of a run (`css`: :func:`loading_notice`'s answer): after the session's first,
    the notice stays while the browser still loads the page's elements, then hides by itself;
    later runs have none."""
    st.session_state[keys.APP_RAN] = True      # first: after st.stop no element can be written
    if css is not None:
        css.markdown(_HIDE_WHEN_DRAWN, unsafe_allow_html=True)   # the app's own CSS, no input


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
