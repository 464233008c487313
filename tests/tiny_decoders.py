"""Tiny GGUF decoders of the four architectures attnviz reads — `llama`, `qwen2`, `qwen3`,
`gemma3` — written with gguf's own GGUFWriter as llama.cpp's convert_hf_to_gguf.py writes them
(the same metadata keys, tensor names from gguf's own name map), in F32, F16, Q8_0 and Q6_K,
with random weights drawn from a seed. Each loads in transformers 5
(``AutoModelForCausalLM.from_pretrained(folder, gguf_file=name)``), so `reference` gives an
independent computation of the same file: logits, attention weights and 20 greedy tokens.

The variation points each architecture exercises (SPECS):

- llama: W_Q and W_K rows permuted for llama.cpp's rotary layout (`_permute`: llama.cpp does it
  for Llama only; transformers undoes it), grouped-query heads, byte-level BPE (pre-tokenizer
  `smollm`, SmolLM2's three control tokens at ids 0, 1, 2).
- qwen2: biases on W_Q, W_K, W_V; its control tokens at the end of the vocabulary, as Qwen's are.
- qwen3: per-head RMS norms of queries and keys (QK-norm), head_dim 128 ≠ d_model / heads (128
  is Qwen3Config's default, and transformers reads no `qwen3.attention.key_length`: another
  head_dim does not load).
- gemma3: QK-norm, norms after attention and after the MLP too, embeddings scaled by √d_model
  (transformers does it; nothing in the file), GELU-tanh, every norm stored as 1 + w (llama.cpp
  adds 1 to Gemma's norms; transformers subtracts it), multi-query attention (1 K/V head),
  head_dim 256 ≠ d_model / heads, sliding-window layers with a window of 4 and one global layer
  (layers 0-4 local, 5 global: the GGUF carries no layer pattern, llama.cpp and transformers
  both put a global layer every sixth, hence six layers), RoPE base 1,000,000 on the global
  layer (`gemma3.rope.freq_base`) and 10,000 on the local ones (fixed in both readers: no key),
  SentencePiece-style vocabulary (`tokenizer.ggml.model = llama`, scores, token types, byte
  fallback `<0x00>`…`<0xFF>`).
  Its head_dim is 256 because the attention scale is not in the file either: llama.cpp scales
  by 1/√head_dim, transformers by 1/√query_pre_attn_scalar, whose default is 256; with
  head_dim 256 both read the same model (as Gemma 3 270M, whose head_dim is 256).

Sizes: d_model 256, d_ff 512: a K-quant's block is 256 values of a row, Q8_0's 32, so every
matrix of every architecture is quantised (llama.cpp would fall back to another type for a row
length they do not divide). gguf-py quantises F32, F16 and Q8_0 (`gguf.quants.quantize`) but no
K-quant (its Q4_K and Q6_K raise NotImplementedError): `quantize_q6_k` writes Q6_K blocks here
(one scale per 16 values, 6-bit values), read back by gguf's own `dequantize`. As llama.cpp
does, 1-D tensors (norms, biases) stay F32 in every file type.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

ARCHS = ("llama", "qwen2", "qwen3", "gemma3")
DTYPES = ("F32", "F16", "Q8_0", "Q6_K")
FILE_TYPE = {"F32": 0, "F16": 1, "Q8_0": 7, "Q6_K": 18}        # gguf.LlamaFileType


@dataclasses.dataclass(frozen=True)
class Spec:
    """One architecture's tiny shape and variation points."""
    arch: str
    num_layers: int = 2
    d_model: int = 256
    d_ff: int = 512
    num_heads: int = 4
    num_kv_heads: int = 2
    head_dim: int = 64
    rope_base: float = 10000.0
    rms_eps: float = 1e-5
    context: int = 2048
    qkv_bias: bool = False
    qk_norm: bool = False
    gemma: bool = False          # post-norms, 1 + w norms, √d_model, GELU-tanh, sliding window
    sliding_window: int | None = None
    pre: str = "smollm"          # tokenizer.ggml.pre of the byte-level vocabularies


