"""Figures of what a modern decoder adds to attention: the rotation angle of every position and
frequency pair (rotary positions), and which key/value head each query head reads (grouped-query
attention). Plain plotly, no streamlit:

    t = attnviz.DecoderModel.load().run("The capital of France is").trace(3)
    rotation_angles_figure(t.rope_angles, t.rope_base, t.k_positions).show()
    kv_sharing_figure(t.num_heads, t.kv_group).show()
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from attnviz.core.errors import AttnvizInputError
from attnviz.core.grouped_query import kv_head
from attnviz.i18n import t
from attnviz.plot import budget
from attnviz.plot.figures import heatmap


def rotation_angles_figure(angles, base: float, positions, tokens=None, *,
                           max_bytes: int = budget.SMALL_CHARTS_BYTES) -> go.Figure:
    """The angle (radians) each position's feature pair i is turned by,
    θ[p, i] = p · base^(−2i/d_k): rows the positions (with their tokens), columns the pairs
    (features i and i + d_k/2). `angles` (n, d_k/2), e.g. ``trace.rope_angles``. Pooled into
    blocks when it would send more than `max_bytes` (attnviz.plot.budget)."""
    a = np.asarray(angles, dtype=np.float64)
    if a.ndim != 2 or a.size == 0:
        raise AttnvizInputError("error.figure.angles", shape=a.shape)
    positions = [int(p) for p in np.asarray(positions).reshape(-1)]
    if len(positions) != a.shape[0]:
        raise AttnvizInputError("error.figure.positions_count", want=a.shape[0],
                                count=len(positions))
    pairs = a.shape[1]
    rows = [f"{p}" if tokens is None else f"{p}: {tok}" for p, tok in
            zip(positions, tokens if tokens is not None else positions)]
    cols = [str(i) for i in range(pairs)]
    return heatmap(a, row_labels=rows, col_labels=cols, kind="signed",
                   title=t("figure.rope.title", base=f"{base:g}"),
                   row_title=t("figure.rope.position"), col_title=t("figure.rope.pair"),
                   value_name=t("figure.rope.angle"), show_values=False, max_bytes=max_bytes)


def kv_sharing_figure(num_heads: int, kv_group: int) -> go.Figure:
    """Query heads (rows) × key/value heads (columns): 1 where query head h reads K/V head
    h // kv_group (`grouped_query.kv_head`), the K and V it shares with the other heads of its
    group."""
    if num_heads < 1 or kv_group < 1 or num_heads % kv_group:
        raise AttnvizInputError("error.figure.kv_groups", heads=num_heads, group=kv_group)
    kv_heads = num_heads // kv_group
    shared = (kv_head(np.arange(num_heads), num_heads, kv_heads)[:, None]
              == np.arange(kv_heads)[None, :]).astype(np.float64)       # (H, H_kv)
    fig = heatmap(shared, row_labels=[t("figure.head", head=h) for h in range(num_heads)],
                  col_labels=[t("figure.kv.head", number=k) for k in range(kv_heads)],
                  kind="weights", title=t("figure.kv.title", heads=num_heads,
                                          kv_heads=kv_heads),
                  row_title=t("figure.kv.query_head"), col_title=t("figure.kv.kv_head"),
                  value_name=t("figure.kv.reads"), show_values=False)
    fig.update_layout(height=min(120 + 28 * num_heads, 520), coloraxis_showscale=False)
    fig.update_traces(showscale=False)          # 1 = reads it: no scale of weights to read
    return fig
