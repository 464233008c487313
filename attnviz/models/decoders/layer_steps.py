"""A real decoder layer step by step as its model has it: the engine's trace of the layer's
attention (``DecoderRun.trace``) with what the model's config puts around it — Gemma 3's
scaled embeddings, the layer's kind (a sliding window of 512 keys, or every earlier key on the
global layers), the scale's source (query_pre_attn_scalar) and the norm after attention. A
Llama-family layer (SmolLM2) has none of them, and its steps stay the engine's own."""

from __future__ import annotations

import numpy as np

from attnviz.core.engine import LayerDesign, with_design
from attnviz.core.trace import AttentionTrace
from attnviz.models.decoders.decoder import DecoderModel, DecoderRun
from attnviz.models.decoders.gguf_llama import DecoderConfig
from attnviz.models.decoders.llama_layer import layer_attention_trace


def layer_design(config: DecoderConfig, layer: int, n: int) -> LayerDesign | None:
    """What layer `layer` adds around attention on a text of `n` tokens; None where it adds
    nothing (a Llama-family layer)."""
    kinds = set(config.layer_types)
    two_kinds = len(kinds) > 1 and config.sliding_window is not None
    window = config.window_of(layer)
    design = LayerDesign(
        layer=layer,
        kind=config.layer_types[layer] if two_kinds else None,
        window=window,
        full_layers=tuple(i for i, kind in enumerate(config.layer_types) if kind == "full")
        if two_kinds else (),
        attn_scalar=config.attn_scale ** -2 if config.attn_scale else None,
        embed_scale=float(config.embed_scale), d_model=config.d_model,
        post_norm=config.post_norms,
        window_applies=window is not None and n > window)
    return design if design != LayerDesign(layer=layer, d_model=config.d_model,
                                            window_applies=False) else None


def layer_trace(model: DecoderModel, run: DecoderRun, layer: int) -> AttentionTrace:
    """Layer `layer` of `run` step by step: ``run.trace(layer)`` with the layer's designs (see
    the module's docstring); for a Llama-family layer, ``run.trace(layer)`` itself."""
    traced = run.trace(layer)
    design = layer_design(model.config, layer, len(run.ids))
    if design is None:
        return traced
    return _with_design(model, traced, design, run.ids)


def edited_layer_trace(model: DecoderModel, run: DecoderRun, layer: int, x: np.ndarray,
                       w) -> AttentionTrace:
    """Layer `layer`'s attention on an edited input `x` (n, d_model) with edited weights `w`
    (a MultiHeadWeights): the layer's own computation (``layer_attention_trace``, the one
    ``run.trace`` makes) with the model's rotary base, scale, mask (its sliding window) and
    QK-norm gains, and its designs around it; with `x` and `w` the layer's own, it is
    ``layer_trace``. The engine's errors as they are (an overflow names its step)."""
    traced = layer_attention_trace(x, w, model.config, layer=layer,
                                   qk_norm_gains=model.qk_norm_gains(layer))
    design = layer_design(model.config, layer, x.shape[0])
    return traced if design is None else _with_design(model, traced, design, run.ids)


def _with_design(model: DecoderModel, traced: AttentionTrace, design: LayerDesign,
                 ids: np.ndarray) -> AttentionTrace:
    gain = model.attention_output_norm(design.layer)
    return with_design(
        traced, design,
        embedded=model.token_embeddings(ids) if design.embed_scale != 1.0 else None,
        post_norm=None if gain is None else (gain, model.config.rms_eps))
