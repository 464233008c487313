"""A causal model's runs (SmolLM2's) as the app's pages share them: one run per model, text and
token limit, kept for recent texts, every session and page reading the same one (the Pretrained
model page's and Read the model's). No streamlit (session.build builds the Pretrained model
input's view from it). The encoder's runs are encoder_runs'."""

from __future__ import annotations

from attnviz.core.cache import SizedCache
from attnviz.models.decoders.decoder import MAX_TOKENS, DecoderModel, DecoderRun

RUNS_MAX_BYTES = 256 * 2**20     # a 64-token run holds about 26 MB (its logits: 12.6 MB)
RUNS_MAX_ENTRIES = 16


def _run_size(run: DecoderRun) -> int:
    """The run's arrays and its value norms (as many bytes as its attentions), which Read the
    model makes on the shared run: counted now, as the cache measures an entry once."""
    return run.nbytes + run.attentions.nbytes


_RUNS = SizedCache(RUNS_MAX_BYTES, RUNS_MAX_ENTRIES, size_of=_run_size)


def cached_decoder_run(text: str, max_tokens: int, model: DecoderModel | None = None
                       ) -> DecoderRun:
    """``model.run(text, max_tokens)`` (default: ``DecoderModel.load()``; the limit within
    1 … 512), computed once for every page and session asking for it."""
    m = model if model is not None else DecoderModel.load()
    limit = max(1, min(int(max_tokens), MAX_TOKENS))
    return _RUNS.get((str(m.path), text, limit), lambda: m.run(text, limit))
