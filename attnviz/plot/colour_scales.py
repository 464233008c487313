"""The colour scales of every heatmap: a diverging scale centred on 0 for signed arrays, the
weights' sequential scale on a fixed 0–1 range or relative to each head's or each row's
largest weight (a relative scale's colours sent as one byte a cell), masked cells grey.
Plotly's names and settings only, shared by attnviz.plot's builders."""

from __future__ import annotations

import warnings

import numpy as np
import plotly.colors as pc

from attnviz.core.errors import AttnvizInputError
from attnviz.i18n import t

SIGNED_COLORSCALE = "RdBu_r"      # diverging, blue < 0 < red; centred on 0 by zmid
WEIGHTS_COLORSCALE = "Blues"      # sequential, on the fixed range 0–1
MASKED_COLOR = "#8c8c8c"          # grey: neither end nor middle of either scale
# a relative scale's colour c (0–1) is sent as the byte 1 + round(c · COLOUR_LEVELS): 1–250,
# never 255, whose base64 is "////", which plotly's JSON escapes to 24 bytes (\\u002f each)
COLOUR_LEVELS = 249
KINDS = ("signed", "weights")
WEIGHT_SCALES = {"fixed": "fixed 0–1", "head": "each head's max", "row": "each row's max"}
RELATIVE_SCALE_ABOVE = 32         # default_weight_scale: more keys than this → each row's max
# level 0 grey (a masked cell), levels 1–250 the weights' scale: a relative scale's colours
# for heads_grid's large facets, which mark masked cells without an overlay
MASKED_LEVEL_COLORSCALE = ([[0.0, MASKED_COLOR], [0.5 / (1 + COLOUR_LEVELS), MASKED_COLOR]]
                           + [[(1 + p * COLOUR_LEVELS) / (1 + COLOUR_LEVELS), c]
                              for p, c in pc.get_colorscale(WEIGHTS_COLORSCALE)])


def check_kind(kind: str) -> str:
    if kind not in KINDS:
        raise AttnvizInputError("error.figure.one_of", name="kind", allowed=", ".join(KINDS),
                                value=repr(kind))
    return kind


def colour_levels(relative, *, masked_zero: bool = False) -> np.ndarray:
    """A relative scale's colours c (0–1, NaN where masked) as the levels a figure sends,
    1 + round(c × COLOUR_LEVELS), 1 to 250: uint8, one byte a cell. A NaN (masked) cell makes
    them float32, NaN being plotly's gap; or, `masked_zero`, level 0 (still one byte a cell),
    which MASKED_LEVEL_COLORSCALE draws grey."""
    c = np.asarray(relative, dtype=np.float64)
    levels = 1 + np.rint(np.clip(c, 0.0, 1.0) * COLOUR_LEVELS)
    if not np.isnan(levels).any():
        return levels.astype(np.uint8)
    return np.nan_to_num(levels, nan=0).astype(np.uint8) if masked_zero \
        else levels.astype(np.float32)


def default_weight_scale(n_keys: int) -> str:
    """The weights' colour scale to start with: "fixed" (0–1) up to RELATIVE_SCALE_ABOVE (32)
    keys; beyond, "row", as each weight is then about 1/n_keys and pale on the fixed scale."""
    return "row" if n_keys > RELATIVE_SCALE_ABOVE else "fixed"


def relative_weights(weights, scale: str) -> np.ndarray:
    """The colours' values of `weights` (…, n_q, n_k), NaN where masked: the weights
    themselves ("fixed"), ÷ the largest of the last two axes ("head") or ÷ each row's largest
    ("row"). A maximum of 0 (every key of the row masked) divides by 1. Display only."""
    w = np.asarray(weights)
    scale = check_weight_scale(scale)
    if scale == "fixed":
        return w
    axes = (-2, -1) if scale == "head" else (-1,)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)       # all-NaN rows stay NaN
        top = np.nanmax(w, axis=axes, keepdims=True)
    return w / np.where(np.isfinite(top) & (top > 0), top, 1)


def check_weight_scale(scale: str) -> str:
    if scale not in WEIGHT_SCALES:
        raise AttnvizInputError("error.figure.one_of", name="weight_scale",
                                allowed=", ".join(WEIGHT_SCALES), value=repr(scale))
    return scale


def colour_props(kind: str, scale: str = "fixed", masked_level: bool = False) -> dict:
    if kind == "weights":
        low, high, colours = weights_range(scale, masked_level)
        return dict(colorscale=colours, zmin=low, zmax=high, colorbar=colorbar(scale))
    return dict(colorscale=SIGNED_COLORSCALE, zmid=0.0)


def coloraxis(kind: str, scale: str = "fixed", masked_level: bool = False) -> dict:
    if kind == "weights":
        low, high, colours = weights_range(scale, masked_level)
        return dict(colorscale=colours, cmin=low, cmax=high, colorbar=colorbar(scale))
    return dict(colorscale=SIGNED_COLORSCALE, cmid=0.0)


def weights_range(scale: str, masked_level: bool = False):
    """(low, high, colour scale) of the weights: 0–1, or a relative scale's levels 1–250
    (0–250 with level 0 grey when `masked_level`)."""
    if scale == "fixed":
        return 0.0, 1.0, WEIGHTS_COLORSCALE
    top = 1.0 + COLOUR_LEVELS
    if masked_level:
        return 0.0, top, MASKED_LEVEL_COLORSCALE
    return 1.0, top, WEIGHTS_COLORSCALE


def colorbar(scale: str) -> dict:
    """The colour bar of the weights, titled by the scale; a relative scale's levels read
    0 … 1 of the head's or row's largest weight."""
    bar = dict(title=dict(text=t(f"figure.colorbar.{scale}"), side="top"))
    if scale != "fixed":
        ticks = [0, 0.25, 0.5, 0.75, 1]
        bar.update(tickmode="array", tickvals=[1 + v * COLOUR_LEVELS for v in ticks],
                   ticktext=[f"{v:g}" for v in ticks])
    return bar
