"""The tiny GGUF decoders (tests/tiny_decoders.py, issue 37 part 4) are what they say: each
file holds exactly the metadata keys llama.cpp's convert_hf_to_gguf.py writes for its
architecture, its tensors read back by gguf's own reader equal what was written (exactly in
F32 and F16, within half a quantisation step in Q8_0 and Q6_K), transformers 5 loads every
(architecture, type) with exactly those weights, its tokenizers split English and Chinese with
the vocabulary's merges, and its models use the variation points the files are for (biases,
QK-norm, head_dim ≠ d_model / heads, one K/V head, sliding-window and global layers with their
RoPE bases). These are the fixtures attnviz's converters are checked against."""

from __future__ import annotations

import numpy as np
import pytest

from tests import tiny_decoders

PAIRS = [(a, t) for a in tiny_decoders.ARCHS for t in tiny_decoders.DTYPES]
ENGLISH, CHINESE = "This is the cat", "自注意力机制。"

# The keys convert_hf_to_gguf.py writes (read from llama.cpp's source, not from the module):
# TextModel.set_gguf_parameters for every architecture, LlamaModel's vocab_size and
# rope.dimension_count, key/value_length where the config has head_dim (Qwen3, Gemma 3),
# Gemma3Model's sliding_window; _set_vocab_gpt2 or _set_vocab_sentencepiece and SpecialVocab.
GENERAL = {"general.architecture", "general.type", "general.name", "general.file_type",
           "general.quantization_version"}
MODEL = {"block_count", "context_length", "embedding_length", "feed_forward_length",
         "attention.head_count", "attention.head_count_kv", "rope.freq_base",
         "attention.layer_norm_rms_epsilon"}
BPE = {"model", "pre", "tokens", "token_type", "merges", "bos_token_id", "eos_token_id"}
KEYS = {
    "llama": MODEL | {"vocab_size", "rope.dimension_count"},
    "qwen2": MODEL,
    "qwen3": MODEL | {"attention.key_length", "attention.value_length"},
    "gemma3": MODEL | {"attention.key_length", "attention.value_length",
                       "attention.sliding_window"},
}
TOKENIZER_KEYS = {
    "llama": BPE,
    "qwen2": BPE | {"padding_token_id"},
    "qwen3": BPE | {"padding_token_id"},
    "gemma3": {"model", "pre", "tokens", "scores", "token_type", "bos_token_id", "eos_token_id",
               "unknown_token_id", "padding_token_id", "add_bos_token", "add_eos_token",
               "add_space_prefix"},
}


def read(path):
    """(metadata, {name: (type name, float32 values in numpy's shape)}) by gguf's own reader."""
    from gguf import GGUFReader
    from gguf.quants import dequantize

    reader = GGUFReader(path)
    meta = {k: f.contents() for k, f in reader.fields.items() if not k.startswith("GGUF.")}
    tensors = {t.name: (t.tensor_type.name,
                        dequantize(t.data, t.tensor_type).reshape(tuple(reversed(t.shape))))
               for t in reader.tensors}
    return meta, tensors


def blocks(x: np.ndarray, size: int) -> np.ndarray:
    return x.reshape(-1, size)


