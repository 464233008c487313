"""Shared links: the URL's query string reopens the same view; garbage never raises."""

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

import attnviz
import attnviz.session.edits
import attnviz.app.keys
import attnviz.session.settings
from attnviz.i18n import t, use_language
from attnviz.models.decoders.decoder import MAX_TOKENS
from attnviz.app.generate import generate_view
from tests.apptest_helpers import (TIMEOUT, charts, decode, heatmap_z, no_exceptions, open_page,
                                   plain, shared_components, shows)

EVERY_SETTING = {
    "mode": "Sentence", "sentence": "早上好 the cat", "d_model": "12", "num_heads": "3",
    "d_k": "5", "init": "kaiming", "seed": "7", "bias": "1", "scaled": "0", "causal": "1",
    "positional": "1", "max_tokens": "4", "step": "weights", "head": "2",
}


def expected_weights_every_setting() -> np.ndarray:
    """The same view computed straight from the engine, not through the app."""
    tokens = attnviz.tokenize("早上好 the cat")[:4]
    x = attnviz.embed_tokens(tokens, 12, seed=7) + attnviz.sinusoidal_positions(4, 12)
    w = attnviz.MultiHeadWeights.random(12, 3, d_k=5, d_v=5, init="kaiming", seed=7, bias=True)
    return attnviz.trace_attention(x, w, causal=True, scale=1.0).weights[2]


def test_a_link_with_every_setting_reproduces_the_trace():
    at = open_page("pages/steps.py", params=EVERY_SETTING)
    no_exceptions(at)
    assert at.session_state["step"] == "weights" and at.session_state["head"] == 2
    shown = heatmap_z(charts(at)[0])
    want = expected_weights_every_setting()
    np.testing.assert_allclose(np.nan_to_num(shown, nan=0.0), want, atol=1e-12)
    assert shows(at.info, "notice.tokens.cut_at_limit", count=5, used=4, maximum=512)


def test_the_app_writes_what_differs_from_the_defaults_into_the_url():
    at = open_page(sentence="hello world", num_heads=2, causal=True)
    assert dict(at.query_params) == {"sentence": "hello world", "num_heads": "2",
                                     "causal": "1"}


@pytest.mark.slow
def test_edited_matrices_travel_in_the_link():
    state = {"sentence": "a b", "d_model": 2, "num_heads": 1}
    signature = attnviz.session.settings.weights_signature(
        attnviz.session.settings.Settings(**state))
    w_v = np.array([[[0.5, -1.0], [2.0, 0.25]]])
    first = open_page(**state, edits={signature: {
        "x": attnviz.session.edits.Edit(np.array([[1.0, 2], [3, 4]]), ("a", "b")),
        "w_v": attnviz.session.edits.Edit(w_v)}})
    link = dict(first.query_params)
    assert "edits" in link and link["sentence"] == "a b"
    again = open_page("pages/steps.py", params={**link, "step": "v"})
    np.testing.assert_allclose(heatmap_z(charts(again)[0]), np.array([[1, 2], [3, 4]]) @ w_v[0])


def _encoded(doc_text: str) -> str:
    import base64
    import zlib

    raw = zlib.compress(doc_text.encode("utf-8"), 9)
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


HOSTILE = [
    {"edits": _encoded('{"w_q": {"values": ' + "[" * 5000 + "]" * 5000 + "}}")},   # deep
    {"edits": _encoded('{"w_q": {"values": [' + "0," * 3_000_000 + "0]}}")},        # a bomb
    {"edits": "A" * 400_000},              # (Streamlit drops a query string over 512 K chars)
    {"sentence": "x" * 400_000},
    {"x_text": "1 " * 200_000, "mode": "Matrix X"},
    {"[Your session expired](https://evil.example/login)": "1", "a" * 5000: "b"},
]


@pytest.mark.slow
@pytest.mark.parametrize("params", HOSTILE)
def test_a_hostile_link_gives_a_notice_and_the_page_still_draws(params):
    at = open_page("pages/steps.py", params=params)
    no_exceptions(at)
    home = open_page(params=params)
    no_exceptions(home)
    assert home.sidebar.warning, "a notice says what was ignored"
    assert charts(home), "the page still draws"


def test_a_link_over_streamlits_limit_opens_the_default_view():
    home = open_page(params={"sentence": "x" * 1_000_000})
    no_exceptions(home)
    assert home.session_state["sentence"] == attnviz.session.settings.DEFAULT_SENTENCE
    assert charts(home)


