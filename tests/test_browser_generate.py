"""The Generate page in headless Chromium: type a prompt, generate 5 tokens, and the 5th new
token's attention row is on the page — in every head of the chosen layer, with the numbers
SmolLM2 gives for that row (computed here by DecoderModel.generate in the test's process)."""

import numpy as np
import pytest

from attnviz.i18n import t
from tests.browser_helpers import SharedContext, DECODE_Z_JS, exceptions, wait_for_idle

pytestmark = pytest.mark.browser

PROMPT = "The cat sat on the"

CHART_JS = f"""(part) => {{
    const decode = {DECODE_Z_JS};
    for (const el of document.querySelectorAll('.js-plotly-plot')) {{
        const title = el.layout && el.layout.title ? el.layout.title.text : '';
        if (title.includes(part)) {{
            const tr = el.data[0];
            return {{title: title, x: Array.from(tr.x || []), y: Array.from(tr.y || []),
                     z: decode(tr.z)}};
        }}
    }}
    return null;
}}"""


def test_generate_five_tokens_and_see_the_fifth_tokens_attention_row(browser, app_url):
    from threadpoolctl import threadpool_limits

    from attnviz import DecoderModel
    from attnviz.app.runtime.threads import blas_threads

    context = SharedContext(browser, viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    try:
        page.goto(f"{app_url}/generate")
        page.get_by_role("heading", name=t("generate.title")).wait_for(
            timeout=90_000)
        box = page.get_by_role("textbox", name="Prompt")
        box.wait_for(timeout=60_000)
        box.click()
        page.keyboard.press("Control+A")
        page.keyboard.type(PROMPT, delay=20)           # typed as a person types
        page.keyboard.press("Control+Enter")
        page.get_by_text("Prompt: 5 tokens").wait_for(timeout=60_000)
        count = page.get_by_role("spinbutton", name="How many")
        count.fill("5")                 # (its default: no run needed, none waited for)
        count.press("Enter")
        page.get_by_role("button", name="Generate 5").wait_for(timeout=30_000)
        wait_for_idle(page)                        # the run that drew it has ended
        page.get_by_role("button", name="Generate 5").click()
        page.get_by_role("heading", name="New token 5", exact=True).wait_for(timeout=120_000)
        page.wait_for_function(f"() => ({CHART_JS})('New token 5') !== null", timeout=60_000)
        assert not exceptions(page)

        row = page.evaluate(CHART_JS, "New token 5")
        # the server runs numpy's BLAS on blas_threads() threads (1); on two, the sums
        # of a matrix product are split otherwise and a weight moves by ~1e-6 (float32)
        with threadpool_limits(blas_threads(), user_api="blas"):
            gen = DecoderModel.load().generate(PROMPT, max_new_tokens=5)
        step = gen.steps[4]
        layer = DecoderModel.load().num_layers - 1            # the page's default layer
        assert f"layer {layer}" in row["title"]
        z = np.array(row["z"], dtype=np.float64)
        # 9 heads, one column per key: the 5 prompt tokens, new tokens 1-4 (the 5th is chosen
        # by this row, so not yet a key)
        assert z.shape == (9, 5 + 4) == step.attentions[layer].shape
        np.testing.assert_allclose(z, step.attentions[layer], atol=1e-6)
        np.testing.assert_allclose(z.sum(axis=1), 1.0, atol=1e-5)
        assert row["y"] == [str(h) for h in range(9)]          # one row per head
        assert page.get_by_text("Generated: 5 new tokens").count() == 1
    finally:
        context.close()