@pytest.mark.slow                       # the session's 16 files: ~2 s for the first test
@pytest.mark.parametrize("arch, dtype", PAIRS)
def test_each_file_has_llama_cpps_keys_and_reads_back_as_written(tiny_decoders, arch, dtype):
    written = tiny_decoders[arch, dtype]
    meta, tensors = read(written.path)

    assert set(meta) == GENERAL | {f"{arch}.{k}" for k in KEYS[arch]} \
        | {f"tokenizer.ggml.{k}" for k in TOKENIZER_KEYS[arch]}
    for key, value in written.metadata.items():
        if isinstance(value, float):
            assert meta[key] == pytest.approx(value, rel=1e-7), key       # stored as float32
        else:
            assert meta[key] == value, key
    assert meta["general.architecture"] == arch

    assert tensors.keys() == written.tensors.keys()
    quantised = []
    for name, x in written.tensors.items():
        kind, back = tensors[name]
        assert back.shape == x.shape, name
        if x.ndim == 1 or dtype == "F32":
            assert kind == "F32" and np.array_equal(back, x), name        # norms, biases: F32
        elif dtype == "F16":
            assert kind == "F16" and np.array_equal(back, x.astype(np.float16)), name
        elif dtype == "Q8_0":
            # 32 values share the step d = amax / 127: each rounded to within d / 2, then the
            # step stored as float16 (within d·2^-11), which a value of up to 127 steps carries
            assert kind == "Q8_0", name
            amax = np.abs(blocks(x, 32)).max(axis=1, keepdims=True)
            err = np.abs(blocks(back - x, 32))
            assert (err <= amax / 254 + amax * 2 ** -11).all(), name
            quantised.append(err.max())
        else:                                 # 16 values share a 6-bit step, scaled per 256
            assert kind == "Q6_K", name
            amax = np.abs(blocks(x, 16)).max(axis=1)
            block_step = np.abs(blocks(x, 256)).max(axis=1) / 31 / 127 * (1 + 2 ** -10)
            bound = (amax / 31 + np.repeat(block_step, 16)) / 2
            err = np.abs(blocks(back - x, 16)).max(axis=1)
            assert (err <= bound * (1 + 1e-6)).all(), name
            quantised.append(err.max())
    if dtype in ("Q8_0", "Q6_K"):
        assert min(quantised) > 0                     # every matrix was really quantised


# ---- transformers reads them -------------------------------------------------------------------

@pytest.mark.parametrize("arch, dtype", PAIRS)
def test_transformers_loads_each_file_with_the_weights_written(hf_tiny_decoders, tiny_decoders,
                                                               arch, dtype):
    """Every tensor lands where write() says (names, Llama's unpermuted W_Q/W_K, Gemma's norms
    less 1), exactly: transformers dequantises with the same gguf functions. In F32 and F16 that
    is the random weights drawn (float16 values): the layout and the conventions round-trip."""
    model, _ = hf_tiny_decoders[arch, dtype]
    written = tiny_decoders[arch, dtype]
    state = {k: v.numpy() for k, v in model.state_dict().items()}
    assert set(state) - set(written.weights) <= {"lm_head.weight"}
    assert set(written.weights) <= set(state)
    for name, value in written.weights.items():
        assert np.array_equal(state[name], value), name
        if dtype in ("F32", "F16"):
            assert np.array_equal(state[name], written.original[name]), name
    assert np.array_equal(model.get_output_embeddings().weight.detach().numpy(),
                          written.weights["model.embed_tokens.weight"])       # tied


@pytest.mark.parametrize("arch, dtype", PAIRS)
def test_each_tokenizer_splits_english_and_chinese_with_the_vocabularys_merges(
        hf_tiny_decoders, arch, dtype):
    _, tokenizer = hf_tiny_decoders[arch, dtype]
    tokens = tiny_decoders.vocab(arch).tokens
    spm = arch == "gemma3"
    for text, whole in ((ENGLISH, " the"), (CHINESE, "自注意力")):
        ids = tokenizer(text)["input_ids"]
        assert ids[0] == tokens.index("<bos>") if spm else ids[0] != tokenizer.bos_token_id
        piece = whole.replace(" ", "▁") if spm else \
            "".join(tiny_decoders.byte_alphabet()[b] for b in whole.encode())
        assert tokens.index(piece) in ids                              # one token
        assert tokenizer.decode(ids, skip_special_tokens=True) == text
    pieces = tokenizer.convert_ids_to_tokens(tokenizer(CHINESE)["input_ids"])
    full_stop = ["<0xE3>", "<0x80>", "<0x82>"] if spm else ["ã", "Ģ", "Ĥ"]
    assert pieces[-3:] == full_stop                     # 。 is in no vocabulary: its 3 bytes


