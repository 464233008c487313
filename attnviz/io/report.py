"""One self-contained HTML report of a trace: every step's heatmaps with its formula rendered
as MathML, the input and the settings named; it opens offline (plotly's JavaScript inlined,
no URL referenced). The plain files (.npz, CSV zip, JSON) are attnviz.io.files.
"""

from __future__ import annotations

import html

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from attnviz.io.files import is_causal
from attnviz.core.modes import Mode
from attnviz.describe.labels import trace_tokens, visible
from attnviz.describe.scale import scale_words
from attnviz.i18n import language, t

if TYPE_CHECKING:
    from attnviz.core.trace import AttentionTrace

# ---- one self-contained HTML page ---------------------------------------------------------------

def report_html(trace: AttentionTrace, tokens_q: Sequence[str] | None = None,
                tokens_k: Sequence[str] | None = None, *, title: str | None = None,
                source: str | None = None, settings: object | None = None) -> str:
    """Every step of `trace` (each head of per-head steps) as heatmaps in one HTML file that
    opens offline: plotly's JavaScript is inlined once, formulas are MathML (which browsers
    draw themselves), no CDN or other URL is referenced.

    Parameters
    ----------
    trace : AttentionTrace
        The computation to report.
    tokens_q, tokens_k : sequence of str, optional
        Query and key labels, as in :func:`attnviz.plot.figures.step_figure`.
    title : str, optional
        The page's title and heading (default "attnviz report", in the active language).
    source : str, optional
        What the input was, in words, e.g. ``'Sentence: “The cat sat.”'``; by default it is
        derived from `settings` when that is the app's ``Settings``.
    settings : attnviz.session.settings.Settings or mapping, optional
        The app's settings (described as text: sentence or preset, d_model, heads, …), or any
        mapping of name → value, shown as a table.

    Everything from the user (title, source, settings, tokens) is HTML-escaped. The report's
    own words are in the language active when it is made (``<html lang>`` says which).
    """
    from attnviz.plot import figures

    labels_q, labels_k = trace_tokens(trace, tokens_q, tokens_k)
    described_source, items = describe_settings(settings)
    source = described_source if source is None else source
    title = t("report.title") if title is None else title
    parts = [f"<h1>{_esc(title)}</h1>",
             f"<section class='input'><h2>{_esc(t('report.input'))}</h2>"]
    if source:
        parts.append(f"<p class='source'>{_esc(visible(source))}</p>")   # no U+202E reversing it
    if items:
        parts.append(_table(items, t("report.settings")))
    parts.append(_table(trace_settings(trace), t("report.this_trace")))
    parts.append(f"<p class='tokens'>{_esc(t('report.queries'))} {_token_list(labels_q)}</p>")
    if labels_k != labels_q:
        parts.append(f"<p class='tokens'>{_esc(t('report.keys'))} {_token_list(labels_k)}</p>")
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
            parts.append(figures.html_div(fig, include_plotlyjs=first))
            first = False
    body = "\n".join(parts)
    return (f"<!DOCTYPE html><html lang='{_esc(language())}'><head><meta charset='utf-8'>"
            f"<title>{_esc(title)}"
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
    # <bdi>: a right-to-left token keeps its place in the line, whatever its neighbours
    return "".join(f"<bdi class='tok'>{_esc(visible(t))}</bdi>" for t in tokens)


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
    """The shapes and settings the trace itself records, as (name, value) rows, in the active
    language."""
    w = trace.params
    rows = [(t("report.row.heads"), str(trace.num_heads))]
    if w is not None:
        rows.append(("d_model", str(w.d_model)))
    rows += [("d_k", str(trace.d_k)), ("d_v", str(trace.d_v)),
             (t("report.row.shape"), f"{trace.n_q} × {trace.n_k}")]
    rows.append((t("report.row.scale"), scale_words(trace.scale, trace.d_k, value=True)))
    rows.append((t("report.row.mask"), _mask_text(trace)))
    if w is not None:
        rows.append((t("report.row.biases"), t("report.yes" if w.has_bias else "report.no")))
    if trace.context is not None:
        rows.append((t("report.row.attention"), t("report.cross_attention")))
    return rows


def _mask_text(trace) -> str:
    if is_causal(trace):
        text = t("report.mask.causal")
    elif trace.mask is not None:
        shape = (trace.num_heads, trace.n_q, trace.n_k)
        text = t("report.mask.cells", count=int(np.broadcast_to(trace.mask, shape).sum()))
    else:
        text = t("report.mask.none")
    if trace.has_mask:
        free = ~np.isneginf(trace.masked_scores)
        if not np.array_equal(trace.masked_scores[free], trace.scaled_scores[free]):
            text += t("report.mask.float")
    return text


def describe_settings(settings) -> tuple[str | None, list[tuple[str, str]]]:
    """The app's settings in words: (where the input came from, [(setting, value), …]) with
    only the settings that matter for its mode, in the active language. A mapping is listed
    as it is."""
    if settings is None:
        return None, []
    if not hasattr(settings, "mode"):
        return None, [(str(k), str(v)) for k, v in dict(settings).items()]
    s = settings
    yes = {True: t("report.on"), False: t("report.off")}
    # heads, d_k, biases and the mask are read off the trace itself (trace_settings)
    random_weights = [(t("report.setting.weights"),
                       t("report.setting.weights.random", init=s.init, seed=s.seed))]
    switches = [(t("report.setting.scaling"), yes[s.scaled]),
                (t("report.setting.causal"), yes[s.causal])]
    positional = (t("report.setting.positional"), yes[s.positional])
    limit = (t("report.setting.token_limit"), str(s.max_tokens))
    if s.mode == Mode.SENTENCE:
        return (t("report.source.sentence", sentence=s.sentence),
                [(t("report.setting.embedding"), t("report.setting.embedding.value",
                                                    seed=s.seed)),
                 *random_weights, *switches, positional, limit])
    if s.mode == Mode.MATRIX_X:
        return t("report.source.matrix_x"), [*random_weights, *switches, positional]
    if s.mode == Mode.PRESET:
        return t("report.source.preset", title=_preset_title(s.preset)), switches
    if s.mode == Mode.QKV:
        return t("report.source.qkv"), switches
    if s.mode == Mode.PRETRAINED:
        return (t("report.source.pretrained", sentence=s.sentence, layer=s.layer),
                [*switches, limit])
    if s.mode == Mode.TOY:             # its mask and scaling are the trace's (listed below)
        return t("report.source.toy", layer=s.layer), []
    return t("report.source.mode", mode=s.mode), switches


def _preset_title(name: str) -> str:
    """A preset's title in the active language (an unknown name as it is)."""
    from attnviz.tutorials.presets import PRESET_NAMES

    return t(f"preset.{name}.title") if name in PRESET_NAMES else str(name)
