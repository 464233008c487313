"""Small helpers so a UI change touches one line of the AppTest tests. A page is opened with
tools/apptest.py's ``open_page`` (shared with the benchmarks), imported here."""

from __future__ import annotations

import base64
import json
import re

import numpy as np
from streamlit.testing.v1 import AppTest

from tools import streamlit_compat
from tools.apptest import ROOT, TIMEOUT, no_exceptions, open_page, shared_components  # noqa: F401

PAGES = ("pages/home.py", "pages/inputs.py", "pages/steps.py", "pages/multihead.py")


class Runs:
    """One run per distinct opening, shared by the tests that only read it (module- or
    class-scoped fixtures): `runs(page, params=…, **state)` opens it the first time (with
    :func:`open_page`) and gives the same AppTest afterwards. A test that clicks, types or
    sets a widget opens its own page instead."""

    def __init__(self):
        self._runs: dict = {}

    def __call__(self, page: str = "pages/home.py", **how) -> AppTest:
        key = (page, repr(sorted(how.items(), key=lambda kv: kv[0])))
        if key not in self._runs:
            self._runs[key] = open_page(page, **how)
        return self._runs[key]


def check_all(failures: list[str]) -> None:
    """One assertion for a loop of cases over shared runs: every failed case named (page,
    language, element) and what it found, not only the first."""
    assert not failures, "\n".join(failures)


def record_downloads(monkeypatch) -> dict:
    """file name → the callable a download button registers (it makes the file when clicked,
    outside the script run)."""
    return streamlit_compat.record_deferred_files(monkeypatch)


def charts(at: AppTest) -> list[dict]:
    """Every plotly chart on the page as its figure dict."""
    return [json.loads(c.proto.spec) for c in at.get("plotly_chart")]


def charts_keyed(at: AppTest, key) -> list[dict]:
    """Every plotly chart whose widget key is `key` (a string), or of the family `key` (an
    attnviz.app.keys.Family: ``keys.DELTA_MAP``), as its figure dict: a chart found by what
    it is, not by its title's words."""
    owns = key.owns if hasattr(key, "owns") else key.__eq__
    return [json.loads(c.proto.spec) for c in at.get("plotly_chart") if c.key and owns(c.key)]


def click_points(at: AppTest, key: str, points: list[dict]) -> AppTest:
    """Run the page as after a click on the points of the plotly chart `key` (drawn with
    on_select): the selection the browser sends (Streamlit's PlotlyChart sends each plotly
    point with its fields in snake case: x, y, curve_number, point_index …) beside every
    widget's value. AppTest has no way to click a chart, so this adds that widget state."""
    chart = next(c for c in at.get("plotly_chart") if c.key == key)
    states = streamlit_compat.widget_states(at)
    selection = {"points": points, "point_indices": [p["point_index"] for p in points],
                 "box": [], "lasso": []}
    states.widgets.append(streamlit_compat.widget_state(
        chart.proto.id, string_value=json.dumps({"selection": selection})))
    return streamlit_compat.run_with_states(at, states)


def elements(node):
    """`node` (an AppTest's element tree: streamlit_compat.element_tree(at)) and every element
    under it, depth first."""
    yield node
    children = getattr(node, "children", None)
    for child in (children.values() if isinstance(children, dict) else children or []):
        yield from elements(child)


def widget_values(at: AppTest) -> dict:
    """{key: value} of every keyed widget on the page (the sidebar's too), as drawn."""
    from streamlit.testing.v1 import element_tree as et

    return {node.key: node.value for node in elements(streamlit_compat.element_tree(at))
            if isinstance(node, et.Widget) and node.key and not node.key.startswith("$$")}


def chart_bytes(at: AppTest) -> int:
    return sum(len(c.proto.spec) for c in at.get("plotly_chart"))


def decode(values) -> np.ndarray:
    """A plotly JSON array: a plain list, or numpy's base64 form {dtype, bdata, shape}."""
    if isinstance(values, dict) and "bdata" in values:
        a = np.frombuffer(base64.b64decode(values["bdata"]), dtype=np.dtype(values["dtype"]))
        shape = values.get("shape")
        if shape:
            a = a.reshape([int(s) for s in str(shape).split(",")])
        return a
    return np.array(values, dtype=float)


