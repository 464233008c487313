"""Every text an AppTest run shows, and the words in the wrong language among them.

    texts = visible_texts(at)                      # or visible_texts(at, at.sidebar)
    assert not english_sentences(texts, ignore=tokens)      # a page in lang=zh
    assert not chinese_outside(texts, ignore=tokens)         # a page in English

`visible_texts` walks the element tree (titles, headers, captions, markdown, alerts, labels,
help texts, options, button and link labels, expander and tab labels) and each plotly chart's
JSON (title, subtitle, axis titles, annotations, colour-bar titles, hover templates, legend
names), and, for the whole app, the navigation's page titles. LaTeX is skipped (formulas are
the same in every language), and so are code spans (tokens, code).

An "English sentence" is three or more English words in a row: words of two or more letters
(single letters such as Q, K, V, i, j, identifiers such as W_Q, d_model, L6 and numbers neither
count nor break a run), separated by spaces and plain punctuation only; a proper name from
PROPER_NAMES does not count either. Strings passed as `ignore` (the input's tokens, preset names)
are removed first.
"""

from __future__ import annotations

import html
import json
import re
from dataclasses import dataclass

from attnviz.i18n import languages, native_name
from tools import streamlit_compat

# proto fields that hold shown text (not ids, values, raw options or icons)
TEXT_FIELDS = {"body", "label", "help", "options", "content", "placeholder"}
SKIPPED_ELEMENTS = {"latex", "code"}
PROPER_NAMES = {"MiniLM", "SmolLM", "BERT", "WordPiece", "Transformer", "Transformers",
                "Xavier", "Kaiming", "NumPy", "JSON", "CSV", "HTML", "PNG", "SVG", "PyTorch",
                "torch", "softmax", "Softmax", "Self-Attention", "Attention", "Thinking",
                "Machines", "CLS", "SEP", "UNK", "Abnar", "Zuidema", "Kobayashi", "GELU",
                "LayerNorm", "RoPE", "GQA", "ReLU", "Adam", "MHA", "Gemma"}