@pytest.mark.slow
@pytest.mark.parametrize("params", [
    {"d_model": "lots", "num_heads": "-3", "seed": "1e99"},
    {"mode": "<script>", "preset": "nope", "init": "0", "bias": "maybe"},
    {"edits": "not base64!", "step": "nope", "head": "99", "query": "x"},
    {"edits": "eJzLSM3JyVcozy_KSQEAGgQEXQ", "max_tokens": "100000"},
    {"sentence": "x" * 30_000, "unknown": "1", "layer": "42", "d_k": "999999999999"},
])
def test_garbage_in_the_link_falls_back_with_a_notice(params):
    for page in ("pages/home.py", "pages/steps.py", "pages/multihead.py", "pages/inputs.py"):
        at = open_page(page, params=params)             # no exception: open_page checks
        if page == "pages/home.py":
            assert at.warning or at.error


# ---- issue 18.16: every parameter of a link is bounded -----------------------------------------

import attnviz.app.shared.links as links_module          # noqa: E402

DEEP = "[" * 5000 + "]" * 5000                      # the link: 5000 levels, 10 KB
TOO_LONG = "\x00\u202e" + "9" * 30_000              # past every limit, with a NUL and an RLO
# the settings one by one; the pages' picks (each read the same way: links._parse) all at once
# in test_every_page_pick_is_bounded
EVERY_PARAMETER = [*attnviz.session.settings.Settings().__dict__, "edits", "unsaved_edits"]
USED_IN = {"x_text": "Matrix X", "q_text": "Q, K, V", "k_text": "Q, K, V", "v_text": "Q, K, V"}


def _everything_shown(at) -> str:
    parts = [e.value for kind in ("markdown", "caption", "error", "warning", "info", "success")
             for e in getattr(at, kind)]
    return " ".join(str(p) for p in parts)


@pytest.mark.slow
@pytest.mark.parametrize("name", EVERY_PARAMETER)
@pytest.mark.parametrize("value", [DEEP, TOO_LONG], ids=["nested", "too long"])
def test_every_link_parameter_is_bounded(name, value):
    """A hostile value in any one parameter (in the mode that uses it): no traceback, no
    server path, the page draws, and what was refused is said."""
    params = {name: value, **({"mode": USED_IN[name]} if name in USED_IN else {})}
    at = open_page(params=params)
    no_exceptions(at)
    shown = _everything_shown(at)
    assert "Traceback" not in shown and ".py" not in shown and "RecursionError" not in shown
    assert charts(at), "the page still draws"
    if value is TOO_LONG or name in USED_IN:
        assert at.sidebar.warning, f"nothing says the link's {name} was refused"
    kept = at.session_state[name] if name in at.session_state else None
    assert not isinstance(kept, str) or len(kept) <= links_module.MAX_TEXT_CHARS


def _pick_kind(name: str):
    return links_module._kind(name, attnviz.app.keys.LINK_DEFAULTS[name])


@pytest.mark.slow
@pytest.mark.parametrize("hostile", ["nested", "too long"])
def test_every_page_pick_is_bounded(hostile):
    """A hostile value in every page pick a link carries, at once (the link under Streamlit's
    512 K: a value just past each pick's longest; the 5000-deep nesting in those read as text
    or lists): no traceback, the page draws, every pick refused is named, and no text kept is
    longer than a text may be."""
    picks = attnviz.app.keys.LINK_DEFAULTS
    params = ({n: DEEP for n in picks if _pick_kind(n) in (str, list)} if hostile == "nested"
              else {n: TOO_LONG[:links_module.MAX_CHARS[_pick_kind(n)] + 1] for n in picks})
    at = open_page(params=params)
    no_exceptions(at)
    shown = _everything_shown(at)
    assert "Traceback" not in shown and ".py" not in shown and "RecursionError" not in shown
    assert charts(at), "the page still draws"
    for name, value in params.items():
        if len(value) > links_module.MAX_CHARS[_pick_kind(name)] or _pick_kind(name) is list:
            assert shows(at.sidebar.warning, "link.bad_value", name=name), name
        kept = at.session_state[name] if name in at.session_state else None
        assert not isinstance(kept, str) or len(kept) <= links_module.MAX_TEXT_CHARS


def test_many_unknown_parameters_make_one_short_notice():
    at = open_page(params={f"junk{i}" + "x" * 300: "1" for i in range(200)})
    no_exceptions(at)
    notices = [plain(w) for w in at.sidebar.warning]
    assert len(notices) == 1 and shows(at.sidebar.warning, "link.unknown_more", more=197)
    assert len(notices[0]) < 400