def test_the_models_use_the_variation_points(hf_tiny_decoders):
    llama, qwen2, qwen3, gemma3 = (hf_tiny_decoders[a, "F32"][0] for a in tiny_decoders.ARCHS)

    assert (llama.config.head_dim, llama.config.num_key_value_heads) == (64, 2)
    assert llama.model.layers[0].self_attn.q_proj.bias is None

    attention = qwen2.model.layers[1].self_attn
    assert all(getattr(attention, f"{x}_proj").bias is not None for x in "qkv")
    assert not hasattr(attention, "q_norm")

    c = qwen3.config
    assert c.head_dim == 128 != c.hidden_size // c.num_attention_heads
    assert tuple(qwen3.model.layers[0].self_attn.q_norm.weight.shape) == (128,)
    assert qwen3.model.layers[0].self_attn.q_proj.bias is None

    c = gemma3.config
    assert c.model_type == "gemma3_text"
    assert (c.head_dim, c.num_key_value_heads, c.sliding_window) == (256, 1, 4)
    assert c.head_dim != c.hidden_size // c.num_attention_heads
    assert c.query_pre_attn_scalar == c.head_dim                 # the scale llama.cpp uses too
    assert c.layer_types == ["sliding_attention"] * 5 + ["full_attention"]
    assert c.rope_parameters["full_attention"]["rope_theta"] == 1e6
    assert c.rope_parameters["sliding_attention"]["rope_theta"] == 1e4
    assert c.hidden_activation == "gelu_pytorch_tanh"
    assert float(gemma3.model.embed_tokens.embed_scale) == 16.0   # √d_model
    layer = gemma3.model.layers[0]
    for norm in ("post_attention_layernorm", "pre_feedforward_layernorm",
                 "post_feedforward_layernorm"):
        assert hasattr(layer, norm)
    assert hasattr(layer.self_attn, "q_norm") and hasattr(layer.self_attn, "k_norm")


# ---- the reference -----------------------------------------------------------------------------

def test_the_reference_is_transformers_on_the_file(hf_tiny_decoders):
    """logits, attention weights (causal rows summing to 1) and 20 greedy tokens each taking the
    argmax; F16 holds the same float16-exact weights as F32, so the same numbers exactly."""
    for arch in tiny_decoders.ARCHS:
        ref = tiny_decoders.reference(None, ENGLISH, loaded=hf_tiny_decoders[arch, "F32"])
        n, spec = len(ref.ids), tiny_decoders.SPECS[arch]
        assert ref.logits.shape == (n, len(tiny_decoders.vocab(arch).tokens))
        assert ref.attentions.shape == (spec.num_layers, spec.num_heads, n, n)
        np.testing.assert_allclose(ref.attentions.sum(axis=-1), 1, atol=1e-5)
        assert (ref.attentions[..., np.triu_indices(n, 1)[0], np.triu_indices(n, 1)[1]] == 0).all()
        assert len(ref.greedy) == 20 and ref.greedy[0] == int(ref.logits[-1].argmax())
        if arch == "gemma3":
            same = tiny_decoders.reference(None, ENGLISH, steps=0,
                                           loaded=hf_tiny_decoders[arch, "F16"])
            assert np.array_equal(same.logits, ref.logits)


def test_the_gemma3_window_is_four_keys_on_local_layers_and_all_on_the_global(
        hf_tiny_decoders):
    ref = tiny_decoders.reference(None, ENGLISH, steps=0, loaded=hf_tiny_decoders["gemma3",
                                                                                  "F32"])
    n = len(ref.ids)
    assert n >= 10
    back = np.subtract.outer(np.arange(n), np.arange(n))           # query i, key j: i - j
    for layer, weights in enumerate(ref.attentions):
        seen = weights > 0
        if layer < 5:
            assert (seen == ((back >= 0) & (back < 4))).all(), layer
        else:
            assert (seen == (back >= 0)).all(), layer
