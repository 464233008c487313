"""The package installs and runs without the checkout (issue 20): a copy of the checkout is
installed with ``pip install -c constraints.txt <copy>[all]`` into a fresh virtual environment
in a temporary folder (no system site-packages, no PYTHONPATH), then, from outside the
checkout: ``attnviz --version``; the README's Python example; ``attnviz app`` serving every
page, each opened as a browser opens a link (Streamlit's websocket protocol), the first one a
sub-page of the fresh server; the declared dependencies. About a minute to install here (pip
finds torch's CPU wheel on this machine's local index)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import attnviz
from attnviz import cli
from tests.browser_helpers import free_port, stop_process, wait_healthy
from tests.stream_client import CHARTS, TITLES, open_page
from tools import streamlit_compat

pytestmark = pytest.mark.install

ROOT = Path(__file__).resolve().parents[1]
NAV_ORDER = ("", "inputs", "steps", "multihead", "experiments", "pretrained", "reading", "trace",
             "train", "generate", "compare", "atlas")      # the navigation's URL paths (Home, the default, is the root)


def clean_env(**extra) -> dict[str, str]:
    """The environment without anything pointing at the checkout or this Python's packages."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME", "PYTHONSTARTUP")}
    return {**env, **extra}


@pytest.fixture(scope="module")
def venv(tmp_path_factory) -> Path:
    """A fresh virtual environment with a copy of the checkout installed, [all] extras."""
    base = tmp_path_factory.mktemp("install")
    copy = base / "attnviz-src"
    files = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard",
                            "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    for name in filter(None, files.decode().split("\0")):
        if (ROOT / name).is_file():
            (copy / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, copy / name)
    env_dir = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(env_dir)], check=True, env=clean_env())
    # --no-compile: Python compiles a module to bytecode when it is first imported; pip compiling
    # every module of every package up front was half of the install's time here (78 s → 40 s)
    done = subprocess.run([str(env_dir / "bin" / "pip"), "install", "-q", "--no-compile", "-c",
                           str(copy / "constraints.txt"), f"{copy}[all]"],
                          capture_output=True, text=True, timeout=1200, env=clean_env(),
                          cwd=base)
    assert done.returncode == 0, done.stderr[-3000:]
    shutil.rmtree(copy)                    # what runs now is the installed package alone
    return env_dir