SPECS = {
    "llama": Spec("llama"),
    "qwen2": Spec("qwen2", rope_base=1e6, rms_eps=1e-6, context=32768, qkv_bias=True,
                  pre="qwen2"),
    "qwen3": Spec("qwen3", head_dim=128, rope_base=1e6, rms_eps=1e-6, context=32768,
                  qk_norm=True, pre="qwen2"),
    "gemma3": Spec("gemma3", num_layers=6, num_kv_heads=1, head_dim=256, rope_base=1e6,
                   rms_eps=1e-6, context=32768, qk_norm=True, gemma=True, sliding_window=4),
}


# ---- vocabularies ------------------------------------------------------------------------------

WORDS = [" the", "is", "自注意力", "机制"]    # whole tokens in every vocabulary
BPE_CONTROL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
SPM_CONTROL = ["<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>", "<end_of_turn>"]
SPM_CHARS = "▁abcdefghijklmnopqrstuvwxyzT自注意力机制"


def byte_alphabet() -> list[str]:
    """GPT-2's bytes_to_unicode, written out again here: the character that spells each byte."""
    keep = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1),
            *range(ord("®"), ord("ÿ") + 1)]
    extra = iter(range(256, 512))
    return [chr(b) if b in keep else chr(next(extra)) for b in range(256)]


def _fold(parts: list[str], merges: list[str]) -> str:
    """Merge `parts` left to right, recording each merge once."""
    whole = parts[0]
    for part in parts[1:]:
        if f"{whole} {part}" not in merges:
            merges.append(f"{whole} {part}")
        whole += part
    return whole


def bpe_merges() -> list[str]:
    """Byte-level merges making each of WORDS one token: each character's bytes, then the
    characters ("Ġ t", "Ġt h", "Ġth e"; the three bytes of 自, …)."""
    spell = byte_alphabet()
    merges: list[str] = []
    for word in WORDS:
        chars = [_fold([spell[b] for b in c.encode()], merges) for c in word]
        _fold(chars, merges)
    return merges


def spm_pieces() -> list[str]:
    """SentencePiece pieces, best first: single characters, then WORDS built left to right."""
    pieces = list(SPM_CHARS)
    for word in WORDS:
        word = word.replace(" ", "▁")
        pieces += [word[:i] for i in range(2, len(word) + 1) if word[:i] not in pieces]
    return pieces


@dataclasses.dataclass(frozen=True)
class Vocab:
    tokens: list[str]
    types: list[int]             # gguf.TokenType
    scores: list[float] | None   # SentencePiece only
    merges: list[str] | None     # byte-level only
    bos: int
    eos: int
    unk: int | None = None
    pad: int | None = None


def vocab(arch: str) -> Vocab:
    from gguf import TokenType

    if arch == "gemma3":
        bytes_ = [f"<0x{b:02X}>" for b in range(256)]
        pieces = spm_pieces()
        return Vocab(tokens=SPM_CONTROL + bytes_ + pieces,
                     types=[TokenType.CONTROL] * 3 + [TokenType.UNKNOWN]
                     + [TokenType.CONTROL] * 2 + [TokenType.BYTE] * 256
                     + [TokenType.NORMAL] * len(pieces),
                     scores=[0.0] * (len(SPM_CONTROL) + 256) + [-float(i) for i in
                                                                range(len(pieces))],
                     merges=None, bos=2, eos=1, unk=3, pad=0)
    merges = bpe_merges()
    normal = byte_alphabet() + ["".join(m.split(" ")) for m in merges]
    kinds = [TokenType.NORMAL] * len(normal)
    if arch == "llama":                    # SmolLM2: control tokens first, BOS <|im_start|>
        return Vocab(tokens=BPE_CONTROL + normal, types=[TokenType.CONTROL] * 3 + kinds,
                     scores=None, merges=merges, bos=1, eos=2)
    end = len(normal)                      # Qwen: control tokens last, BOS = EOS = PAD
    return Vocab(tokens=normal + BPE_CONTROL, types=kinds + [TokenType.CONTROL] * 3,
                 scores=None, merges=merges, bos=end, eos=end, unk=None, pad=end)


