"""A tiny Llama-architecture GGUF, written with gguf's own GGUFWriter as llama.cpp's converter
writes SmolLM2's: the same metadata keys, a byte-level BPE vocabulary (GPT-2's byte alphabet,
a few merges, SmolLM2's three control tokens at its ids 0, 1, 2), W_Q and W_K rows permuted
for llama.cpp's rotary layout, matrices in float16 and norms in float32. Two layers, d_model
16, 4 heads over 2 K/V heads: converted, checked and rebuilt in milliseconds, so the
converted-model cache's damage and repair can be tested on it (tests/test_model_cache.py).

`write` returns the weights in transformers' layout (W_Q/W_K unpermuted, the float16 values
as float32), from which `reference_logits` computes the logits with transformers'
LlamaForCausalLM: an independent computation of the same model."""

from __future__ import annotations

from pathlib import Path

import numpy as np

SIZES = dict(num_layers=2, num_heads=4, num_kv_heads=2, d_model=16, d_ff=24)
ROPE_BASE, RMS_EPS, CONTEXT = 10000.0, 1e-5, 2048
CONTROL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]          # ids 0, 1 (BOS), 2 (EOS)
MERGES = ["Ġ t", "h e", "Ġt he", "i s"]                           # " the" is one token


def byte_alphabet() -> list[str]:
    """GPT-2's bytes_to_unicode, written out again here: the character that spells each byte."""
    keep = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1),
            *range(ord("®"), ord("ÿ") + 1)]
    extra = iter(range(256, 512))
    return [chr(b) if b in keep else chr(next(extra)) for b in range(256)]


def tokens() -> list[str]:
    return CONTROL + byte_alphabet() + ["".join(m.split(" ")) for m in MERGES]


def _permute(w: np.ndarray, heads: int) -> np.ndarray:
    """llama.cpp's convert_hf_to_gguf.py LlamaModel.permute: each head's rows (2, d_k/2) written
    as (d_k/2, 2), so that rotary pairs are neighbours."""
    return w.reshape(heads, 2, w.shape[0] // heads // 2, *w.shape[1:]).swapaxes(1, 2) \
        .reshape(w.shape)


def weights(seed: int = 0) -> dict[str, np.ndarray]:
    """Random weights in transformers' Llama names and (out, in) layout, float32 values that
    float16 holds exactly (the GGUF stores the matrices as float16)."""
    rng = np.random.default_rng(seed)
    L, H, H_kv, d, f = (SIZES[k] for k in ("num_layers", "num_heads", "num_kv_heads",
                                           "d_model", "d_ff"))
    d_k = d // H

    def matrix(rows: int, cols: int) -> np.ndarray:
        return (rng.standard_normal((rows, cols)) / np.sqrt(cols)).astype(np.float16) \
            .astype(np.float32)

    def gain() -> np.ndarray:
        return (1 + 0.2 * rng.standard_normal(d)).astype(np.float32)

    w = {"model.embed_tokens.weight": matrix(len(tokens()), d) * 4,
         "model.norm.weight": gain()}
    for i in range(L):
        p = f"model.layers.{i}."
        w |= {p + "self_attn.q_proj.weight": matrix(H * d_k, d) * 2,
              p + "self_attn.k_proj.weight": matrix(H_kv * d_k, d) * 2,
              p + "self_attn.v_proj.weight": matrix(H_kv * d_k, d),
              p + "self_attn.o_proj.weight": matrix(d, H * d_k),
              p + "mlp.gate_proj.weight": matrix(f, d),
              p + "mlp.up_proj.weight": matrix(f, d),
              p + "mlp.down_proj.weight": matrix(d, f),
              p + "input_layernorm.weight": gain(),
              p + "post_attention_layernorm.weight": gain()}
    return w


def write(path: Path, seed: int = 0) -> dict[str, np.ndarray]:
    """The tiny model's GGUF at `path`; its weights in transformers' layout."""
    from gguf import GGUFWriter, TokenType

    w = weights(seed)
    H, H_kv = SIZES["num_heads"], SIZES["num_kv_heads"]
    out = GGUFWriter(str(path), "llama")
    out.add_name("tiny llama")
    out.add_block_count(SIZES["num_layers"])
    out.add_context_length(CONTEXT)
    out.add_embedding_length(SIZES["d_model"])
    out.add_feed_forward_length(SIZES["d_ff"])
    out.add_head_count(H)
    out.add_head_count_kv(H_kv)
    out.add_rope_freq_base(ROPE_BASE)
    out.add_layer_norm_rms_eps(RMS_EPS)
    out.add_rope_dimension_count(SIZES["d_model"] // H)
    out.add_tokenizer_model("gpt2")
    out.add_token_list(tokens())
    out.add_token_types([TokenType.CONTROL] * len(CONTROL)
                        + [TokenType.NORMAL] * (len(tokens()) - len(CONTROL)))
    out.add_token_merges(MERGES)
    out.add_bos_token_id(1)
    out.add_eos_token_id(2)

    def half(name: str) -> np.ndarray:
        return w[name].astype(np.float16)

    out.add_tensor("token_embd.weight", half("model.embed_tokens.weight"))
    for i in range(SIZES["num_layers"]):
        p, b = f"model.layers.{i}.", f"blk.{i}."
        out.add_tensor(b + "attn_q.weight", _permute(half(p + "self_attn.q_proj.weight"), H))
        out.add_tensor(b + "attn_k.weight", _permute(half(p + "self_attn.k_proj.weight"), H_kv))
        for gguf_name, hf_name in [("attn_v", "self_attn.v_proj"),
                                   ("attn_output", "self_attn.o_proj"),
                                   ("ffn_gate", "mlp.gate_proj"), ("ffn_up", "mlp.up_proj"),
                                   ("ffn_down", "mlp.down_proj")]:
            out.add_tensor(b + gguf_name + ".weight", half(p + hf_name + ".weight"))
        out.add_tensor(b + "attn_norm.weight", w[p + "input_layernorm.weight"])
        out.add_tensor(b + "ffn_norm.weight", w[p + "post_attention_layernorm.weight"])
    out.add_tensor("output_norm.weight", w["model.norm.weight"])
    out.write_header_to_file()
    out.write_kv_data_to_file()
    out.write_tensors_to_file()
    out.close()
    return w


def reference_logits(torch, w: dict[str, np.ndarray], ids: list[int]) -> np.ndarray:
    """(n, vocab) float32: transformers' LlamaForCausalLM (eager, float32) with weights `w`
    on the token ids `ids`."""
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=len(tokens()), hidden_size=SIZES["d_model"],
                         intermediate_size=SIZES["d_ff"],
                         num_hidden_layers=SIZES["num_layers"],
                         num_attention_heads=SIZES["num_heads"],
                         num_key_value_heads=SIZES["num_kv_heads"], rms_norm_eps=RMS_EPS,
                         rope_theta=ROPE_BASE, max_position_embeddings=CONTEXT,
                         tie_word_embeddings=True, attn_implementation="eager")
    model = LlamaForCausalLM(config).eval()
    missing, unexpected = model.load_state_dict({k: torch.from_numpy(v) for k, v in w.items()},
                                                strict=False)
    assert (missing, unexpected) == (["lm_head.weight"], []), (missing, unexpected)  # tied
    with torch.no_grad():
        return model(torch.tensor([ids])).logits[0].numpy()
