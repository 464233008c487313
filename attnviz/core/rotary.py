"""Rotary position embeddings (RoPE, Su et al. 2021) in the half-split layout of transformers'
Llama: a vector's feature pair (i, i + d/2) at position p is turned by the angle

    θ[p, i] = p · base^(−2i/d)          i = 0 … d/2 − 1

    rotate(x, p) = x · cos Θ_p + rotate_half(x) · sin Θ_p,   rotate_half(x₁, x₂) = (−x₂, x₁)

so the dot product of a query turned at m and a key turned at n depends on m − n alone.
"""

from __future__ import annotations

import numpy as np

__all__ = ["apply_rope", "cos_sin", "rope_angles", "rope_frequencies", "rotate_half"]


def rope_frequencies(d: int, base: float) -> np.ndarray:
    """(d/2,) float64: base^(−2i/d), radians per position of feature pair i (transformers'
    ``inv_freq``)."""
    return 1.0 / base ** (np.arange(0, d, 2, dtype=np.float64) / d)


def rope_angles(positions, d: int, base: float) -> np.ndarray:
    """(n, d/2) float64: θ[p, i] = positions[p] · base^(−2i/d)."""
    positions = np.asarray(positions, dtype=np.float64)
    return positions[:, None] * rope_frequencies(d, base)[None, :]


def rotate_half(x: np.ndarray) -> np.ndarray:
    """(x₁, x₂) → (−x₂, x₁) on the last axis cut in halves."""
    half = x.shape[-1] // 2
    return np.concatenate([-x[..., half:], x[..., :half]], axis=-1)


def cos_sin(positions, d: int, base: float, dtype) -> tuple[np.ndarray, np.ndarray]:
    """cos Θ and sin Θ (n, d) in `dtype`: the angles (n, d/2) written twice side by side,
    computed in float64 (transformers computes them in float32)."""
    angles = rope_angles(positions, d, base)
    both = np.concatenate([angles, angles], axis=-1)          # (n, d)
    return np.cos(both).astype(dtype), np.sin(both).astype(dtype)


def apply_rope(x: np.ndarray, positions=None, base: float | None = None, *,
               cos: np.ndarray | None = None, sin: np.ndarray | None = None) -> np.ndarray:
    """x (…, n, d) with row p turned by RoPE at positions[p] (n,); in x's dtype.

    The one rotation of the package (transformers' ``apply_rotary_pos_emb`` on one array):
    the engine, the decoder's layer and the experiments all call it. Either `positions` and
    `base`, or `cos` and `sin` (n, d) from ``cos_sin`` computed once for every layer and head
    that turns rows at the same positions (as transformers' ``position_embeddings``)."""
    if cos is None:
        cos, sin = cos_sin(positions, x.shape[-1], base, x.dtype)
    return x * cos + rotate_half(x) * sin