# ---- weights -----------------------------------------------------------------------------------

def weights(spec: Spec, seed: int = 0) -> dict[str, np.ndarray]:
    """Random weights in transformers' names and (out, in) layout: float32 values float16 holds
    exactly. Norm weights are transformers' (Gemma's w of (1 + w), in [-0.5, 0.9])."""
    rng = np.random.default_rng(seed)
    d, f, hd = spec.d_model, spec.d_ff, spec.head_dim
    q_rows, kv_rows = spec.num_heads * hd, spec.num_kv_heads * hd

    def half(x: np.ndarray) -> np.ndarray:
        return x.astype(np.float16).astype(np.float32)

    def matrix(rows: int, cols: int, scale: float = 1.0) -> np.ndarray:
        return half(scale * rng.standard_normal((rows, cols)) / np.sqrt(cols))

    def gain(n: int) -> np.ndarray:
        g = 0.2 * rng.standard_normal(n)
        if spec.gemma:              # multiples of 2^-10: 1 + w and back are exact in float16
            return (np.round(np.clip(g, -0.5, 0.9) * 1024) / 1024).astype(np.float32)
        return half(1 + g)

    w = {"model.embed_tokens.weight": matrix(len(vocab(spec.arch).tokens), d, 4),
         "model.norm.weight": gain(d)}
    for i in range(spec.num_layers):
        p = f"model.layers.{i}."
        w |= {p + "self_attn.q_proj.weight": matrix(q_rows, d, 2),
              p + "self_attn.k_proj.weight": matrix(kv_rows, d, 2),
              p + "self_attn.v_proj.weight": matrix(kv_rows, d),
              p + "self_attn.o_proj.weight": matrix(d, q_rows),
              p + "mlp.gate_proj.weight": matrix(f, d),
              p + "mlp.up_proj.weight": matrix(f, d),
              p + "mlp.down_proj.weight": matrix(d, f),
              p + "input_layernorm.weight": gain(d),
              p + "post_attention_layernorm.weight": gain(d)}
        if spec.qkv_bias:
            w |= {p + f"self_attn.{x}_proj.bias": half(0.5 * rng.standard_normal(n))
                  for x, n in (("q", q_rows), ("k", kv_rows), ("v", kv_rows))}
        if spec.qk_norm:
            w |= {p + "self_attn.q_norm.weight": gain(hd), p + "self_attn.k_norm.weight": gain(hd)}
        if spec.gemma:
            w |= {p + "pre_feedforward_layernorm.weight": gain(d),
                  p + "post_feedforward_layernorm.weight": gain(d)}
    return w


