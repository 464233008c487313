"""Issue 38 §2: a real decoder layer step by step as its model has it
(models/decoders/layer_steps.py) — Gemma 3's scaled embeddings, QK-norm, the layer's rotary base,
the scale from query_pre_attn_scalar, the sliding window masked as the causal triangle is, one K/V
head for every query head, the norm after attention — checked against transformers' own hooks on the
tiny Gemma 3 of tests/tiny_decoders.py (window 4, layers 0-4 local, 5 global); a Llama-family layer
gets no step of them; an edited layer computes as the model does (QK-norm with its gains)."""

from __future__ import annotations

import numpy as np
import pytest

from tests import tiny_decoders as files

TEXT = "the is the 机制 the is the"          # 12 tokens with BOS: longer than the window of 4


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """The tiny Gemma 3, Qwen3 and Llama files (F32), and attnviz's models of them."""
    from attnviz.models.decoders.decoder import DecoderModel

    folder = tmp_path_factory.mktemp("layer-steps")
    written = {arch: files.write(folder / f"tiny-{arch}.gguf", arch, "F32")
               for arch in ("gemma3", "qwen3", "llama")}
    return {arch: (w, DecoderModel.load(w.path, cache_dir=folder / "cache"))
            for arch, w in written.items()}


def test_a_llama_layer_has_none_of_gemmas_steps(tiny):
    from attnviz.models.decoders import layer_steps

    _, model = tiny["llama"]
    run = model.run(TEXT)
    traced = layer_steps.layer_trace(model, run, 1)
    assert [s.name for s in traced.steps] == [s.name for s in run.trace(1).steps]
    assert not {"embedded", "q_normed", "output_normed"} & {s.name for s in traced.steps}
    assert traced.design is None


