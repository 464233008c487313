"""attnviz.app.keys is the one place the app's session-state keys are spelled out.

Read from the source (ast): no module of the app writes a key as a string where it gives one to
Streamlit or to session state; every declared key is used; a widget is made only by its key's
owner. Run in the app (AppTest): every key session state holds after the pages ran is declared.
"""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from attnviz.app import keys
from attnviz.session.settings import Settings
from attnviz.core.modes import Mode
from tests.apptest_helpers import open_page
from tools import streamlit_compat

ROOT = Path(__file__).resolve().parents[1]
APP = ROOT / "attnviz" / "app"
MODULES = sorted(p for p in APP.rglob("*.py") if p.name != "keys.py")
SESSION_CALLS = {"get", "pop", "setdefault"}


def _module(path: Path) -> str:
    return ".".join(path.relative_to(APP).with_suffix("").parts)


def _keyish(name: str | None) -> bool:
    """A parameter or variable that holds a key: `key`, `…_key`, or `setting` (the sidebar's
    shown copies take the setting's key)."""
    return name is not None and (name == "key" or name.endswith("_key") or name == "setting")


def _is_session_state(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "session_state"


def _spelled(node: ast.AST) -> bool:
    return isinstance(node, ast.JoinedStr) or (isinstance(node, ast.Constant)
                                               and isinstance(node.value, str))


def _functions(trees: dict[str, ast.Module]) -> dict[str, dict[str, list[str]]]:
    """module → function name → its parameter names (positional first)."""
    found: dict[str, dict[str, list[str]]] = {}
    for module, tree in trees.items():
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef):
                a = node.args
                found.setdefault(module, {})[node.name] = [
                    p.arg for p in a.posonlyargs + a.args + a.kwonlyargs if p.arg != "self"]
    return found


def _params(functions, module: str, call: ast.Call) -> list[str] | None:
    """The parameters of the app function `call` calls: one in the same module, else the one
    function of that name in the app (None: not the app's, or more than one of that name)."""
    f = call.func
    name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
    if name in functions.get(module, {}):
        return functions[module][name]
    matches = [fs[name] for fs in functions.values() if name in fs]
    return matches[0] if len(matches) == 1 else None


def _key_places(trees):
    """(module, line, node) for every expression the app gives as a key."""
    functions = _functions(trees)
    for module, tree in trees.items():
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                given = {kw.arg: kw.value for kw in node.keywords}
                if "key" in given:
                    yield module, node.lineno, given["key"]
                f = node.func
                if (isinstance(f, ast.Attribute) and f.attr in SESSION_CALLS
                        and _is_session_state(f.value) and node.args):
                    yield module, node.lineno, node.args[0]
                params = _params(functions, module, node)
                if params is not None:
                    for name, arg in zip(params, node.args):
                        if _keyish(name):
                            yield module, node.lineno, arg
                    for name, arg in given.items():
                        if name != "key" and _keyish(name):
                            yield module, node.lineno, arg
                for callback in ("on_change", "on_click"):
                    args = given.get("args")
                    if callback in given and isinstance(args, ast.Tuple):
                        target = ast.Call(func=given[callback], args=[], keywords=[])
                        for name, arg in zip(_params(functions, module, target) or [], args.elts):
                            if _keyish(name):
                                yield module, node.lineno, arg
            elif isinstance(node, ast.Subscript) and _is_session_state(node.value):
                yield module, node.lineno, node.slice
            elif isinstance(node, ast.Compare) and any(_is_session_state(c)
                                                       for c in node.comparators):
                yield module, node.lineno, node.left
            elif isinstance(node, ast.FunctionDef):
                a = node.args
                for p, default in zip(a.args[len(a.args) - len(a.defaults):], a.defaults):
                    if _keyish(p.arg):
                        yield module, node.lineno, default
                for p, default in zip(a.kwonlyargs, a.kw_defaults):
                    if default is not None and _keyish(p.arg):
                        yield module, node.lineno, default
            elif isinstance(node, ast.Assign):
                for target in node.targets:
                    names = target.elts if isinstance(target, ast.Tuple) else [target]
                    values = (node.value.elts if isinstance(node.value, ast.Tuple)
                              and len(node.value.elts) == len(names) else [node.value] * len(names))
                    for name, value in zip(names, values):
                        if isinstance(name, ast.Name) and _keyish(name.id):
                            yield module, node.lineno, value


@pytest.fixture(scope="module")
def trees() -> dict[str, ast.Module]:
    return {_module(p): ast.parse(p.read_text(encoding="utf-8")) for p in MODULES}


def test_the_scan_finds_the_keys_it_is_meant_to_find():
    """The rules below would pass on code they cannot see: this code, written the old way,
    has each kind of place found."""
    old = ast.parse('''
def helper(view, key="head"):
    st.session_state[f"{key}_dropped"] = 1
def page():
    st.button("Go", key="go")
    st.session_state.get("mode")
    "sentence" in st.session_state
    helper(view, "query")
    st.text_input("x", on_change=helper, args=(None, "x_text"))
    notes_key = f"paste_notes_{name}"
''')
    places = list(_key_places({"m": old}))
    spelled = sorted(ast.unparse(n) for _, _, n in places if _spelled(n))
    assert spelled == sorted(["'head'", "f'{key}_dropped'", "'go'", "'mode'", "'sentence'",
                              "'query'", "'x_text'", "f'paste_notes_{name}'"])