def _permute(w: np.ndarray, heads: int) -> np.ndarray:
    """llama.cpp's convert_hf_to_gguf.py LlamaModel.permute: each head's rows (2, d_k/2) written
    as (d_k/2, 2), so that rotary pairs are neighbours."""
    return w.reshape(heads, 2, w.shape[0] // heads // 2, *w.shape[1:]).swapaxes(1, 2) \
        .reshape(w.shape)


def _unpermute(w: np.ndarray, heads: int) -> np.ndarray:
    return w.reshape(heads, w.shape[0] // heads // 2, 2, *w.shape[1:]).swapaxes(1, 2) \
        .reshape(w.shape)


def to_gguf(spec: Spec, w: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The tensors as llama.cpp's converter writes them: gguf's names, Llama's W_Q/W_K permuted,
    Gemma's norms as 1 + w (float32: exact, w being float16 in [-0.5, 0.9])."""
    from gguf import MODEL_ARCH_NAMES, get_tensor_name_map

    arch = next(a for a, name in MODEL_ARCH_NAMES.items() if name == spec.arch)
    names = get_tensor_name_map(arch, spec.num_layers)
    out = {}
    for hf_name, value in w.items():
        stem, suffix = hf_name.rsplit(".", 1)
        name = names.get_name(stem) + "." + suffix
        if spec.arch == "llama" and name.endswith("attn_q.weight"):
            value = _permute(value, spec.num_heads)
        elif spec.arch == "llama" and name.endswith("attn_k.weight"):
            value = _permute(value, spec.num_kv_heads)
        elif spec.gemma and name.endswith("norm.weight"):
            value = value + np.float32(1)
        out[name] = value
    return out


def from_gguf(spec: Spec, tensors: dict[str, np.ndarray], hf_names) -> dict[str, np.ndarray]:
    """`to_gguf` undone: transformers' names `hf_names` and layout."""
    from gguf import MODEL_ARCH_NAMES, get_tensor_name_map

    arch = next(a for a, name in MODEL_ARCH_NAMES.items() if name == spec.arch)
    names = get_tensor_name_map(arch, spec.num_layers)
    hf = {}
    for hf_name in hf_names:
        stem, suffix = hf_name.rsplit(".", 1)
        name = names.get_name(stem) + "." + suffix
        value = tensors[name]
        if spec.arch == "llama" and name.endswith("attn_q.weight"):
            value = _unpermute(value, spec.num_heads)
        elif spec.arch == "llama" and name.endswith("attn_k.weight"):
            value = _unpermute(value, spec.num_kv_heads)
        elif spec.gemma and name.endswith("norm.weight"):
            value = value - np.float32(1)
        hf[hf_name] = value
    return hf


# ---- quantisation ------------------------------------------------------------------------------

def quantize_q6_k(x: np.ndarray) -> np.ndarray:
    """Q6_K blocks (ggml's block_q6_K: ql[128], qh[64], int8 scales[16], float16 d; 256 values
    of a row each) of the float32 matrix `x`: each 16 values' scale d·s (s an int8, d the
    block's float16), each value round(x / (d·s)) in [-32, 31], stored plus 32 as 4 low bits
    (ql) and 2 high bits (qh) in the order gguf's Q6_K.dequantize_blocks reads them.
    The scales are rounded up, so no value is clipped: each is within half its step."""
    rows, cols = x.shape
    blocks = x.reshape(-1, 256).astype(np.float32)
    n = blocks.shape[0]
    sub = blocks.reshape(n, 16, 16)
    step = np.abs(sub).max(axis=2) / 31                       # the step each 16 values need
    d = (step.max(axis=1) / 127).astype(np.float16)
    short = d.astype(np.float32) * 127 < step.max(axis=1)     # float16 rounded down: one up
    d[short] = np.nextafter(d[short], np.float16(np.inf))
    d32 = np.where(d == 0, np.float16(1), d).astype(np.float32)
    s = np.clip(np.ceil(step / d32[:, None]), 1, 127).astype(np.int8)
    q = np.clip(np.rint(sub / (d32[:, None] * s)[..., None]), -32, 31).astype(np.int16) + 32
    q = q.astype(np.uint8).reshape(n, 256)
    low, high = q & 0x0F, q >> 4
    low = low.reshape(n, 2, 2, 64)                            # (half, nibble, byte)
    ql = (low[:, :, 0] | (low[:, :, 1] << 4)).reshape(n, 128)
    high = high.reshape(n, 2, 4, 32)                          # (half, bit pair, byte)
    qh = (high[:, :, 0] | (high[:, :, 1] << 2) | (high[:, :, 2] << 4) | (high[:, :, 3] << 6))
    out = np.concatenate([ql, qh.reshape(n, 64), s.view(np.uint8), d.reshape(n, 1).view(np.uint8)],
                         axis=1)
    return out.reshape(rows, cols // 256 * 210)


def quantize(x: np.ndarray, dtype: str) -> tuple[np.ndarray, object]:
    """(the bytes or floats to write, their GGMLQuantizationType): 1-D tensors stay F32."""
    from gguf import GGMLQuantizationType as Q, quants

    if x.ndim == 1 or dtype == "F32":
        return x.astype(np.float32), Q.F32
    if dtype == "Q6_K":
        return quantize_q6_k(x), Q.Q6_K
    qtype = Q[dtype]
    return quants.quantize(x, qtype), qtype


# ---- the file ----------------------------------------------------------------------------------

@dataclasses.dataclass
class Written:
    """What `write` wrote: `original` (the random weights, transformers' names and layout),
    `tensors` (them in GGUF's names and layout, float32 before quantisation), `qtypes` (each
    tensor's GGMLQuantizationType), `weights` (transformers' names and layout, the values the
    file holds: dequantised, unpermuted, Gemma's norms less 1; `original` itself in F32 and
    F16), `metadata` (every key written, with its value)."""
    path: Path
    arch: str
    dtype: str
    spec: Spec
    original: dict[str, np.ndarray]
    tensors: dict[str, np.ndarray]
    qtypes: dict[str, object]
    weights: dict[str, np.ndarray]
    metadata: dict[str, object]


def metadata(spec: Spec, dtype: str) -> dict[str, object]:
    """The keys llama.cpp's convert_hf_to_gguf.py writes for this architecture (TextModel's
    generic keys; LlamaModel adds vocab_size and rope.dimension_count; a config with head_dim,
    as Qwen3's and Gemma 3's, adds key_length and value_length; Gemma3Model the sliding window;
    a SentencePiece vocabulary scores and add_space_prefix), in writing order."""
    from gguf import GGML_QUANT_VERSION

    a, v = spec.arch, vocab(spec.arch)
    m: dict[str, object] = {
        "general.architecture": a, "general.type": "model", "general.name": f"tiny {a}",
        f"{a}.block_count": spec.num_layers, f"{a}.context_length": spec.context,
        f"{a}.embedding_length": spec.d_model, f"{a}.feed_forward_length": spec.d_ff,
        f"{a}.attention.head_count": spec.num_heads,
        f"{a}.attention.head_count_kv": spec.num_kv_heads,
        f"{a}.rope.freq_base": spec.rope_base,
        f"{a}.attention.layer_norm_rms_epsilon": spec.rms_eps,
    }
    if a in ("qwen3", "gemma3"):
        m |= {f"{a}.attention.key_length": spec.head_dim,
              f"{a}.attention.value_length": spec.head_dim}
    if a == "llama":
        m |= {"llama.vocab_size": len(v.tokens), "llama.rope.dimension_count": spec.head_dim}
    if a == "gemma3":
        m |= {"gemma3.attention.sliding_window": spec.sliding_window}
    m |= {"general.file_type": FILE_TYPE[dtype], "general.quantization_version": GGML_QUANT_VERSION}
    if v.merges is not None:
        m |= {"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.pre": spec.pre,
              "tokenizer.ggml.tokens": v.tokens, "tokenizer.ggml.token_type": v.types,
              "tokenizer.ggml.merges": v.merges}
    else:
        m |= {"tokenizer.ggml.model": "llama", "tokenizer.ggml.pre": "default",
              "tokenizer.ggml.tokens": v.tokens, "tokenizer.ggml.scores": v.scores,
              "tokenizer.ggml.token_type": v.types}
    m |= {"tokenizer.ggml.bos_token_id": v.bos, "tokenizer.ggml.eos_token_id": v.eos}
    if v.unk is not None:
        m["tokenizer.ggml.unknown_token_id"] = v.unk
    if v.pad is not None:
        m["tokenizer.ggml.padding_token_id"] = v.pad
    if a == "gemma3":
        m |= {"tokenizer.ggml.add_bos_token": True, "tokenizer.ggml.add_eos_token": False,
              "tokenizer.ggml.add_space_prefix": False}
    return m


def _add(out, key: str, value) -> None:
    """One key with the GGUF type llama.cpp's writer gives it: UINT32 counts and ids, FLOAT32
    numbers, arrays of STRING, FLOAT32 (scores) or INT32 (token types)."""
    if key == "general.architecture":
        return                                                # GGUFWriter writes it itself
    if isinstance(value, bool):
        out.add_bool(key, value)
    elif isinstance(value, str):
        out.add_string(key, value)
    elif isinstance(value, float):
        out.add_float32(key, value)
    elif isinstance(value, int):
        out.add_uint32(key, value)
    else:
        out.add_array(key, [int(v) if key.endswith("token_type") else v for v in value])


def write(path: Path, arch: str, dtype: str, seed: int = 0, spec: Spec | None = None) -> Written:
    """The tiny `arch` decoder's GGUF at `path` in `dtype` (F32, F16, Q8_0 or Q6_K), and what
    it holds. `spec` overrides SPECS[arch] (tests/tiny_llama.py's d_model 16)."""
    from gguf import GGUFWriter, quants

    spec = spec or SPECS[arch]
    w = weights(spec, seed)
    tensors = to_gguf(spec, w)
    meta = metadata(spec, dtype)
    out = GGUFWriter(str(path), arch)
    for key, value in meta.items():
        if key == "general.file_type":
            out.add_file_type(value)
        else:
            _add(out, key, value)
    qtypes, held = {}, {}
    for name, value in tensors.items():
        data, qtypes[name] = quantize(value, dtype)
        out.add_tensor(name, data, raw_dtype=qtypes[name] if data.dtype == np.uint8 else None)
        held[name] = quants.dequantize(data, qtypes[name]).reshape(value.shape) \
            if data.dtype == np.uint8 else data.astype(np.float32)
    out.write_header_to_file()
    out.write_kv_data_to_file()
    out.write_tensors_to_file()
    out.close()
    return Written(Path(path), arch, dtype, spec, w, tensors, qtypes, from_gguf(spec, held, w),
                   meta)


def write_all(folder: Path, seed: int = 0) -> dict[tuple[str, str], Written]:
    """Every (architecture, dtype) file in `folder`, named tiny-ARCH-DTYPE.gguf."""
    return {(a, t): write(folder / f"tiny-{a}-{t}.gguf", a, t, seed)
            for a in ARCHS for t in DTYPES}


# ---- transformers' reference -------------------------------------------------------------------

@dataclasses.dataclass
class Reference:
    """transformers' numbers for one prompt: `ids` (its tokenizer's, BOS as it adds it),
    `logits` (n, vocab), `attentions` (layers, heads, n, n), `greedy` (the next `steps` ids,
    argmax each time over the whole sequence, no end-of-text stop)."""
    ids: list[int]
    logits: np.ndarray
    attentions: np.ndarray
    greedy: list[int]


def load(path: Path):
    """(model, tokenizer) as transformers reads the GGUF at `path`: float32, eager attention."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = Path(path)
    tokenizer = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    model = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name,
                                                 attn_implementation="eager",
                                                 dtype=torch.float32).eval()
    return model, tokenizer


def reference(path: Path, prompt: str, steps: int = 20, loaded=None) -> Reference:
    import torch

    model, tokenizer = loaded or load(path)
    ids = tokenizer(prompt)["input_ids"]
    with torch.no_grad():
        out = model(torch.tensor([ids]), output_attentions=True)
        seq = list(ids)
        for _ in range(steps):
            seq.append(int(model(torch.tensor([seq])).logits[0, -1].argmax()))
    return Reference(ids=list(ids), logits=out.logits[0].numpy(),
                     attentions=torch.stack([a[0] for a in out.attentions]).numpy(),
                     greedy=seq[len(ids):])
