"""The weights' colour scale control (AppTest): on Home, Multi-head and the weights step, it
changes the chart sent, keeps the true weights for the hover, and the user's choice wins over
the length-based default."""

import numpy as np
import pytest

import attnviz
from attnviz.i18n import Message, t
from tests.apptest_helpers import charts, decode, heatmap_z, no_exceptions, open_page, shows

pytestmark = pytest.mark.slow        # each test runs pages or processes: see tests/conftest.py

SENTENCE = "the cat sat on the mat"
TOKENS = SENTENCE.split()
LONG = " ".join(f"w{i}" for i in range(100))
PAGES = [("pages/home.py", {}), ("pages/multihead.py", {}),
         ("pages/steps.py", {"step": "weights"})]


def weights_chart(at) -> dict:
    """The first chart: the heads grid (Home, Multi-head) or the weights step's heatmap."""
    return charts(at)[0]


def colour_bar_title(fig: dict) -> str:
    layout_bar = fig["layout"].get("coloraxis", {}).get("colorbar", {})
    bar = layout_bar or fig["data"][0].get("colorbar", {})
    return bar["title"]["text"]


def colours(fig: dict) -> np.ndarray:
    """A relative scale's colours, 0–1, from the levels the chart sends: 1 + round(249 c)."""
    return (heatmap_z(fig).astype(float) - 1) / 249


LEVEL = 0.5 / 249                 # a colour sent as a level is within half a level of its value


def expected_weights(tokens, heads=4, d_model=16):
    return attnviz.trace_attention(attnviz.embed_tokens(tokens, d_model),
                                   attnviz.MultiHeadWeights.random(d_model, heads)).weights


@pytest.mark.parametrize("page, state", PAGES)
def test_the_control_changes_the_chart_and_hover_keeps_the_true_weights(page, state):
    at = open_page(page, sentence=SENTENCE, **state)
    no_exceptions(at)
    control = at.segmented_control(key="weight_scale")
    assert control.label == t("scales.label") and control.value == "fixed"   # short input
    fixed = weights_chart(at)
    assert colour_bar_title(fixed) == t("figure.colorbar.fixed")
    want = expected_weights(TOKENS)[0]                           # head 0, by the engine
    np.testing.assert_allclose(heatmap_z(fixed), want, rtol=1e-6)

    control.set_value("row").run()
    no_exceptions(at)
    row = weights_chart(at)
    assert colour_bar_title(row) == t("figure.colorbar.row")
    z, true = colours(row), decode(row["data"][0]["customdata"])
    np.testing.assert_array_equal(z.max(axis=1), 1.0)           # each row's max: darkest
    np.testing.assert_allclose(z, want / want.max(axis=1, keepdims=True), atol=LEVEL)
    np.testing.assert_allclose(true, want, rtol=1e-6)            # hover: the true weights
    assert "customdata" in row["data"][0]["hovertemplate"]

    at.segmented_control(key="weight_scale").set_value("head").run()
    head = weights_chart(at)
    assert colour_bar_title(head) == t("figure.colorbar.head")
    np.testing.assert_allclose(colours(head), want / want.max(), atol=LEVEL)


def test_a_long_input_starts_on_each_rows_max_but_the_users_choice_wins():
    at = open_page("pages/home.py", sentence=LONG, max_tokens=100)
    no_exceptions(at)
    assert at.segmented_control(key="weight_scale").value == "row"
    assert np.nanmax(colours(weights_chart(at)), axis=1) == pytest.approx(1.0)
    at.segmented_control(key="weight_scale").set_value("fixed").run()
    assert colour_bar_title(weights_chart(at)) == t("figure.colorbar.fixed")
    at.session_state["sentence"] = LONG + " more words"          # a new long input
    at.run()
    assert at.segmented_control(key="weight_scale").value == "fixed"
    assert colour_bar_title(weights_chart(at)) == t("figure.colorbar.fixed")


# ---- every other attention map (issue 18 item 9) -----------------------------------------------

OTHER = "the dog sat on a mat"
MODEL_SENTENCE = "The animal didn't cross the street because it was too tired"
# (page, seeded state, each weights chart's title: a message, or a formula no language
# translates): every page and tab that draws attention weights as a map, beyond Home,
# Multi-head and the weights step above. A tab is seeded by its label, the tabs' state.
FIRST, SECOND = Message("figure.first_sentence"), Message("figure.second_sentence")
MAPS = [
    ("pages/pretrained.py", dict(pt_view=t("pretrained.tab.one_head"), pt_layer=2, pt_head=3),
     [Message("pretrained.one_head.title", layer=2, head=3)]),
    ("pages/pretrained.py", dict(pt_view=t("pretrained.tab.one_head"), pt_compare=OTHER),
     [FIRST, SECOND]),
    ("pages/reading.py", dict(rd_view=t("reading.tab.rollout"), ro_layer=3),
     [Message("reading.rollout.title", layer=3), Message("reading.rollout.raw_title", layer=3)]),
    ("pages/reading.py", dict(rd_view=t("reading.tab.value"), vw_layer=2, vw_head=5),
     [Message("reading.value.weights_title", layer=2, head=5)]),
    ("pages/experiments.py", dict(experiment=t("experiments.tab.raw")), ["softmax(X Xᵀ)"]),
    ("pages/experiments.py", dict(experiment=t("experiments.tab.masks"), exp_causal=True),
     [Message("experiments.masks.weights")]),
    ("pages/experiments.py", dict(experiment=t("experiments.tab.cross")),
     [Message("experiments.cross.title", queries=6, keys=4)]),
    ("pages/experiments.py", dict(experiment=t("experiments.tab.bug")),
     ["softmax(QKᵀ/√d_k)", Message("experiments.bug.buggy_title")]),
    ("pages/multihead.py", dict(mh_section=t("multihead.tab.second"), mh_compare=OTHER),
     [FIRST, SECOND]),
]


