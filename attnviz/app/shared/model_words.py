"""A model's words on the pages: the sidebar's option and each page's caption. A built-in
model's are its own catalogue entries (``sidebar.model_choice.option.<name>``,
``pretrained.caption.<name>``, ``reading.caption.<name>``, the name's hyphens as underscores); a server's own GGUF file
(``ATTNVIZ_MODELS``) has one wording for every such file, naming the model and its file."""

from __future__ import annotations

from attnviz.i18n import t
from attnviz.models.catalogue.registry import ModelEntry, ModelSizes

TERMS_URL = "ai.google.dev/gemma/terms"      # the Gemma Terms of Use, as its NOTICE names them
LICENCES = "attnviz/models/catalogue/licences"         # where the terms and NOTICE ship


def entry_text(kind: str, entry: ModelEntry) -> str:
    """`kind` ("sidebar.model_choice.option", "pretrained.caption" or "reading.caption") for
    the model of `entry`; a caption of a model used under terms ends with their notice (the
    option names them)."""
    if entry.file is None:                       # an id's parts are words: gemma3-270m → gemma3_270m
        text = t(f"{kind}.{entry.name.replace('-', '_')}")
        if entry.terms is not None and kind != "sidebar.model_choice.option":
            text += " " + t("model.terms_notice", terms_url=TERMS_URL, licences=LICENCES)
        return text
    sizes = entry.sizes()
    return t(f"{kind}.local", model=entry.shown, file=entry.file.name,
             command="attnviz app --model", layers=sizes.num_layers, heads=sizes.num_heads,
             kv_heads=sizes.num_kv_heads, d_model=sizes.d_model)


def named(entry: ModelEntry) -> str:
    """The model's name as a page's words say it: with the terms it is used under, where it
    has some ("Gemma 3 270M (Gemma Terms of Use)")."""
    if entry.terms is None:
        return entry.shown
    return t("model.with_terms", model=entry.shown, terms=t(f"model.terms.{entry.terms}"))


def rope_words(sizes: ModelSizes | None, model: str, one: str, per_kind: str) -> str:
    """How `model` (of `sizes`) turns Q and K: message `one` ({model}, {base}: its base), or
    where its sliding-window layers have another base than its global ones, `per_kind`
    ({model}, {local}: the sliding-window layers' base, {base}: the global layers', {layers}:
    theirs)."""
    bases = sorted(set(sizes.rope_bases)) if sizes and sizes.rope_bases else []
    if len(bases) <= 1:
        return t(one, model=model,
                 base=f"{int(sizes.rope_base):,}" if sizes and sizes.rope_base else "")
    global_layers = [i for i, b in enumerate(sizes.rope_bases) if b == sizes.rope_base]
    local = next(b for b in bases if b != sizes.rope_base)
    return t(per_kind, model=model, local=f"{int(local):,}", base=f"{int(sizes.rope_base):,}",
             layers=", ".join(map(str, global_layers)))