def run_in(venv: Path, *args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([str(venv / "bin" / args[0]), *args[1:]], capture_output=True,
                          text=True, timeout=300, cwd="/tmp", env=clean_env(), **kw)


def test_the_version_and_the_declared_dependencies(venv):
    out = run_in(venv, "attnviz", "--version")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == f"attnviz {attnviz.__version__}" == "attnviz 0.2.0"
    show = run_in(venv, "pip", "show", "attnviz").stdout
    requires = re.search(r"^Requires: (.*)$", show, re.M).group(1).split(", ")
    assert sorted(requires) == ["babel", "numpy", "regex"]            # the core, always
    extras = run_in(venv, "python", "-c", "import importlib.metadata as m; "
                    "print('\\n'.join(m.requires('attnviz')))").stdout.splitlines()
    assert 'streamlit==1.67.0; extra == "app"' in extras
    assert 'torch==2.13.0; extra == "models"' in extras
    assert any(e.startswith("plotly") and 'extra == "plot"' in e for e in extras)


def test_the_installed_package_is_the_one_imported_and_ships_its_files(venv):
    code = ("import attnviz, attnviz.app.main, pathlib\n"
            "p = pathlib.Path(attnviz.__file__).parent\n"
            "print(p)\n"
            "print(sorted(str(f.relative_to(p)) for f in p.rglob('*') "
            "if f.suffix in ('.po', '.csv', '.svg', '.toml', '.typed')))\n")
    out = run_in(venv, "python", "-c", code)
    assert out.returncode == 0, out.stderr
    where, data = out.stdout.splitlines()
    assert "site-packages" in where and str(ROOT) not in where
    assert eval(data) == ["app/config.toml", "app/static/favicon.svg",  # noqa: S307
                          "i18n/locales/en.po", "i18n/locales/glossary.csv",
                          "i18n/locales/zh.po", "py.typed"]


def test_the_readmes_python_example_runs_from_tmp(venv):
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    code = re.findall(r"```python\n(.*?)```", readme, re.S)[0]
    code += "\nassert t.weights.shape == (8, len(tokens), len(tokens))\n"
    # .show() prints the figure's JSON instead of opening a browser (plotly's own "json"
    # renderer needs IPython, which the app does not install)
    code = ("import plotly.io\n"
            "plotly.io.show = lambda fig, *a, **k: print(fig.to_json())\n") + code
    out = subprocess.run([str(venv / "bin" / "python"), "-c", code], capture_output=True,
                         text=True, timeout=300, cwd="/tmp", env=clean_env())
    assert out.returncode == 0, out.stderr
    assert '"type":"heatmap"' in out.stdout.replace(" ", "")


def test_attnviz_app_serves_every_page_from_the_installed_package(venv, tmp_path):
    port = free_port()
    log = open(tmp_path / "server.log", "w+b")
    server = subprocess.Popen([str(venv / "bin" / "attnviz"), "app", "--server.port", str(port),
                               "--server.address", "127.0.0.1"], cwd=tmp_path, stdout=log,
                              stderr=subprocess.STDOUT, env=clean_env(PYTHONUNBUFFERED="1"))
    url = f"http://127.0.0.1:{port}"
    try:
        try:
            wait_healthy(url, server, 120)
        except RuntimeError:
            log.seek(0)
            raise RuntimeError(log.read().decode(errors="replace")) from None
        for page, title in TITLES.items():       # "steps" first: the fresh server's first request
            seen = open_page(url, page)
            assert not seen["exceptions"], (page, seen["exceptions"])
            assert title in seen["titles"], (page, seen["titles"])
            assert page not in CHARTS or "plotly_chart" in seen["types"], (page, seen["types"])
            # the whole app around it, the fresh server's first request too: every page in
            # the navigation, this one current, and the sidebar
            assert tuple(p for _, p in seen["navigation"]) == NAV_ORDER, seen["navigation"]
            assert seen["current"] == ("" if page == "home" else page) and not seen["not_found"]
            assert page in ("train", "generate", "atlas") or "Sentence" in seen["sidebar_text_inputs"]
            assert seen["script"].endswith("site-packages/attnviz/app/main.py")
            # the shipped config took effect (given as options: no .streamlit/ here)
            assert seen["config"].toolbar_mode == streamlit_compat.toolbar_mode("MINIMAL")
            assert seen["config"].gather_usage_stats is False
    finally:
        stop_process(server)
        log.close()


def test_attnviz_app_gives_streamlit_the_shipped_config_and_the_callers_options_last():
    shipped = tomllib.loads(cli.CONFIG.read_text(encoding="utf-8"))
    assert shipped == tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    args = cli.streamlit_args(["--server.port", "8600", "--server.fileWatcherType", "poll"])
    assert args[:2] == ["run", str(cli.MAIN)]
    pairs = dict(zip(args[2::2], args[3::2]))          # the last value of an option wins
    assert pairs == {"--client.toolbarMode": "minimal", "--client.showSidebarNavigation": "false",
                     "--browser.gatherUsageStats": "false",
                     "--browser.serverAddress": "localhost", "--server.headless": "true",
                     "--server.fileWatcherType": "poll", "--server.maxUploadSize": "20",
                     "--server.maxMessageSize": "13", "--server.maxWidgetStateSize": "13",
                     "--server.port": "8600"}
    assert args.index("--server.fileWatcherType") < len(args) - 4   # the shipped one first…
    assert args[-3:] == ["8600", "--server.fileWatcherType", "poll"]   # …the caller's after it
