"""Issue 37.4: every decoder family attnviz reads (llama, qwen2, qwen3, gemma3), in every file
type (F32, F16, Q8_0, Q6_K), is computed as transformers computes it from the same GGUF: the
tiny files tests/tiny_decoders.py writes (random weights; each family's own design: Q/K/V
biases, QK-norm, post-norms, GELU-tanh, √d_model embeddings, a sliding window of 4 on five of
six layers, one K/V head), read by attnviz's converter and by transformers' ``gguf_file=``.

Tolerances: the two sides compute the same float32 formulas in another order (numpy's and
torch's matrix products, h/√v against h·rsqrt(v), Gemma's gain 1 + (w − 1) against w), so they
agree to float32 rounding grown through a few layers: attentions within 1e-5, logits within
1e-4 (issue 37's bounds), greedy tokens identical."""

from __future__ import annotations

import numpy as np
import pytest

from tests import tiny_decoders as files

pytestmark = pytest.mark.reference

PROMPT = "the 自注意力 is the 机制"
KEYS = [(arch, dtype) for arch in files.ARCHS for dtype in files.DTYPES]


@pytest.fixture(scope="module")
def references(tiny_decoders, hf_tiny_decoders):
    """transformers' ids, logits, attentions and 20 greedy tokens for PROMPT, per file."""
    return {key: files.reference(tiny_decoders[key].path, PROMPT, loaded=hf_tiny_decoders[key])
            for key in KEYS}


@pytest.fixture(scope="module")
def models(tiny_decoders, tmp_path_factory):
    """attnviz's DecoderModel of each file, converted into a cache of this module's own."""
    from attnviz.models.decoders.decoder import DecoderModel

    cache = tmp_path_factory.mktemp("family-cache")
    return {key: DecoderModel.load(tiny_decoders[key].path, cache_dir=cache) for key in KEYS}


@pytest.mark.parametrize("key", KEYS, ids=["-".join(k) for k in KEYS])
def test_each_family_and_file_type_is_transformers_own_computation(key, models, references):
    model, ref = models[key], references[key]
    run = model.run(PROMPT)
    assert run.ids.tolist() == ref.ids                      # the tokenizer built from the file
    np.testing.assert_allclose(run.attentions, ref.attentions, rtol=0, atol=1e-5)
    np.testing.assert_allclose(run.logits, ref.logits, rtol=0, atol=1e-4)
    made = model.generate(PROMPT, max_new_tokens=20, stop_at_eos=False)   # with its KV cache
    assert made.ids[len(ref.ids):].tolist() == ref.greedy


def test_the_spec_carries_each_familys_design(models):
    """What the converter read from each file's metadata (transformers' configs say the same:
    tests/test_tiny_decoders.py)."""
    spec = {arch: models[(arch, "F32")].config for arch in files.ARCHS}
    assert [spec[a].qkv_bias for a in files.ARCHS] == [False, True, False, False]
    assert [spec[a].qk_norm for a in files.ARCHS] == [False, False, True, True]
    assert [spec[a].post_norms for a in files.ARCHS] == [False, False, False, True]
    g = spec["gemma3"]
    assert (g.head_dim, g.num_kv_heads, g.activation) == (256, 1, "gelu_tanh")
    assert g.head_dim != g.d_model // g.num_heads
    assert g.embed_scale == np.float32(np.sqrt(g.d_model))
    assert [g.window_of(layer) for layer in range(g.num_layers)] == [4] * 5 + [None]
    assert [g.rope_base_of(layer) for layer in range(g.num_layers)] == [1e4] * 5 + [1e6]
    assert g.scale == 1 / 16 and g.add_bos


def test_a_sliding_layer_puts_exactly_zero_on_keys_a_window_back(models):
    """Gemma 3's local layers: a query sees the 4 keys up to itself and puts exactly 0 on keys 4
    or more positions back; its global layer (5) does not."""
    model = models[("gemma3", "F32")]
    run = model.run("the is the is the is the is the is")
    n = len(run.ids)
    back = np.arange(n)[:, None] - np.arange(n)[None, :]
    far = back >= 4
    assert n > 4 and far.any()
    for layer in range(5):
        assert (run.attentions[layer][:, far] == 0).all()
        assert (run.attentions[layer][:, (back >= 0) & ~far] > 0).all()
    assert (run.attentions[5][:, far] > 0).all()


