"""Figures of a change between two traces (`attnviz.diff`): a pinned baseline and the trace
after an edit. Plain plotly, no streamlit.

    d = attnviz.diff(baseline, edited)
    change_heatmap(d["scores"].delta[0], row_labels=tokens, col_labels=tokens)
    kl_bars(d.kl[0], tokens)
"""

from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go

from attnviz.core.errors import AttnvizInputError
from attnviz.i18n import t
from attnviz.plot.figures import DETAIL_MAX_BYTES, heatmap
from attnviz.plot.text_layout import escape
from attnviz.describe.labels import unique

KL_COLOR = "#6a51a3"


def change_title() -> str:
    """"Change from the baseline", in the active language."""
    return t("figure.change.title")


def change_heatmap(delta2d, *, row_labels, col_labels, title: str | None = None,
                   row_title: str | None = None, col_title: str | None = None,
                   max_bytes: int = DETAIL_MAX_BYTES) -> go.Figure:
    """Δ = now − baseline of one step (one head's slice), on the diverging scale centred on 0:
    red where the number grew, blue where it shrank, white where it did not change.

    Parameters
    ----------
    delta2d : array-like, shape (n_rows, n_cols)
        The change. ±∞ (a key masked in one trace only) is drawn grey, as masked.
    row_labels, col_labels, row_title, col_title
        As in :func:`attnviz.plot.figures.heatmap`.
    title : str, optional
        The figure title (escape user text with :func:`attnviz.plot.text_layout.escape` before
        putting it here); default
        :func:`change_title`. Titles default to the active language's words.
    max_bytes : int
        The figure's byte budget, as in :func:`attnviz.plot.figures.heatmap`; default
        DETAIL_MAX_BYTES, as it sits below the step's own map (a larger change is pooled into
        blocks, each showing its change farthest from 0).
    """
    return heatmap(delta2d, row_labels=row_labels, col_labels=col_labels,
                   title=change_title() if title is None else title, kind="signed",
                   row_title=t("figure.axis.query") if row_title is None else row_title,
                   col_title=t("figure.axis.key") if col_title is None else col_title,
                   value_name=t("figure.hover.change"), max_bytes=max_bytes)


def kl_bars(kl_row, tokens_q, *, title: str = "") -> go.Figure:
    """One bar per query: KL(baseline row ‖ now row) of its attention weights, in bits.

    Parameters
    ----------
    kl_row : array-like, shape (n_q,)
        ``attnviz.diff(baseline, now).kl[head]``. +∞ (the baseline attends to a key the new
        weights give 0, e.g. a key masked only now) is drawn as a grey bar of height 0 marked
        "∞".
    tokens_q : sequence of str, length n_q
        The query labels (duplicates kept apart by their position).
    """
    kl = np.asarray(kl_row, dtype=np.float64).reshape(-1)
    labels = [escape(s) for s in unique([str(t) for t in tokens_q])]
    if len(labels) != kl.size:
        raise AttnvizInputError("error.figure.kl_labels", labels=len(labels), values=kl.size)
    finite = np.isfinite(kl)
    y = np.where(finite, kl, 0.0)
    text = [f"{v:.3g}" if ok else "∞" for v, ok in zip(kl, finite)]
    show = kl.size <= 32
    top = float(y.max(initial=0.0)) or 1.0
    fig = go.Figure(go.Bar(
        x=labels, y=y, marker_color=np.where(finite, KL_COLOR, "#8c8c8c").tolist(),
        customdata=text, text=text if show else None,
        texttemplate="%{text}" if show else None, textposition="outside", cliponaxis=False,
        hovertemplate=t("figure.kl.hover", x="%{x}", kl="%{customdata}")
        + "<extra></extra>"))
    fig.update_layout(title=dict(text=title), height=260, showlegend=False,
                      margin=dict(l=10, r=10, t=50 if title else 20, b=10),
                      yaxis=dict(title=dict(text=t("figure.kl.bits")), range=[0, top * 1.3],
                                 rangemode="tozero", automargin=True),
                      xaxis=dict(type="category", categoryorder="array", categoryarray=labels,
                                 automargin=True, title=dict(text=t("figure.axis.query"))))
    return fig


def format_change(value: float) -> str:
    """A max |Δ| as a metric shows it: 4 significant digits, ∞ for a masked key."""
    return "∞" if math.isinf(value) else f"{value:.4g}"
