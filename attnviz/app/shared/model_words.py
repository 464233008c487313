"""A model's words on the pages: the sidebar's option and each page's caption. A built-in
model's are its own catalogue entries (``sidebar.model_choice.option.<name>``,
``pretrained.caption.<name>``, ``reading.caption.<name>``); a server's own GGUF file
(``ATTNVIZ_MODELS``) has one wording for every such file, naming the model and its file."""

from __future__ import annotations

from attnviz.i18n import t
from attnviz.models.registry import ModelEntry


def entry_text(kind: str, entry: ModelEntry) -> str:
    """`kind` ("sidebar.model_choice.option", "pretrained.caption" or "reading.caption") for
    the model of `entry`."""
    if entry.file is None:
        return t(f"{kind}.{entry.name}")
    sizes = entry.sizes()
    return t(f"{kind}.local", model=entry.shown, file=entry.file.name,
             command="attnviz app --model", layers=sizes.num_layers, heads=sizes.num_heads,
             kv_heads=sizes.num_kv_heads, d_model=sizes.d_model)
