"""Taking a trace out: every intermediate as .npz, a zip of CSVs, JSON, and one offline HTML report.

Names are the trace's field names (q, k, v, scores, …); per-head arrays keep their head axis in
.npz and JSON, and become one CSV per head in the zip. Beside the intermediates each file carries
what is needed to take the model away and re-run it: the token labels (``tokens_q``,
``tokens_k``), the parameters (``w_q``, ``w_k``, ``w_v``, ``w_o`` and the biases ``b_q`` … that
exist; none for a trace of Q, K, V entered directly) and the settings (``scale``, ``num_heads``,
``causal``, the boolean ``mask``). Used as methods of AttentionTrace: ``t.to_npz(file)``,
``t.to_csv_zip(file)``, ``t.to_json()``, and ``attnviz.report_html(t)``;
``MultiHeadWeights.from_npz(file)`` reads the parameters back.
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
PARAMETER_FIELDS = ("w_q", "w_k", "w_v", "w_o", "b_q", "b_k", "b_v", "b_o")


def arrays_of(trace) -> dict[str, np.ndarray]:
    """Every stored intermediate of `trace` by name (those that are None are left out)."""
    out = {name: np.asarray(getattr(trace, name)) for name in ARRAY_FIELDS
           if getattr(trace, name) is not None}
    if trace.mask is not None:
        out["mask"] = np.asarray(trace.mask)
    return out


def parameters_of(trace) -> dict[str, np.ndarray]:
    """W_Q, W_K, W_V, W_O and the biases that exist; empty for a trace_qkv trace (no weights)."""
    w = trace.attn_weights
    if w is None:
        return {}
    return {name: np.asarray(getattr(w, name)) for name in PARAMETER_FIELDS
            if getattr(w, name) is not None}


def token_labels(trace, tokens_q=None, tokens_k=None) -> tuple[list[str], list[str]]:
    """The query and key labels, defaulting as the figures do (``q1, q2, …``, ``k1, …``)."""
    from .figures import _trace_tokens      # one default labelling for charts and files

    return _trace_tokens(trace, tokens_q, tokens_k)


def is_causal(trace) -> bool:
    """True when the trace's boolean mask is exactly the causal one (key j > query i) in every
    head."""
    if trace.mask is None:
        return False
    shape = (trace.num_heads, trace.n_q, trace.n_k)
    future = np.triu(np.ones((trace.n_q, trace.n_k), dtype=bool), k=1)   # (n_q, n_k)
    return bool(np.array_equal(np.broadcast_to(trace.mask, shape),
                               np.broadcast_to(future, shape)))


def to_npz(trace, file, tokens_q=None, tokens_k=None) -> None:
    """Save every intermediate, the token labels, the parameters and the settings to `file`, a
    path or a binary file object. Labels are unicode arrays, so ``np.load(file,
    allow_pickle=False)`` reads everything."""
    tokens_q, tokens_k = token_labels(trace, tokens_q, tokens_k)
    np.savez_compressed(file, scale=np.array(trace.scale, dtype=np.float64),
                        num_heads=np.array(trace.num_heads), causal=np.array(is_causal(trace)),
                        tokens_q=np.array(tokens_q, dtype=str),
                        tokens_k=np.array(tokens_k, dtype=str),
                        **arrays_of(trace), **parameters_of(trace))


def to_json(trace, tokens_q=None, tokens_k=None) -> str:
    """Every intermediate and parameter as nested lists under "arrays" (−∞, in masked scores,
    is written as null), the token labels (at the top and in "arrays", as in the .npz), the
    settings and the steps' texts."""
    tokens_q, tokens_k = token_labels(trace, tokens_q, tokens_k)
    arrays = {name: _json_array(a)
              for name, a in {**arrays_of(trace), **parameters_of(trace)}.items()}
    arrays.update(tokens_q=tokens_q, tokens_k=tokens_k)
    doc = {"scale": trace.scale, "num_heads": trace.num_heads, "causal": is_causal(trace),
           "tokens_q": tokens_q, "tokens_k": tokens_k, "warnings": list(trace.warnings),
           "steps": [{"name": s.name, "title": s.title, "formula": s.formula,
                      "explanation": s.explanation, "axes": list(s.axes)} for s in trace.steps],
           "arrays": arrays}
    return json.dumps(doc, ensure_ascii=False, allow_nan=False)


def _json_array(a: np.ndarray) -> list:
    if a.dtype == bool:
        return a.tolist()
    out = np.where(np.isfinite(a), a, np.nan).astype(object)
    out[~np.isfinite(a)] = None
    return out.tolist()


