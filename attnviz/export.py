"""Taking a trace out: every intermediate as .npz, a zip of CSVs, JSON, and one offline HTML report.

Names are the trace's field names (q, k, v, scores, …); per-head arrays keep their head axis in
.npz and JSON, and become one CSV per head in the zip. Used as methods of AttentionTrace:
``t.to_npz(file)``, ``t.to_csv_zip(file)``, ``t.to_json()``, and ``attnviz.report_html(t)``.
"""

from __future__ import annotations

import html
import io
import json
import math
import zipfile

import numpy as np

ARRAY_FIELDS = ("x", "context", "q", "k", "v", "scores", "scaled_scores", "masked_scores",
                "weights", "z", "concat", "output")


def arrays_of(trace) -> dict[str, np.ndarray]:
    """Every stored intermediate of `trace` by name (those that are None are left out)."""
    out = {name: np.asarray(getattr(trace, name)) for name in ARRAY_FIELDS
           if getattr(trace, name) is not None}
    if trace.mask is not None:
        out["mask"] = np.asarray(trace.mask)
    return out


def to_npz(trace, file) -> None:
    """Save every intermediate (and `scale`) to `file`, a path or a binary file object."""
    np.savez_compressed(file, scale=np.array(trace.scale), **arrays_of(trace))


def to_json(trace) -> str:
    """Every intermediate as nested lists; −∞ (masked scores) is written as null."""
    arrays = {}
    for name, a in arrays_of(trace).items():
        if a.dtype == bool:
            arrays[name] = a.tolist()
        else:
            arrays[name] = np.where(np.isfinite(a), a, np.nan).astype(object)
            arrays[name][~np.isfinite(a)] = None
            arrays[name] = arrays[name].tolist()
    doc = {"scale": trace.scale, "num_heads": trace.num_heads, "warnings": list(trace.warnings),
           "steps": [{"name": s.name, "title": s.title, "formula": s.formula,
                      "explanation": s.explanation, "axes": list(s.axes)} for s in trace.steps],
           "arrays": arrays}
    return json.dumps(doc, ensure_ascii=False, allow_nan=False)


def to_csv_zip(trace, file, tokens_q=None, tokens_k=None) -> None:
    """A zip of CSV files, one per array (per head: ``weights_head0.csv``), with the token
    labels (queries, keys) or feature names (d0, d1, …) as row and column headers."""
    labels = _axis_labels(trace, tokens_q, tokens_k)
    with zipfile.ZipFile(file, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for step in trace.steps:
            if step.on_demand:
                continue
            axes = step.axes[1:] if step.per_head else step.axes
            heads = range(trace.num_heads) if step.per_head else [None]
            for h in heads:
                a = step.array if h is None else step.array[h]
                name = step.name if h is None else f"{step.name}_head{h}"
                zf.writestr(f"{name}.csv", _csv(a, *(labels(ax, n) for ax, n in
                                                     zip(axes, a.shape))))


def _axis_labels(trace, tokens_q, tokens_k):
    tokens_q = list(tokens_q) if tokens_q is not None else [f"q{i}" for i in range(trace.n_q)]
    tokens_k = list(tokens_k) if tokens_k is not None else (
        tokens_q if trace.n_k == trace.n_q else [f"k{j}" for j in range(trace.n_k)])

    def labels(axis: str, n: int) -> list[str]:
        if axis == "query":
            return tokens_q
        if axis == "key":
            return tokens_k
        return [f"d{j}" for j in range(n)]

    return labels


def _csv(a: np.ndarray, rows: list[str], cols: list[str]) -> str:
    buf = io.StringIO()
    buf.write(",".join(_cell(c) for c in [""] + cols) + "\n")
    for label, row in zip(rows, a):
        buf.write(",".join([_cell(label)] + [_number(v) for v in row]) + "\n")
    return buf.getvalue()


def _cell(text: str) -> str:
    """A CSV cell, quoted when it holds a comma, quote or newline (tokens can)."""
    text = str(text)
    if any(c in text for c in ',"\n\r'):
        return '"' + text.replace('"', '""') + '"'
    return text


def _number(v) -> str:
    v = float(v)
    if math.isinf(v):
        return "-inf" if v < 0 else "inf"
    return repr(v)


# ---- one self-contained HTML page ---------------------------------------------------------------

def report_html(trace, tokens_q=None, tokens_k=None, *, title: str = "attnviz report") -> str:
    """Every step of `trace` (each head of per-head steps) as heatmaps in one HTML file that
    opens offline: plotly's JavaScript is inlined once, no CDN or other URL is referenced."""
    import plotly.io as pio

    from . import figures

    parts = [f"<h1>{html.escape(title)}</h1>",
             f"<p>{trace.num_heads} head(s), {trace.n_q} queries, {trace.n_k} keys, "
             f"d_k = {trace.d_k}, scale = {trace.scale:.6g}.</p>"]
    parts += [f"<p class='warn'>{html.escape(w)}</p>" for w in trace.warnings]
    first = True
    for step in trace.steps:
        parts.append(f"<h2>{html.escape(step.title)}</h2><pre>{html.escape(step.formula)}"
                     f"</pre><p>{html.escape(step.explanation)}</p>")
        heads = range(trace.num_heads) if step.per_head else [0]
        for h in heads:
            fig = figures.step_figure(trace, step.name, head=h, tokens_q=tokens_q,
                                      tokens_k=tokens_k)
            parts.append(pio.to_html(fig, full_html=False, include_plotlyjs=first,
                                     config={"displaylogo": False}))
            first = False
    body = "\n".join(parts)
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}"
            f"</title><style>body{{font-family:sans-serif;max-width:1100px;margin:auto}}"
            f".warn{{color:#a15c00}}</style></head><body>{body}</body></html>")
