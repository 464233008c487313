"""The tuned lens on SmolLM2 (issue 28, "beyond"): translators fitted by ridge regression on
text the model writes itself, kept on disk as the converted model is. Expected numbers come
from transformers (its hidden states through its own norm and lm_head, each first moved by
the translator with this file's own arithmetic) or from numpy's least squares — never from
attnviz's lens."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from attnviz.app import keys
from attnviz.describe.labels import token_shown
from attnviz.i18n import render, use_language
from attnviz.models.readers import tuned_lens as tl
from tests.apptest_helpers import button, charts, decode, no_exceptions, open_page, shows
from tests.message_helpers import raises_message

pytestmark = pytest.mark.slow

HELD_OUT = ["The Eiffel Tower is in the city of", "She opened the door and saw",
            "春天来了，花都开了。", "def add(a, b):\n    return a + b  # 早上好"]


@pytest.fixture(scope="session")
def tuned(decoder):
    """The model's tuned lens where the app keeps it (beside the converted model): fitted the
    first time on this machine, then read from disk."""
    return decoder.tuned_lens()


def _unit(h, eps):
    h = np.asarray(h, dtype=np.float64)
    return h / np.sqrt((h * h).mean(-1, keepdims=True) + eps)


def _log_softmax(x):
    x = np.asarray(x, dtype=np.float64)
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def hf_lenses(torch, hf_decoder, translators, eps, text):
    """Transformers' logit lens and tuned lens of `text`: log-probabilities (L + 1, n, vocab)
    each, every hidden state (the last is already normed: the model's logits) through
    transformers' norm and lm_head, the tuned one first moved by [u(h), 1] · A_ℓ."""
    model, tok = hf_decoder
    with torch.no_grad():
        out = model(torch.tensor([tok(text)["input_ids"]]), output_hidden_states=True)
        hidden = [h[0] for h in out.hidden_states]
        last = len(hidden) - 1

        def read(h):
            return model.lm_head(model.model.norm(h)).numpy()

        logit = [read(h) for h in hidden[:last]] + [out.logits[0].numpy()]
        moved = [torch.tensor((_unit(h.numpy(), eps) @ translators[i][:-1]
                               + translators[i][-1]).astype(np.float32))
                 for i, h in enumerate(hidden[:last])]
        tuned = [read(h) for h in moved] + [out.logits[0].numpy()]
    return _log_softmax(np.stack(logit)), _log_softmax(np.stack(tuned))


def kl_from_last(logp):
    """KL(last row ‖ each row) (L + 1, n) in nats."""
    p = np.exp(logp[-1])
    return (p * (logp[-1] - logp)).sum(-1)


# ---- the fit ---------------------------------------------------------------------------------

def test_the_fit_is_the_ridge_regression_of_the_last_layers_direction():
    """Each translator solves min ‖[u(h_ℓ), 1] A − u(h_L)‖² + λ‖A‖², λ = RIDGE · tokens: the
    same as numpy's least squares on the system with √λ · I stacked under it."""
    rng = np.random.default_rng(0)
    streams = rng.standard_normal((3, 200, 6)) * [1, 5, 0.1, 1, 1, 30]   # (L + 1, t, d)
    eps = 1e-5
    got = tl.fit(streams.astype(np.float32), eps)
    assert got.shape == (2, 7, 6) and got.dtype == np.float32
    target = _unit(streams[-1].astype(np.float32), eps)
    lam = tl.RIDGE * 200
    for layer in range(2):
        x = np.hstack([_unit(streams[layer].astype(np.float32), eps), np.ones((200, 1))])
        a = np.vstack([x, np.sqrt(lam) * np.eye(7)])
        b = np.vstack([target, np.zeros((7, 6))])
        expected = np.linalg.lstsq(a, b, rcond=None)[0]
        np.testing.assert_allclose(got[layer], expected, rtol=1e-4, atol=1e-6)


# ---- closer to the output than the logit lens ------------------------------------------------

@pytest.mark.parametrize("text", HELD_OUT)
def test_the_tuned_lens_is_closer_to_the_output_at_every_layer(torch, decoder, hf_decoder, tuned,
                                                              text):
    """On text it was not fitted on (English, Chinese, code), transformers' hidden states read
    through the translators are closer to the model's output than the logit lens at every
    layer (mean KL over the positions); attnviz's tuned lens gives those KLs and top tokens."""
    assert text not in tl.TRAINING_PROMPTS
    translators = np.asarray(tuned.translators, dtype=np.float64)
    logit, tuned_logp = hf_lenses(torch, hf_decoder, translators, decoder.config.rms_eps, text)
    kl_logit, kl_tuned = kl_from_last(logit), kl_from_last(tuned_logp)        # (L + 1, n)
    below = kl_tuned.mean(1)[:-1] < kl_logit.mean(1)[:-1]
    assert below.all(), np.flatnonzero(~below)
    lens = decoder.logit_lens(text, k=3, tuned=True)
    assert lens.tuned and len(lens.rows) == decoder.num_layers + 1
    np.testing.assert_allclose(lens.kl, kl_tuned, rtol=1e-3, atol=2e-3)
    ordered = np.sort(tuned_logp, axis=-1)
    clear = ordered[..., -1] - ordered[..., -2] > 4e-3
    assert clear.mean() > 0.9
    np.testing.assert_array_equal(lens.top_ids[..., 0][clear], tuned_logp.argmax(-1)[clear])
    np.testing.assert_array_equal(lens.top_ids[-1], decoder.logit_lens(text, k=3).top_ids[-1])


def test_it_was_fitted_on_the_models_own_text(decoder, tuned):
    """Every position of each prompt and the NEW_TOKENS sampled after it."""
    prompts = sum(len(decoder.encode(p)) for p in tl.TRAINING_PROMPTS)
    assert tuned.tokens == prompts + tl.NEW_TOKENS * len(tl.TRAINING_PROMPTS)
    assert tuned.translators.shape == (decoder.num_layers, decoder.d_model + 1, decoder.d_model)
    assert np.isfinite(tuned.translators).all()


def test_no_sublayers_with_the_tuned_lens(decoder, tuned):
    with raises_message("error.lens.tuned_sublayers"):
        decoder.logit_lens("a b c", sublayers=True, tuned=True)


# ---- kept on disk -----------------------------------------------------------------------------

def test_a_copy_on_disk_is_read_checked_and_a_damaged_one_fitted_again(decoder, tuned, tmp_path,
                                                                      monkeypatch):
    """The folder copied elsewhere is read whole ("verified", the same numbers); cut or with a
    byte changed it is found damaged (each reason's id). A fit kept on disk ("fitted") and
    loaded damaged from a copy is fitted again ("refitted", the reason said) to the same
    translators. Those two fits are small — two of the prompts, four sampled tokens each
    (TRAINING_PROMPTS and NEW_TOKENS, which the folder's stamp holds): what the disk does with
    a fit does not depend on its size."""
    folder = tl.cache_folder(decoder)
    assert folder.is_dir() and tl.cache_folder(decoder, tmp_path).parent == tmp_path
    copy = tl.cache_folder(decoder, tmp_path)
    shutil.copytree(folder, copy)
    shape = tuned.translators.shape
    read = tl._open_checked(copy, decoder, shape)
    assert read.outcome == "verified"
    np.testing.assert_array_equal(read.translators, tuned.translators)

    def damage(copy):
        data = copy / tl.FILE
        whole = data.read_bytes()
        data.write_bytes(whole[:-100])
        assert tl._open_checked(copy, decoder, shape).reason.msg_id == "model_cache.size"
        data.write_bytes(whole[:-1] + bytes([whole[-1] ^ 1]))
        assert tl._open_checked(copy, decoder, shape).reason.msg_id == "model_cache.checksum"

    damage(copy)
    monkeypatch.setattr(tl, "TRAINING_PROMPTS", tl.TRAINING_PROMPTS[:2])
    monkeypatch.setattr(tl, "NEW_TOKENS", 4)
    fitted = tl.load(decoder, tmp_path / "small")
    assert fitted.outcome == "fitted" and fitted.reason is None
    assert fitted.tokens == sum(len(decoder.encode(p)) for p in tl.TRAINING_PROMPTS) + 2 * 4
    small = tl.cache_folder(decoder, tmp_path / "small")
    assert small.name != copy.name                   # another stamp: another folder
    damaged = tl.cache_folder(decoder, tmp_path / "damaged")
    shutil.copytree(small, damaged)
    damage(damaged)

    stages = []
    again = tl.load(decoder, tmp_path / "damaged", progress=lambda s: stages.append(s.stage))
    assert again.outcome == "refitted" and again.reason.msg_id == "model_cache.checksum"
    assert {"damaged", "generating", "fitting", "writing", "done"} <= set(stages)
    np.testing.assert_allclose(again.translators, fitted.translators, atol=1e-4)
    assert tl._open_checked(damaged, decoder, shape).outcome == "verified"


def test_kept_reads_a_whole_copy_and_never_fits(decoder, tuned, tmp_path):
    """``kept``: None where no copy is (no fit started: no folder made) or a damaged one is;
    a whole copy read, the same numbers."""
    assert tl.kept(decoder, tmp_path / "none") is None
    assert not (tmp_path / "none").exists()
    copy = tl.cache_folder(decoder, tmp_path / "cut")
    shutil.copytree(tl.cache_folder(decoder), copy)
    (copy / tl.FILE).write_bytes((copy / tl.FILE).read_bytes()[:-100])
    assert tl.kept(decoder, tmp_path / "cut") is None
    shutil.copytree(tl.cache_folder(decoder), tl.cache_folder(decoder, tmp_path / "whole"))
    read = tl.kept(decoder, tmp_path / "whole")
    assert read.outcome == "verified"
    np.testing.assert_array_equal(read.translators, tuned.translators)


# ---- on the page -------------------------------------------------------------------------------

@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_lens_tab_shows_the_tuned_lens_beside_the_logit_lens(torch, decoder, hf_decoder,
                                                                  tuned, lang):
    """Trace the answer's lens tab with the tuned lens chosen: the grid writes transformers'
    tuned top token where it is clear, and the KL chart's two lines are both lenses' mean KL
    by layer, the tuned one below at every layer (the caption says 30 of 30)."""
    text = HELD_OUT[0]
    at = open_page("pages/trace.py", params={"lang": lang}, model="smollm2", sentence=text,
                   **{keys.LENS_KIND: "tuned"})
    no_exceptions(at)
    translators = np.asarray(tuned.translators, dtype=np.float64)
    logit, tuned_logp = hf_lenses(torch, hf_decoder, translators, decoder.config.rms_eps, text)
    [grid] = [f for f in charts(at) if f["data"] and f["data"][0]["type"] == "heatmap"
              and len(f["data"][0]["y"]) == 31]
    assert grid["layout"]["title"]["text"] == render("reading.lens.tuned.grid_title", lang)
    _, tok = hf_decoder
    ordered = np.sort(tuned_logp, axis=-1)
    clear = ordered[..., -1] - ordered[..., -2] > 4e-3
    best = tuned_logp.argmax(-1)                                      # (L + 1, n)
    written = np.array(grid["data"][0]["text"], dtype=object)        # (L + 1, n), lens order
    for r, i in zip(*np.nonzero(clear)):
        shown = token_shown(tok.decode([best[r, i]]))                  # ␣, ↵ …
        cut = shown if len(shown) <= 6 else shown[:5] + "…"           # a cell holds 6 characters
        assert written[r, i] == cut, (r, i)
    [kl] = [f for f in charts(at) if len(f["data"]) == 2 and f["data"][0]["type"] == "scatter"]
    lines = {trace["name"]: decode(trace["y"]) for trace in kl["data"]}
    logit_name, tuned_name = (render(f"reading.lens.kind.option.{k}", lang)
                              for k in ("logit", "tuned"))
    np.testing.assert_allclose(lines[logit_name], kl_from_last(logit).mean(1),
                               rtol=1e-3, atol=2e-3)
    np.testing.assert_allclose(lines[tuned_name], kl_from_last(tuned_logp).mean(1),
                               rtol=1e-3, atol=2e-3)
    with use_language(lang):
        assert shows(at.caption, "reading.lens.tuned.kl_caption", below=30, layers=30)
        assert shows(at.caption, "reading.lens.tuned.caption", tokens=tuned.tokens)


def test_a_link_brings_the_tuned_lens_back(tuned):
    """A link with lens_kind=tuned opens the lens tab on the tuned lens (its grid and the KL
    chart); an unknown kind opens the logit lens."""
    from tests.apptest_helpers import open_page

    at = open_page("pages/trace.py",
                   params={"model": "smollm2", "sentence": HELD_OUT[1], "lens_kind": "tuned"})
    no_exceptions(at)
    assert at.session_state[keys.LENS_KIND] == "tuned"
    titles = [f["layout"]["title"]["text"] for f in charts(at)]
    assert render("reading.lens.tuned.grid_title", "en") in titles
    assert any(title.startswith("KL(") for title in titles), titles
    other = open_page("pages/trace.py",
                      params={"model": "smollm2", "sentence": HELD_OUT[1], "lens_kind": "bogus"})
    no_exceptions(other)
    assert other.session_state[keys.LENS_KIND] == "logit"
    assert render("reading.lens.grid_title", "en") in [
        f["layout"]["title"]["text"] for f in charts(other)]


def test_a_tuned_lens_that_cannot_be_had_is_said_and_the_logit_lens_shown(monkeypatch):
    """When the fit fails (here: the error a model with a non-finite logit gives), the tab
    says so in an error and draws the logit lens, no traceback; the next visit tries again."""
    from attnviz.models.decoders.decoder import MODEL_NAME, DecoderModel
    from attnviz.models.finite import not_finite

    def broken(self, cache_dir=None, progress=None):
        raise not_finite(MODEL_NAME, "logits")

    queue = on_a_queue_of_its_own(monkeypatch)
    monkeypatch.setattr(tl, "kept", lambda model, cache=None: None)
    monkeypatch.setattr(DecoderModel, "tuned_lens", broken)
    at = open_page("pages/trace.py", params={"lang": "en"}, model="smollm2", sentence=HELD_OUT[1],
                   **{keys.LENS_KIND: "tuned"})
    button(at, render("reading.lens.tuned.fit", "en")).click().run()
    said = [shows(at.error, "reading.lens.tuned.failed")]      # failed at once, or …
    assert queue.wait_idle(30)
    at.run()
    no_exceptions(at)
    said.append(shows(at.error, "reading.lens.tuned.failed"))  # … said in the next run
    assert said in ([True, False], [False, True]), said
    titles = [f["layout"]["title"]["text"] for f in charts(at)]
    assert render("reading.lens.grid_title", "en") in titles
    assert not any(title.startswith("KL(") for title in titles)
    at.run()                                    # said once; the button offers the fit again
    no_exceptions(at)
    assert not at.error
    assert render("reading.lens.tuned.fit", "en") in [b.label for b in at.button]


def on_a_queue_of_its_own(monkeypatch):
    """The server's queue for heavy work, a new one for this test (one worker)."""
    from attnviz.models import heavy

    queue = heavy.HeavyQueue(workers=1)
    monkeypatch.setattr(heavy, "default_queue", lambda: queue)
    return queue


# ---- what the learner is told -------------------------------------------------------------------

def identity_lens(decoder, outcome: str, reason=None):
    """A TunedLens whose translators only divide each stream by its RMS (which the final norm
    undoes): the logit lens's numbers, without a minute's fit."""
    d = decoder.d_model
    translators = np.zeros((decoder.num_layers, d + 1, d), np.float32)
    translators[:, :d] = np.eye(d, dtype=np.float32)
    return tl.TunedLens(translators, 1, decoder.config.rms_eps, outcome, reason)


def slow_fit(found, fitted: list):
    """DecoderModel.tuned_lens as a fit of a second that ends in `found` (added to `fitted`)."""
    import time

    def fit(self, cache_dir=None, progress=None):
        tell = progress or (lambda stage: None)
        tell(tl.TunedProgress("generating", 0, 16))
        time.sleep(1.0)
        fitted.append(found)
        tell(tl.TunedProgress("done"))
        return found

    return fit


def notices(at, msg_id: str) -> int:
    return sum(shows([info], msg_id) for info in at.info)


@pytest.mark.parametrize("outcome, reason, msg_id", [
    ("refitted", "model_cache.checksum", "reading.lens.tuned.refitted"),
    ("in_memory", "model_cache.missing", "reading.lens.tuned.in_memory"),
    ("in_memory", None, "reading.lens.tuned.not_kept"),
])
def test_how_a_fit_ended_is_said_once_to_the_learner_who_waited_for_it(
        monkeypatch, decoder, outcome, reason, msg_id):
    """The learner whose page waited for the fit is told, once, that a damaged copy was fitted
    again or that the fit cannot be kept on disk; their next rerun and a later learner, who
    get the lens at once, are not (issue 34: the notice was shown to every later learner)."""
    from attnviz.i18n import Message
    from attnviz.models.decoders.decoder import DecoderModel

    found = identity_lens(decoder, outcome,
                          None if reason is None else Message(reason, file=tl.FILE))
    fitted = []
    queue = on_a_queue_of_its_own(monkeypatch)
    monkeypatch.setattr(tl, "kept", lambda model, cache=None: fitted[0] if fitted else None)
    monkeypatch.setattr(DecoderModel, "tuned_lens", slow_fit(found, fitted))
    state = dict(model="smollm2", sentence=f"Told once: {msg_id}", **{keys.LENS_KIND: "tuned"})
    waited = open_page("pages/trace.py", params={"lang": "en"}, **state)
    button(waited, render("reading.lens.tuned.fit", "en")).click().run()
    assert queue.wait_idle(30) and fitted
    waited.run()
    assert notices(waited, msg_id) == 1, [i.value for i in waited.info]
    waited.run()
    no_exceptions(waited)
    later = open_page("pages/trace.py", params={"lang": "en"}, **state)
    for at in (waited, later):
        assert not any(shows([i], m) for i in at.info for m in (
            "reading.lens.tuned.refitted", "reading.lens.tuned.in_memory",
            "reading.lens.tuned.not_kept")), [i.value for i in at.info]
        assert render("reading.lens.tuned.grid_title", "en") in [
            f["layout"]["title"]["text"] for f in charts(at)]


def test_a_read_only_cache_cannot_keep_a_fit(decoder, tmp_path):
    """can_keep: True where the cache's folder can be made, False in a read-only place (as a
    baked image's cache is to its server)."""
    import os
    import subprocess

    place = tmp_path / "cache"
    place.mkdir()
    assert tl.can_keep(decoder, place) and tl.can_keep(decoder, place / "not" / "yet")
    if os.geteuid() == 0:                # root writes through permissions: make it immutable
        made = subprocess.run(["chattr", "+i", str(place)], capture_output=True)
        if made.returncode != 0:
            pytest.skip(f"cannot make a read-only folder here: {made.stderr!r}")
    else:
        place.chmod(0o555)
    try:
        assert not tl.can_keep(decoder, place)
        assert not tl.can_keep(decoder, place / "not" / "yet")
    finally:
        subprocess.run(["chattr", "-i", str(place)], capture_output=True)
        place.chmod(0o755)


def test_the_fit_starts_only_on_a_press_once_for_every_learner(decoder, monkeypatch):
    """A link with lens_kind=tuned and no tuned lens at hand starts no fit: the logit lens and
    the button "Fit the tuned lens"; a press puts one job on the server's queue, a second
    learner's press joins it (one fit), and the fit stops once both have cancelled."""
    import threading
    import time

    from attnviz.models.decoders.decoder import DecoderModel
    from tests.apptest_helpers import open_page

    queue = on_a_queue_of_its_own(monkeypatch)
    monkeypatch.setattr(tl, "kept", lambda model, cache=None: None)
    fits, ended = [], threading.Event()

    def fitting(model, cache_dir=None, progress=None):    # a fit that runs until stopped
        fits.append(model.path)
        try:
            for i in range(10_000):
                progress(tl.TunedProgress("generating", i % 16, 16))
                time.sleep(0.02)
        finally:
            ended.set()

    monkeypatch.setattr(DecoderModel, "tuned_lens", fitting)
    link = {"model": "smollm2", "sentence": HELD_OUT[0], "lens_kind": "tuned"}
    learners = [open_page("pages/trace.py", params=link) for _ in range(2)]
    for at in learners:
        no_exceptions(at)
        assert shows(at.info, "reading.lens.tuned.not_fitted")
        assert render("reading.lens.grid_title", "en") in [
            f["layout"]["title"]["text"] for f in charts(at)]
    assert queue.started == 0 and queue.status() == (0, 0) and not fits

    for at in learners:
        button(at, render("reading.lens.tuned.fit", "en")).click().run()
        no_exceptions(at)
        assert shows(at.caption, "reading.lens.tuned.other_tabs")
    jobs = [at.session_state[keys.LENS_TUNED_JOB][1] for at in learners]
    assert jobs[0] is jobs[1] and len(jobs[0].learners) == 2
    deadline = time.monotonic() + 30
    while not fits and time.monotonic() < deadline:
        time.sleep(0.05)
    assert fits == [decoder.path] and queue.started == 1

    cancel = render("reading.lens.tuned.stop", "en")
    button(learners[0], cancel).click().run()
    assert shows(learners[0].info, "reading.lens.tuned.cancelled")
    assert not ended.wait(1.5) and jobs[0].running          # the other learner still waits
    button(learners[1], cancel).click().run()
    assert ended.wait(10) and queue.wait_idle(10)
    assert jobs[0].ended == "stopped" and fits == [decoder.path]
    assert render("reading.lens.tuned.fit", "en") in [b.label for b in learners[1].button]