def test_no_module_spells_a_key_out(trees):
    spelled = [f"attnviz/app/{m.replace('.', '/')}.py:{line}: {ast.unparse(node)}"
               for m, line, node in _key_places(trees) if _spelled(node)]
    assert spelled == [], "keys belong in attnviz.app.keys:\n" + "\n".join(spelled)


def _constants() -> dict[str, str]:
    """keys.NAME → the declared name (a key, a family's prefix, a suffix)."""
    out = {}
    for name, value in vars(keys).items():
        if not name.isupper():
            continue
        declared = (value if isinstance(value, str) else getattr(value, "prefix", None)
                    or getattr(value, "suffix", None))
        if declared in keys.REGISTRY:
            out[name] = declared
    return out


def test_every_declaration_has_its_constant_and_is_used(trees):
    constants = _constants()
    assert sorted(constants.values()) == sorted(keys.REGISTRY), "a declaration without a name"
    used = {node.attr for tree in trees.values() for node in ast.walk(tree)
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
            and node.value.id == "keys"}
    unused = sorted(set(constants) - used)
    assert unused == [], f"declared in attnviz.app.keys but used nowhere: {unused}"
    unknown = sorted(n for n in used if not hasattr(keys, n))
    assert unknown == []


def test_a_widget_is_made_only_by_its_keys_owner(trees):
    constants = _constants()
    wrong = []
    for module, tree in trees.items():
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            for kw in node.keywords:
                value = kw.value
                ref = value.func if isinstance(value, ast.Call) else value
                if (kw.arg == "key" and isinstance(ref, ast.Attribute)
                        and isinstance(ref.value, ast.Name) and ref.value.id == "keys"
                        and ref.attr in constants):
                    owners = keys.REGISTRY[constants[ref.attr]].owners
                    if module not in owners:
                        wrong.append(f"{module}:{node.lineno} makes keys.{ref.attr} "
                                     f"(owned by {', '.join(owners)})")
    assert wrong == []


def test_the_owners_are_modules_of_the_app():
    modules = {_module(p) for p in MODULES}
    strangers = {(d.name, o) for d in keys.REGISTRY.values() for o in d.owners
                 if o not in modules}
    assert strangers == set()


def test_the_sidebars_keys_are_the_settings_fields():
    fields = {f.name for f in dataclasses.fields(Settings)}
    declared = {d.name for d in keys.REGISTRY.values() if d.kind == "key"
                and any(owner.split(".")[0] == "sidebar" for owner in d.owners)}
    assert fields - declared == set()


def test_a_key_cannot_be_declared_twice_nor_made_by_two_declarations():
    with pytest.raises(ValueError, match="twice"):
        keys._register("mode", ("sidebar.input_source",))
    keys.REGISTRY["step_go_again"] = keys.Declared("step_go_again", ("steps.page",), "key")
    try:
        with pytest.raises(ValueError, match="could make"):
            keys._check()
    finally:
        del keys.REGISTRY["step_go_again"]
    keys._check()


def test_known_tells_declared_keys_from_others():
    assert keys.known(keys.MODE) and keys.known(keys.STEP_MAP("scores"))
    assert keys.known(keys.UPLOAD_ERROR(keys.X_TEXT)) and keys.known(keys.SHOWN(keys.MH_Z))
    assert not keys.known("mood") and not keys.known("mode_unknown_suffix")
    assert not keys.known(keys.SHOWN("mood"))


def _run(at: AppTest, page: str) -> set[str]:
    """Run `page`, show its tables, pin a baseline: the keys session state then holds."""
    at.switch_page(page).run()
    assert not at.exception, (page, at.exception)
    for toggle in at.toggle:
        if toggle.key and toggle.key.endswith(keys.SHOWN.suffix):
            toggle.set_value(True)
    at.run()
    for button in at.button:
        if button.key and button.key.endswith(keys.PIN.suffix):
            button.click().run()
            break
    assert not at.exception, (page, at.exception)
    return set(streamlit_compat.session_state_items(at))


@pytest.mark.slow
def test_every_key_the_pages_leave_in_session_state_is_declared():
    """Home, Inputs & weights, Step by step, Multi-head and Experiments in one session, and
    Step by step in each synthetic input mode: every key session state holds is declared (the
    models' pages are left to their own tests: they load the models)."""
    at = open_page(timeout=180)
    seen = set(streamlit_compat.session_state_items(at))
    for page in ("inputs", "steps", "multihead", "experiments", "home"):
        seen |= _run(at, f"pages/{page}.py")
    for mode in (Mode.PRESET, Mode.MATRIX_X, Mode.QKV):
        at.session_state[keys.MODE] = mode.value
        seen |= _run(at, "pages/steps.py")
    assert len(seen) > 60
    assert any(keys.STEP_TABLE.owns(k) for k in seen) and keys.SHOWN_SETTING("d_k") in seen
    strangers = sorted(k for k in seen if not keys.known(k))
    assert strangers == []
