"""No request leaves the machine: every page, its icons, fonts and favicon come from the app's
own server (or are inline data: / blob: URLs). Under CI=true these never skip."""

from urllib.parse import urlsplit

import pytest

from attnviz.i18n import t
from tests.browser_helpers import exceptions, open_page, wait_for_app, wait_for_layout

pytestmark = pytest.mark.browser

LOCAL_HOSTS = {"127.0.0.1", "localhost", "[::1]", "::1"}
INLINE_SCHEMES = {"data", "blob", "about"}
PAGES = [(t("nav.inputs"), t("inputs.title")), (t("nav.steps"), t("steps.title")),
         (t("nav.multihead"), t("multihead.title")), (t("nav.experiments"), t("experiments.title")),
         (t("nav.pretrained"), t("pretrained.title")),
         (t("nav.home"), t("home.title"))]

# URLs the page points at without the request being reported: headless Chromium does not fetch
# favicons, so the <link rel=icon> is checked from the DOM as well
REFERENCED_URLS_JS = """() => [
    ...Array.from(document.querySelectorAll('link[href]'), e => e.href),
    ...Array.from(document.querySelectorAll('img[src], script[src], iframe[src]'), e => e.src),
    ...performance.getEntriesByType('resource').map(e => e.name),
]"""


def outside(url: str) -> bool:
    parts = urlsplit(url)
    if parts.scheme in INLINE_SCHEMES:
        return False
    return parts.hostname not in LOCAL_HOSTS


def test_every_page_stays_on_this_machine(browser, app_url):
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    requested: list[str] = []
    page.on("request", lambda request: requested.append(request.url))
    page.goto(app_url)
    wait_for_app(page)
    referenced = set(page.evaluate(REFERENCED_URLS_JS))
    for link, title in PAGES:
        open_page(page, link, title)
        wait_for_layout(page)           # icons and fonts load after the charts: all loaded
        referenced |= set(page.evaluate(REFERENCED_URLS_JS))
        assert not exceptions(page), link
    context.close()
    assert requested, "no request was recorded"
    assert sorted({u for u in requested if outside(u)}) == []
    assert sorted(u for u in referenced if outside(u)) == []