def test_a_sentence_link_with_a_right_to_left_override_shows_it_removed():
    at = open_page(params={"sentence": "one \u202etwo three"})
    no_exceptions(at)
    assert at.session_state["sentence"] == "one two three"
    assert any("⟨U+202E⟩" in plain(c) for c in at.sidebar.caption)


@pytest.mark.slow
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_links_notices_are_in_the_links_language(lang):
    """Issue 21: a link's notices (an unknown name, a value that is not a number, a toy-model
    mode no link can carry) are said in the page's language, the names and values as typed."""
    from attnviz.i18n import use_language
    from tests.i18n_walker import CJK, english_runs

    with use_language(lang):
        at = open_page(params={"lang": lang, "d_model": "x", "colour": "1", "mode": "Toy model"})
        notices = at.sidebar.warning
        assert shows(notices, "link.bad_value", name="d_model", value="'x'",
                     why=t("link.why.not_whole"))
        assert shows(notices, "link.unknown", names="“colour”")
        assert shows(notices, "link.toy_mode", mode="'Toy model'",
                     button=t("train.step_through.label"),
                     used=t("sidebar.mode.option.sentence"))
    said = " ".join(plain(w) for w in notices)
    if lang == "zh":
        assert english_runs(said.replace("Toy model", " ")) == [], said
    else:
        assert not CJK.search(said), said


# ---- issue 26: a link's notices on the page it opens -------------------------------------------

@pytest.mark.parametrize("page", ["pages/generate.py", "pages/train.py", "pages/steps.py",
                                  "pages/reading.py"])
@pytest.mark.slow
def test_a_links_notices_show_on_the_page_it_opens(page):
    """Today's main said nothing on Generate (and Train), the pages with their own settings:
    the notices appeared on the next page visited."""
    at = open_page(page, params={"lang": "xx", "layer": "999", "colour": "1"})
    notices = at.sidebar.warning
    assert shows(notices, "link.lang_invalid", value="xx", choices="en, zh")
    assert shows(notices, "link.unknown", names="“colour”")
    assert shows(notices, "link.clamped", name="layer", value="'999'", low=0, high=29)
    assert at.session_state["layer"] != 999


def test_a_links_notices_on_generate_are_in_the_links_language():
    at = open_page("pages/generate.py", params={"lang": "zh", "colour": "1", "layer": "999"})
    with use_language("zh"):
        assert shows(at.sidebar.warning, "link.unknown", names="“colour”")
        assert shows(at.sidebar.warning, "link.clamped", name="layer", value="'999'", low=0,
                     high=29)


@pytest.mark.parametrize("value", ["500", "many"])
def test_a_links_generated_count_refused_is_named_as_the_link_names_it(value):
    """gen_tokens beyond the page's 40, or not a number: the notice names gen_tokens, never
    the page's internal key."""
    at = open_page("pages/generate.py",
                   params={"gen_prompt": "Two plus two is", "gen_tokens": value})
    said = " ".join(plain(w) for w in at.sidebar.warning)
    assert "gen_tokens" in said and "gen_from_link" not in said, said
    assert shows(at.sidebar.warning, "link.clamped" if value == "500" else "link.bad_value")
    assert "generate_run" not in at.session_state               # nothing generated by a link


@pytest.mark.slow
def test_a_links_long_prompt_draws_its_next_token_bars_only_when_pressed(decoder):
    """A link with a long prompt cost ~1.8 s of server CPU on opening (the forward pass under
    the next-token bars); it waits for a press instead, said in the page, and then draws the
    bars of the prompt the model reads (its last 512 tokens). A short one draws at once."""
    long = "The cat sat on the mat. " * 60
    assert generate_view.LINK_BARS_TOKENS < len(decoder.encode(long)) <= MAX_TOKENS
    at = open_page("pages/generate.py", params={"gen_prompt": long, "gen_tokens": "5"})
    assert shows(at.info, "generate.next.press")
    assert not next_bars(at)
    assert "generate_run" not in at.session_state               # nothing generated by a link
    [b for b in at.button if b.key == attnviz.app.keys.GEN_NEXT_SHOW][0].click().run()
    no_exceptions(at)
    [bars] = next_bars(at)
    logits = decoder.run(long).logits[-1].astype(np.float64)              # computed here
    probs = np.exp(logits - logits.max()) / np.exp(logits - logits.max()).sum()
    shown = decode(bars["data"][0]["x"])
    np.testing.assert_allclose(shown, np.sort(probs)[::-1][:10], rtol=1e-5, atol=1e-7)
    assert not shows(at.info, "generate.next.press")

    short = open_page("pages/generate.py", params={"gen_prompt": "Two plus two is"})
    assert next_bars(short)


