"""The HTML report: formulas as MathML (no raw LaTeX on the page), its input named, user text
escaped; in Chromium the formulas take up space and nothing is fetched."""

import html
import re

import numpy as np
import pytest

import attnviz
from attnviz.io.report import formula_html
from attnviz.session.settings import Settings

SENTENCE = "The cat sat."
EVIL = "<script>alert(1)</script>"
LATEX_COMMANDS = (r"\mathbb", r"\frac", r"\sqrt", r"\mathrm", r"\top", r"\text", r"\left",
                  r"\dots", r"\cdot", r"\in", r"\times", r"\infty", "^{", "_{")


def _trace(**kw):
    w = attnviz.MultiHeadWeights.random(8, 2, seed=0, bias=True)
    tokens = attnviz.tokenize(SENTENCE)
    return attnviz.trace_attention(attnviz.embed_tokens(tokens, 8), w, causal=True, **kw), tokens


def _every_formula() -> list[str]:
    """Every formula the engine writes: with and without biases, self and cross-attention,
    masked, scaled by 1/√d_k or another factor or not at all, and Q, K, V entered directly."""
    rng = np.random.default_rng(0)
    x, ctx = rng.normal(size=(3, 8)), rng.normal(size=(4, 8))
    traces = [attnviz.trace_qkv(rng.normal(size=(2, 3)), rng.normal(size=(2, 3)),
                                rng.normal(size=(2, 2)), causal=True)]
    for bias in (False, True):
        w = attnviz.MultiHeadWeights.random(8, 2, seed=1, bias=bias)
        for kw in ({}, {"causal": True}, {"context": ctx}, {"scale": 1.0}, {"scale": 0.3}):
            traces.append(attnviz.trace_attention(x, w, **kw))
    w64 = attnviz.MultiHeadWeights.random(128, 2, seed=0)            # d_k 64: "\sqrt{64}"
    traces.append(attnviz.trace_attention(rng.normal(size=(2, 128)), w64))
    formulas = {s.formula for t in traces for s in t.steps}
    assert any(r"\sqrt{64}" in f for f in formulas) and any("+ b^{Q}_h" in f for f in formulas)
    return sorted(formulas)


def _visible_text(page: str) -> str:
    """What a reader sees: no scripts (plotly), no MathML annotations (the LaTeX source kept
    for copying, which browsers do not draw), no tags."""
    page = re.sub(r"<script\b.*?</script>", "", page, flags=re.S | re.I)
    page = re.sub(r"<annotation\b.*?</annotation>", "", page, flags=re.S)
    page = re.sub(r"<style\b.*?</style>", "", page, flags=re.S)
    return html.unescape(re.sub(r"<[^>]+>", " ", page))


@pytest.mark.parametrize("formula", _every_formula())
def test_every_engine_formula_becomes_mathml(formula):
    out = formula_html(formula)
    assert out.startswith("<math") and out.endswith("</math>"), out
    shown = re.sub(r"<annotation\b.*?</annotation>", "", out, flags=re.S)
    assert "\\" not in shown                          # no command left unconverted
    # the constructs come out as MathML structure, not as text
    for tex, element in ((r"\frac", "<mfrac>"), (r"\sqrt", "<msqrt>"),
                         ("^", "<msup>|<msubsup>"), ("_", "<msub>|<msubsup>"),
                         (r"\mathbb{R}", "ℝ"), (r"\top", "⊤"), (r"\infty", "∞"),
                         (r"\dots", "…")):
        if tex in formula:
            assert re.search(element, shown), (tex, shown)
    assert f'<annotation encoding="application/x-tex">{html.escape(formula, quote=False)}' \
           f"</annotation>" in out


def test_a_formula_the_converter_cannot_read_is_shown_as_escaped_text():
    for bad in (r"\left( <b>x</b>", r"\unknowncommand{x} < y"):
        out = formula_html(bad)
        assert out.startswith("<code") and "<math" not in out
        assert "<b>" not in out and "&lt;" in out
        assert html.unescape(re.sub(r"<[^>]+>", "", out)) == bad
    # text inside \text{} is escaped by the MathML path too
    out = formula_html(r"\text{" + EVIL + "}")
    assert EVIL not in out and "&lt;script&gt;" in out


@pytest.mark.slow
def test_report_shows_formulas_as_mathml_and_no_raw_latex():
    t, tokens = _trace()
    page = attnviz.report_html(t, tokens)
    assert page.count("<math") == len(t.steps)
    visible = _visible_text(page)
    for command in LATEX_COMMANDS:
        assert command not in visible, command
    assert "<pre>" not in page