def test_a_local_layers_cache_keeps_only_its_window(models, references, monkeypatch):
    """Generation on Gemma 3's design: each local layer's KV cache holds the last 4 positions
    (the window, the query's own included) and drops the earlier ones — moved every step here
    (no slack) — while the global layer keeps all; the tokens are still transformers' (its own
    sliding-window cache), and each step's attention row is the whole text's row."""
    from attnviz.models.decoders.llama_layer import WindowedKVCache

    monkeypatch.setattr(WindowedKVCache, "_SLACK", 0)
    model, ref = models[("gemma3", "F32")], references[("gemma3", "F32")]
    made = model.generate(PROMPT, max_new_tokens=20, stop_at_eos=False)
    assert made.ids[len(ref.ids):].tolist() == ref.greedy
    patterns = {}
    model.run_layers(model.token_embeddings(made.ids[:-1]),
                     hook=lambda layer, name, value: patterns.__setitem__(layer, value[0])
                     if name == "pattern" else None)
    c = model.config
    per_position = 2 * c.num_kv_heads * c.d_k * 4                      # float32 keys and values
    for step in made.steps:
        p = step.query_position
        assert step.cache_first == (max(0, p - 3),) * 5 + (0,)
        assert step.cache_kept == (min(p + 1, 4),) * 5 + (p + 1,)
        assert step.cache_bytes == per_position * sum(step.cache_kept)
        for layer in range(c.num_layers):
            np.testing.assert_allclose(step.attentions[layer], patterns[layer][:, p, :p + 1],
                                       rtol=0, atol=1e-6)
            assert (step.attentions[layer][:, :step.cache_first[layer]] == 0).all()
    assert made.steps[-1].cache_kept[0] == 4 < made.steps[-1].cache_tokens


def test_a_family_or_tokenizer_not_read_is_refused_naming_what_is_read(tmp_path, tiny_decoders):
    """A GGUF of another architecture, or another tokenizer kind, is refused before anything is
    converted, with the message naming the families read."""
    import gguf

    from attnviz.core.errors import AttnvizInputError
    from attnviz.models.decoders import gguf_llama

    source = tiny_decoders[("llama", "F32")].path
    for key, value, message in (("general.architecture", "phi3", "error.gguf.architecture"),
                                ("tokenizer.ggml.model", "t5", "error.gguf.tokenizer")):
        reader = gguf.GGUFReader(str(source))
        path = tmp_path / f"{value}.gguf"
        writer = gguf.GGUFWriter(str(path), arch=value if key == "general.architecture"
                                 else "llama")
        for field in reader.fields.values():
            if field.name.startswith("GGUF.") or field.name == "general.architecture":
                continue
            contents = field.contents()
            if field.name == key:
                contents = value
            writer.add_key_value(field.name, contents, field.types[0],
                                 field.types[-1] if field.types[0] == gguf.GGUFValueType.ARRAY
                                 else None)
        for t in reader.tensors:
            writer.add_tensor(t.name, np.asarray(t.data), raw_dtype=t.tensor_type)
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()
        with pytest.raises(AttnvizInputError) as caught:
            gguf_llama.read_config(path)
        assert caught.value.msg_id == message
        if message == "error.gguf.architecture":
            assert caught.value.params["supported"] == "llama, qwen2, qwen3, gemma3"


@pytest.mark.parametrize("arch", files.ARCHS)
def test_each_blocks_update_is_the_sum_of_its_flow_terms(arch, models):
    """Information flow on every family (issue 37.4): the attention sublayer's output is the sum
    of one term per head and earlier token (``flow.head_terms``; with Gemma's post-norm, each
    term divided by the norm's one number per token and scaled by its gain), within 1e-4 of
    what the layer adds; the residual and MLP terms then sum to the next stream; and the flow's
    importances into each node sum to 1."""
    from attnviz.models.readers import flow

    model = models[(arch, "F32")]
    ids = model.encode(PROMPT)
    reads = {}

    def read(layer, name, value):
        reads[(layer, name)] = np.array(value[0])

    model.run_layers(model.token_embeddings(ids), hook=read)
    for layer in range(model.num_layers):
        alpha, parts = flow.head_terms(model, layer, reads[(layer, "pattern")],
                                       reads[(layer, "v")])
        terms = np.einsum("hij,hjd->id", alpha.astype(np.float64), parts.astype(np.float64))
        np.testing.assert_allclose(terms, reads[(layer, "attn_out")], rtol=0, atol=1e-4)
        np.testing.assert_allclose(reads[(layer, "resid_pre")] + reads[(layer, "attn_out")],
                                   reads[(layer, "resid_mid")], rtol=0, atol=1e-5)
        np.testing.assert_allclose(reads[(layer, "resid_mid")] + reads[(layer, "mlp_out")],
                                   reads[(layer, "resid_post")], rtol=0, atol=1e-5)
    f = model.information_flow(PROMPT, threshold=0.0)
    into = f.head_weights.sum(axis=(1, 3)) + f.attn_residual        # (layers, n)
    np.testing.assert_allclose(into, 1, atol=1e-5)
    np.testing.assert_allclose(f.mlp + f.mlp_residual, 1, atol=1e-5)