CJK = re.compile(r"[\u2e80-\u2fff\u3000-\u303f\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff"
                 r"\uf900-\ufaff\uff00-\uffef]")
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_]*(?:['’-][A-Za-z0-9_]+)*")
_GAP = re.compile(r"[\s,.;:!?'\"“”‘’()\[\]/&*+\-–—0-9]*")     # between two words of a run
_LATEX = re.compile(r"\$\$.*?\$\$|\$[^$]*\$|\\\(.*?\\\)", re.S)
_CODE = re.compile(r"(`+)(.+?)(?<!`)\1(?!`)", re.S)
_TAGS = re.compile(r"<[^>]+>")
_STYLE = re.compile(r"<style>.*?</style>", re.S)       # CSS (app/main.py's): never shown
_HOVER = re.compile(r"%\{[^}]*\}|<extra>.*?</extra>")
_URL = re.compile(r"https?://\S+")


@dataclass(frozen=True)
class Shown:
    """One text as the page shows it, and where (element type and field, or chart part)."""

    where: str
    text: str


# ---- collecting ------------------------------------------------------------------------------

def visible_texts(at, node=None, *, navigation: bool = True) -> list[Shown]:
    """Every text `node` (default: the whole page, main and sidebar) shows, charts included;
    with `navigation` (and no node), the navigation's page titles too."""
    found: list[Shown] = []
    _walk(streamlit_compat.element_tree(at) if node is None else node, found)
    if node is None and navigation:
        found += [Shown("navigation", title) for title in streamlit_compat.navigation_titles(at)
                  if title]
    return found


def _walk(node, found: list[Shown]) -> None:
    kind = getattr(node, "type", "")
    proto = getattr(node, "proto", None)
    if kind not in SKIPPED_ELEMENTS and proto is not None and hasattr(proto, "ListFields"):
        if kind == "plotly_chart":
            found += [Shown(f"chart {where}", text)
                      for where, text in chart_texts(json.loads(proto.spec))]
        else:
            _proto_texts(proto, kind, found)
    for child in (getattr(node, "children", None) or {}).values():
        _walk(child, found)


def _proto_texts(message, where: str, found: list[Shown]) -> None:
    for field, value in message.ListFields():
        values = list(value) if field.is_repeated else [value]
        if field.type == field.TYPE_MESSAGE:
            for v in values:
                _proto_texts(v, f"{where}.{field.name}", found)
        elif field.type == field.TYPE_STRING and field.name in TEXT_FIELDS:
            found += [Shown(f"{where}.{field.name}", v) for v in values if v]


def chart_texts(fig: dict) -> list[tuple[str, str]]:
    """(part, text) of what a plotly figure dict shows in words."""
    out = []
    layout = fig.get("layout", {})

    def title(part: str, obj) -> None:
        if isinstance(obj, dict):
            text = obj.get("text")
            if text:
                out.append((part, text))
            sub = obj.get("subtitle")
            if isinstance(sub, dict) and sub.get("text"):
                out.append((part + ".subtitle", sub["text"]))
        elif isinstance(obj, str) and obj:
            out.append((part, obj))

    title("title", layout.get("title"))
    for name, axis in layout.items():
        if re.fullmatch(r"[xy]axis\d*", name) and isinstance(axis, dict):
            title(f"{name}.title", axis.get("title"))
    for note in layout.get("annotations", []):
        if note.get("text"):
            out.append(("annotation", note["text"]))
    title("coloraxis.colorbar", layout.get("coloraxis", {}).get("colorbar", {}).get("title"))
    title("legend.title", layout.get("legend", {}).get("title"))
    for trace in fig.get("data", []):
        title("colorbar", trace.get("colorbar", {}).get("title"))
        if trace.get("hovertemplate"):
            out.append(("hover", trace["hovertemplate"]))
        if trace.get("name") and trace.get("showlegend", trace.get("type") != "heatmap"):
            out.append(("legend", trace["name"]))
    return out


# ---- judging ---------------------------------------------------------------------------------

def prose(text: str, ignore=()) -> str:
    """`text` without what is not prose in a language: LaTeX, code spans, HTML tags, hover
    placeholders, addresses, style sheets, and the `ignore` strings (longest first)."""
    text = _STYLE.sub(" ", text)
    text = _HOVER.sub(" ", text)
    text = html.unescape(_TAGS.sub(" ", text))
    text = _LATEX.sub(" ", text)
    text = _CODE.sub(" ", text)
    text = _URL.sub(" ", text)
    text = text.replace("\\", "")                   # Markdown escapes (ui.text.literal)
    for s in sorted({str(s) for s in ignore if str(s).strip()}, key=len, reverse=True):
        text = text.replace(s, " ")
    return text


def english_runs(text: str, min_words: int = 3) -> list[str]:
    """The runs of `min_words` or more English words in a row in `text` (see the module)."""
    text = _WORD.sub(lambda m: m.group() if _counts(m.group()) else " ", text)
    runs, run, end = [], [], 0
    for m in _WORD.finditer(text):
        if run and not _GAP.fullmatch(text[end:m.start()]):
            if len(run) >= min_words:
                runs.append(" ".join(run))
            run = []
        run.append(m.group())
        end = m.end()
    if len(run) >= min_words:
        runs.append(" ".join(run))
    return runs


def _counts(word: str) -> bool:
    """A word of a sentence: two or more letters, not an identifier or a proper name."""
    return len(word) >= 2 and not re.search(r"[0-9_]", word) and word not in PROPER_NAMES


def english_sentences(texts: list[Shown], ignore=()) -> list[tuple[str, str, str]]:
    """(where, run, whole text) of every English sentence among `texts`."""
    return [(s.where, run, s.text) for s in texts for run in english_runs(prose(s.text, ignore))]


def chinese_outside(texts: list[Shown], ignore=()) -> list[tuple[str, str]]:
    """(where, text) of every text with Chinese characters outside `ignore` and the
    languages' own names (the language switch shows 中文 in every language)."""
    allowed = [*ignore, *(native_name(lang) for lang in languages())]
    return [(s.where, s.text) for s in texts if CJK.search(prose(s.text, allowed))]