@pytest.mark.slow
def test_report_with_no_extra_arguments_still_describes_the_trace():
    t, _ = _trace()
    page = attnviz.report_html(t)
    visible = _visible_text(page)
    assert page.count("<math") == len(t.steps)
    assert "q1" in visible and "q4" in visible                     # the figures' labels
    # what the trace itself records, whatever the caller passes
    assert re.search(r"heads\s+2\b", visible) and re.search(r"d_k\s+4\b", visible)
    assert re.search(r"scale\s+÷ √d_k = ÷ √4 = × 0\.5\b", visible)
    assert re.search(r"mask\s+causal", visible)


@pytest.mark.slow
def test_report_names_the_sentence_and_the_settings():
    t, tokens = _trace()
    s = Settings(mode="Sentence", sentence=SENTENCE, d_model=8, num_heads=2, bias=True,
                 causal=True, seed=0, init="xavier")
    visible = _visible_text(attnviz.report_html(t, tokens, settings=s))
    assert f"Sentence: “{SENTENCE}”" in visible
    assert re.search(r"causal mask\s+on", visible)
    assert re.search(r"positional encoding\s+off", visible)
    assert re.search(r"weights\s+random, xavier init, seed 0", visible)


def test_report_names_a_preset_by_its_title():
    preset = attnviz.load_preset("three_inputs")
    t = preset.trace()
    page = attnviz.report_html(t, preset.tokens,
                               settings=Settings(mode="Preset", preset="three_inputs",
                                                 scaled=False))
    visible = _visible_text(page)
    assert "Preset: Three inputs, one head (no scaling)" in visible
    assert re.search(r"scale\s+no scaling \(× 1\)", visible)


@pytest.mark.slow
def test_report_source_and_mapping_settings_are_shown():
    t, tokens = _trace()
    visible = _visible_text(attnviz.report_html(t, tokens, source="My notebook run",
                                                settings={"temperature": 0.5}))
    assert "My notebook run" in visible and re.search(r"temperature\s+0\.5", visible)


@pytest.mark.slow
def test_user_text_in_the_report_is_escaped():
    t, _ = _trace()
    tokens = [EVIL, "<b>", "&", "x"]
    page = attnviz.report_html(t, tokens, title=EVIL, source=EVIL,
                               settings={EVIL: "<b>bold</b>"})
    assert EVIL not in page
    assert page.count("&lt;script&gt;alert(1)&lt;/script&gt;") >= 5   # title ×2, source,
    assert "<b>" not in _strip_plotly(page)                            # setting, token
    page = attnviz.report_html(t, tokens, settings=Settings(sentence=EVIL))
    assert EVIL not in page
    assert f"Sentence: “{html.escape(EVIL)}”" in page


def _strip_plotly(page: str) -> str:
    return re.sub(r"<script\b.*?</script>", "", page, flags=re.S | re.I)


# ---- in Chromium ----------------------------------------------------------------------------

@pytest.mark.browser
def test_report_formulas_render_in_chromium_without_any_request(browser, tmp_path):
    t, tokens = _trace()
    page_html = attnviz.report_html(t, tokens, settings=Settings(
        sentence=SENTENCE, d_model=8, num_heads=2, bias=True, causal=True))
    path = tmp_path / "report.html"
    path.write_text(page_html, encoding="utf-8")
    page = browser.new_page(viewport={"width": 1100, "height": 900})
    requests = []
    page.on("request", lambda r: requests.append(r.url))
    try:
        page.goto(path.as_uri())
        page.wait_for_selector(".js-plotly-plot .main-svg")
        assert requests == [path.as_uri()]               # the file itself, nothing else
        boxes = page.eval_on_selector_all(
            ".formula math", "els => els.map(e => { const r = e.getBoundingClientRect();"
                             " return [r.width, r.height]; })")
        assert len(boxes) == len(t.steps)
        assert all(w > 20 and h > 10 for w, h in boxes), boxes
        # a fraction is laid out as a fraction: numerator above the denominator
        num, den = page.evaluate("""() => {
            const f = document.querySelector('.formula mfrac');
            return [f.children[0], f.children[1]].map(e => e.getBoundingClientRect())
                .map(r => [r.top, r.bottom]); }""")
        assert num[1] <= den[0] + 1, (num, den)
        text = page.inner_text("body")
        assert "\\frac" not in text and "\\mathbb" not in text and "\\sqrt" not in text
        assert f"Sentence: “{SENTENCE}”" in text
        page.screenshot(path=str(tmp_path / "report.png"))
    finally:
        page.close()
