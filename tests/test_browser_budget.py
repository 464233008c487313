"""Issue 18 item 13 in headless Chromium: at 512 tokens the Pretrained model's one-head map,
on each row's max (where long texts start), arrives within the figure budget, draws, and its
hover shows the true weight of the cell under the pointer (plotly.js decoding the uint8
colours and the float32 weights Streamlit sent as base64). Under CI=true these never skip."""

import io
import re
import urllib.parse

import numpy as np
import pytest
from PIL import Image   # a dependency of streamlit

from attnviz.i18n import t
from tests.message_helpers import lead
from tests.browser_helpers import exceptions, page_at

pytestmark = pytest.mark.browser

TEXT = ("The animal didn't cross the street because it was too tired, and the river ran on "
        "past the old mill. ") * 40                                 # > 512 WordPiece tokens
QUERY = urllib.parse.urlencode({"sentence": TEXT, "max_tokens": 512})


def titled(prefix: str) -> str:
    """JS: the plotly chart whose title starts with `prefix`."""
    return f"""() => Array.from(document.querySelectorAll('.js-plotly-plot')).find(el =>
        el.layout && el.layout.title && String(el.layout.title.text).startsWith('{prefix}'))"""


MAP_JS = titled("Layer 0, head 0")


@pytest.fixture(scope="module")
def run(minilm):
    run = minilm.run(TEXT, max_tokens=512)
    assert len(run.tokens) == 512
    return run


@pytest.fixture(scope="module")
def weights(run):
    return run.attentions[0, 0]                                   # layer 0, head 0: (512, 512)


def cell_centre(page, chart_js: str, row: int, col: int) -> tuple[float, float]:
    """Where on the page the centre of cell (row, col) of a map is, from plotly's own axes."""
    return tuple(page.evaluate(f"""() => {{
        const gd = ({chart_js})();
        const xa = gd._fullLayout.xaxis, ya = gd._fullLayout.yaxis;
        const box = gd.querySelector('.main-svg').getBoundingClientRect();
        return [box.left + xa._offset + xa.l2p({col}), box.top + ya._offset + ya.l2p({row})];
    }}"""))


def hover_lines(page) -> list[str]:
    page.wait_for_selector(".js-plotly-plot .hoverlayer .hovertext", timeout=10_000)
    return page.eval_on_selector_all(".js-plotly-plot .hoverlayer .hovertext tspan.line",
                                     "els => els.map(e => e.textContent)")


def hover_off(page) -> None:
    page.mouse.move(5, 5)                                          # off the map: hover goes
    page.wait_for_selector(".js-plotly-plot .hoverlayer .hovertext", state="detached")


def hovered(lines: list[str], rows: list[str], cols: list[str], row: int, col: int):
    """The (row, col) the hover names (its labels are the map's, each distinct): the cell
    aimed at, or a neighbour where a cell is about a pixel high and the pointer rounds."""
    name = re.compile(r"(?:query|key)(?: positions)?: (.*)")
    got = (rows.index(name.fullmatch(lines[0])[1]), cols.index(name.fullmatch(lines[1])[1]))
    assert abs(got[0] - row) <= 1 and abs(got[1] - col) <= 1, (lines, row, col)
    return got


def positions(label: str, index: int) -> slice:
    """The token positions a drawn row or column covers: "238–239" when pooled, else its own."""
    found = re.fullmatch(r"(\d+)–(\d+)", label)
    return slice(int(found[1]), int(found[2]) + 1) if found else slice(index, index + 1)


def test_a_512_token_map_on_the_row_scale_draws_and_hovers_the_true_weight(browser, app_url,
                                                                          weights):
    with page_at(browser, f"{app_url}/pretrained?{QUERY}", "Pretrained model") as page:
        page.wait_for_function(f"() => ({MAP_JS})()", timeout=60_000)
        assert not exceptions(page)
        sent = page.evaluate(f"""() => {{
            const gd = ({MAP_JS})(), tr = gd._fullData[0];      // as plotly.js decoded it
            return {{spec: [gd.data[0].z.dtype, gd.data[0].customdata.dtype],
                     z: tr.z.constructor.name, rows: tr.z.length,
                     row: tr.z[0].constructor.name, cols: tr.z[0].length,
                     custom: tr.customdata[0].constructor.name,
                     bar: tr.colorbar.title.text}};
        }}""")
        # plotly.js decoded the base64 arrays into typed rows: colours a byte, weights float32
        assert sent == {"spec": ["u1", "f4"], "z": "Array", "rows": 512, "row": "Uint8Array",
                        "cols": 512, "custom": "Float32Array",
                        "bar": t("figure.colorbar.row")}
        page.evaluate(f"() => ({MAP_JS})().scrollIntoView({{block: 'center'}})")
        picture = page.locator(".js-plotly-plot .heatmaplayer image").first
        assert picture.get_attribute("href").startswith("data:image/png")
        shot = np.asarray(Image.open(io.BytesIO(picture.screenshot())).convert("RGB"))
        assert len(np.unique(shot.reshape(-1, 3), axis=0)) > 100   # drawn: many shades
        labels = page.evaluate(f"() => [({MAP_JS})()._fullData[0].y,"
                               f" ({MAP_JS})()._fullData[0].x]")
        darkest = int(np.argmax(weights[100]))
        for row, col in [(100, darkest), (3, 7), (511, 0), (256, 300)]:
            x, y = cell_centre(page, MAP_JS, row, col)
            page.mouse.move(x, y)
            row, col = hovered(hover_lines(page), *labels, row, col)
            lines = hover_lines(page)
            shown = float(re.fullmatch(r"weight: (\S+)", lines[2]).group(1))
            # 7 significant digits of the model's float32 weight
            assert shown == pytest.approx(float(weights[row, col]), rel=6e-7, abs=0), lines
            hover_off(page)


def test_a_pooled_map_hovers_the_true_largest_weight_of_its_block(browser, app_url, run):
    """Read the model → Rollout at 512 tokens: two maps share the page's budget, so each is
    pooled; a cell's hover names its block and shows the largest weight in it."""
    raw = run.attentions[0].mean(axis=0)                          # layer 0, heads averaged
    chart = titled("Layer 0, heads averaged")
    with page_at(browser, f"{app_url}/reading?{QUERY}", t("nav.reading")) as page:
        page.wait_for_function(f"() => ({chart})()", timeout=60_000)
        assert not exceptions(page)
        page.evaluate(f"() => ({chart})().scrollIntoView({{block: 'center'}})")
        subtitle = page.evaluate(f"() => ({chart})().layout.title.subtitle.text")
        assert subtitle.startswith(lead("figure.pooled.map.largest"))
        rows, cols = page.evaluate(f"() => [({chart})()._fullData[0].y,"
                                   f" ({chart})()._fullData[0].x]")
        assert len(rows) * len(cols) < 512 * 512
        for i, j in [(100, 40), (len(rows) - 1, len(cols) - 1), (3, len(cols) // 2)]:
            x, y = cell_centre(page, chart, i, j)
            page.mouse.move(x, y)
            i, j = hovered(hover_lines(page), rows, cols, i, j)
            lines = hover_lines(page)
            block = raw[positions(rows[i], i), positions(cols[j], j)]
            shown = float(re.fullmatch(r"largest weight: (\S+)", lines[2]).group(1))
            assert shown == pytest.approx(float(block.max()), rel=6e-7, abs=0), lines
            hover_off(page)
