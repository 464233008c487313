"""Every page in AppTest: runs on any input, shows the engine's numbers, reacts to edits.

Tests that only read a page share its run (`runs`, one per distinct opening in this module:
each page on the default sentence is run once for every test reading it); a test that clicks,
types or sets a widget opens its own."""

import numpy as np
import pytest

import attnviz
from attnviz.tutorials.presets import PRESET_NAMES
from attnviz.app import keys
from tests.apptest_helpers import (PAGES, Runs, apply_paste, chart_bytes, charts, decode,
                                   heatmap_z, no_exceptions, open_page, plain, shown_tokens, shows,
                                   titled)
from tests.message_helpers import cell_at
from attnviz.i18n import Message, t

DEFAULT = "The animal didn't cross the street because it was too tired"


def softmax(s):
    e = np.exp(s - s.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def by_hand(sentence=DEFAULT, d_model=16, heads=4):
    """The app's default recipe (embed_tokens with seed 0, xavier weights with seed 0, scaled,
    no mask), the attention itself written out here in numpy: x, weights (H, n, n), Z, output."""
    x = attnviz.embed_tokens(attnviz.tokenize(sentence), d_model, seed=0)
    w = attnviz.MultiHeadWeights.random(d_model, heads, init="xavier", seed=0)
    q, k, v = (np.einsum("nm,hmd->hnd", x, m) for m in (w.w_q, w.w_k, w.w_v))
    weights = softmax(q @ k.transpose(0, 2, 1) / np.sqrt(d_model // heads))
    z = weights @ v
    return x, weights, z, np.concatenate(list(z), axis=1) @ w.w_o


def grid_maps(fig, heads):
    """The weights of each facet of a heads grid (masked cells NaN)."""
    maps = [decode(tr["z"]) for tr in fig["data"] if tr["type"] == "heatmap"
            and tr.get("name") != "masked"]
    assert len(maps) == heads, len(maps)
    return maps


def assert_first_chart_shows(at, page, x, weights, q0=None):
    """The page's first chart holds these numbers: the heads grid (Home, Multi-head) each
    head's weights, grey (NaN) where masked; Inputs and Step by step the input X (or, with Q,
    K, V entered, Step by step head 0's Q), to float32's precision."""
    first = charts(at)[0]
    if page in ("pages/home.py", "pages/multihead.py"):
        for h, shown in enumerate(grid_maps(first, len(weights))):
            np.testing.assert_allclose(shown, weights[h], rtol=1e-6, atol=1e-7,
                                       equal_nan=True, err_msg=f"{page} head {h}")
    else:                          # a matrix of more than 400 cells is sent as float32
        np.testing.assert_allclose(heatmap_z(first), x if x is not None else q0, rtol=1e-6,
                                   atol=1e-7, err_msg=page)


@pytest.fixture(scope="module")
def runs():
    return Runs()


@pytest.mark.parametrize("page", PAGES)
def test_every_page_runs_on_the_default_sentence(page, runs):
    at = runs(page)
    assert not at.error
    x, weights, z, output = by_hand()
    assert_first_chart_shows(at, page, x, weights)
    figs = charts(at)
    if page == "pages/home.py":
        assert shown_tokens(at) == attnviz.tokenize(DEFAULT)
        np.testing.assert_allclose(heatmap_z(figs[1]), output, rtol=1e-9, atol=1e-12)
    if page == "pages/multihead.py":
        np.testing.assert_allclose(heatmap_z(figs[1]), z[0], rtol=1e-9, atol=1e-12)


@pytest.mark.slow
@pytest.mark.parametrize("page", PAGES)
def test_a_page_works_alone_from_the_seeded_sentence_or_none(page, runs):
    # every opening is the session's first run (open_page): the page alone, nothing before it
    at = runs(page, sentence="早上好")
    assert any("早" in str(fig) for fig in charts(at))
    x, weights, _, _ = by_hand("早上好")
    assert_first_chart_shows(at, page, x, weights)
    bare = runs(page)
    assert any("animal" in str(fig) for fig in charts(bare))
    x, weights, _, _ = by_hand()
    assert_first_chart_shows(bare, page, x, weights)


@pytest.mark.slow
@pytest.mark.parametrize("page", PAGES)
@pytest.mark.parametrize("preset", PRESET_NAMES)
def test_every_page_runs_on_every_preset(page, preset, runs):
    # on Step by step, the vector view (off on arrival) is what draws the key labels
    at = runs(page, mode="Preset", preset=preset,
              **({"vector_view": True} if page == "pages/steps.py" else {}))
    assert not at.error
    p = attnviz.load_preset(preset)
    if page == "pages/inputs.py" and p.weights is None:     # Q, K, V or X given: no weights
        assert shows(at.info, "inputs.no_weights")
        return
    shown = " ".join(str(fig) for fig in charts(at))
    for token in set(p.tokens) | set(p.key_tokens):        # the preset's own labels are drawn
        assert token.replace("'", "&#x27;") in shown or token in shown, (token, page)
    t = p.trace()                                          # the tutorial's numbers (test_presets)
    weights = np.where(t.mask, np.nan, t.weights) if t.mask is not None else t.weights
    assert_first_chart_shows(at, page, t.x, weights, q0=t.q[0])


@pytest.mark.slow
@pytest.mark.parametrize("page", PAGES)
def test_chinese_sentence_and_other_head_counts(page):
    at = open_page(page, sentence="早上好，今天天气很好", num_heads=2, d_model=8)
    no_exceptions(at)
    assert any("天" in str(fig) for fig in charts(at))
    x, weights, _, _ = by_hand("早上好，今天天气很好", d_model=8, heads=2)
    assert_first_chart_shows(at, page, x, weights)


@pytest.mark.slow
def test_home_grid_has_one_facet_per_head_and_changes_with_heads():
    for heads in (2, 8):
        grid = charts(open_page("pages/home.py", num_heads=heads, d_model=16))[0]
        assert sum(1 for tr in grid["data"] if tr["type"] == "heatmap") == heads


@pytest.mark.slow
def test_home_shows_the_tokens_and_output_of_the_sentence():
    at = open_page("pages/home.py", sentence="Thinking Machines")
    assert shown_tokens(at) == ["Thinking", "Machines"]
    t = attnviz.trace_attention(attnviz.embed_tokens(["Thinking", "Machines"], 16),
                                attnviz.MultiHeadWeights.random(16, 4))
    output = charts(at)[-1]
    np.testing.assert_allclose(heatmap_z(output), t.output, rtol=1e-6)


@pytest.mark.slow
def test_changing_the_sentence_changes_the_numbers():
    a = charts(open_page("pages/multihead.py", sentence="the cat sat"))
    b = charts(open_page("pages/multihead.py", sentence="the dog sat"))
    assert not np.allclose(heatmap_z(a[0]), heatmap_z(b[0]))


@pytest.mark.slow
def test_step_page_walks_the_tutorial_003_numbers():
    at = open_page("pages/steps.py", mode="Preset", preset="three_inputs", step="scores")
    np.testing.assert_array_equal(heatmap_z(charts(at)[0]), [[2, 4, 4], [4, 16, 12], [4, 12, 10]])
    at.button(key=keys.STEP_GO("+1")).click().run()    # the scaled scores (here unscaled)
    assert at.session_state["step"] == "scaled_scores"
    at.button(key=keys.STEP_GO("+1")).click().run()
    assert at.session_state["step"] == "weights"
    np.testing.assert_allclose(heatmap_z(charts(at)[0])[0], [0.063379, 0.468311, 0.468311],
                               atol=1e-6)
    at.button(key=keys.STEP_GO("-1")).click().run()
    assert at.session_state["step"] == "scaled_scores"


def test_step_page_vector_view_follows_one_query():
    at = open_page("pages/steps.py", mode="Preset", preset="three_inputs", step="z")
    assert len(charts(at)) == 1, "the vector view waits for its toggle"
    at.toggle(key="vector_view").set_value(True).run()
    assert len(charts(at)) == 3 and not at.dataframe, "its tables wait for their own toggle"
    at.toggle(key="vector_shown").set_value(True).run()
    frames = [d.value for d in at.dataframe]
    total, z_row = t("steps.vector.sum_row"), t("steps.vector.z_row")
    sums = [f for f in frames if total in list(f.index)]
    assert sums, "the vector view ends with the sum of the weighted values"
    np.testing.assert_allclose(sums[0].loc[total], [1.936621, 6.683105, 1.595068], atol=1e-6)
    np.testing.assert_allclose(sums[0].loc[z_row], sums[0].loc[total])


@pytest.mark.slow
def test_the_vector_views_chart_ends_with_the_sum_it_promises_equal_to_z():
    """Issue 18 item 10: "their sum" was only the table's last row. The chart of weight × value
    ends with a sum row, set off by a line, equal to the query's row of Z computed here from
    X and the weights (softmax(q Kᵀ/√d_k) V, one head, by numpy)."""
    tokens = ["the", "cat", "sat", "on", "the", "mat"]
    at = open_page("pages/steps.py", sentence=" ".join(tokens), d_model=8, num_heads=2,
                   head=1, step="z", vector_view=True, vector_query=2)
    no_exceptions(at)
    fig = titled(at, "figure.weighted_sum.title")
    x = attnviz.embed_tokens(tokens, 8, seed=0)
    w = attnviz.MultiHeadWeights.random(8, 2, init="xavier", seed=0)
    q, k, v = x @ w.w_q[1], x @ w.w_k[1], x @ w.w_v[1]                 # (6, 4) each
    scores = q @ k.T / np.sqrt(4)
    weights = np.exp(scores - scores.max(axis=1, keepdims=True))
    weights /= weights.sum(axis=1, keepdims=True)
    z = weights @ v                                                       # (6, 4)
    shown = heatmap_z(fig)
    assert shown.shape == (len(tokens) + 1, 4)                # one row per key, then the sum
    assert fig["data"][0]["y"][-1].startswith("Σ")
    np.testing.assert_allclose(shown[-1], z[2], rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(shown[:-1], weights[2][:, None] * v, rtol=1e-9, atol=1e-12)
    line = [s for s in fig["layout"]["shapes"] if s["type"] == "line"]
    assert [s["y0"] for s in line] == [len(tokens) - 0.5]    # between the keys and the sum


def test_a_step_table_shows_the_heatmap_numbers_when_toggled():
    at = open_page("pages/steps.py", mode="Preset", preset="three_inputs", step="scores")
    at.toggle(key="step_table_scores_shown").set_value(True).run()
    np.testing.assert_array_equal(at.dataframe[0].value, heatmap_z(charts(at)[0]))
    np.testing.assert_array_equal(at.dataframe[0].value, [[2, 4, 4], [4, 16, 12], [4, 12, 10]])


@pytest.mark.slow
def test_multihead_tables_show_z_concat_and_output_when_toggled():
    trace = attnviz.trace_attention(attnviz.embed_tokens(["Thinking", "Machines"], 4),
                                    attnviz.MultiHeadWeights.random(4, 2))
    # one section tab open at a time (only the open one is drawn), seeded by its label
    for section, key, expected in (("multihead.tab.z", "mh_z_table", trace.z[0]),
                                   ("multihead.tab.concat", "mh_concat_table", trace.concat),
                                   ("multihead.tab.output", "mh_output_table", trace.output)):
        at = open_page("pages/multihead.py", sentence="Thinking Machines", d_model=4,
                       num_heads=2, mh_section=t(section))
        assert len(charts(at)) == 1 + (section == "multihead.tab.output") + 1 and \
            not at.dataframe
        at.toggle(key=f"{key}_shown").set_value(True).run()
        np.testing.assert_allclose(at.dataframe[0].value.to_numpy(), expected, rtol=1e-6)


def test_two_queries_entered_directly():
    at = open_page("pages/steps.py", mode="Q, K, V", step="scaled_scores")
    no_exceptions(at)
    np.testing.assert_allclose(heatmap_z(charts(at)[0]), [[0.577, 0.577], [0.577, 1.155]],
                               atol=5e-4)


@pytest.mark.slow
def test_pasting_a_weight_changes_every_later_step():
    at = open_page("pages/inputs.py", sentence="Thinking Machines", d_model=4, num_heads=1)
    at.session_state["matrix"] = "w_q"
    at.run()
    new_wq = np.arange(16.0).reshape(4, 4) / 10
    area = next(a for a in at.text_area if a.key.startswith("paste_text_w_q"))
    area.input("\n".join(" ".join(str(v) for v in row) for row in new_wq))
    apply_paste(at)
    no_exceptions(at)
    assert not at.error
    at.switch_page("pages/steps.py")
    at.session_state["step"] = "q"
    at.run()
    x = attnviz.embed_tokens(["Thinking", "Machines"], 4)
    np.testing.assert_allclose(heatmap_z(charts(at)[0]), x @ new_wq, rtol=1e-6)


@pytest.mark.slow
def test_a_bad_paste_shows_an_error_and_keeps_the_matrix():
    at = open_page("pages/inputs.py", sentence="Thinking Machines", d_model=4, num_heads=1)
    before = heatmap_z(charts(at)[0])
    area = next(a for a in at.text_area if a.key.startswith("paste_text_x"))
    area.input("1 2 3 4\n5 6 oops 8")
    apply_paste(at)
    no_exceptions(at)
    assert shows(at.error, "error.cell.not_a_number", where=cell_at(2, 3, "X"), value="'oops'"), \
        [plain(e) for e in at.error]
    np.testing.assert_array_equal(heatmap_z(charts(at)[0]), before)
    area = next(a for a in at.text_area if a.key.startswith("paste_text_x"))
    area.input("1 2 3\n4 5 6")
    apply_paste(at)
    assert shows(at.error, "error.edits.shape", matrix="X", want="2 × 4", shape="2 × 3")


def test_reset_drops_the_edits():
    at = open_page("pages/inputs.py", sentence="a b", d_model=2, num_heads=1)
    area = next(a for a in at.text_area if a.key.startswith("paste_text_x"))
    area.input("1 2\n3 4")
    apply_paste(at)
    np.testing.assert_array_equal(heatmap_z(charts(at)[0]), [[1, 2], [3, 4]])
    at.button(key=keys.RESET_EDITS).click().run()
    np.testing.assert_allclose(heatmap_z(charts(at)[0]), attnviz.embed_tokens(["a", "b"], 2))


def test_long_sentence_is_truncated_with_a_notice():
    at = open_page("pages/home.py", sentence=" ".join(f"w{i}" for i in range(70)))
    assert shows(at.info, "notice.tokens.cut_at_limit", count=70, used=64, maximum=512)
    assert shown_tokens(at) == [f"w{i}" for i in range(64)]


@pytest.mark.slow
@pytest.mark.parametrize("state, msg_id, params", [
    (dict(d_model=10, num_heads=3), "error.settings.head_dim", dict(d_model=10, heads=3)),
    (dict(mode="Matrix X", x_text="1 2\n3"), "error.matrix.named",
     dict(name="X", problem=Message("error.matrix.ragged", row=2, count=1, first=2))),
    (dict(mode="Q, K, V", q_text="1 2", k_text="1 2 3"), "error.engine.qk_width", dict(q=2, k=3)),
    (dict(sentence="   "), "error.sentence.empty", {}),
])
@pytest.mark.parametrize("page", PAGES)
def test_bad_input_is_an_error_in_the_page_not_a_crash(page, state, msg_id, params):
    at = open_page(page, **state)
    no_exceptions(at)
    assert shows(at.error, msg_id, **params), [plain(e) for e in at.error]


def test_user_text_is_escaped_in_figures():
    at = open_page("pages/home.py", sentence="<b>x</b> <script>alert(1)</script>")
    no_exceptions(at)
    grid = charts(at)[0]
    labels = [str(v) for v in grid["layout"]["xaxis"].get("ticktext", [])] + \
        [str(v) for tr in grid["data"] for v in (tr.get("x") or [])]
    assert not any("<b>" in v or "<script>" in v for v in labels)
    assert "&lt;" in str(grid)
    assert shown_tokens(at)[:3] == ["<", "b", ">"]
    assert not any("<b>" in m.value for m in at.markdown)      # each token its own code span


def test_tokens_with_backticks_and_markdown_are_shown_as_typed():
    sentence = "say `hi` to [me](x) $a$"
    at = open_page("pages/home.py", sentence=sentence)
    assert shown_tokens(at) == attnviz.tokenize(sentence)


@pytest.mark.slow
def test_figure_payload_for_128_tokens_and_12_heads_is_bounded():
    sentence = " ".join(f"w{i}" for i in range(128))
    for page in PAGES:
        at = open_page(page, sentence=sentence, d_model=48, num_heads=12, max_tokens=128)
        no_exceptions(at)
        assert chart_bytes(at) <= 3 * 1024 * 1024, page


@pytest.mark.slow
@pytest.mark.parametrize("page", PAGES)
def test_pages_run_on_the_pretrained_model_layer(page):
    at = open_page(page, mode="Pretrained model", layer=3, sentence="The cat sat.")
    no_exceptions(at)
    assert not at.error
    assert any("[CLS]" in str(fig) for fig in charts(at))
    t = attnviz.PretrainedModel.load().trace("The cat sat.")[3]    # checked against transformers
    assert_first_chart_shows(at, page, t.x, t.weights)


@pytest.mark.slow
def test_step_page_on_the_pretrained_model_shows_its_real_weights():
    model = attnviz.PretrainedModel.load()
    expected = model.trace("The cat sat.")[3].weights[5]          # layer 3, head 5
    at = open_page("pages/steps.py", mode="Pretrained model", layer=3, sentence="The cat sat.",
                   step="weights", head=5)
    np.testing.assert_allclose(heatmap_z(charts(at)[0]), expected, atol=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize("page", ["pages/home.py", "pages/steps.py", "pages/multihead.py"])
def test_pages_offer_every_export(page, runs):
    at = runs(page)
    labels = [b.proto.label for b in at.get("download_button")]
    assert labels == [t("downloads.npz"), t("downloads.csv"), "JSON", t("downloads.html")]
    assert all(b.proto.ignore_rerun for b in at.get("download_button"))   # a click: no rerun


@pytest.mark.slow
def test_chart_camera_saves_png_or_svg_with_a_descriptive_name():
    import json as _json

    at = open_page("pages/steps.py", step="weights")
    config = _json.loads(at.get("plotly_chart")[0].proto.config)
    assert config["toImageButtonOptions"] == {"format": "png", "scale": 2,
                                              "filename": "attnviz_step_map_weights"}
    at.radio(key="image_format").set_value("svg").run()
    config = _json.loads(at.get("plotly_chart")[0].proto.config)
    assert config["toImageButtonOptions"]["format"] == "svg"


@pytest.mark.slow
@pytest.mark.parametrize("page", ["pages/home.py", "pages/multihead.py"])
def test_512_tokens_and_16_heads_stay_within_the_figure_budget(page):
    sentence = " ".join(f"w{i}" for i in range(600))
    at = open_page(page, sentence=sentence, max_tokens=512, num_heads=16, d_model=64)
    no_exceptions(at)
    assert shows(at.info, "notice.tokens.cut_at_maximum", count=600, used=512, maximum=512)
    assert chart_bytes(at) <= 3 * 1024 * 1024


def test_multihead_compares_one_head_on_a_second_sentence():
    """Sentence input: the same weights on a second sentence, one head, and the difference on
    the positions holding the same token; expected from traces built here."""
    first, second = "the cat sat on the mat", "the cat sat on a mat"
    at = open_page("pages/multihead.py", sentence=first, d_model=8, num_heads=2,
                   mh_section=t("multihead.tab.second"), mh_compare=second, mh_compare_head=1)
    assert not at.exception
    w = attnviz.MultiHeadWeights.random(8, 2, seed=0)
    a, b = (attnviz.trace_attention(attnviz.embed_tokens(attnviz.tokenize(s), 8, seed=0), w)
            for s in (first, second))
    np.testing.assert_allclose(heatmap_z(titled(at, "figure.first_sentence")), a.weights[1],
                               rtol=1e-12)
    np.testing.assert_allclose(heatmap_z(titled(at, "figure.second_sentence")), b.weights[1],
                               rtol=1e-12)
    same = [0, 1, 2, 3, 5]                                 # "the" at 4 became "a"
    delta = titled(at, "figure.delta_weights")
    np.testing.assert_allclose(heatmap_z(delta), b.weights[1][np.ix_(same, same)]
                               - a.weights[1][np.ix_(same, same)], atol=1e-12)
    assert delta["data"][0]["y"] == ["the", "cat", "sat", "on", "mat"]


def test_the_second_sentence_tab_is_only_for_the_sentence_input(runs):
    at = runs("pages/multihead.py", mode="Preset", preset="three_inputs")
    assert not at.exception
    assert t("multihead.tab.second") not in [tab.label for tab in at.tabs]


def test_home_says_its_weights_are_random_and_starts_a_tutorial_on_step_by_step():
    """Issue 34.6: Home's default (tutorial 000's sentence) runs on random weights and says so
    (with the sidebar's seed), asks nobody to look for "it" → "animal" there, and its start
    button opens Step by step on tutorial 003's worked example, its numbers as the tutorial
    has them; a preset's own weights get no such notice."""
    at = open_page("pages/home.py")
    assert shows(at.info, "home.random.notice", seed=0), [plain(i) for i in at.info]
    assert shows(at.info, "home.random.it")
    assert at.main.get("page_link")                 # the map, right below the start ...
    headers = [h.value for h in at.subheader]
    assert headers.index(t("home.start.subheader")) < headers.index(t("home.steps.subheader")) \
        < headers.index(t("home.weights.subheader"))               # ... above the charts
    at.button(key="home_start").click().run()
    no_exceptions(at)
    assert at.title[0].value == t("steps.title")
    assert (at.session_state["mode"], at.session_state["preset"]) == ("Preset", "three_inputs")
    tutorial_003_x = [[1, 0, 1, 0], [0, 2, 0, 2], [1, 1, 1, 1]]    # its three inputs
    np.testing.assert_array_equal(heatmap_z(charts(at)[0]), tutorial_003_x)
    at.switch_page("pages/home.py")
    at.run()
    assert not shows(at.info, "home.random.notice")


def test_the_preset_box_names_each_preset_in_full_sight_with_its_title_below(runs):
    """Issue 34.10: the presets' titles were cut in the sidebar's box (260 px): the box names
    each by a short name (at most 26 characters fit at 1024 px), its full title below."""
    at = runs("pages/home.py", mode="Preset", preset="thinking_machines")
    box = at.sidebar.selectbox(key="preset")
    assert box.options == [t(f"preset.{name}.short") for name in PRESET_NAMES]
    assert max(len(name) for name in box.options) <= 26
    assert shows(at.sidebar.caption, "sidebar.preset.about",
                 title=t("preset.thinking_machines.title"))


def test_homes_map_links_every_page_and_names_the_real_models(runs):
    """Home's map of pages leads to every other page (issue 27.11: it left out Read the model,
    Train and Generate) and its Pretrained card names the models the page runs."""
    at = runs("pages/home.py")
    linked = [link.proto.page for link in at.main.get("page_link")]
    assert linked == ["inputs", "steps", "multihead", "experiments", "pretrained", "reading", "trace",
                      "train", "generate", "compare", "atlas"]
    captions = [c.value for c in at.caption]
    assert any("all-MiniLM-L6-v2" in c and "SmolLM2-135M-Instruct" in c and "Gemma 3 270M" in c
               for c in captions)
