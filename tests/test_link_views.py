"""A copied link brings the whole view back (issue 27.1): each page's picks — model, layer,
head, tab, highlighted token, second sentence, the prompt, the sampling settings and seed, the
tokens generated — go into the link, and the link opened in a fresh session shows the same
view. The views are compared by what the page shows, the numbers from the model itself."""

from __future__ import annotations

import numpy as np
import pytest

from tests.apptest_helpers import charts, heatmap_z, no_exceptions, open_link, page_in, shows

TEXT = "The animal didn't cross the street because it was too tired"


def link_of(at) -> dict:
    """The link the page wrote, as its parameters."""
    return {k: v for k, v in at.query_params.items()}


def reopened(at, page: str):
    """The page's link opened in a new session (a first visit)."""
    again = open_link({k: v[0] if isinstance(v, list) else v for k, v in link_of(at).items()},
                      page)
    no_exceptions(again)
    return again


def titles(at) -> list[str]:
    return [f["layout"].get("title", {}).get("text", "") for f in charts(at)]


@pytest.mark.slow
def test_generate_brings_back_the_prompt_the_sampling_and_the_tokens_generated(decoder):
    prompt = "Once upon a time, a little robot"
    made = decoder.generate(prompt, max_new_tokens=6, temperature=0.9, seed=7)
    at = page_in("pages/generate.py", gen_prompt=prompt, gen_sampling="sample",
                 gen_temperature=0.9, gen_seed=7, gen_step=4, gen_layer=3,
                 generate_run={"recipe": (prompt, False, 0.9, 7), "generation": made})
    no_exceptions(at)
    assert link_of(at)["gen_tokens"] == "6"
    again = reopened(at, "pages/generate.py")
    # the link generates nothing by itself (issue 34): its count waits in the box, said
    assert "generate_run" not in again.session_state
    assert again.number_input(key="gen_count").value == 6
    assert shows(again.info, "generate.link.press", n=6)
    assert not any("gen_from_link" in e.value for e in (*again.info, *again.warning))
    [many] = [b for b in again.button if b.key == "gen_many"]
    many.click().run()
    no_exceptions(again)
    assert not shows(again.info, "generate.link.press")
    gen = again.session_state["generate_run"]["generation"]
    # the same generation, made again from prompt, settings, seed and count
    assert list(gen.new_ids) == list(made.new_ids)
    assert again.text_area(key="gen_prompt").value == prompt
    assert again.radio(key="gen_sampling").value == "sample"
    assert again.slider(key="gen_temperature").value == pytest.approx(0.9)
    assert again.number_input(key="gen_seed").value == 7
    assert again.select_slider(key="gen_step").value == 4
    assert again.selectbox(key="gen_layer").value == 3
    assert titles(again) == titles(at)


@pytest.mark.slow
def test_a_generation_made_on_this_server_is_shown_at_once_by_its_link(decoder):
    """A learner presses Generate 3; a fresh session opening their link sees those tokens
    without a press (no generation runs: the one made is reused)."""
    prompt = "Two plus two is"
    at = page_in("pages/generate.py", gen_prompt=prompt, gen_count=3)
    [many] = [b for b in at.button if b.key == "gen_many"]
    many.click().run()
    no_exceptions(at)
    made = at.session_state["generate_run"]["generation"]
    assert link_of(at)["gen_tokens"] == "3"
    again = reopened(at, "pages/generate.py")
    assert again.session_state["generate_run"]["generation"] is made
    assert not shows(again.info, "generate.link.press")


@pytest.mark.slow
def test_generate_with_nothing_generated_reopens_with_nothing_generated():
    at = page_in("pages/generate.py", gen_prompt="Two plus two is")
    assert "gen_tokens" not in link_of(at)
    again = reopened(at, "pages/generate.py")
    assert again.text_area(key="gen_prompt").value == "Two plus two is"
    assert "generate_run" not in again.session_state


