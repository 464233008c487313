"""A Streamlit server of the app for a test or a benchmark: started on a free port, waited for
until it answers, stopped (tests/browser_helpers.py drives a browser on it; tools/streamlit_client.py
speaks its websocket protocol)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def running_app(timeout: float = 90, *, script: Path = ROOT / "app.py", cwd: Path = ROOT,
                port: int | None = None):
    """`streamlit run script` (default the app) on 127.0.0.1 and `port` (default: a free one),
    from `cwd` (whose .streamlit/config applies); yields the base URL."""
    with streamlit_server(timeout, script=script, cwd=cwd, port=port) as (url, _):
        yield url


@contextmanager
def streamlit_server(timeout: float = 90, *, script: Path = ROOT / "app.py", cwd: Path = ROOT,
                     port: int | None = None, options: tuple[str, ...] = (),
                     env: dict[str, str] | None = None):
    """`running_app`, with more Streamlit command-line `options` ("--server.x", "value", …)
    and more environment variables `env`; yields (the base URL, the server's process)."""
    port = port or free_port()
    log = tempfile.TemporaryFile()           # not a pipe: a long run must never block on it
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", str(script),
         "--server.port", str(port), "--server.address", "127.0.0.1",
         "--server.headless", "true", "--browser.gatherUsageStats", "false", *options],
        cwd=cwd, stdout=log, stderr=subprocess.STDOUT,
        env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})})
    url = f"http://127.0.0.1:{port}"
    try:
        try:
            wait_healthy(url, proc, timeout)
        except RuntimeError:
            log.seek(0)
            raise RuntimeError(f"streamlit run {script} did not start:\n"
                               + log.read().decode(errors="replace")) from None
        yield url, proc
    finally:
        stop_process(proc)
        log.close()


def wait_healthy(url: str, proc: subprocess.Popen | None, timeout: float = 120) -> None:
    """Wait until `url`/_stcore/health answers 200 (Streamlit's, or a proxy's in front of it);
    RuntimeError if `proc` exits first or `timeout` s pass."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        if (proc is not None and proc.poll() is not None) or time.monotonic() > deadline:
            raise RuntimeError(f"{url} did not become healthy")
        time.sleep(0.3)


def stop_process(proc: subprocess.Popen, timeout: float = 10) -> None:
    """Terminate `proc`, and kill it if it has not exited after `timeout` s."""
    proc.terminate()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