def next_bars(at: AppTest) -> list[dict]:
    title = t("figure.generate.next.title")
    return [c for c in charts(at) if (c["layout"].get("title") or {}).get("text") == title]


# ---- issue 34.5: every value written to and read from a link is bounded; a value the page
# ---- cannot use is said, as the other keys' are -------------------------------------------------

def _page_with_picks():
    """A page of three picks, as the app's pages make them (a choice, a layer kept in range, a
    tab bar), between the link's reading and its notice of what the page replaced."""
    import streamlit as st

    from attnviz.app import keys
    from attnviz.app.shared import links

    links.read_once()
    with st.sidebar:
        links.show_link_notices()                  # what reading the link said
    st.radio("where", ["resid", "attn"], key=keys.TR_WHERE)
    if st.session_state.get(keys.PT_LAYER) not in range(6):    # as pretrained_view.keep_in_range
        st.session_state[keys.PT_LAYER] = 0
    st.tabs(["One", "Two"], key=keys.PT_VIEW, on_change="rerun")
    st.checkbox("switch", key=keys.LENS_SUBLAYERS)
    links.say_replaced()
    links.write()


def _picks_page(link: dict) -> AppTest:
    at = shared_components(AppTest.from_function(_page_with_picks, default_timeout=TIMEOUT))
    for key, value in link.items():
        at.query_params[key] = value
    at.run()
    no_exceptions(at)
    return at


@pytest.mark.slow
def test_a_link_value_the_page_cannot_use_is_said_with_what_it_uses():
    """tr_where=nowhere, a layer of 10¹² and an unknown tab were replaced without a word."""
    at = _picks_page({"tr_where": "nowhere", "pt_layer": str(10**12), "pt_view": "Three",
                      "lens_sublayers": "1"})
    assert at.session_state["tr_where"] == "resid" and at.session_state["pt_layer"] == 0
    assert shows(at.sidebar.warning, "link.not_a_choice", name="tr_where", value="'nowhere'",
                 used="'resid'")
    assert shows(at.sidebar.warning, "link.not_a_choice", name="pt_layer",
                 value=repr(str(10**12)), used="'0'")
    assert shows(at.sidebar.warning, "link.not_a_choice", name="pt_view", value="'Three'",
                 used="'One'")
    assert len(at.sidebar.warning) == 3                 # the switch, used as it is, says nothing
    at.run()                          # said once after the page; then with the others
    assert len(at.session_state["link_notices"]) == 3 and len(at.sidebar.warning) == 3


@pytest.mark.slow
def test_a_link_whose_picks_the_page_uses_says_nothing():
    at = _picks_page({"tr_where": "attn", "pt_layer": "5", "pt_view": "Two"})
    assert not at.sidebar.warning
    assert (at.session_state["tr_where"], at.session_state["pt_layer"],
            at.session_state["pt_view"]) == ("attn", 5, "Two")
    assert dict(at.query_params) == {"tr_where": "attn", "pt_layer": "5", "pt_view": "Two"}


@pytest.mark.slow
def test_a_slider_value_beyond_its_range_is_moved_inside_with_a_notice():
    """exp_dk=10¹² stopped the Experiments page (Streamlit refuses a slider's value beyond
    its range)."""
    from attnviz.tutorials.experiments import MAX_SCALING_D_K

    at = _picks_page({"exp_dk": str(10**12)})
    assert at.session_state["exp_dk"] == MAX_SCALING_D_K
    assert shows(at.sidebar.warning, "link.clamped", name="exp_dk", used=MAX_SCALING_D_K)


def _huge_picks():
    import streamlit as st

    from attnviz.app import keys
    from attnviz.app.shared import links
    from attnviz.i18n import t

    st.session_state[keys.MH_SECTION] = "x" * 12_500_000       # as a hostile client sends it
    st.session_state[keys.TR_WHERE] = "y" * 1_000              # no choice the page offers
    st.session_state[keys.EXPERIMENT] = t("experiments.tab.masks")
    st.session_state[keys.EXP_CROSS_TEXT] = "z" * 30_000
    links.write()


@pytest.mark.slow
def test_every_page_pick_written_into_the_link_is_bounded():
    """A 12.5 MB tab value came back as a 12.2 MB query string."""
    at = shared_components(AppTest.from_function(_huge_picks, default_timeout=TIMEOUT))
    at.run()
    no_exceptions(at)
    assert dict(at.query_params) == {"experiment": t("experiments.tab.masks")}
    assert set(at.session_state["link_too_long"]) == {"mh_section", "exp_cross_text"}


@pytest.mark.parametrize("name, kind", [("mh_section", "tab"), ("tr_where", "name"),
                                        ("gen_seed", int), ("exp_cross_text", str)])