@pytest.mark.parametrize("arch", files.ARCHS)
def test_the_lens_and_patching_read_every_family(arch, models):
    """The readers on every family (issue 37.4): the logit lens's last row is the model's own
    output (the same computation, so the same bits); residual patching's ends are exact — 1
    where the clean run's stream is put back whole at the one token that differs, 0 wherever
    the two runs are the same."""
    model = models[(arch, "F32")]
    run = model.run(PROMPT)
    lens = model.logit_lens(PROMPT, k=3)
    np.testing.assert_array_equal(lens.logits(-1), run.logits)
    assert (lens.target_rank[-1] == 1).all() and (lens.kl[-1] == 0).all()
    clean, corrupted = PROMPT, PROMPT.replace("自注意力", "机制", 1)
    a, b = model.encode(clean), model.encode(corrupted)
    assert len(a) == len(b) and (a != b).sum() == 1
    diff = int(np.flatnonzero(a != b)[0])
    top = int(np.argmax(run.logits[-1]))
    other = int(np.argsort(run.logits[-1])[-2])
    p = model.patch(clean, corrupted, answers=(top, other), where="resid")
    assert p.effect[0, diff] == pytest.approx(1, abs=1e-6)
    assert np.all(p.effect[:, :diff] == 0)
    assert p.effect[model.num_layers, -1] == pytest.approx(1, abs=1e-6)


