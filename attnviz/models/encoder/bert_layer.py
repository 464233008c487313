"""One BERT encoder layer in numpy, as transformers' modeling_bert.py writes it: the batched
attention the head ablations run (`attention_output`, heads silenced before W_O, nothing kept;
one text's traced attention is the engine's), then residual + LayerNorm, the feed-forward layer
and residual + LayerNorm (`after_attention`). The weights of one layer are a `BertBlock`;
attnviz.models.encoder.pretrained reads them from the checkpoint and runs the layers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from attnviz.core.engine import attention
from attnviz.core.weights import MultiHeadWeights
from attnviz.models.finite import all_finite, first_not_finite, not_finite


@dataclass(frozen=True, eq=False)
class BertBlock:
    """One encoder layer: its attention weights and everything around attention."""

    attention: MultiHeadWeights
    attn_norm: tuple[np.ndarray, np.ndarray]   # LayerNorm γ, β (d_model,) after attention
    w_1: np.ndarray                            # (d_model, d_ff)
    b_1: np.ndarray                            # (d_ff,)
    w_2: np.ndarray                            # (d_ff, d_model)
    b_2: np.ndarray                            # (d_model,)
    ffn_norm: tuple[np.ndarray, np.ndarray]    # LayerNorm γ, β (d_model,) after feed-forward


def attention_output(x: np.ndarray, w: MultiHeadWeights, keep: np.ndarray, layer: int,
                     model: str) -> np.ndarray:
    """MultiHead(x) for B texts at once, x (B, n, d_model) → (B, n, d_out), with the heads
    where keep (B, H) is False silenced: their Z zeroed before W_O, what BERT's head_mask did.
    The engine's formula written plainly (``attention``) and batched; no intermediate is kept.
    A non-finite output raises error.model.not_finite naming `model`, `layer` and the first
    step that holds one.
    """
    b, n, _ = x.shape
    h, d_k = w.num_heads, w.d_k
    mat, bias = w.stacked("qkv", x.dtype)                       # (d_model, H·(2 d_k + d_v))
    flat = x.reshape(b * n, -1) @ mat                           # (B·n, H·(2 d_k + d_v))
    if bias is not None:
        flat += bias
    cuts = (0, h * d_k, 2 * h * d_k, flat.shape[1])
    q, k, v = (flat[:, i:j].reshape(b, n, h, -1).transpose(0, 2, 1, 3)   # (B, H, n, d)
               for i, j in zip(cuts, cuts[1:]))
    z, weights = attention(q, k, v)                             # (B, H, n, d_v)
    z *= keep[:, :, None, None]
    concat = z.transpose(0, 2, 1, 3).reshape(b * n, -1)         # (B·n, H·d_v)
    out = concat @ w.w_o.astype(x.dtype, copy=False)
    if w.b_o is not None:
        out += w.b_o.astype(x.dtype, copy=False)
    if not all_finite(out):                                     # only then: which step
        raise not_finite(model, first_not_finite([
            ("q", q), ("k", k), ("v", v), ("scores", lambda: q @ k.swapaxes(-1, -2)),
            ("weights", weights), ("z", z)]) or "output", layer=layer)
    return out.reshape(b, n, -1)


def after_attention(block: BertBlock, h: np.ndarray, attended: np.ndarray, hidden_act: str,
                    eps: float) -> np.ndarray:
    """Residual + LayerNorm, then the feed-forward layer with its own residual + LayerNorm:
    m = LayerNorm(h + a), LayerNorm(m + act(m W_1 + b_1) W_2 + b_2), rows (n, d_model)."""
    m = layer_norm(h + attended, *block.attn_norm, eps)                      # (n, d_model)
    inner = ACTIVATIONS[hidden_act](m @ block.w_1 + block.b_1)               # (n, d_ff)
    return layer_norm(m + inner @ block.w_2 + block.b_2, *block.ffn_norm, eps)


def layer_norm(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float) -> np.ndarray:
    """(x − mean) / √(var + eps) · γ + β over each row's features (biased variance, as torch)."""
    mean = x.mean(axis=-1, keepdims=True)                   # (n, 1)
    centred = x - mean
    var = np.mean(centred * centred, axis=-1, keepdims=True)
    return (centred / np.sqrt(var + eps)) * gamma + beta


def gelu(x: np.ndarray) -> np.ndarray:
    """GELU(x) = x Φ(x) = x · ½ (1 + erf(x / √2)), the exact form BERT's "gelu" names;
    computed in float64, returned in x's dtype."""
    wide = x.astype(np.float64)
    return (0.5 * wide * (1.0 + erf(wide * math.sqrt(0.5)))).astype(x.dtype, copy=False)


ACTIVATIONS = {"gelu": gelu}


def erf(x: np.ndarray) -> np.ndarray:
    """erf of a float64 array, elementwise: torch's (the one transformers' GELU calls; within
    1 ulp of math.erf), imported here so that a trace never loads torch."""
    import torch

    return torch.special.erf(torch.from_numpy(np.ascontiguousarray(x))).numpy()