def heatmap_z(fig: dict, trace: int = 0) -> np.ndarray:
    return decode(fig["data"][trace]["z"])


def button(at: AppTest, label: str):
    """The button with this label (tests find widgets by label or key, never by position)."""
    found = [b for b in at.button if b.label == label]
    assert found, f"no button {label!r}; the buttons are {[b.label for b in at.button]}"
    return found[0]


def apply_paste(at: AppTest) -> AppTest:
    """Press the editor's Apply button (keys.APPLY: the pasted matrix applied) and run: the
    box's text typed before it (area.input(text), no run between) goes with the click, one form."""
    from attnviz.app import keys

    found = [b for b in at.button if b.key and keys.APPLY.owns(b.key)]
    assert found, f"no Apply button; the buttons are {[b.key for b in at.button]}"
    return found[0].click().run()


def plain(element) -> str:
    """An alert's or caption's text as the reader sees it: the app escapes user text for
    Markdown (attnviz.app.shared.text.literal), so drop those backslashes and invisible joiners."""
    return re.sub(r"\\(.)", r"\1", element.value).replace("\u2060", "")


def shows(elements, msg_id: str, /, **known) -> bool:
    """Whether one of the page's `elements` (alerts, captions, toasts) shows the message
    `msg_id`, with the parameters in `known` (see message_helpers.message_pattern)."""
    from tests.message_helpers import message_pattern

    pattern = message_pattern(msg_id, **known)
    return any(pattern.search(plain(e)) for e in elements)


def title_text(fig: dict) -> str:
    """A figure's title as its reader reads it: HTML entities unescaped, the line breaks
    attnviz.plot.text_layout.wrap_title put at a space (or after a CJK comma) taken out."""
    import html

    title = fig["layout"].get("title") or {}
    return html.unescape(title.get("text", "") if isinstance(title, dict) else str(title))


def titled(at: AppTest, msg_id: str, /, **known) -> dict:
    """The page's chart whose title is the message `msg_id` (the parameters in `known` as it
    renders them, any other any text: message_helpers.message_pattern): a chart found by what
    its title says, not by its English wording."""
    found = charts_titled(at, msg_id, **known)
    assert found, (f"no chart titled {msg_id} {known}; the titles are "
                   f"{[title_text(fig) for fig in charts(at)]}")
    return found[0]


def charts_titled(at: AppTest, msg_id: str, /, **known) -> list[dict]:
    """Every chart of the page whose title shows the message `msg_id` (see :func:`titled`)."""
    from tests.message_helpers import message_pattern

    pattern = message_pattern(msg_id, **known)
    return [fig for fig in charts(at)
            if any(pattern.fullmatch(title_text(fig).replace("<br>", joint))
                   for joint in (" ", ""))]


def shown_tokens(at: AppTest) -> list[str]:
    """The tokens of the page's token line (Markdown code spans, ui/text.token_line)."""
    line = next(m.value for m in at.markdown if m.value.lstrip("\u2068").startswith("`"))
    return [m.group(2).strip() for m in re.finditer(r"(`+)(.+?)(?<!`)\1(?!`)", line)]


def reachable(root, limit: int = 2_000_000) -> list:
    """Every object reachable from `root` through references (closures, callbacks and their
    arguments, containers, fields), except classes, modules and loaded modules' globals: those
    are shared by every session (caches included), not held by `root`."""
    import gc
    import sys
    import types

    module_dicts = {id(m.__dict__) for m in list(sys.modules.values()) if m is not None}
    seen, stack, found = set(), [root], []
    while stack and len(seen) < limit:
        o = stack.pop()
        if id(o) in seen or id(o) in module_dicts or isinstance(o, (type, types.ModuleType)):
            continue
        seen.add(id(o))
        found.append(o)
        stack.extend(gc.get_referents(o))
    return found