@pytest.mark.parametrize("arch", files.ARCHS)
def test_value_norms_are_the_sizes_of_what_each_head_adds(arch, models):
    """The value-weighted attention on every family: α_ij ‖v_j W_O,h‖, and with Gemma's norm
    after attention the size of what joins the stream, α_ij / r_i ‖(v_j W_O,h) ⊙ g‖, r_i the
    root mean square of the attention's output before that norm — computed here from the run's
    weights and the values a hook reads. Their sum over heads and keys is at least the size of
    what the sublayer adds (the layer's own attn_out, the triangle inequality)."""
    model = models[(arch, "F32")]
    run = model.run(PROMPT)
    reads = {}
    model.run_layers(model.token_embeddings(run.ids),
                     hook=lambda layer, name, value: reads.__setitem__((layer, name),
                                                                       np.array(value[0], float)))
    h, eps = model.num_heads, model.config.rms_eps
    for layer in range(model.num_layers):
        alpha = run.attentions[layer].astype(float)                          # (H, n, n)
        v = np.repeat(reads[(layer, "v")], h // model.num_kv_heads, axis=0)  # (H, n, d_k)
        w_o = model.layer_weights(layer).w_o.astype(float).reshape(h, v.shape[-1], -1)
        f = v @ w_o                                                          # (H, n, d_model)
        gain = model.attention_output_norm(layer)
        if gain is None:
            expected = alpha * np.linalg.norm(f, axis=-1)[:, None, :]
        else:
            a = np.einsum("hij,hjd->id", alpha, f)                           # before the norm
            r = np.sqrt((a * a).mean(axis=-1) + eps)
            expected = alpha / r[None, :, None] * np.linalg.norm(f * gain, axis=-1)[:, None, :]
        np.testing.assert_allclose(run.value_norms[layer], expected, rtol=1e-4, atol=1e-6)
        size = np.linalg.norm(reads[(layer, "attn_out")], axis=-1)           # (n,)
        assert (run.value_norms[layer].sum(axis=(0, 2)) >= size * (1 - 1e-4)).all()


def test_the_config_states_the_variation_points_by_spec_names(models):
    """SPEC's names for what differs (issue 37): layer_types, rope_bases, norms …"""
    g, llama = models[("gemma3", "F32")].config, models[("llama", "F32")].config
    assert g.layer_types == ("sliding",) * 5 + ("full",)
    assert g.rope_bases == (1e4,) * 5 + (1e6,)
    assert (g.norms, llama.norms) == ("sandwich", "pre")
    assert (g.sliding_window, llama.sliding_window) == (4, None)
    assert llama.layer_types == ("full",) * llama.num_layers
    assert llama.rope_bases == (llama.rope_base,) * llama.num_layers
    assert (g.qk_norm, g.qkv_bias, g.activation, g.head_dim) == (True, False, "gelu_tanh", 256)


def test_the_tuned_lens_is_fitted_per_model_and_chat_only_where_there_is_a_template(
        models, tmp_path):
    """The tuned lens on another family (issue 37.4): fitted for that model in its own cache
    folder, its last row still the model's output; a base model without a chat template
    refuses chat=True, naming the model."""
    from attnviz.core.errors import AttnvizInputError

    model = models[("gemma3", "F32")]
    lens = model.tuned_lens(cache_dir=tmp_path)
    assert lens.translators.shape == (model.num_layers, model.d_model + 1, model.d_model)
    assert lens.outcome == "fitted" and any(tmp_path.rglob("*.npy"))   # kept in its folder
    tuned = model.logit_lens(PROMPT, k=3, tuned=True)
    np.testing.assert_allclose(tuned.logits(-1), model.run(PROMPT).logits, atol=1e-5)
    with pytest.raises(AttnvizInputError) as caught:
        model.generate(PROMPT, 2, chat=True)
    assert caught.value.msg_id == "error.decoder.no_chat_template"
    assert caught.value.params["model"] == model.model_name


def test_a_cut_damaged_or_too_large_file_is_refused_in_words(tiny_decoders, tmp_path):
    """Your own GGUF, broken on purpose (issue 37.3): a file cut anywhere is refused as
    unreadable, never a traceback; a file whose float32 arrays would not fit in this machine's
    memory is refused before anything is converted, saying both numbers."""
    import gguf

    from attnviz.core.errors import AttnvizInputError
    from attnviz.models.decoders.decoder import DecoderModel

    data = tiny_decoders[("gemma3", "Q8_0")].path.read_bytes()
    for fraction in (0.001, 0.01, 0.3, 0.9, 0.999):
        cut = tmp_path / f"cut-{fraction}.gguf"
        cut.write_bytes(data[:int(len(data) * fraction)])
        with pytest.raises(AttnvizInputError) as caught:
            DecoderModel.load(cut, cache_dir=tmp_path / "cache")
        assert caught.value.msg_id in ("error.gguf.unreadable", "error.gguf.no_key"), fraction
    # the tiny Llama's metadata, claiming a million layers with MLPs a million wide
    source = gguf.GGUFReader(str(tiny_decoders[("llama", "F32")].path))
    big = tmp_path / "big.gguf"
    writer = gguf.GGUFWriter(str(big), arch="llama")
    for field in source.fields.values():
        if field.name.startswith("GGUF.") or field.name == "general.architecture":
            continue
        value = {"llama.block_count": 1_000_000,
                 "llama.feed_forward_length": 1_000_000}.get(field.name, field.contents())
        writer.add_key_value(field.name, value, field.types[0],
                             field.types[-1] if field.types[0] == gguf.GGUFValueType.ARRAY
                             else None)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.close()
    with pytest.raises(AttnvizInputError) as caught:
        DecoderModel.load(big, cache_dir=tmp_path / "big-cache")
    assert caught.value.msg_id == "error.gguf.too_large"
    assert float(caught.value.params["need"]) > float(caught.value.params["available"]) > 0
    assert not (tmp_path / "big-cache").exists()                    # nothing was converted


def test_the_cache_is_keyed_by_the_files_content(tiny_decoders, tmp_path, monkeypatch):
    """A copy of a GGUF elsewhere finds the conversion already made (issue 37.3: keyed by
    content, not by path); a file with one byte changed never does."""
    import shutil

    from attnviz.models.decoders import gguf_llama

    monkeypatch.setenv("ATTNVIZ_CACHE_DIR", str(tmp_path / "cache"))
    source = tiny_decoders[("qwen2", "F16")].path
    first = gguf_llama.load(source)
    copy = tmp_path / "elsewhere" / "renamed.gguf"
    copy.parent.mkdir()
    shutil.copyfile(source, copy)
    copy = copy.rename(copy.with_name(source.name))          # the same stem, another folder
    again = gguf_llama.load(copy)
    assert (first.report.outcome, again.report.outcome) == ("converted", "verified")
    assert again.cached_in == first.cached_in
    changed = tmp_path / "changed" / source.name
    changed.parent.mkdir()
    data = bytearray(source.read_bytes())
    data[-1] ^= 1                                            # one bit of the last tensor
    changed.write_bytes(bytes(data))
    assert gguf_llama.cache_folder(changed) != first.cached_in
    assert gguf_llama.load(changed).report.outcome == "converted"
