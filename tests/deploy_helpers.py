"""What tests/test_deploy.py (plain processes) and tests/test_image.py (containers) both check
of deploy/haproxy.cfg in front of replicas: Debian's haproxy, the metrics block in every
spelling, the security headers."""

from __future__ import annotations

import http.client
import os
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CFG = ROOT / "deploy" / "haproxy.cfg"

# /_stcore/metrics spelt every way that still reaches Streamlit's counters (it decodes the
# path before routing) or that a naive rule would miss (issue 19.6)
METRICS_SPELLINGS = ["/_stcore/metrics", "/_stcore/metric%73", "/_stcore/METRIC%53",
                     "/_stcore%2Fmetrics", "/_stcore%2fmetrics", "/%5fstcore/metrics",
                     "//_stcore/metrics", "/_stcore//metrics", "/_stcore/metrics/",
                     "/_stcore/metrics%2F", "/_STCORE/METRICS", "/x/..%2F_stcore/metrics",
                     "/_stcore/metrics?format=text"]
# the ones Streamlit itself answers with its counters when asked directly
METRICS_DIRECT = ["/_stcore/metrics", "/_stcore/metric%73", "/_stcore%2Fmetrics",
                  "/%5fstcore/metrics"]
COUNTERS = b"# TYPE session_events"


def haproxy() -> str:
    """Debian's haproxy; under CI=true a missing one fails instead of skipping."""
    path = shutil.which("haproxy") or ("/usr/sbin/haproxy"
                                       if Path("/usr/sbin/haproxy").exists() else None)
    if path is None:
        if os.environ.get("CI"):
            pytest.fail("CI=true but Debian's haproxy is not installed (.ci/run installs it)")
        pytest.skip("haproxy is not installed: apt-get install -y haproxy")
    return path


class Port:
    """A replica as benchmarks/bench_load.local_haproxy_cfg reads it: its port on 127.0.0.1."""

    def __init__(self, port: int):
        self.port = port


def raw_get(port: int, path: str, headers: dict | None = None) -> tuple[int, bytes]:
    """GET `path` from 127.0.0.1:`port` exactly as written (no client-side normalisation or
    quoting)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", path, headers=headers or {})
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def assert_metrics_blocked(proxy_port: int, replica_ports: list[int]) -> None:
    """Streamlit itself answers the decoded spellings with its counters; through the proxy
    every spelling is refused (404, no counters) and the rest of the app still goes through."""
    for port in replica_ports:
        for path in METRICS_DIRECT:
            status, body = raw_get(port, path)
            assert status == 200 and COUNTERS in body, (port, path)
    for path in METRICS_SPELLINGS:
        status, body = raw_get(proxy_port, path)
        assert status == 404 and COUNTERS not in body, (path, status)
    assert raw_get(proxy_port, "/_stcore/health")[0] == 200
    assert raw_get(proxy_port, "/_stcore/metricsx")[0] == 200        # the app's own page
    assert b"<div id=\"root\">" in raw_get(proxy_port, "/")[1]


def assert_security_headers(headers) -> None:
    """The headers deploy/haproxy.cfg adds to every response (docs/deploy.md's table)."""
    assert headers["X-Frame-Options"] == "SAMEORIGIN"
    assert "frame-ancestors 'self'" in headers["Content-Security-Policy"]
    assert "connect-src 'self';" in headers["Content-Security-Policy"]
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert headers["Referrer-Policy"] == "same-origin"
    assert "Server" not in headers
