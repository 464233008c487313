"""The shipped server settings: Streamlit's module watcher is off in the project's config and
in the image (issue 19.1: with it on, every script run rescanned the ~2,900 modules torch
loads, on the event loop, and a learner's first chart waited up to minutes)."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow        # each test runs pages or processes: see tests/conftest.py

ROOT = Path(__file__).resolve().parents[1]


def streamlit_option(cwd: Path, env: dict[str, str] | None = None) -> str:
    """server.fileWatcherType as Streamlit's command line reads it (`streamlit config show`,
    which applies STREAMLIT_* variables as `streamlit run` does), started in `cwd` (whose
    .streamlit/config.toml applies) with `env` added to an environment without STREAMLIT_*
    variables. Streamlit shows its default as a comment."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("STREAMLIT_")}
    out = subprocess.run([sys.executable, "-m", "streamlit", "config", "show"], cwd=cwd,
                         env={**base, **(env or {})}, capture_output=True, text=True,
                         timeout=120, check=True)
    match = re.search(r'(?m)^(# )?fileWatcherType = "(\w+)"', out.stdout)
    return match.group(2) if match.group(1) is None else "default " + match.group(2)


def dockerfile_env() -> dict[str, str]:
    """The variables the Dockerfile's ENV instructions set (continuation lines joined)."""
    text = re.sub(r"\\\n", " ", (ROOT / "Dockerfile").read_text())
    env = {}
    for line in text.splitlines():
        if line.startswith("ENV "):
            env.update(re.findall(r"(\w+)=(\S+)", line))
    return env


def test_the_projects_config_turns_the_module_watcher_off():
    assert streamlit_option(ROOT) == "none"


def test_the_image_turns_the_module_watcher_off_by_its_environment(tmp_path):
    env = dockerfile_env()
    assert env.get("STREAMLIT_SERVER_FILE_WATCHER_TYPE") == "none"
    assert streamlit_option(tmp_path) == "default auto"           # no config: Streamlit's own
    assert streamlit_option(tmp_path, env) == "none"              # the image's variables
    cmd = next(line for line in (ROOT / "Dockerfile").read_text().splitlines()
               if line.startswith("CMD "))
    assert "fileWatcherType" not in cmd or "fileWatcherType\", \"none" in cmd


def test_the_shipped_config_bounds_websocket_messages_to_what_the_app_sends():
    """Issue 26: server.maxMessageSize and server.maxWidgetStateSize (MB) are lowered from
    Streamlit's 200 and 25 to what the app needs: the largest message a browser sends for it
    (the Q, K, V boxes full, as tools/streamlit_client builds the rerun) fits, with the rest of
    a page's widgets; a 16 MB one does not. Streamlit reads both from the project's folder, and
    the image sets neither otherwise. (benchmarks/bench_messages.py measures the largest
    messages both ways on a real server; tests/test_server_limits.py sends the 16 MB.)"""
    import tomllib

    from attnviz.app.shared.text import MAX_MATRIX_CHARS
    from tools.streamlit_client import rerun_message, text_state

    server = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())["server"]
    qkv = len(rerun_message(page_hash="0" * 32, widgets=[
        text_state(f"$$ID-{'0' * 32}-{name}_text", "0" * MAX_MATRIX_CHARS) for name in "qkv"]))
    for option in ("maxMessageSize", "maxWidgetStateSize"):
        limit = server[option] * 10**6
        assert qkv + 100_000 <= limit < 16 * 10**6, (option, qkv, limit)
    out = subprocess.run([sys.executable, "-c", "from streamlit import config; "
                          "print(config.get_option('server.maxMessageSize'), "
                          "config.get_option('server.maxWidgetStateSize'))"],
                         cwd=ROOT, env={k: v for k, v in os.environ.items()
                                        if not k.startswith("STREAMLIT_")},
                         capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.split() == [str(server["maxMessageSize"]),
                                  str(server["maxWidgetStateSize"])]
    assert not [k for k in dockerfile_env() if "MESSAGE_SIZE" in k or "WIDGET_STATE" in k]
