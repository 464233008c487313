"""Issue 38 §2's experiments (tutorials/designs.py and the Experiments page's three tabs): the
sliding window, QK-norm's score range, the KV cache of MQA, GQA and MHA. Expected numbers come
from transformers (the tiny Gemma 3 of tests/tiny_decoders.py: window 4, layers 0-4 local, 5
global), from the models' published configs, or from a computation written again here."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tests import tiny_decoders as files

TEXT = "the is the 机制 the is the"


@pytest.fixture(scope="module")
def tiny_gemma(tmp_path_factory):
    from attnviz.models.decoders.decoder import DecoderModel

    folder = tmp_path_factory.mktemp("designs")
    written = files.write(folder / "tiny-gemma3.gguf", "gemma3", "F32")
    return written, DecoderModel.load(written.path, cache_dir=folder / "cache")


# ---- the KV cache --------------------------------------------------------------------------------

# the models' published configs (HuggingFaceTB/SmolLM2-135M-Instruct, google/gemma-3-270m):
# layers, query heads, K/V heads, head_dim, sliding layers and their window
PUBLISHED = {"smollm2": (30, 9, 3, 64, 0, None), "gemma3-270m": (18, 4, 1, 256, 15, 512)}


def expected_bytes(layers, kv, d, tokens, local=0, window=None):
    """K and V, float32, every layer: local layers hold min(tokens, window) positions."""
    per_position = 2 * kv * d * 4
    held = (layers - local) * tokens + local * (min(tokens, window) if window else tokens)
    return per_position * held


@pytest.mark.slow
@pytest.mark.parametrize("name", PUBLISHED)
def test_kv_cache_bytes_per_token_and_at_1k_and_32k(name):
    from attnviz.models.catalogue import registry
    from attnviz.tutorials import designs

    layers, heads, kv, d, local, window = PUBLISHED[name]
    size = designs.cache_size(name, registry.get(name).config())
    assert size.bytes_per_token() == 2 * layers * kv * d * 4
    assert size.bytes_per_token(heads) == 2 * layers * heads * d * 4          # full MHA
    assert size.design == ("mqa" if kv == 1 else "gqa")
    for tokens in (1024, 32768):
        assert size.bytes_at(tokens) == expected_bytes(layers, kv, d, tokens)
        assert size.bytes_at(tokens, heads) == expected_bytes(layers, heads, d, tokens)
        assert size.bytes_at(tokens, windowed=True) == \
            expected_bytes(layers, kv, d, tokens, local, window)
    # the numbers the issue names: SmolLM2 46,080 B a token (MHA 138,240), Gemma 3 36,864
    # (MHA 147,456); Gemma 3 at 32k with its window: 15 layers hold 512 positions
    assert {"smollm2": 46_080, "gemma3-270m": 36_864}[name] == size.bytes_per_token()


# ---- the sliding window ------------------------------------------------------------------------

def test_each_layers_reach_grows_with_depth_until_a_global_layer():
    from attnviz.models.catalogue import registry
    from attnviz.tutorials import designs

    reach = designs.layer_reach(registry.get("gemma3-270m").config())
    assert reach[:5] == (511, 1022, 1533, 2044, 2555)        # window − 1 more each local layer
    assert all(math.isinf(r) for r in reach[5:])              # layer 5 is global
    assert all(math.isinf(r) for r in designs.layer_reach(registry.get("smollm2").config()))


@pytest.mark.reference
@pytest.mark.slow
def test_the_window_experiment_equals_transformers_on_the_tiny_gemma(tiny_gemma, torch):
    from attnviz.tutorials import designs

    written, model = tiny_gemma
    ids = designs.window_ids(model, TEXT, n=11)
    assert len(ids) == 11 and ids[0] == model.config.bos_id and (ids[1:] != model.config.bos_id).all()
    r = designs.sliding_window(model, ids)
    hf, _ = files.load(written.path)
    with torch.no_grad():
        att = hf(torch.tensor([ids.tolist()]), output_attentions=True).attentions
    assert (r.local_layer, r.global_layer, r.window) == (0, 5, 4)
    np.testing.assert_allclose(r.local_weights, att[0][0, :, -1].numpy(), atol=1e-5)
    np.testing.assert_allclose(r.global_weights, att[5][0, :, -1].numpy(), atol=1e-5)
    far = np.arange(11) <= 10 - 4                           # 4 or more positions back
    assert np.array_equal(r.beyond, far)
    assert r.local_beyond == 0.0 and (r.local_weights[:, far] == 0).all()
    assert r.global_beyond > 0


@pytest.mark.slow
def test_on_gemma_3_a_local_layer_gives_exactly_0_to_keys_512_back_and_a_global_one_does_not():
    """The issue's experiment on the real model: 600 tokens (past run()'s 512), the last
    query's weights on layer 0 (local) and layer 5 (global)."""
    from attnviz.models.decoders.decoder import DecoderModel
    from attnviz.tutorials import designs

    model = DecoderModel.load(name="gemma3-270m")
    ids = designs.window_ids(model, "Attention reads the tokens before it.")
    r = designs.sliding_window(model, ids)
    assert r.n == 600 and r.window == 512 and int(r.beyond.sum()) == 600 - 512
    assert r.local_beyond == 0.0 and (r.local_weights[:, :88] == 0).all()
    assert (r.local_weights[:, 88:] > 0).all()                 # inside the window: seen
    assert r.global_beyond > 1e-3
    np.testing.assert_allclose(r.local_weights.sum(axis=1), 1, atol=1e-5)