@pytest.mark.reference
@pytest.mark.slow
def test_gemmas_steps_equal_transformers_hooks(tiny, torch):
    """The embeddings × √d_model, QK-norm's queries, the weights (exactly 0 outside a local
    layer's window, masked as the causal triangle is) and the norm after attention: each equal
    to what transformers computes in the same layer of the same file."""
    from attnviz.models.decoders import layer_steps

    written, model = tiny["gemma3"]
    hf, tokenizer = files.load(written.path)
    ids = tokenizer(TEXT)["input_ids"]
    run = model.run(TEXT)
    assert run.ids.tolist() == ids and len(ids) > 4
    seen = {}

    def keep(name):
        def hook(module, args, out):
            seen[name] = (out[0] if isinstance(out, tuple) else out).detach().numpy()
        return hook

    layers = hf.model.layers
    handles = [hf.model.embed_tokens.register_forward_hook(keep("embedded"))]
    for i in (0, 5):
        handles += [layers[i].post_attention_layernorm.register_forward_hook(keep(f"post{i}")),
                    layers[i].self_attn.q_norm.register_forward_hook(keep(f"q_norm{i}"))]
    with torch.no_grad():
        out = hf(torch.tensor([ids]), output_attentions=True)
    for h in handles:
        h.remove()
    n = len(ids)
    back = np.arange(n)[:, None] - np.arange(n)[None, :]
    for layer in (0, 5):
        traced = layer_steps.layer_trace(model, run, layer)
        names = [s.name for s in traced.steps]
        assert names[0] == "embedded" and names[-1] == "output_normed"
        assert names.index("q_normed") < names.index("q_rotated")        # QK-norm before RoPE
        np.testing.assert_allclose(traced.embedded, seen["embedded"][0], rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(traced.output_normed, seen[f"post{layer}"][0],
                                   rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(traced.q_normed, seen[f"q_norm{layer}"][0],   # (H, n, d_k)
                                   rtol=1e-4, atol=1e-5)
        hf_weights = out.attentions[layer][0].numpy()                  # (H, n, n)
        np.testing.assert_allclose(traced.weights, hf_weights, atol=1e-5)
        outside = back >= 4                                            # the window's keys back
        if layer == 0:                                                 # local: masked, exactly 0
            assert traced.design.kind == "sliding" and traced.design.window == 4
            assert (traced.weights[:, outside] == 0).all() and (hf_weights[:, outside] == 0).all()
            assert traced.mask[..., outside].all()                    # masked, as j > i is
            assert traced.rope_base == 10_000
        else:                                                          # global: it sees them
            assert traced.design.kind == "full" and traced.design.full_layers == (5,)
            assert (traced.weights[:, outside] > 0).all() and not traced.mask[..., outside].any()
            assert traced.rope_base == 1_000_000
        assert traced.kv_group == 4 and traced.num_kv_heads == 1        # multi-query
        assert traced.scale == 256 ** -0.5                             # query_pre_attn_scalar


def test_the_models_qk_norm_gains_are_the_files(tiny):
    """qk_norm_gains: the gains in the file (Gemma's stored as 1 + the checkpoint's weight, as
    it computes with them); None where q and k are not normed."""
    for arch, layer in (("gemma3", 5), ("qwen3", 1)):
        written, model = tiny[arch]
        g_q, g_k = model.qk_norm_gains(layer)
        for gain, which in ((g_q, "q"), (g_k, "k")):
            stored = written.weights[f"model.layers.{layer}.self_attn.{which}_norm.weight"]
            expected = np.float32(1) + stored if arch == "gemma3" else stored
            np.testing.assert_array_equal(gain, expected)
    assert tiny["llama"][1].qk_norm_gains(1) is None


@pytest.mark.parametrize("arch,layer", [("gemma3", 0), ("gemma3", 5), ("qwen3", 1)])
def test_an_edited_trace_of_the_layers_own_weights_is_the_layer(tiny, arch, layer):
    """The edited-weights view with nothing changed is the model's own layer at every step
    (QK-norm included): exactly equal, being the same computation on the same arrays."""
    from attnviz.models.decoders import layer_steps

    _, model = tiny[arch]
    run = model.run(TEXT)
    own = layer_steps.layer_trace(model, run, layer)
    edited = layer_steps.edited_layer_trace(model, run, layer, own.x, own.params)
    assert [s.name for s in edited.steps] == [s.name for s in own.steps]
    assert {"q_normed", "k_normed"} <= {s.name for s in own.steps}
    for step in own.steps:
        np.testing.assert_array_equal(edited.step(step.name).array, step.array,
                                      err_msg=step.name)
    assert edited.design == own.design


def _rms_normed(a, gain, eps):
    return a / np.sqrt((a * a).mean(axis=-1, keepdims=True) + eps) * gain


def _rotated(a, base):
    """transformers' apply_rotary_pos_emb (rotate_half: feature i with i + d/2), positions 0…n−1."""
    n, d = a.shape[-2:]
    angles = np.arange(n)[:, None] * base ** (-np.arange(0, d, 2) / d)[None, :]
    cos, sin = (np.concatenate([f(angles)] * 2, axis=-1) for f in (np.cos, np.sin))
    half = np.concatenate([-a[..., d // 2:], a[..., :d // 2]], axis=-1)
    return a * cos + half * sin


def test_an_edited_w_q_changes_the_scores_as_computed_here(tiny):
    """A Gemma 3 layer with a random W_Q: its scaled scores are QK-norm (the file's gains) of
    x W_Q per head and of x W_K (the file's one K/V head), then RoPE with the layer's base,
    then q kᵀ / √query_pre_attn_scalar (256), computed here in float64: within 1e-4 of
    attnviz's float32 (scores of size ~1 from sums of 256 products). Without QK-norm the scores
    would be far from these."""
    from attnviz.models.decoders import layer_steps

    written, model = tiny["gemma3"]
    spec = written.spec
    run = model.run(TEXT)
    rng = np.random.default_rng(38)
    for layer, base in ((0, 10_000.0), (5, spec.rope_base)):
        own = layer_steps.layer_trace(model, run, layer)
        w_q = rng.standard_normal(own.params.w_q.shape).astype(np.float32)   # (H, d, d_k)
        edited = layer_steps.edited_layer_trace(model, run, layer, own.x,
                                                own.params.replace(w_q=w_q))
        x = own.x.astype(np.float64)
        p = f"model.layers.{layer}.self_attn."
        g_q, g_k = (1.0 + written.weights[p + f"{w}_norm.weight"].astype(np.float64)
                    for w in ("q", "k"))
        k = x @ written.weights[p + "k_proj.weight"].astype(np.float64).T     # one K/V head
        q = np.einsum("nd,hde->hne", x, w_q.astype(np.float64))
        k_rot = _rotated(_rms_normed(k, g_k, spec.rms_eps), base)
        expected = _rotated(_rms_normed(q, g_q, spec.rms_eps), base) @ k_rot.T / 16.0
        np.testing.assert_allclose(edited.scaled_scores, expected, rtol=1e-4, atol=1e-4)
        assert np.abs(own.scaled_scores - expected).max() > 0.1             # the edit shows
        unnormed = _rotated(q, base) @ _rotated(k, base).T / 16.0
        assert np.abs(unnormed - expected).max() > 1.0                      # QK-norm shows


def test_the_steps_texts_name_the_layers_designs(tiny):
    from attnviz.models.decoders import layer_steps

    _, model = tiny["gemma3"]
    run = model.run(TEXT)
    local, full = (layer_steps.layer_trace(model, run, i) for i in (0, 5))
    ids = {name: local.step(name).text.explanation.msg_id for name in
           ("embedded", "k", "v", "q_rotated", "scaled_scores", "masked_scores", "output_normed")}
    assert ids == {"embedded": "step.embedded.explanation",
                   "k": "step.k.explanation_multi_query", "v": "step.v.explanation_multi_query",
                   "q_rotated": "step.rotated.explanation_local",
                   "scaled_scores": "step.scaled_scores.explanation_scalar",
                   "masked_scores": "step.masked_scores.explanation_window",
                   "output_normed": "step.output_normed.explanation"}
    assert full.step("masked_scores").text.explanation.msg_id == "step.masked_scores.explanation_global"
    assert full.step("q_rotated").text.explanation.msg_id == "step.rotated.explanation_global"
    assert r"i - j \geq 4" in local.step("masked_scores").formula
    from attnviz.i18n import use_language

    for lang in ("en", "zh"):                  # every text renders (strict: its parameters)
        with use_language(lang):
            for traced in (local, full):
                assert all(s.title and s.explanation for s in traced.steps)
    # a text no longer than the window: the band hides nothing, and the words say so
    short = model.run("is the")
    fits = layer_steps.layer_trace(model, short, 0)
    assert fits.step("masked_scores").text.explanation.msg_id == \
        "step.masked_scores.explanation_window_fits"
    assert np.array_equal(fits.mask[0], np.triu(np.ones((len(short.ids),) * 2, bool), 1))


def test_one_kv_head_is_said_as_multi_query_not_1_heads():
    from attnviz.app.pretrained.decoder_page import causal_mask, sharing_text
    from attnviz.i18n import render, use_language

    for lang in ("en", "zh"):
        with use_language(lang):
            assert sharing_text(4, 1) == render("decoder.sharing_multi_query", lang, heads=4)
    # the Pretrained page's map masks what the layer masks: the window too
    n, window = 7, 3
    back = np.arange(n)[:, None] - np.arange(n)[None, :]
    assert np.array_equal(causal_mask(n, window), (back < 0) | (back >= window))
    assert np.array_equal(causal_mask(n), back < 0)


def test_the_pretrained_page_says_gemmas_window_and_not_smollm2s():
    from attnviz.app.pretrained.decoder_page import window_text
    from attnviz.i18n import render, use_language
    from attnviz.models.catalogue import registry

    with use_language("en"):
        assert window_text(registry.get("gemma3-270m").config()) == " " + render(
            "decoder.window_note", "en", window=512, layers="5, 11, 17")
        assert window_text(registry.get("smollm2").config()) == ""


def test_a_token_of_spaces_is_written_not_an_empty_box():
    from attnviz.app.shared.text import token_line

    line = token_line(["a", " ", "\n", " b"])
    assert "`␣`" in line and "`↵`" in line and "` b`" in line and "` `" not in line
    from attnviz.describe.labels import unique

    # the charts' axes and tables too: "␣ (2)", not a blank "(2)"
    assert unique(["a", " ", "b", " ", "\n"]) == ["a", "␣ (2)", "b", "␣ (4)", "↵"]


GEMMA = dict(mode="Pretrained model", model="gemma3-270m", sentence="The cat sat on the mat")


@pytest.mark.slow
def test_step_by_step_on_gemma_3_shows_its_steps_in_its_order():
    """Gemma 3 270M on Step by step: its own step list (the scaled embeddings first, QK-norm
    before RoPE, the norm after attention last), the mask's words for the layer's kind, and the
    norm after attention drawn with the numbers computed here (RMSNorm of the output, the gain
    read from the model)."""
    from attnviz.models.decoders.decoder import DecoderModel
    from tests.apptest_helpers import heatmap_z, open_page, shows, titled

    layer = 0                                    # local; the global layer's words: above
    model = DecoderModel.load(name="gemma3-270m")
    run = model.run(GEMMA["sentence"])
    at = open_page("pages/steps.py", **GEMMA, layer=layer, step="masked_scores", head=2)
    steps = at.selectbox(key="step").options
    assert len(steps) == 18 and steps[0].startswith("1. ") and "√d_model" in steps[0]
    assert shows([*at.markdown, *at.caption], "step.masked_scores.explanation_window_fits",
                 layer=layer, window=512)
    at = open_page("pages/steps.py", **GEMMA, layer=layer, step="output_normed", head=2)
    out = run.trace(layer).output.astype(np.float64)
    gain = model.attention_output_norm(layer)
    expected = out / np.sqrt((out ** 2).mean(axis=-1, keepdims=True) + model.config.rms_eps) * gain
    z = heatmap_z(titled(at, "step.output_normed.title"))
    np.testing.assert_allclose(z, expected, rtol=1e-3, atol=1e-3)


@pytest.mark.slow
def test_an_edited_gemma_layer_keeps_its_window_scale_base_and_qk_norm():
    """Edits on a Gemma 3 layer: the layer's own rotary base, scale, QK-norm and designs stay
    (the mask of a short text: causal), with no notice beyond the unedited view's; W_O doubled
    doubles the output, computed here."""
    from attnviz.session.build import build_view
    from attnviz.session.edits import Edit
    from attnviz.session.settings import Settings

    s = Settings(**GEMMA, layer=5)
    plain = build_view(s)
    w_o = np.asarray(plain.trace.params.w_o) * 2
    edited = build_view(s, {"w_o": Edit(w_o)})
    assert edited.ok and edited.notices == plain.notices            # nothing left out to say
    tr = edited.trace
    np.testing.assert_array_equal(tr.q_normed, plain.trace.q_normed)   # W_O is after them
    assert tr.rope_base == 1_000_000 and tr.scale == 1 / 16
    assert tr.design is not None and tr.design.kind == "full"
    assert [s.name for s in tr.steps][0] == "embedded" and tr.steps[-1].name == "output_normed"
    np.testing.assert_allclose(tr.output, tr.concat @ w_o, rtol=1e-5, atol=1e-5)
