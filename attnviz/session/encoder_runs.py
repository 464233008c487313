"""An encoder's runs (all-MiniLM-L6-v2's) as the app's pages share them: one run per model, text
and token limit, kept for recent texts, every session and page reading the same one. No
streamlit (session.build builds the Pretrained model input's view from it). The causal
model's runs are decoder_runs'."""

from __future__ import annotations

from functools import lru_cache

from attnviz.core.cache import SizedCache, arrays_in, nbytes
from attnviz.models.encoder.pretrained import MIN_TOKENS, PretrainedModel, PretrainedTrace

RUNS_MAX_BYTES = 256 * 2**20    # the runs kept, at most (the newest is always kept: one
RUNS_MAX_ENTRIES = 64           # 512-token run alone holds about 350 MB)


def _run_size(run: PretrainedTrace) -> int:
    """Bytes a run holds of its own (the layer weights its traces point to are the model's)."""
    return nbytes(run, skip=_model_arrays())


@lru_cache(maxsize=1)
def _model_arrays() -> frozenset[int]:
    model = PretrainedModel.load()
    return frozenset(id(a) for a in arrays_in(model))


_RUNS = SizedCache(RUNS_MAX_BYTES, RUNS_MAX_ENTRIES, size_of=_run_size)


def cached_encoder_run(text: str, max_tokens: int, model: PretrainedModel | None = None
                       ) -> PretrainedTrace:
    """``model.run(text, …)`` (default: ``PretrainedModel.load()``) with the token limit clamped
    to what the model takes (MIN_TOKENS … 512), kept for recent texts (within RUNS_MAX_BYTES)
    so every page and every session shares one run. Sessions asking for the same run at the
    same time wait for one computation of it. (The runs of a model other than the package's
    are measured with the weights they point to.)"""
    m = model if model is not None else PretrainedModel.load()
    limit = max(MIN_TOKENS, min(max_tokens, m.max_tokens))
    return _RUNS.get((str(m.path), text, limit), lambda: _whole_run(m, text, limit))


def _whole_run(model: PretrainedModel, text: str, limit: int) -> PretrainedTrace:
    """A run with its lazily stacked attentions made now, so the cache measures them."""
    run = model.run(text, limit)
    run.attentions
    return run
