"""The server asks nothing of the internet (issue 18.20): started as the README and the image
start it, under strace, Streamlit makes no connection to an address outside this machine (left
alone, headless Streamlit 1.67 asks checkip.amazonaws.com for the external IP and connects a
socket towards 8.8.8.8 for the network IP, to print them), and its start-up log names only the
local URL. A browser then visits pages (the pretrained model included) on the same server: the
server still connects nowhere else. Under CI=true a missing strace fails instead of skipping.
"""

from __future__ import annotations

import ipaddress
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from attnviz.i18n import t
from tests.browser_helpers import (exceptions, free_port, open_page, stop_process, wait_for_app,
                                   wait_healthy)

pytestmark = pytest.mark.slow        # each test runs pages or processes: see tests/conftest.py

ROOT = Path(__file__).resolve().parents[1]
ADDRESS = re.compile(r'inet_addr\("([^"]+)"\)|inet_pton\(AF_INET6?, "([^"]+)"')
# how the README (no address: every interface) and the image (Dockerfile CMD) start it
START = {"readme": [], "image": ["--server.address", "0.0.0.0"]}


def strace() -> str:
    path = shutil.which("strace")
    if path is None:
        if os.environ.get("CI"):
            pytest.fail("CI=true but strace is not installed (.ci/run installs it)")
        pytest.skip("strace is not installed: apt-get install -y strace")
    return path


class TracedServer:
    """`streamlit run app.py` from the project's folder (its .streamlit/config.toml applies),
    every connect/sendto/sendmsg of it and its children written to a file by strace."""

    def __init__(self, tmp: Path, extra: list[str]):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log, self.trace = tmp / "streamlit.log", tmp / "strace.txt"
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("STREAMLIT_", "HF_", "TRANSFORMERS_"))}
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(
                [strace(), "-f", "-qq", "-e", "trace=connect,sendto,sendmsg", "-o",
                 str(self.trace), sys.executable, "-m", "streamlit", "run", "app.py",
                 "--server.port", str(self.port), *extra],
                cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                env={**env, "PYTHONUNBUFFERED": "1"},
                start_new_session=True)           # strace and the server: one group to stop
        try:
            wait_healthy(self.url, self.proc, 120)
            deadline = time.monotonic() + 30          # the URLs are printed after the start
            while "URL:" not in self.log_text() and time.monotonic() < deadline:
                time.sleep(0.2)
        except BaseException:
            self.stop()
            raise

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")

    def outside_addresses(self) -> set[str]:
        """Every address outside this machine that a traced call connected or sent to."""
        found = set()
        for line in self.trace.read_text(errors="replace").splitlines():
            for m in ADDRESS.finditer(line):
                address = ipaddress.ip_address(m.group(1) or m.group(2))
                mapped = getattr(address, "ipv4_mapped", None)
                if not (address.is_loopback or (mapped and mapped.is_loopback)
                        or address.is_unspecified):
                    found.add(str(address))
        return found

    def stop(self) -> None:
        """strace and the server it runs: terminating strace alone detaches it and leaves the
        server running (two were left by every run of this file)."""
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        stop_process(self.proc)
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)      # whatever outlived the terminate
        except ProcessLookupError:
            pass


@pytest.fixture(scope="module", params=list(START))
def server(request, tmp_path_factory):
    s = TracedServer(tmp_path_factory.mktemp(request.param), START[request.param])
    yield s
    s.stop()


def _same_origin_websocket(url: str) -> None:
    """Open and close a websocket as the app's page does (its origin is the server's)."""
    from websockets.sync.client import connect      # sync: Playwright's loop may be running

    with connect(url.replace("http://", "ws://") + "/_stcore/stream", origin=url,
                 open_timeout=20):
        pass


def test_start_up_names_the_local_url_and_connects_nowhere_else(server):
    _same_origin_websocket(server.url)
    log = server.log_text()
    assert f"URL: http://localhost:{server.port}" in log, log
    for looked_up in ("External URL", "Network URL", "auto detect external IP"):
        assert looked_up not in log, log
    assert server.outside_addresses() == set(), server.trace.read_text()[-3000:]


@pytest.mark.browser
def test_pages_served_connect_nowhere_else(server, browser):
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.goto(server.url)
    wait_for_app(page)
    for link, title in ((t("nav.pretrained"), t("pretrained.title")),
                        (t("nav.steps"), t("steps.title"))):
        open_page(page, link, title)
        assert not exceptions(page), link
    context.close()
    assert server.outside_addresses() == set(), server.trace.read_text()[-3000:]