# ---- QK-norm -----------------------------------------------------------------------------------

def _rope(x, base):
    """x (H, n, d) turned by RoPE in the half-split layout, written again here."""
    n, d = x.shape[1], x.shape[2]
    inv = base ** (-np.arange(0, d, 2) / d)
    angles = np.arange(n)[:, None] * inv[None, :]
    cos, sin = np.cos(np.concatenate([angles] * 2, -1)), np.sin(np.concatenate([angles] * 2, -1))
    half = np.concatenate([-x[..., d // 2:], x[..., :d // 2]], -1)
    return x * cos + half * sin


@pytest.mark.reference
@pytest.mark.slow
def test_the_score_range_with_and_without_qk_norm_on_the_tiny_gemma(tiny_gemma, torch):
    """With QK-norm: the model's own scores (their weights equal transformers'); without: the
    same layer's q and k as transformers projects them (its q_proj and k_proj), rotated and
    scaled here."""
    from attnviz.tutorials import designs

    written, model = tiny_gemma
    hf, tokenizer = files.load(written.path)
    ids = tokenizer(TEXT)["input_ids"]
    seen = {}
    handles = []
    for i, layer in enumerate(hf.model.layers):
        for part in ("q_proj", "k_proj"):
            handles.append(getattr(layer.self_attn, part).register_forward_hook(
                lambda m, a, out, key=(i, part): seen.__setitem__(key, out[0].numpy())))
    with torch.no_grad():
        hf(torch.tensor([ids]))
    for h in handles:
        h.remove()
    r = designs.score_range(model, model.run(TEXT))
    assert r.qk_norm and np.array_equal(r.with_norm, r.actual)
    n, c = len(ids), model.config
    lower = ~np.triu(np.ones((n, n), bool), 1)
    for layer in range(c.num_layers):
        q = seen[(layer, "q_proj")].reshape(n, c.num_heads, c.d_k).transpose(1, 0, 2)
        k = seen[(layer, "k_proj")].reshape(n, 1, c.d_k).transpose(1, 0, 2)
        base = 10_000 if layer < 5 else 1_000_000
        s = _rope(q.astype(np.float64), base) @ _rope(k.astype(np.float64), base) \
            .transpose(0, 2, 1) / 16                                   # 1/√256
        np.testing.assert_allclose(r.without_norm[layer], np.abs(s[:, lower]).max(), rtol=1e-4)
    assert (r.softcap_change >= 0).all()
    worst = r.actual.max()
    assert r.softcap_change.max() == pytest.approx(worst - 50 * math.tanh(worst / 50), rel=1e-6)


# ---- the page ------------------------------------------------------------------------------------

@pytest.mark.slow
def test_the_experiments_model_tabs_run_the_sidebars_decoder():
    """The sliding-window tab on the decoder the sidebar names (the pretrained model where that
    is a decoder): Gemma 3's exact 0 and its 88 keys outside the window; SmolLM2 said to have
    none; the decoder chosen on the page becomes the sidebar's model."""
    from attnviz.i18n import render
    from tests.apptest_helpers import open_page, shows

    tab = render("experiments.tab.window", "en")
    at = open_page("pages/experiments.py", experiment=tab, mode="Pretrained model",
                   model="gemma3-270m")
    assert at.selectbox(key="lm_pick").value == "gemma3-270m"
    metrics = {m.label: m.value for m in at.metric}
    assert metrics[render("experiments.window.local", "en", layer=0)] == "0.0"
    assert metrics[render("experiments.window.masked", "en")] == str(600 - 512)
    assert float(metrics[render("experiments.window.global", "en", layer=5)]) > 0
    at.selectbox(key="lm_pick").set_value("smollm2").run()
    assert at.session_state["model"] == "smollm2"                 # one choice, both places
    assert shows(at.info, "experiments.window.none", model="SmolLM2-135M-Instruct")
    assert not at.exception
    # a page whose sidebar model is the encoder: the first language model, its own choice
    at = open_page("pages/experiments.py", experiment=render("experiments.tab.kv", "en"))
    assert at.session_state["model"] == "minilm"
    table = at.dataframe[0].value
    assert sorted(set(table.iloc[:, 0])) == ["Gemma 3 270M", "SmolLM2-135M-Instruct"]
    assert "46,080" in set(table.iloc[:, 2]) and "36,864" in set(table.iloc[:, 2])
