"""Issue 18 item 13, the figure budget: every page and tab, at the largest inputs the app allows
(512 tokens; d_model 1024; 16 heads; the Pretrained model's 512 WordPiece tokens), on every
colour scale, sends at most 3 MB of figures (AppTest: the JSON strings Streamlit sends)."""

import numpy as np
import pytest

import attnviz
from attnviz.session.settings import Settings
from attnviz.app.shared.baseline import Pin
from attnviz.i18n import t
from tests.apptest_helpers import charts, decode, heatmap_z, no_exceptions, open_page
from tools.largest_pages import BUDGET, CASES, MODEL, SCALES, TEXT

pytestmark = pytest.mark.slow        # each test runs pages or processes: see tests/conftest.py


def sent_bytes(at) -> int:
    return sum(len(c.proto.spec.encode("utf-8")) for c in at.get("plotly_chart"))


@pytest.mark.parametrize("page, state", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_every_page_at_the_largest_inputs_stays_within_the_figure_budget(page, state):
    sizes = {}
    at = None
    for scale in SCALES:
        seeded = dict(state, weight_scale=scale, weight_scale_chosen=True)
        if at is None:
            at = open_page(page, **seeded)
        else:                                           # the same session, another scale
            at.session_state["weight_scale"] = scale
            at.run()
        no_exceptions(at)
        assert charts(at), "the page draws"
        sizes[scale] = sent_bytes(at)
    assert max(sizes.values()) <= BUDGET, {s: f"{b / 1e6:.2f} MB" for s, b in sizes.items()}


def test_the_pretrained_head_at_512_tokens_is_sent_whole_on_the_row_scale():
    """Within the budget without pooling the page's main map: every weight, exactly."""
    weights = attnviz.PretrainedModel.load().run(TEXT, max_tokens=512).attentions[0, 0]
    at = open_page("pages/pretrained.py", **MODEL, pt_view=t("pretrained.tab.one_head"),
                   pt_layer=0, pt_head=0,
                   weight_scale="row", weight_scale_chosen=True)
    no_exceptions(at)
    fig = charts(at)[0]
    true = decode(fig["data"][0]["customdata"])
    assert true.dtype == np.float32 and true.shape == (512, 512)     # every weight, unpooled
    np.testing.assert_allclose(true, weights, rtol=1e-6)
    assert fig["data"][0]["z"]["dtype"] == "u1"                      # colours: a byte a cell
    assert heatmap_z(fig).shape == (512, 512)
