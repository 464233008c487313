"""Small helpers so a UI change touches one line of the AppTest tests."""

from __future__ import annotations

import base64
import json
import re

from pathlib import Path

import numpy as np
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[1]
TIMEOUT = 120
PAGES = ("pages/home.py", "pages/inputs.py", "pages/steps.py", "pages/multihead.py")


def open_page(page: str = "pages/home.py", *, params: dict | None = None,
              locale: str | None = None, timeout: float = TIMEOUT, **state) -> AppTest:
    """The one way the tests open a page: `page` as a session's first run, nothing before it
    (a link opened, a fresh server's first request): app.py with the link's query `params`,
    the browser's `locale`, the seeded session `state`, switched to `page` before its first
    run, so Streamlit runs app.py's navigation straight to it (the page file runs the app
    around itself, attnviz.app.main.page_file); one run. No page may raise (a learner sees no
    traceback): checked here."""
    at = shared_components(AppTest.from_file(str(ROOT / "app.py"), default_timeout=timeout))
    for key, value in (params or {}).items():
        at.query_params[key] = value
    if locale:
        at.context["locale"] = locale
    for key, value in state.items():
        at.session_state[key] = value
    at.switch_page(page)
    at.run()
    no_exceptions(at)
    return at


_COMPONENTS: list = []


def shared_components(at: AppTest) -> AppTest:
    """`at` with the test process's one registry of the installed packages' custom components.
    Each new AppTest finds them again at its first run (Streamlit 1.67, PR #15488: it reads the
    metadata of every installed distribution, 1-5 s here, often more than the page itself);
    what is installed does not change while the tests run, so it is found once. Streamlit
    keeps the registry in AppTest._bidi_component_manager (None until the first run): a
    release that renames it fails here, not silently slow."""
    from streamlit.components.v2.component_manager import BidiComponentManager

    assert getattr(at, "_bidi_component_manager", "absent") is None, "Streamlit changed AppTest"
    if not _COMPONENTS:
        manager = BidiComponentManager()
        manager.discover_and_register_components(start_file_watching=False)
        _COMPONENTS.append(manager)
    at._bidi_component_manager = _COMPONENTS[0]
    return at


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
    from streamlit.runtime.media_file_manager import MediaFileManager

    made = {}
    original = MediaFileManager.add_deferred

    def record(self, data_callable, mimetype, coordinates, file_name=None, **kw):
        made[file_name] = data_callable
        return original(self, data_callable, mimetype, coordinates, file_name, **kw)

    monkeypatch.setattr(MediaFileManager, "add_deferred", record)
    return made


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
    from streamlit.proto.WidgetStates_pb2 import WidgetState

    chart = next(c for c in at.get("plotly_chart") if c.key == key)
    states = at._tree.get_widget_states()
    selection = {"points": points, "point_indices": [p["point_index"] for p in points],
                 "box": [], "lasso": []}
    states.widgets.append(WidgetState(id=chart.proto.id,
                                      string_value=json.dumps({"selection": selection})))
    return at._run(states)


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


def no_exceptions(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]


def button(at: AppTest, label: str):
    """The button with this label (tests find widgets by label or key, never by position)."""
    found = [b for b in at.button if b.label == label]
    assert found, f"no button {label!r}; the buttons are {[b.label for b in at.button]}"
    return found[0]


def apply_paste(at: AppTest) -> AppTest:
    """Press the editor's Apply button (keys.APPLY: the pasted matrix applied) and run."""
    from attnviz.app import keys

    found = [b for b in at.button if b.key and keys.APPLY.owns(b.key)]
    assert found, f"no Apply button; the buttons are {[b.key for b in at.button]}"
    return found[0].click().run()


def plain(element) -> str:
    """An alert's or caption's text as the reader sees it: the app escapes user text for
    Markdown (attnviz.app.text.literal), so drop those backslashes and invisible joiners."""
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