@pytest.mark.slow
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_read_the_model_brings_back_the_tab_layer_and_head(decoder, lang):
    from attnviz.i18n import render, use_language

    tab = render("reading.tab.value", lang)
    at = page_in("pages/reading.py", lang, model="smollm2", sentence=TEXT, rd_view=tab,
                 vw_layer=5, vw_head=4)
    assert not at.error
    with use_language(lang):            # AppTest formats the widgets' values in this thread
        again = reopened(at, "pages/reading.py")
    assert again.session_state["rd_view"] == tab
    assert again.session_state["vw_layer"] == 5 and again.session_state["vw_head"] == 4
    run = decoder.run(TEXT)
    shown = [heatmap_z(f) for f in charts(again) if f["data"] and f["data"][0]["type"] == "heatmap"]
    assert any(z.shape == run.attentions[5, 4].shape
               and np.allclose(z, run.attentions[5, 4], atol=1e-6) for z in shown)
    assert titles(again) == titles(at)


@pytest.mark.slow
def test_read_the_model_brings_back_the_ablations_heads_and_second_sentence():
    at = page_in("pages/reading.py", sentence=TEXT, rd_view="Ablation", ab_heads="L3H2, L5",
                 ab_other="A cat sat on the mat.")
    again = reopened(at, "pages/reading.py")
    assert again.session_state["ab_heads"] == "L3H2, L5"
    assert again.session_state["ab_other"] == "A cat sat on the mat."
    assert titles(again) == titles(at)


@pytest.mark.slow
def test_pretrained_smollm2_brings_back_layer_head_and_language(decoder):
    """The issue's case: SmolLM2, layer 5, head 3, 中文 reopened at layer 0, head 0."""
    from attnviz.i18n import use_language

    at = page_in("pages/pretrained.py", "zh", model="smollm2", sentence=TEXT, pt_dec_layer=5,
                 pt_dec_head=3)
    assert not at.error
    assert {"model", "lang", "pt_dec_layer", "pt_dec_head"} <= set(link_of(at))
    with use_language("zh"):
        again = reopened(at, "pages/pretrained.py")
    assert again.session_state["pt_dec_layer"] == 5 and again.session_state["pt_dec_head"] == 3
    run = decoder.run(TEXT)
    heatmaps = [heatmap_z(f) for f in charts(again) if f["data"][0]["type"] == "heatmap"]
    assert any(np.allclose(np.nan_to_num(z), np.tril(run.attentions[5, 3]), atol=1e-6)
               for z in heatmaps)
    assert titles(again) == titles(at)


@pytest.mark.slow
@pytest.mark.parametrize("model, prefix", [("minilm", "pt_hv"), ("smollm2", "pt_dec_hv")])
def test_the_head_view_brings_back_its_layer_heads_and_highlighted_token(model, prefix):
    from attnviz.i18n import render

    tab = render("pretrained.tab.head_view", "en")
    at = page_in("pages/pretrained.py", model=model, sentence=TEXT, pt_view=tab,
                 **{f"{prefix}_layer": 2, f"{prefix}_token": 4, f"{prefix}_heads": [0, 2, 5]})
    assert not at.error
    again = reopened(at, "pages/pretrained.py")
    assert again.session_state["pt_view"] == tab
    assert again.session_state[f"{prefix}_layer"] == 2
    assert again.session_state[f"{prefix}_token"] == 4
    assert again.session_state[f"{prefix}_heads"] == [0, 2, 5]
    assert charts(again) == charts(at)


def test_every_token_stays_every_token_through_a_link():
    at = page_in("pages/pretrained.py", sentence=TEXT,
                 pt_view="Head view: one layer, every head", pt_hv_layer=1)
    again = reopened(at, "pages/pretrained.py")
    assert again.session_state["pt_hv_token"] == at.session_state["pt_hv_token"]
    assert not again.warning                 # no "clamped" notice about it


@pytest.mark.slow
def test_the_second_sentence_comes_back():
    at = page_in("pages/pretrained.py", sentence=TEXT, pt_compare="A cat sat on the mat.")
    again = reopened(at, "pages/pretrained.py")
    assert again.session_state["pt_compare"] == "A cat sat on the mat."
    assert titles(again) == titles(at)