def to_csv_zip(trace, file, tokens_q=None, tokens_k=None) -> None:
    """A zip of CSV files, one per array (per head: ``weights_head0.csv``), with the token
    labels (queries, keys) or feature names (d0, d1, …) as row and column headers; the
    parameters too, where the trace has them (``w_q_head0.csv`` …, ``w_o.csv``, ``b_q.csv`` with
    one row per head, ``b_o.csv`` with one row)."""
    labels = _axis_labels(*token_labels(trace, tokens_q, tokens_k))
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
        for name, a in parameters_of(trace).items():
            if a.ndim == 3:                                  # (H, d_in, d_out): one per head
                for h, m in enumerate(a):
                    zf.writestr(f"{name}_head{h}.csv", _csv(m, _features(m.shape[0]),
                                                            _features(m.shape[1])))
            elif name == "w_o":                              # (H*d_v, d_out)
                zf.writestr("w_o.csv", _csv(a, _features(a.shape[0]), _features(a.shape[1])))
            elif a.ndim == 2:                                # b_q, b_k, b_v (H, d)
                zf.writestr(f"{name}.csv", _csv(a, [f"head{h}" for h in range(a.shape[0])],
                                                _features(a.shape[1])))
            else:                                            # b_o (d_out,)
                zf.writestr(f"{name}.csv", _csv(a[None], [name], _features(a.shape[0])))


def _axis_labels(tokens_q: list[str], tokens_k: list[str]):
    def labels(axis: str, n: int) -> list[str]:
        if axis == "query":
            return tokens_q
        if axis == "key":
            return tokens_k
        return _features(n)

    return labels


def _features(n: int) -> list[str]:
    return [f"d{j}" for j in range(n)]


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

def report_html(trace, tokens_q=None, tokens_k=None, *, title: str = "attnviz report",
                source: str | None = None, settings=None) -> str:
    """Every step of `trace` (each head of per-head steps) as heatmaps in one HTML file that
    opens offline: plotly's JavaScript is inlined once, formulas are MathML (which browsers
    draw themselves), no CDN or other URL is referenced.

    Parameters
    ----------
    trace : AttentionTrace
        The computation to report.
    tokens_q, tokens_k : sequence of str, optional
        Query and key labels, as in :func:`attnviz.figures.step_figure`.
    title : str
        The page's title and heading.
    source : str, optional
        What the input was, in words, e.g. ``'Sentence: “The cat sat.”'``; by default it is
        derived from `settings` when that is the app's ``Settings``.
    settings : attnviz.model.Settings or mapping, optional
        The app's settings (described as text: sentence or preset, d_model, heads, …), or any
        mapping of name → value, shown as a table.

    Everything from the user (title, source, settings, tokens) is HTML-escaped.
    """
    import plotly.io as pio

    from . import figures

    labels_q, labels_k = token_labels(trace, tokens_q, tokens_k)
    described_source, items = describe_settings(settings)
    source = described_source if source is None else source
    parts = [f"<h1>{_esc(title)}</h1>", "<section class='input'><h2>Input</h2>"]
    if source:
        parts.append(f"<p class='source'>{_esc(source)}</p>")
    if items:
        parts.append(_table(items, "Settings"))
    parts.append(_table(trace_settings(trace), "This trace"))
    parts.append(f"<p class='tokens'>Queries: {_token_list(labels_q)}</p>")
    if labels_k != labels_q:
        parts.append(f"<p class='tokens'>Keys: {_token_list(labels_k)}</p>")
    parts.append("</section>")
    parts += [f"<p class='warn'>{_esc(w)}</p>" for w in trace.warnings]
    first = True
    for step in trace.steps:
        parts.append(f"<h2>{_esc(step.title)}</h2><div class='formula'>"
                     f"{formula_html(step.formula)}</div><p>{_esc(step.explanation)}</p>")
        heads = range(trace.num_heads) if step.per_head else [0]
        for h in heads:
            fig = figures.step_figure(trace, step.name, head=h, tokens_q=tokens_q,
                                      tokens_k=tokens_k)
            parts.append(pio.to_html(fig, full_html=False, include_plotlyjs=first,
                                     config={"displaylogo": False}))
            first = False
    body = "\n".join(parts)
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{_esc(title)}"
            f"</title><style>{_CSS}</style></head><body>{body}</body></html>")


_CSS = ("body{font-family:sans-serif;max-width:1100px;margin:auto}"
        ".warn{color:#a15c00}"
        ".formula{font-size:1.35em;margin:.4em 0}"
        ".formula math{math-style:normal}"                  # display-size fractions, inline
        ".formula code{font-size:.75em}"
        "table.settings{border-collapse:collapse;margin-bottom:.6em}"
        "table.settings caption{text-align:left;font-weight:bold;padding:.2em 0}"
        "table.settings th,table.settings td{text-align:left;padding:.15em .8em .15em 0}"
        "table.settings th{font-weight:normal;color:#555}"
        ".tok{border:1px solid #ccc;border-radius:3px;padding:0 .25em;margin-right:.2em}")


def _esc(text) -> str:
    return html.escape(str(text))


def _table(items: list[tuple[str, str]], caption: str) -> str:
    rows = "".join(f"<tr><th>{_esc(k)}</th><td>{_esc(v)}</td></tr>" for k, v in items)
    return f"<table class='settings'><caption>{_esc(caption)}</caption>{rows}</table>"