def test_every_page_pick_read_from_a_link_is_bounded(name, kind):
    too_long = "9" * (links_module.MAX_CHARS[kind] + 1)
    with pytest.raises(ValueError):
        links_module._parse(name, too_long, attnviz.app.keys.link_default(name)[1])
    kept = "9" * links_module.MAX_CHARS[kind]
    assert links_module._parse(name, kept, attnviz.app.keys.link_default(name)[1]) == (
        int(kept) if kind is int else kept)


def test_a_tables_toggle_is_a_pick_a_link_carries():
    found, default = attnviz.app.keys.link_default("step_table_scores_shown")
    assert found and default is False
    assert not attnviz.app.keys.link_default("no_such_table_shown")[0]


@pytest.mark.slow
def test_trace_says_which_of_a_links_picks_it_could_not_use(decoder):
    """The issue's link: tr_layer=30 (SmolLM2 has 30 layers: 0 to 29) and an unknown pair
    were replaced without a word; an unknown tab too."""
    from attnviz.i18n import render

    at = open_page("pages/trace.py", params={
        "model": "smollm2", "tr_view": render("trace.tab.patching", "en"),
        "tr_where": "heads_pos", "tr_layer": "30", "tr_pair": "zzz"})
    assert at.session_state["tr_layer"] == decoder.num_layers - 1
    assert shows(at.sidebar.warning, "link.not_a_choice", name="tr_layer", value="'30'",
                 used=f"'{decoder.num_layers - 1}'")
    assert shows(at.sidebar.warning, "link.not_a_choice", name="tr_pair", value="'zzz'")
    assert at.session_state["tr_where"] == "heads_pos"          # a choice it has: kept, unsaid
    assert len(at.sidebar.warning) == 2
    tab = open_page("pages/trace.py", params={"model": "smollm2", "tr_view": "Nope"})
    assert shows(tab.sidebar.warning, "link.not_a_choice", name="tr_view", value="'Nope'")


@pytest.mark.slow
def test_a_links_notice_names_its_parameter_not_a_session_key():
    """gen_tokens beyond Generate's most was said as “gen_from_link”, a key of the app's."""
    from attnviz.app.generate.generate_state import MAX_NEW_TOKENS

    at = _picks_page({"gen_tokens": "99999"})
    assert shows(at.sidebar.warning, "link.clamped", name="gen_tokens", used=MAX_NEW_TOKENS)
    assert not any("gen_from_link" in plain(w) for w in at.sidebar.warning)


# ---- the first click after a server restart: the page on screen sends its widgets' values -------

def _page_after_a_restart():
    """A page with a pick the link carries, its runs counted, its end as the app's."""
    import streamlit as st

    from attnviz.app import keys
    from attnviz.app.shared import links

    st.session_state["runs"] = st.session_state.get("runs", 0) + 1
    links.read_once()
    st.radio("where", ["resid", "attn", "mlp"], key=keys.TR_WHERE)
    links.write()
    links.keep_first_click()


def _restarted(link: dict, clicked: str | None) -> AppTest:
    """A page opened by `link`, then, the server restarted, its first click picks `clicked`
    (None: the page on screen sends what it shows, as a click elsewhere does)."""
    from tools import streamlit_compat as drivers

    old = shared_components(AppTest.from_function(_page_after_a_restart, default_timeout=TIMEOUT))
    for key, value in link.items():
        old.query_params[key] = value
    old.run()
    if clicked is not None:
        old.radio(key="tr_where").set_value(clicked)
    new = shared_components(AppTest.from_function(_page_after_a_restart, default_timeout=TIMEOUT))
    for key, value in link.items():
        new.query_params[key] = value
    drivers.run_with_states(new, drivers.widget_states(old))
    no_exceptions(new)
    return new


@pytest.mark.slow
def test_the_first_click_after_a_restart_on_a_pick_the_link_carries_wins_over_the_link():
    at = _restarted({"tr_where": "attn"}, clicked="mlp")
    assert at.session_state["tr_where"] == "mlp" and at.radio(key="tr_where").value == "mlp"
    assert dict(at.query_params) == {"tr_where": "mlp"}
    assert at.session_state["runs"] == 2                  # the link's view, then the click's
    at.run()
    assert at.session_state["tr_where"] == "mlp"          # and it stays


@pytest.mark.slow
def test_a_first_run_sent_what_the_link_says_runs_once():
    at = _restarted({"tr_where": "attn"}, clicked=None)
    assert at.session_state["tr_where"] == "attn" and at.session_state["runs"] == 1
