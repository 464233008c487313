"""The views only some models have, and which of them the pages offer for a model: decided by
what the registry says the model is (``entry.causal``, ``entry.lm_head``), so a new entry —
one of ``registry.ENTRIES`` or a model file added to the choice — is offered every view its
model can give, and no page compares a model's name. How a page shows a model is the app's
concern: the registry (attnviz.models.catalogue.registry) keeps what a model is.

    model_views.offers(entry, model_views.LENS)     # True for SmolLM2, False for MiniLM
"""

from __future__ import annotations

from attnviz.models.catalogue.registry import ModelEntry

COMPARE = "compare"          # Pretrained model: a second sentence's attention beside the first's
EMBEDDING = "embedding"      # Read the model, ablation: what heads do to the sentence embedding
SINK = "sink"                # the first token as the attention sink (head statistics, values)
NEXT_TOKEN = "next_token"    # Read the model, ablation: what heads do to the next token
LENS = "lens"                # Read the model: the logit lens (every layer read as the last)
VIEWS = (COMPARE, EMBEDDING, SINK, NEXT_TOKEN, LENS)


def views(entry: ModelEntry) -> frozenset[str]:
    """The views of VIEWS the pages offer for `entry`'s model: an encoder's (not causal) pooled
    sentence embedding and a second sentence beside the first; a causal model's first token
    as the sink, and with a language-model head the next token and the logit lens."""
    if not entry.causal:
        return frozenset({COMPARE, EMBEDDING})
    return frozenset({SINK, NEXT_TOKEN, LENS} if entry.lm_head else {SINK})


def offers(entry: ModelEntry, view: str) -> bool:
    """Whether the pages offer `view` (one of VIEWS; ValueError otherwise) for `entry`."""
    if view not in VIEWS:
        raise ValueError(f"unknown view {view!r}: one of {VIEWS}")
    return view in views(entry)
