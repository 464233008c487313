"""The one Llama layer (issue 29.1, ``attnviz.models.decoders.llama_layer``) that
``DecoderModel.run``, generation, the head-ablation ranking and the readers call: its callers agree
with each other, what its hooks read is what transformers computes at the same places, and its
patches are transformers' own forward hooks doing the same. Expected numbers come from transformers
and torch (the same GGUF, eager attention, float32)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import numpy as np
import pytest

from attnviz.i18n import use_language
from attnviz.models.decoders import decoder_reading
from attnviz.models.decoders.decoder import DecoderModel, DecoderRun
from attnviz.models.decoders.llama_layer import HOOK_POINTS
from tests.hf_reference import hf_activations
from tests.i18n_walker import CJK
from tests.message_helpers import between, raises_message

ROOT = Path(__file__).resolve().parents[1]
TEXT = "The animal didn't cross the street because it was too tired"
CLEAN = "When Mary and John went to the store, John gave a drink to"
CORRUPTED = "When Mary and John went to the store, Mary gave a drink to"


def _log_softmax(logits) -> np.ndarray:
    import torch
    return torch.log_softmax(torch.tensor(np.asarray(logits), dtype=torch.float64), -1).numpy()


# ---- the callers agree ------------------------------------------------------------------------

def test_run_next_token_logprobs_and_the_ablation_path_agree(decoder):
    """The same text through the three ways the model runs its layers: ``run`` (the engine's
    traced attention), ``next_token_logprobs`` (the KV cache's prefill, one sequence) and the
    ablation ranking's batched path (every layer from 0, a batch of two all-ones head masks)."""
    run = decoder.run(TEXT)
    from_run = _log_softmax(run.logits[-1])
    cached = decoder.next_token_logprobs(TEXT)
    batched = decoder_reading._from_layer(decoder, run, 0, np.ones((2, 30, 9)))   # (2, vocab)
    # the layers give the three the same residual stream (up to its rounding, below); the
    # logits differ by the output product's rounding alone — Eᵀ times n rows at once (run),
    # one row (the cache) or two (the batch): BLAS adds the 576 terms in another order, a few
    # float32 ulps of logits around ±20 (measured: at most 2.8e-5 on three texts); a layer
    # computed wrongly (a head, the mask, a position off by one) moves them by 1e-2 and more
    np.testing.assert_allclose(cached, from_run, atol=1e-4)
    np.testing.assert_allclose(batched[0], cached, atol=1e-4)
    # two rows of one batch, the same numbers in: a BLAS kernel may treat a product's rows
    # differently too (OpenBLAS's Haswell kernel: 2.9e-5 apart), so the same bound
    np.testing.assert_allclose(batched[1], batched[0], atol=1e-4)
    h = decoder.run_layers(np.repeat(decoder.token_embeddings(run.ids)[None], 2, axis=0),
                           head_mask=np.ones((2, 30, 9)))                 # (2, n, d_model)
    # the same stream up to rounding at the scale of each row's largest feature: bit for bit
    # with OpenBLAS's SkylakeX kernel, 2.3e-6 of the row's largest with its Haswell kernel on
    # 2 threads (a batch of two is split between the threads); the bound is 1e-5 of it
    scale = np.abs(run.hidden_states[-1]).max(axis=-1, keepdims=True)   # (n, 1)
    for stream in h:
        assert (np.abs(stream - run.hidden_states[-1]) <= 1e-5 * scale).all()
    top = int(np.argmax(from_run))
    assert int(np.argmax(cached)) == int(np.argmax(batched[0])) == top
    step = decoder.generate(TEXT, max_new_tokens=1).steps[0]          # generation's prefill
    assert step.id == top and step.probability == pytest.approx(np.exp(from_run[top]), abs=1e-5)


def test_run_layers_and_unembed_are_transformers_hidden_states_and_logits(decoder, hf_decoder):
    import torch

    model, _ = hf_decoder
    ids = decoder.encode(TEXT)
    with torch.no_grad():
        out = model(torch.tensor([list(ids)]), output_hidden_states=True)
    hidden = torch.stack(out.hidden_states)[:, 0].numpy()              # (31, n, d_model)
    h = decoder.run_layers(decoder.token_embeddings(ids))                         # (n, d_model)
    np.testing.assert_allclose(decoder.token_embeddings(ids), hidden[0], atol=1e-6)
    np.testing.assert_allclose(decoder.unembed(h), out.logits[0].numpy(), atol=1e-3)
    # transformers' last hidden state is already normed: compare the layers up to 29 here
    half = decoder.run_layers(hidden[12], 12, 20)                      # layers 12 … 19
    np.testing.assert_allclose(half, hidden[20], rtol=1e-5, atol=1e-3)


# ---- what the hooks read, against transformers ----------------------------------------------

def test_every_hook_point_reads_what_transformers_computes_there(decoder, hf_decoder):
    ids = decoder.encode(TEXT)
    layers = (0, 13, 29)
    read = {}

    def hook(layer, name, value):
        assert not value.flags.writeable                  # a patch is returned, not written
        if layer in layers:
            read[(layer, name)] = np.array(value)

    decoder.run_layers(decoder.token_embeddings(ids)[None], hook=hook)
    assert {name for (_, name) in read} == set(HOOK_POINTS)
    expected = hf_activations(hf_decoder, ids, layers)
    for key in sorted(expected):
        got = read[key]
        assert got.shape == expected[key].shape, key
        # the first token's residual grows to ~10⁴: relative, as test_decoder's hidden states;
        # the weights as test_decoder's attentions
        np.testing.assert_allclose(got, expected[key], rtol=0 if key[1] == "pattern" else 1e-5,
                                   atol=1e-4 if key[1] == "pattern" else 1e-3, err_msg=str(key))


# ---- patches, against transformers' forward hooks doing the same ----------------------------

POSITION = 9                  # " John" / " Mary": where the two prompts differ


def _hf_patched_logits(hf_decoder, clean_ids, corrupted_ids) -> list[np.ndarray]:
    """transformers' last-position logits of the corrupted prompt with, one patch per run, the
    clean run's (a) residual stream before layer 7 at POSITION, (b) z of heads 2 and 5 of
    layer 12 at every position, (c) MLP output of layer 20 at POSITION."""
    import torch

    model, _ = hf_decoder
    layers = model.model.layers
    clean = {}

    def capture(name):
        def hook(module, args, out=None):
            clean[name] = (args[0] if out is None else out).detach().clone()
        return hook

    handles = [layers[7].register_forward_pre_hook(capture("resid")),
               layers[12].self_attn.o_proj.register_forward_pre_hook(capture("z")),
               layers[20].mlp.register_forward_hook(capture("mlp"))]
    with torch.no_grad():
        model(torch.tensor([list(clean_ids)]))
    for handle in handles:
        handle.remove()

    def resid(module, args):
        h = args[0].clone()
        h[:, POSITION] = clean["resid"][:, POSITION]
        return (h,) + args[1:]

    def heads(module, args):
        z = args[0].clone().reshape(1, -1, 9, 64)
        z[:, :, [2, 5]] = clean["z"].reshape(1, -1, 9, 64)[:, :, [2, 5]]
        return (z.reshape(1, -1, 9 * 64),)

    def mlp(module, args, out):
        out = out.clone()
        out[:, POSITION] = clean["mlp"][:, POSITION]
        return out

    results = []
    for module, patch, kind in ((layers[7], resid, "pre"), (layers[12].self_attn.o_proj, heads,
                                "pre"), (layers[20].mlp, mlp, "post")):
        handle = module.register_forward_pre_hook(patch) if kind == "pre" else \
            module.register_forward_hook(patch)
        try:
            with torch.no_grad():
                results.append(model(torch.tensor([list(corrupted_ids)])).logits[0, -1].numpy())
        finally:
            handle.remove()
    return results


def test_patches_in_a_batch_are_transformers_forward_hooks(decoder, hf_decoder):
    clean_ids, corrupted_ids = decoder.encode(CLEAN), decoder.encode(CORRUPTED)
    assert len(clean_ids) == len(corrupted_ids)
    assert (clean_ids != corrupted_ids).tolist() == [i == POSITION for i in range(len(clean_ids))]
    clean = {}

    def read(layer, name, value):
        clean[(layer, name)] = np.array(value)

    decoder.run_layers(decoder.token_embeddings(clean_ids), hook=read)

    def patch(layer, name, value):
        """Row 0: the residual before layer 7 at POSITION; row 1: heads 2 and 5 of layer 12;
        row 2: the MLP output of layer 20 at POSITION — each from the clean run."""
        if (layer, name) == (7, "resid_pre"):
            new = value.copy()
            new[0, POSITION] = clean[(7, "resid_pre")][0, POSITION]
        elif (layer, name) == (12, "z"):
            new = value.copy()
            new[1, [2, 5]] = clean[(12, "z")][0, [2, 5]]
        elif (layer, name) == (20, "mlp_out"):
            new = value.copy()
            new[2, POSITION] = clean[(20, "mlp_out")][0, POSITION]
        else:
            return None
        return new

    corrupted = np.repeat(decoder.token_embeddings(corrupted_ids)[None], 3,
                          axis=0)                                         # (3, n, d_model)
    patched = decoder.unembed(decoder.run_layers(corrupted, hook=patch)[:, -1])   # (3, vocab)
    expected = _hf_patched_logits(hf_decoder, clean_ids, corrupted_ids)
    plain = decoder.unembed(decoder.run_layers(decoder.token_embeddings(corrupted_ids))[-1])
    for row in range(3):
        np.testing.assert_allclose(patched[row], expected[row], atol=1e-3)
        assert np.abs(patched[row] - plain).max() > 1e-2          # each patch did change it


def test_a_head_mask_per_sequence_is_transformers_with_those_heads_zeroed(decoder, hf_decoder):
    import torch

    model, _ = hf_decoder
    ids = decoder.encode(TEXT)
    masks = np.ones((2, 30, 9))
    masks[1, 6, [0, 4]] = 0

    def zero(module, args):
        z = args[0].clone().reshape(1, -1, 9, 64)
        z[:, :, [0, 4]] = 0
        return (z.reshape(1, -1, 9 * 64),)

    handle = model.model.layers[6].self_attn.o_proj.register_forward_pre_hook(zero)
    try:
        with torch.no_grad():
            expected = model(torch.tensor([list(ids)])).logits[0].numpy()
    finally:
        handle.remove()
    h = decoder.run_layers(np.repeat(decoder.token_embeddings(ids)[None], 2, axis=0),
                           head_mask=masks)
    np.testing.assert_allclose(decoder.unembed(h[1]), expected, atol=1e-3)
    assert np.abs(decoder.unembed(h[0]) - expected).max() > 1e-2       # row 0 kept them


# ---- errors ---------------------------------------------------------------------------------

def _said_in_both_languages(caught, *shown) -> None:
    exc = caught.value
    with use_language("zh"):
        chinese = str(exc)
    assert CJK.search(chinese) and not CJK.search(exc.render("en"))
    for part in shown:
        assert part in chinese and part in exc.render("en"), (part, chinese)


def test_a_hook_may_only_read_the_pattern_and_the_values(decoder):
    h = decoder.token_embeddings(decoder.encode("Hello world"))
    for name in ("pattern", "v"):
        with raises_message("error.layer.hook_read_only", name=name) as caught:
            decoder.run_layers(h, hook=lambda layer, point, value, name=name:
                               np.zeros_like(value) if point == name else None)
        _said_in_both_languages(caught, name, "resid_pre")


def test_a_patch_keeps_the_shape(decoder):
    h = decoder.token_embeddings(decoder.encode("Hello world"))                    # (2, 576)
    with raises_message("error.layer.hook_shape", name="z", want="(1, 9, 2, 64)",
                        shape="(1, 9, 1, 64)") as caught:
        decoder.run_layers(h, hook=lambda layer, name, value:
                           value[:, :, :1] if name == "z" else None)
    _said_in_both_languages(caught, "z", "(1, 9, 2, 64)")


BAD_INPUTS = [
    (lambda m: m.run_layers(np.zeros((2, 5))), "error.layer.residual_shape",
     dict(d_model=576, shape="(2, 5)")),
    (lambda m: m.run_layers(np.zeros((1, 0, 576))), "error.layer.residual_shape",
     dict(shape="(1, 0, 576)")),
    (lambda m: m.unembed(np.zeros(5)), "error.layer.residual_shape", dict(shape="(5,)")),
    (lambda m: m.run_layers(np.zeros((2, 3, 576)), head_mask=np.ones((2, 30, 8))),
     "error.head_mask.batch_shape", dict(want=(2, 30, 9), shape=(2, 30, 8))),
    (lambda m: m.run_layers(np.zeros((2, 3, 576)), head_mask=np.full((2, 30, 9), 0.5)),
     "error.head_mask.values", {}),
    (lambda m: m.run_layers(np.zeros((3, 576)), head_mask=np.ones((29, 9))),
     "error.head_mask.shape", dict(want=(30, 9))),
    (lambda m: m.run_layers(np.zeros((3, 576)), 31), "error.whole_number",
     dict(name="start", bounds=between(0, 30))),
    (lambda m: m.run_layers(np.zeros((3, 576)), 5, 4), "error.whole_number",
     dict(name="stop", bounds=between(5, 30))),
    (lambda m: m.token_embeddings([0, 49152]), "error.layer.ids", dict(high=49151)),
    (lambda m: m.token_embeddings([[1, 2]]), "error.layer.ids", dict(shape="(1, 2)")),
]


@pytest.mark.parametrize("call, msg_id, params", BAD_INPUTS,
                         ids=[f"{b[1]}-{i}" for i, b in enumerate(BAD_INPUTS)])
def test_bad_inputs_to_the_layers_say_what_is_wrong(decoder, call, msg_id, params):
    with raises_message(msg_id, **params) as caught:
        call(decoder)
    _said_in_both_languages(caught)


# ---- the model's insides stay inside ----------------------------------------------------------

def test_no_module_reads_a_private_attribute_of_the_decoder():
    """Readers get what they need from DecoderModel's and DecoderRun's public methods
    (``run_layers``, ``token_embeddings``, ``unembed``, ``labels``, ``piece``, ``nbytes``): no
    module but models/decoders/decoder.py reads their underscored attributes."""
    private = {name for cls in (DecoderModel, DecoderRun)
               for name in list(vars(cls)) + list(cls.__dataclass_fields__)
               if name.startswith("_") and not name.startswith("__")}
    assert {"_blocks", "_embed", "_final_norm", "_pieces", "_values"} <= private
    found = []
    for path in sorted((ROOT / "attnviz").rglob("*.py")):
        if path == ROOT / "attnviz" / "models" / "decoders" / "decoder.py":
            continue
        source = path.read_text(encoding="utf-8")
        if not re.search(r"DecoderModel|DecoderRun|models\.decoders\.decoder\b|decoder_reading|"
                         r"import decoder\b", source):
            continue
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Attribute) and node.attr in private and not (
                    isinstance(node.value, ast.Name) and node.value.id == "self"):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} .{node.attr}")
    assert found == []
