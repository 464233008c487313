"""Each concept in one place (issue 20 item 3): the limits, the scale's wording."""

import math

import numpy as np
import pytest

import attnviz
from attnviz.session import build, settings
from attnviz.describe.scale import scale_words
from attnviz.i18n import Message, use_language
from tests.apptest_helpers import open_page
from tests.message_helpers import between, raises_message


# ---- limits once ------------------------------------------------------------------------------

def test_the_heads_limit_is_the_same_for_the_app_and_the_library():
    """The most heads a notebook can make is the most a page or a link takes: each accepts
    the app's largest and refuses one more (it was 16 in the app and 64 in the library)."""
    low, top = settings.BOUNDS["num_heads"]                  # the sidebar's and links'
    assert low == 1
    w = attnviz.MultiHeadWeights.random(top, top, seed=0)           # the largest both accept
    assert w.num_heads == top
    with raises_message("error.whole_number", name="num_heads", bounds=between(1, top),
                        value=str(top + 1)):
        attnviz.MultiHeadWeights.random(top + 1, top + 1, seed=0)
    view = build.build_view(settings.Settings(num_heads=top + 1, d_model=top + 1))
    assert view.trace is None
    assert view.error == Message("error.settings.heads", high=top, value=top + 1)
    assert build.build_view(settings.Settings(num_heads=top, d_model=top)).error is None


# ---- one scale wording ------------------------------------------------------------------------

def _trace(scale):
    x = np.random.default_rng(0).normal(size=(3, 8))
    return attnviz.trace_attention(x, attnviz.MultiHeadWeights.random(8, 2, seed=1), scale=scale)


# d_k = 4 here: 1/√4 = 0.5; a factor a hair off 1/√d_k (float noise) still reads ÷ √d_k
SCALES = [(None, "÷ √d_k", "÷ √d_k = ÷ √4 = × 0.5", True),
          (0.5 * (1 + 1e-11), "÷ √d_k", None, True),
          (1.0, "no scaling (× 1)", "no scaling (× 1)", False),
          (1 / 3, "× 0.3333333333333333", "× 0.3333333333333333", False)]


@pytest.mark.parametrize("scale, words, with_value, divides", SCALES)
def test_the_figure_the_report_and_the_formula_name_the_scale_alike(scale, words, with_value,
                                                                     divides):
    """The scaling was worded in four places with three tolerances (the formula called a
    factor 1e-11 off 1/√d_k "another factor" while the figure said ÷ √d_k; the figure wrote
    × 0.333333, the vector view × 0.3333333333333333). One function now (describe.scale)."""
    from attnviz.io.report import trace_settings
    from attnviz.plot.figures import query_vector_figure

    t = _trace(scale)
    assert scale_words(t.scale, t.d_k) == words
    if with_value is not None:
        assert scale_words(t.scale, t.d_k, value=True) == with_value
    subtitles = [a.text for a in query_vector_figure(t, 0).layout.annotations]
    assert f"scaled score ({words})" in subtitles
    assert dict(trace_settings(t))["scale"] == scale_words(t.scale, t.d_k, value=True)
    formula = next(s for s in t.steps if s.name == "scaled_scores").formula
    assert ("sqrt{d_k}" in formula) == divides
    with use_language("zh"):
        assert scale_words(1.0, 4) == "不缩放（× 1）"


def test_the_vector_views_table_names_the_scale_with_its_value():
    at = open_page("pages/steps.py", sentence="the cat sat", d_model=8, num_heads=2,
                   step="z", vector_view=True, vector_shown=True)
    index = [str(i) for f in at.dataframe for i in f.value.index]
    assert "÷ √d_k = ÷ √4 = × 0.5" in index, index


# ---- the input modes: one enum ------------------------------------------------------------------

@pytest.mark.slow
def test_the_input_modes_are_one_enum_and_no_module_spells_one_out():
    """Issue 20 item 3: the modes were string literals in 7 files. Now attnviz.core.modes.Mode;
    no module but that one writes a mode's value as a string (docstrings and the package's
    public names aside), and the app's modes, ids and link values all come from it."""
    import ast
    from pathlib import Path

    from attnviz.app.sidebar import input_source
    from attnviz.core.modes import Mode

    values = {m.value for m in Mode}
    package = Path(attnviz.__file__).resolve().parent
    spelled = []
    for path in sorted(package.rglob("*.py")):
        if path.name == "modes.py" or path == package / "__init__.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                      if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef))
                      and node.body and isinstance(node.body[0], ast.Expr)}
        spelled += [f"{path.relative_to(package)}:{node.lineno} {node.value!r}"
                    for node in ast.walk(tree) if isinstance(node, ast.Constant)
                    and node.value in values and id(node) not in docstrings]
    assert spelled == []
    assert settings.MODES == tuple(m.value for m in Mode)
    assert settings.TOY_MODE == Mode.TOY == "Toy model"
    assert input_source.MODE_IDS == {"Sentence": "sentence", "Preset": "preset",
                                     "Matrix X": "matrix_x", "Q, K, V": "qkv",
                                     "Pretrained model": "pretrained", "Toy model": "toy"}
    # a file's settings written with the words still read (the values did not change)
    s = settings.Settings.from_dict({**settings.Settings().to_dict(), "mode": "Q, K, V"})
    assert s.mode == Mode.QKV and type(settings.Settings().mode) is str


def test_the_tests_open_the_apps_pages_one_way():
    """Issue 35: the tests opened a page in AppTest seven ways (one ran Home before every
    page). tools/apptest.open_page (shared with the benchmarks, imported by
    tests/apptest_helpers) is now the only one: no test file builds an AppTest from a file (a
    script of the test's own, from_function or from_string, is not a page of the app)."""
    from pathlib import Path

    tests = Path(__file__).resolve().parent
    # test_threads.py runs app.py once in a fresh process that imports nothing of the tests
    allowed = {"test_threads.py"}
    call = "AppTest." + "from_file("                # (not this line)
    assert call in (tests.parent / "tools" / "apptest.py").read_text(encoding="utf-8")
    openers = sorted(p.name for p in tests.glob("*.py") if call in p.read_text(encoding="utf-8"))
    assert [name for name in openers if name not in allowed] == []
    # an AppTest of the test's own script finds Streamlit's components once too (see
    # tools/apptest.shared_components: otherwise 1-5 s for each)
    bare = [f"{p.name}: {line.strip()}" for p in sorted(tests.glob("*.py"))
            for line in p.read_text(encoding="utf-8").splitlines()
            if any(f"AppTest.{way}(" in line for way in ("from_function", "from_string"))
            and "shared_components(AppTest." not in line]
    assert bare == []