def _token_list(tokens: list[str]) -> str:
    return "".join(f"<span class='tok'>{_esc(t)}</span>" for t in tokens)


def formula_html(latex: str) -> str:
    """A step's LaTeX formula as MathML, which browsers draw without any script or font
    download; the LaTeX is kept as the MathML's annotation. A formula the converter cannot
    read (or leaves a command of unconverted) is shown as escaped LaTeX text instead."""
    from xml.etree import ElementTree as ET

    from latex2mathml.converter import convert_to_element

    fallback = f"<code class='tex'>{_esc(latex)}</code>"
    try:
        root = convert_to_element(latex)
    except Exception:                            # the converter raises its own many kinds
        return fallback
    for el in root.iter():
        # the converter writes some characters as entity text ("&#x0003D;"): make them the
        # characters, so serialising escapes them exactly once
        el.text = html.unescape(el.text) if el.text else el.text
        el.tail = html.unescape(el.tail) if el.tail else el.tail
        if "\\" in (el.text or "") + (el.tail or ""):
            return fallback                      # an unknown command left as raw LaTeX
    # HTML parsers put <math> in the MathML namespace themselves: no xmlns URL in the page
    root.attrib.pop("xmlns", None)
    content = list(root)
    semantics = ET.Element("semantics")
    if len(content) == 1:
        semantics.append(content[0])
    else:
        row = ET.SubElement(semantics, "mrow")
        row.extend(content)
    for el in content:
        root.remove(el)
    ET.SubElement(semantics, "annotation", encoding="application/x-tex").text = latex
    root.append(semantics)
    return ET.tostring(root, encoding="unicode", short_empty_elements=False)


def trace_settings(trace) -> list[tuple[str, str]]:
    """The shapes and settings the trace itself records, as (name, value) rows."""
    w = trace.attn_weights
    rows = [("heads", str(trace.num_heads))]
    if w is not None:
        rows.append(("d_model", str(w.d_model)))
    rows += [("d_k", str(trace.d_k)), ("d_v", str(trace.d_v)),
             ("queries × keys", f"{trace.n_q} × {trace.n_k}")]
    if math.isclose(trace.scale, 1 / math.sqrt(trace.d_k)):
        rows.append(("scale", f"1/√d_k = {trace.scale:.6g}"))
    else:
        rows.append(("scale", "1 (no scaling)" if trace.scale == 1.0 else f"{trace.scale:.6g}"))
    rows.append(("mask", _mask_text(trace)))
    if w is not None:
        rows.append(("biases", "yes" if w.has_bias else "no"))
    if trace.context is not None:
        rows.append(("attention", "cross-attention: keys and values from a second input"))
    return rows


def _mask_text(trace) -> str:
    if is_causal(trace):
        text = "causal (each token sees itself and earlier tokens only)"
    elif trace.mask is not None:
        shape = (trace.num_heads, trace.n_q, trace.n_k)
        text = f"{int(np.broadcast_to(trace.mask, shape).sum())} cells masked"
    else:
        text = "none"
    if trace.masked_scores is not trace.scaled_scores:
        free = ~np.isneginf(trace.masked_scores)
        if not np.array_equal(trace.masked_scores[free], trace.scaled_scores[free]):
            text += "; a float mask is added to the scores"
    return text


def describe_settings(settings) -> tuple[str | None, list[tuple[str, str]]]:
    """The app's settings in words: (where the input came from, [(setting, value), …]) with
    only the settings that matter for its mode. A mapping is listed as it is."""
    if settings is None:
        return None, []
    if not hasattr(settings, "mode"):
        return None, [(str(k), str(v)) for k, v in dict(settings).items()]
    s = settings
    yes = {True: "on", False: "off"}
    # heads, d_k, biases and the mask are read off the trace itself (trace_settings)
    random_weights = [("weights", f"random, {s.init} init, seed {s.seed} (plus any edits)")]
    switches = [("scaling by 1/√d_k", yes[s.scaled]), ("causal mask", yes[s.causal])]
    if s.mode == "Sentence":
        return (f"Sentence: “{s.sentence}”",
                [("embedding", f"one vector per token, seed {s.seed}"), *random_weights,
                 *switches, ("positional encoding", yes[s.positional]),
                 ("token limit", str(s.max_tokens))])
    if s.mode == "Matrix X":
        return ("Matrix X, entered by hand",
                [*random_weights, *switches, ("positional encoding", yes[s.positional])])
    if s.mode == "Preset":
        return f"Preset: {_preset_title(s.preset)}", switches
    if s.mode == "Q, K, V":
        return "Q, K and V, entered directly", switches
    if s.mode == "Pretrained model":
        return (f"Sentence: “{s.sentence}” through the pretrained all-MiniLM-L6-v2, "
                f"layer {s.layer}", [*switches, ("token limit", str(s.max_tokens))])
    return f"Mode: {s.mode}", switches


def _preset_title(name: str) -> str:
    from .presets import PRESET_NAMES, load_preset

    return load_preset(name).title if name in PRESET_NAMES else str(name)
