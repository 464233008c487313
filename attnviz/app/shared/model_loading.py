"""A causal model (SmolLM2) for every page that needs it: :func:`decoder`, called after the
page's title.

The model is loaded once per server process, in a thread of its own, while each page waiting
for it shows how far the load is (checking the cache on disk, reading the GGUF, converting layer
by layer, writing) and, when the cache was found damaged, says so and that it is being rebuilt;
once loaded, a page that waited for a repair says, in a short notice, that it was rebuilt
(:func:`tell_repair`, the one rule of who is told, which the tuned lens's fit follows too).

Why a thread: a page's run can be interrupted at any element it updates (the learner clicks
and Streamlit raises its rerun exception there), and a conversion interrupted that way would
start again at the next run. In its own thread it goes on to the end; every session that
arrives meanwhile watches the same load."""

from __future__ import annotations

import threading

import streamlit as st

from attnviz.core.errors import AttnvizInputError
from attnviz.i18n import t
from attnviz.models.catalogue import registry
from attnviz.models.decoders.decoder import DecoderModel
from attnviz.models.decoders.gguf_llama import LoadProgress
from attnviz.app.shared.text import code, literal

QUIET_WAIT = 0.1            # s: a load done sooner (the model was loaded) shows no indicator
POLL = 0.2                  # s between two updates of the indicator
INSTALL = registry.language_model().install     # the Generate page's model's


class _Load:
    """One load of `entry`'s model in a thread of its own: its latest stage, the damage it
    found, and then the model or the error."""

    def __init__(self, entry: registry.ModelEntry) -> None:
        self.entry = entry
        self.stage: LoadProgress | None = None
        self.damage = None                       # a Message, once a damaged cache was found
        self.model: DecoderModel | None = None
        self.error: Exception | None = None
        self.done = threading.Event()
        threading.Thread(target=self._run, name="attnviz-decoder-load", daemon=True).start()

    def _run(self) -> None:
        try:
            self.model = self.entry.load(progress=self._tell)
        except Exception as exc:                 # shown by the pages that wait for it
            self.error = exc
        finally:
            self.done.set()

    def _tell(self, stage: LoadProgress) -> None:
        if stage.stage == "damaged":
            self.damage = stage.reason
        self.stage = stage


_LOCK = threading.Lock()
_loads: dict[str, _Load] = {}          # a model's name → its load


def _the_load(entry: registry.ModelEntry) -> _Load:
    """The process's load of `entry`'s model: the one running or done, or a new one after a
    failed one (the package may have been installed since)."""
    with _LOCK:
        load = _loads.get(entry.name)
        if load is None or (load.done.is_set() and load.error is not None):
            load = _loads[entry.name] = _Load(entry)
        return load


def decoder(entry: registry.ModelEntry | None = None, *,
            stop: bool = True) -> DecoderModel | None:
    """The causal model of `entry` (default: registry.language_model(), SmolLM2), loaded once
    per process, with a progress indicator while it loads. When it cannot load, the reason is
    shown and the page stops (None is returned instead when `stop` is False: the rest of the
    page goes on)."""
    load = _the_load(entry or registry.language_model())
    # a run that met the load unfinished sees what it found (a repair, however quick: a small
    # model's is done within QUIET_WAIT); runs after it, of any session, do not
    met = not load.done.is_set()
    if not load.done.wait(QUIET_WAIT):
        _watch(load)
    if load.error is not None:
        _show_error(load.entry, load.error)
        if stop:
            st.stop()
        return None
    tell_repair(load.model.cache_report, "model_loading", waited=met, show=st.warning,
                icon=":material/build:")
    # the process's model as its loader shares it (loaded by now: no wait), the one every
    # other caller of the page gets too
    return load.entry.load()


def tell_repair(found, messages: str, *, waited: bool, not_kept: bool = False, show=None,
                **options) -> None:
    """Who is told of a repair, one rule for the work a page waits for (the model's load, the
    tuned lens's fit on Read the model): the learner whose page waited for the work — a run
    that met the load unfinished, a session that asked for the fit — is told, once, when it is
    done; a run that gets the result at once (a later rerun, any other session) is not: the
    repair is news only to who waited (issue 34: it was said to every later learner).

    found: the work's result, with its `outcome` and `reason` (a Message saying what was found
    damaged, or None): the model's ``CacheReport``, a ``TunedLens``. A damaged copy made again
    or kept in memory is said with the message `messages`.<outcome> (the reason in it); with
    `not_kept`, a result kept in memory with nothing damaged (the copy cannot be written here)
    with `messages`.not_kept. `show`: st.info (the default) or st.warning, given `options`
    (an icon)."""
    if not waited:
        return
    show = show or st.info
    if found.reason is not None:
        show(t(f"{messages}.{found.outcome}", reason=literal(found.reason)), **options)
    elif not_kept and found.outcome == "in_memory":
        show(t(f"{messages}.not_kept"), **options)


def _watch(load: _Load) -> None:
    """A status box following the load until it is done, then removed."""
    holder = st.empty()
    status = holder.status(t("model_loading.loading", model=load.entry.shown), expanded=True)
    bar = status.progress(0.0)
    shown = None
    while not load.done.wait(POLL):
        stage = load.stage
        if stage is not None and stage != shown:
            # expanded each time: an update without it folds the box, hiding the bar
            status.update(label=_label(load.entry.shown, stage, load.damage), expanded=True)
            bar.progress(stage.fraction, text=_step(stage))
            shown = stage
    holder.empty()


def _label(model: str, stage: LoadProgress, damage) -> str:
    if damage is not None:
        return t("model_loading.damaged", reason=literal(damage))
    if stage.stage in ("reading", "converting", "writing"):
        return t("model_loading.converting", model=model)
    if stage.stage == "verifying":
        return t("model_loading.verifying", model=model)
    return t("model_loading.loading", model=model)


def _step(stage: LoadProgress) -> str | None:
    if stage.stage == "reading":
        return t("model_loading.reading")
    if stage.stage == "converting":
        return t("model_loading.layer", layer=stage.layer, layers=stage.layers)
    if stage.stage == "writing":
        return t("model_loading.writing")
    return None


def _show_error(entry: registry.ModelEntry, exc: Exception) -> None:
    if isinstance(exc, AttnvizInputError):
        st.error(t("model_loading.error", model=entry.shown, error=literal(exc)))
    else:                                        # a broken install: never a traceback
        st.error(t("model_loading.failed", model=entry.shown,
                   error=literal(f"{type(exc).__name__}: {exc}"), command=code(entry.install)))
