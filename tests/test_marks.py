"""The test marks and the fast loop (tests/conftest.py's docstring has the rule for each mark):
the marks SPEC.md names are registered, the README gives the fast loop's command, and
collecting the tests imports none of the heavy libraries (collection stays a few seconds)."""

import re
import tomllib
from pathlib import Path

import pytest

from tests.conftest import HEAVY, MARK_OF_FIXTURE

ROOT = Path(__file__).resolve().parents[1]
FAST_LOOP = "python -m pytest -m fast"


def test_the_marks_are_registered_and_fast_is_every_test_without_one():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]
    registered = {line.split(":")[0] for line in config["ini_options"]["markers"]}
    assert set(HEAVY) == {"browser", "slow", "reference", "install", "deploy"}     # SPEC.md
    assert registered == set(HEAVY) | {"fast"}
    assert "--strict-markers" in config["ini_options"]["addopts"]        # a typo fails
    assert set(MARK_OF_FIXTURE.values()) <= set(HEAVY)


def test_the_selected_tests_carry_the_marks_their_fixtures_need(request):
    for item in request.session.items:
        for fixture, mark in MARK_OF_FIXTURE.items():
            if fixture in item.fixturenames:
                assert item.get_closest_marker(mark), (item.nodeid, mark)
        heavy = [m for m in HEAVY if item.get_closest_marker(m)]
        assert bool(item.get_closest_marker("fast")) == (not heavy), item.nodeid


def test_the_readme_gives_the_fast_loop_and_its_time():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Run the tests", 1)[1].split("\n## ", 1)[0]
    assert f"`{FAST_LOOP}`" in section
    assert re.search(r"\b\d+(\.\d+)? (s|min|minutes?|seconds?)\b", section)
    assert FAST_LOOP in readme.split("## 中文", 1)[1]


def test_collecting_the_tests_imports_no_heavy_library(modules_after_collection):
    heavy = {"torch", "transformers", "sentence_transformers", "playwright", "transformer_lens"}
    loaded = {name.split(".")[0] for name in modules_after_collection} & heavy
    assert loaded == set(), "import these in the fixture or the test that needs them"


@pytest.mark.slow
def test_a_files_tests_share_one_worker_under_xdist():
    """--dist loadgroup runs each group (a file, unless conftest says otherwise) on one worker,
    so a module's fixtures are made once: with pytest 9.2 this needs conftest's own "@group"
    node ids (pytest-xdist 3.8 writes them where pytest no longer reads)."""
    import re
    import subprocess
    import sys

    from tests.apptest_helpers import ROOT

    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "2",
                           "-v", "tests/test_keys.py", "tests/test_constraints.py"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:]
    workers: dict[str, set[str]] = {}
    for worker, file in re.findall(r"\[(gw\d)\].*?PASSED (tests/\w+\.py)", done.stdout):
        workers.setdefault(file, set()).add(worker)
    assert set(workers) == {"tests/test_keys.py", "tests/test_constraints.py"}
    assert all(len(w) == 1 for w in workers.values()), workers