def titled(at, title: Message | str) -> dict:
    """The one chart whose whole title is `title` (a message rendered, or a formula)."""
    title = title.render() if isinstance(title, Message) else title
    found = [f for f in charts(at) if f["layout"].get("title", {}).get("text") == title]
    assert len(found) == 1, (title, [f["layout"].get("title", {}).get("text")
                                     for f in charts(at)])
    return found[0]


def map_id(page: str, titles: list) -> str:
    return "-".join([page[6:-3], *(m.msg_id if isinstance(m, Message) else m for m in titles)])


@pytest.mark.parametrize("page, state, titles", MAPS, ids=[map_id(p, ts) for p, _, ts in MAPS])
def test_every_attention_map_offers_the_scale_and_hover_keeps_the_true_weight(page, state,
                                                                             titles):
    at = open_page(page, sentence=MODEL_SENTENCE if "pretrained" in page or "reading" in page
                    else SENTENCE, weight_scale="fixed", weight_scale_chosen=True, **state)
    no_exceptions(at)
    control = at.segmented_control(key="weight_scale")
    assert control.label == t("scales.label") and control.value == "fixed"
    fixed = [heatmap_z(titled(at, title)) for title in titles]    # the weights themselves
    for title, weights in zip(titles, fixed):
        assert colour_bar_title(titled(at, title)) == t("figure.colorbar.fixed")
        assert np.nanmax(weights) <= 1 + 1e-6
    control.set_value("row").run()
    no_exceptions(at)
    for title, weights in zip(titles, fixed):
        fig = titled(at, title)
        assert colour_bar_title(fig) == t("figure.colorbar.row")
        z, true = colours(fig), decode(fig["data"][0]["customdata"])
        np.testing.assert_allclose(true, weights, rtol=1e-6, equal_nan=True)   # hover
        assert "customdata" in fig["data"][0]["hovertemplate"]
        rows = np.nanmax(weights, axis=1, keepdims=True)
        np.testing.assert_allclose(z, weights / rows, atol=LEVEL, equal_nan=True)
        assert not np.allclose(z, weights, atol=LEVEL, equal_nan=True)   # colours changed


def png_indices(uri: str) -> np.ndarray:
    """The palette indices (rows, cols) of an 8-bit palette PNG data URI without filters, as
    the model view writes them: read back with zlib, independently of the writer."""
    import base64
    import struct
    import zlib

    png = base64.b64decode(uri.split(",", 1)[1])
    pos, data, width, height = 8, b"", 0, 0
    while pos < len(png):
        length, tag = struct.unpack(">I4s", png[pos:pos + 8])
        body = png[pos + 8:pos + 8 + length]
        if tag == b"IHDR":
            width, height = struct.unpack(">II", body[:8])
        elif tag == b"IDAT":
            data += body
        pos += 12 + length
    rows = np.frombuffer(zlib.decompress(data), dtype=np.uint8).reshape(height, width + 1)
    assert (rows[:, 0] == 0).all()                                   # filter "none"
    return rows[:, 1:]


def test_the_model_view_offers_the_scale_and_colours_each_row_by_its_max():
    from attnviz.models.encoder.pretrained import PretrainedModel

    weights = PretrainedModel.load().run(MODEL_SENTENCE).attentions      # (6, 12, n, n)
    at = open_page("pages/pretrained.py", sentence=MODEL_SENTENCE,
                   pt_view=t("pretrained.tab.model_view"), weight_scale="fixed",
                   weight_scale_chosen=True)
    no_exceptions(at)
    control = at.segmented_control(key="weight_scale")
    assert control.label == t("scales.label")
    fig = charts(at)[0]
    panel = png_indices(fig["data"][7]["source"])                     # layer 0, head 7
    np.testing.assert_array_equal(panel, np.rint(weights[0, 7] * 255))
    assert shows(at.caption, "pretrained.model_view.caption",
                 scale=t("figure.weight_scale.fixed"))
    control.set_value("row").run()
    fig = charts(at)[0]
    panel = png_indices(fig["data"][7]["source"])
    row_max = weights[0, 7] / weights[0, 7].max(axis=1, keepdims=True)
    np.testing.assert_array_equal(panel, np.rint(row_max * 255))
    assert (panel.max(axis=1) == 255).all()                         # each row's max: darkest
    assert shows(at.caption, "pretrained.model_view.caption",
                 scale=t("figure.weight_scale.row"))
