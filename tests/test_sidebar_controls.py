"""The sidebar's controls do what they say (issue 18 items 4 and 5), in AppTest.

d_model and Heads move between sizes that work together while d_k = d_model / heads, or the
sidebar offers the nearest that do in one click; on the pages that run the pretrained model,
the settings that do not apply there are disabled, each saying why."""

import pytest
from streamlit.testing.v1 import AppTest

from attnviz.app import keys
from attnviz.i18n import ID_PATTERN, t
from tests.apptest_helpers import PAGES, charts, no_exceptions, open_page, shows

pytestmark = pytest.mark.slow        # each test runs pages or processes: see tests/conftest.py

DRAWING_PAGES = (*PAGES, "pages/experiments.py")      # every page that uses d_model and heads
REAL_MODEL_PAGES = ("pages/pretrained.py", "pages/reading.py")


def sidebar_widget(at: AppTest, name: str):
    """The sidebar's widget labelled `name`: a message id, or a symbol no language translates
    (d_model, d_k)."""
    label = t(name) if ID_PATTERN.fullmatch(name) else name
    found = [w for kind in ("number_input", "selectbox", "checkbox", "radio", "text_input")
             for w in getattr(at.sidebar, kind) if w.label == label]
    assert len(found) == 1, (label, found)
    return found[0]


# ---- item 4: d_model and Heads ------------------------------------------------------------------

def test_plus_on_d_model_with_4_heads_lands_on_a_multiple_of_4_that_every_page_draws():
    at = open_page("pages/home.py")                       # d_model 16, 4 heads
    assert at.session_state["num_heads"] == 4
    at.sidebar.number_input(key="d_model").increment().run()
    no_exceptions(at)
    d_model = at.session_state["d_model"]
    assert d_model > 16 and d_model % 4 == 0, d_model        # 20, not 17
    assert not at.error and charts(at)                      # Home, after the click
    for page in DRAWING_PAGES:
        other = open_page(page, d_model=d_model, num_heads=4)
        no_exceptions(other)
        assert not other.error, (page, [e.value for e in other.error])
        assert charts(other), page
    at = open_page("pages/home.py", d_model=d_model)
    at.sidebar.number_input(key="d_model").decrement().run()
    assert at.session_state["d_model"] == d_model - 4 and charts(at) and not at.error


@pytest.mark.parametrize("d_model, offered", [
    (12, [1, 2, 3, 4, 6, 12]), (16, [1, 2, 4, 8, 16]), (7, [1, 7]), (96, [1, 2, 3, 4, 6, 8, 12, 16]),
])
def test_heads_offers_only_counts_that_divide_d_model(d_model, offered):
    at = open_page("pages/home.py", d_model=d_model, num_heads=1)
    no_exceptions(at)
    heads = at.sidebar.selectbox(key="num_heads")
    assert [int(o) for o in heads.options] == offered


def test_with_d_k_set_by_hand_every_count_of_heads_and_every_d_model_step_is_offered():
    at = open_page("pages/home.py", d_model=16, num_heads=4, d_k=3)
    assert [int(o) for o in at.sidebar.selectbox(key="num_heads").options] == list(range(1, 17))
    at.sidebar.number_input(key="d_model").increment().run()
    assert at.session_state["d_model"] == 17 and not at.error and charts(at)


def test_a_d_model_that_does_not_divide_offers_the_nearest_ones_in_one_click():
    at = open_page("pages/home.py", d_model=18, num_heads=4)    # typed, or from a link
    no_exceptions(at)
    assert shows(at.sidebar.warning, "sidebar.size_fix.warning", d_model=18, heads=4)
    fixes = [(b.key, b.label) for b in at.sidebar.button]
    assert fixes == [(keys.FIX(keys.D_MODEL, 16), "d_model 16"),
                     (keys.FIX(keys.D_MODEL, 20), "d_model 20"),
                     (keys.FIX(keys.NUM_HEADS, 3), t("sidebar.size_fix.heads", count=3))]
    heads = at.sidebar.selectbox(key="num_heads")               # kept, not changed silently
    assert heads.value == 4 and heads.options == ["1", "2", "3", "4", "6", "9"]
    at.sidebar.button(key=keys.FIX(keys.D_MODEL, 20)).click().run()
    no_exceptions(at)
    assert at.session_state["d_model"] == 20 and at.session_state["num_heads"] == 4
    assert not at.error and charts(at)
    at = open_page("pages/home.py", d_model=18, num_heads=4)
    at.sidebar.button(key=keys.FIX(keys.NUM_HEADS, 3)).click().run()
    assert at.session_state["d_model"] == 18 and at.session_state["num_heads"] == 3
    assert not at.error and charts(at)


def test_a_matrix_x_whose_width_does_not_divide_offers_a_count_of_heads_that_does():
    at = open_page("pages/home.py", mode="Matrix X", x_text="1 2 3\n4 5 6", num_heads=2)
    # 1 and 3 divide X's width 3; 2, the user's, stays offered while the warning says why
    assert at.sidebar.selectbox(key="num_heads").options == ["1", "2", "3"]
    assert shows(at.sidebar.warning, "sidebar.size_fix.warning", d_model=3, heads=2)
    assert [b.key for b in at.sidebar.button] == [keys.FIX(keys.NUM_HEADS, 3)]   # X's width
    at.sidebar.button(key=keys.FIX(keys.NUM_HEADS, 3)).click().run()        # is not ours to set
    assert at.session_state["num_heads"] == 3 and not at.error and charts(at)


# ---- item 5: the pages of the pretrained model -------------------------------------------------

USED_HERE = ("sidebar.sentence.label", "sidebar.max_tokens.label")
NOT_USED_HERE = ("sidebar.mode.label", "d_model", "sidebar.heads.label", "d_k",
                 "sidebar.init.label", "sidebar.seed.label", "sidebar.bias.label",
                 "sidebar.scaled.label", "sidebar.causal.label", "sidebar.positional.label")


@pytest.mark.parametrize("page", REAL_MODEL_PAGES)
def test_on_the_pretrained_model_pages_settings_that_do_nothing_are_disabled_and_say_why(page):
    at = open_page(page, num_heads=8, d_model=32, seed=7, init="gaussian")
    no_exceptions(at)
    assert at.title[0].value in (t("pretrained.title"), t("nav.reading"))
    for label in NOT_USED_HERE:
        widget = sidebar_widget(at, label)
        assert widget.disabled, label
        assert "all-MiniLM-L6-v2" in (widget.help or ""), (label, widget.help)
    for label in USED_HERE:
        assert not sidebar_widget(at, label).disabled, label
    # the model's own sizes are shown (all-MiniLM-L6-v2: d_model 384, 12 heads of d_k 32)
    assert (sidebar_widget(at, "d_model").value, sidebar_widget(at, "sidebar.heads.label").value,
            sidebar_widget(at, "d_k").value) == (384, 12, 32)
    # the user's own settings stay for the other pages
    assert (at.session_state["num_heads"], at.session_state["d_model"],
            at.session_state["seed"], at.session_state["init"]) == (8, 32, 7, "gaussian")


def test_on_home_the_same_settings_are_enabled():
    at = open_page("pages/home.py")
    for label in ("d_model", "sidebar.heads.label", "sidebar.init.label", "sidebar.seed.label",
                  "sidebar.mode.label"):
        assert not sidebar_widget(at, label).disabled, label
