"""A tiny Llama-architecture GGUF as llama.cpp's converter writes SmolLM2's:
tests/tiny_decoders.py's `llama` (its metadata keys, byte-level BPE vocabulary with SmolLM2's
three control tokens at ids 0, 1, 2, W_Q and W_K rows permuted for llama.cpp's rotary layout,
matrices in float16 and norms in float32) at d_model 16: two layers, 4 heads over 2 K/V heads,
converted, checked and rebuilt in milliseconds, so the converted-model cache's damage and repair
can be tested on it (tests/test_model_cache.py).

`write` returns the weights in transformers' layout (W_Q/W_K unpermuted, the float16 values
as float32), from which `reference_logits` computes the logits with transformers'
LlamaForCausalLM built from those weights (not from the file): an independent computation of
the same model."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from tests import tiny_decoders

SPEC = dataclasses.replace(tiny_decoders.SPECS["llama"], d_model=16, d_ff=24, head_dim=4)
SIZES = dict(num_layers=SPEC.num_layers, num_heads=SPEC.num_heads,
             num_kv_heads=SPEC.num_kv_heads, d_model=SPEC.d_model, d_ff=SPEC.d_ff)


def tokens() -> list[str]:
    return tiny_decoders.vocab("llama").tokens


def write(path: Path, seed: int = 0) -> dict[str, np.ndarray]:
    """The tiny model's GGUF (F16) at `path`; its weights in transformers' layout."""
    return tiny_decoders.write(path, "llama", "F16", seed, SPEC).weights


def reference_logits(torch, w: dict[str, np.ndarray], ids: list[int]) -> np.ndarray:
    """(n, vocab) float32: transformers' LlamaForCausalLM (eager, float32) with weights `w`
    on the token ids `ids`."""
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=len(tokens()), hidden_size=SPEC.d_model,
                         intermediate_size=SPEC.d_ff, num_hidden_layers=SPEC.num_layers,
                         num_attention_heads=SPEC.num_heads,
                         num_key_value_heads=SPEC.num_kv_heads, rms_norm_eps=SPEC.rms_eps,
                         rope_theta=SPEC.rope_base, max_position_embeddings=SPEC.context,
                         tie_word_embeddings=True, attn_implementation="eager")
    model = LlamaForCausalLM(config).eval()
    missing, unexpected = model.load_state_dict({k: torch.from_numpy(v) for k, v in w.items()},
                                                strict=False)
    assert (missing, unexpected) == (["lm_head.weight"], []), (missing, unexpected)  # tied
    with torch.no_grad():
        return model(torch.tensor([ids])).logits[0].numpy()
