"""A page of the app opened in Streamlit's AppTest as a session's first run (a link opened, a
fresh server's first request): the one way the tests (tests/apptest_helpers.py) and the
benchmarks (benchmarks/bench_app.py, bench_toy.py) open a page without a browser."""

from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

from tools import streamlit_compat

ROOT = Path(__file__).resolve().parents[1]
TIMEOUT = 120


def open_page(page: str = "pages/home.py", *, params: dict | None = None,
              locale: str | None = None, timeout: float = TIMEOUT, **state) -> AppTest:
    """The one way the tests open a page: `page` as a session's first run, nothing before it
    (a link opened, a fresh server's first request): app.py with the link's query `params`,
    the browser's `locale`, the seeded session `state`, switched to `page` before its first
    run, so Streamlit runs app.py's navigation straight to it (the page file runs the app
    around itself, attnviz.app.main.page_file); one run. No page may raise (a learner sees no
    traceback): checked here."""
    at = shared_components(AppTest.from_file(str(ROOT / "app.py"), default_timeout=timeout))
    for key, value in (params or {}).items():
        at.query_params[key] = value
    if locale:
        at.context["locale"] = locale
    for key, value in state.items():
        at.session_state[key] = value
    at.switch_page(page)
    at.run()
    no_exceptions(at)
    return at


_COMPONENTS: list = []


def shared_components(at: AppTest) -> AppTest:
    """`at` with the process's one registry of the installed packages' custom components
    (streamlit_compat.new_component_registry: each new AppTest would find them again, 1-5 s
    here); what is installed does not change while the tests run, so it is found once."""
    if not _COMPONENTS:
        _COMPONENTS.append(streamlit_compat.new_component_registry())
    streamlit_compat.use_component_registry(at, _COMPONENTS[0])
    return at


def no_exceptions(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]
