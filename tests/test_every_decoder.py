"""Every decoder page takes every decoder (issue 38 §1): the language model a page runs is the
sidebar's (a link's ``model=``), its caches are keyed by it, a base model generates without a
chat template, and patching offers the presets that model answers right. The numbers a page
shows are checked against the model's own run, held to transformers elsewhere
(tests/test_gemma3.py, tests/test_decoder.py)."""

from __future__ import annotations

import numpy as np
import pytest

from attnviz.i18n import t
from tests.apptest_helpers import charts_titled, decode, no_exceptions, open_page, shows

PROMPT = "The capital of France is"
GENERATE = "pages/generate.py"


@pytest.fixture(scope="module")
def gemma():
    from attnviz.models.decoders.decoder import DecoderModel

    return DecoderModel.load(name="gemma3-270m")


def softmax64(x: np.ndarray) -> np.ndarray:
    z = np.exp(x.astype(np.float64) - x.max())
    return z / z.sum()


def click(at, key: str):
    [b for b in at.button if b.key == key][0].click().run()
    no_exceptions(at)
    return at


@pytest.mark.slow
def test_a_link_to_generate_on_gemma_runs_gemma_without_a_chat_template(gemma):
    """``model=gemma3-270m`` in a link: the sidebar's language model is Gemma 3, the page says
    it has no chat template and offers no switch, its next-token bars are Gemma's and a
    generation is Gemma's greedy continuation, kept under Gemma's name."""
    at = open_page(GENERATE, params={"model": "gemma3-270m"}, gen_prompt=PROMPT, gen_count=3)
    assert at.selectbox(key="lm_pick").value == "gemma3-270m"
    assert not [w for w in at.toggle if w.key == "gen_chat"]
    assert shows(at.caption, "generate.chat.none", model="Gemma 3 270M")
    assert shows(at.caption, "generate.caption", quant="Q4_K_M")       # the package's file
    bars = charts_titled(at, "figure.generate.next.title")[0]["data"][0]
    probs = softmax64(gemma.run(PROMPT).logits[-1])
    np.testing.assert_allclose(decode(bars["x"]), np.sort(probs)[::-1][:10], rtol=1e-5,
                               atol=1e-7)
    click(at, "gen_many")
    assert at.code[-1].value == gemma.generate(PROMPT, max_new_tokens=3).text
    assert at.session_state["generate_run"]["recipe"][0] == "gemma3-270m"


@pytest.mark.slow
def test_an_encoder_chosen_generates_with_the_first_language_model_and_a_pick_is_the_models():
    """MiniLM chosen elsewhere: Generate runs SmolLM2 and leaves the choice as it was; picking
    Gemma 3 in its sidebar chooses it on every page (the link says so)."""
    at = open_page(GENERATE, model="minilm", gen_prompt=PROMPT)
    assert at.selectbox(key="lm_pick").value == "smollm2"
    assert at.session_state["model"] == "minilm"
    assert [w for w in at.toggle if w.key == "gen_chat"]        # SmolLM2-Instruct has one
    at.selectbox(key="lm_pick").set_value("gemma3-270m").run()
    no_exceptions(at)
    assert at.session_state["model"] == "gemma3-270m"
    assert at.query_params["model"] in ("gemma3-270m", ["gemma3-270m"])
    assert not [w for w in at.toggle if w.key == "gen_chat"]


def test_patching_offers_only_the_presets_the_model_answers_right(tiny_decoders):
    """A model with random weights (a tiny fixture) answers none of the presets: only the
    learner's own pair is offered; SmolLM2 answers all three (test_patching holds that to
    transformers)."""
    from attnviz.models.decoders.decoder import DecoderModel
    from attnviz.app.trace import trace_view

    tiny = DecoderModel.load(tiny_decoders[("llama", "F32")].path)
    assert trace_view.offered_pairs(tiny) == ("custom",)
    assert trace_view.offered_pairs(DecoderModel.load()) == trace_view.PAIRS


def test_an_answer_is_the_tokens_after_a_prompt_not_a_text_with_its_bos(gemma):
    """Gemma puts BOS first in every text it encodes; an answer's first token is the word's."""
    assert gemma.encode(" Paris")[0] == gemma.config.bos_id
    ids = gemma.encode(" Paris", bos=False)
    assert gemma.decode(ids) == " Paris" and gemma.config.bos_id not in ids


@pytest.mark.slow
def test_the_sidebar_states_gemmas_own_sizes_bases_and_scale():
    """Gemma 3 270M's model card: d_k 256 (not 640 / 4), 1 K/V head, no biases, rotary base
    10,000 on sliding-window layers and 1,000,000 on layers 5, 11 and 17, scores × 1/16."""
    at = open_page("pages/pretrained.py", model="gemma3-270m", sentence="The cat sat.")
    fixed = {w.key: w for w in [*at.number_input, *at.checkbox, *at.toggle]
             if w.key.startswith("shown_")}
    shown = {k: w.value for k, w in fixed.items()}
    assert (shown["shown_d_model"], shown["shown_num_heads"], shown["shown_kv_heads"],
            shown["shown_d_k"], shown["shown_bias"], shown["shown_rope_base"]) == \
        (640, 4, 1, 256, False, 1_000_000)
    from tests.message_helpers import message_pattern

    assert message_pattern("sidebar.decoder.rope_layers", local="10,000", base="1,000,000",
                           layers="5, 11, 17").search(fixed["shown_rope"].help)
    assert message_pattern("sidebar.real.scaled_fixed").search(fixed["shown_scaled"].help)


def test_a_qwen2_files_sizes_state_its_biases(tiny_decoders):
    """The sizes the sidebar shows come from the file's config: Qwen2 has Q, K and V biases,
    Llama has none (tests/tiny_decoders.py writes them so)."""
    from attnviz.models.decoders import gguf_llama
    from attnviz.models.catalogue.registry import ModelSizes

    sizes = {arch: ModelSizes.of(gguf_llama.read_config(tiny_decoders[(arch, "F32")].path))
             for arch in ("qwen2", "llama")}
    assert sizes["qwen2"].qkv_bias and not sizes["llama"].qkv_bias


@pytest.mark.slow
def test_generate_shows_gemmas_local_layers_keep_only_their_window(gemma):
    """A 512-token prompt and two new tokens: the second is chosen by position 512, whose
    local layers' caches hold positions 1–512 (the window, 512), the global ones all 513; the
    page says so and counts the vectors kept (2 × 1 K/V head × the positions each layer
    holds), as Gemma's generation held to transformers computes them (test_gemma3_readers)."""
    prompt = "The cat sat on the mat and looked at the door. " * 60
    at = open_page(GENERATE, params={"model": "gemma3-270m"}, gen_prompt=prompt, gen_count=2)
    click(at, "gen_many")
    gen = at.session_state["generate_run"]["generation"]
    step = gen.steps[1]
    assert step.query_position == 512 and step.cache_tokens == 513
    locals_ = [layer for layer in range(18) if layer not in (5, 11, 17)]
    assert [step.cache_first[layer] for layer in locals_] == [1] * 15
    assert [step.cache_first[layer] for layer in (5, 11, 17)] == [0, 0, 0]
    assert shows(at.info, "generate.cache.window", first=1, last=512, window=512, local=15,
                 full="5, 11, 17", total=513)
    vectors = {m.label: m.value for m in at.metric}[t("generate.cache.vectors")]
    assert vectors == f"{2 * (15 * 512 + 3 * 513):,}"
