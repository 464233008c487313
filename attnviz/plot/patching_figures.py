"""Plotly figures of activation patching (``attnviz.models.readers.patching``): the effect of every
patch of one kind as a map, rows (layers, or heads) × columns (positions, or heads).

Plain plotly (no streamlit), so they work in a notebook:

    m = attnviz.DecoderModel.load()
    p = m.patch("The Eiffel Tower is in the city of", "The Colosseum is in the city of",
                answers=(" Paris", " Rome"), where="resid")
    effect_map(p.effect, row_labels=[f"{l}" for l in range(31)],
               col_labels=p.corrupted_tokens, title="patching").show()
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from attnviz.i18n import t
from attnviz.plot.figures import cell_markers
from attnviz.plot.text_layout import NARROW_WIDTH, _category_axis, _esc, _labels

ROW_PX = 18                 # a row of the map
COLUMN_PX = 48              # a column: room for a short token
# the colour scale: blue for what the patch restores (1 = all of the clean answer's logit
# difference), red for what it pushes the other way, white for nothing
COLOURS = "RdBu"


def effect_map(effect, *, row_labels, col_labels, title: str, row_title: str,
               col_title: str, clean_tokens=None, numbered: bool = True) -> go.Figure:
    """The normalised effect of each patch, (R, C): 0 = as the corrupted run, 1 = as the clean
    run, on a diverging scale centred on 0 and reaching at least ±1 (further when an effect
    does); cells not computed (NaN: a patching stopped early) are left blank and their hover
    says so. Rows are drawn with the first at the bottom (layer 0 below layer 29). The hovers
    and clicks are a second trace's (``figures.cell_markers``).

    col_labels: the columns (the corrupted prompt's tokens, or heads); clean_tokens (C,),
    optional: the clean prompt's token at each column, named in the hover where it differs.
    numbered: the columns written "i: label" (positions; heads are named by their number)."""
    e = np.asarray(effect, dtype=np.float64)                          # (R, C)
    rows_n, cols_n = e.shape
    rows = _labels(row_labels, rows_n, "row_labels")
    cols = _labels(col_labels, cols_n, "col_labels")
    if numbered:
        cols = [f"{i}: {c}" for i, c in enumerate(cols)]
    reach = max(1.0, float(np.nanmax(np.abs(e)))) if np.isfinite(e).any() else 1.0
    name = _esc(t("figure.patching.effect"))
    waiting = _esc(t("figure.patching.not_computed"))
    if clean_tokens is not None:
        clean = _labels(clean_tokens, cols_n, "clean_tokens")
        shown = _labels(col_labels, cols_n, "col_labels")
        notes = [_esc(t("figure.patching.clean_token", token=c)) if c != s else ""
                 for c, s in zip(clean, shown)]
    else:
        notes = [""] * cols_n
    hover = [[(f"{name}: {e[r, c]:.4f}" if np.isfinite(e[r, c]) else waiting)
              + (f"<br>{notes[c]}" if notes[c] else "") for c in range(cols_n)]
             for r in range(rows_n)]
    fig = go.Figure(go.Heatmap(
        z=e, x=cols, y=rows, zmin=-reach, zmax=reach, zmid=0.0, colorscale=COLOURS, xgap=1,
        ygap=1, hoverinfo="skip", colorbar=dict(title=dict(text=name, side="top"))))
    # the hovers and the clicks (a head opened): an invisible marker at each cell's centre
    fig.add_trace(cell_markers(rows, cols, hover, f"%{{y}}<br>{_esc(col_title)} %{{x}}<br>"
                                                  "%{customdata}<extra></extra>"))
    width = max(NARROW_WIDTH, 180 + COLUMN_PX * cols_n)
    fig.update_layout(title=dict(text=title), width=width,
                      height=int(max(320, 130 + ROW_PX * rows_n)),
                      margin=dict(l=10, r=10, t=60, b=10))
    _category_axis(fig.layout.xaxis, cols, col_title, plot_px=width - 180)
    _category_axis(fig.layout.yaxis, rows, row_title)
    return fig


__all__ = ["effect_map"]
