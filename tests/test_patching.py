"""Activation patching on SmolLM2 (issue 28.2): exact ends (the whole clean input → 1, nothing
changed → 0), a sample of residual, attention, MLP and head patches reproduced with torch forward
hooks in transformers running the same GGUF, the pairs the model really answers, stopping and
resuming, and the errors. Expected numbers never come from attnviz."""

import numpy as np
import pytest

from attnviz.i18n import render
from attnviz.models.readers.patching import patch_once
from attnviz.tutorials.patching_pairs import PATCHING_PAIRS, patching_pair
from tests.message_helpers import raises_message

IOI = patching_pair("ioi")
FACTUAL = patching_pair("factual")
EFFECT_ATOL = 1e-4          # the bound on the normalised metric against transformers


@pytest.fixture(scope="module")
def ioi_resid(decoder):
    return decoder.patch(IOI.clean, IOI.corrupted, answers=(" Mary", " John"), where="resid")


# ---- the exact ends --------------------------------------------------------------------------

def _first_difference(decoder, pair) -> int:
    a, b = decoder.encode(pair.clean), decoder.encode(pair.corrupted)
    return int(np.flatnonzero(a != b)[0])


@pytest.mark.slow
def test_the_whole_clean_residual_at_layer_0_gives_exactly_one_and_nothing_gives_zero(decoder):
    layers = decoder.num_layers
    assert patch_once(decoder, IOI.clean, IOI.corrupted, where="resid", layer=0) == 1.0
    assert patch_once(decoder, FACTUAL.clean, FACTUAL.corrupted, where="resid", layer=0) == 1.0
    # the stream after the last layer at every position: the clean output itself
    assert patch_once(decoder, IOI.clean, IOI.corrupted, where="resid", layer=layers) == 1.0
    # the first token is the same in both prompts: putting it back changes nothing
    for where, layer in [("resid", 0), ("attn", 4), ("mlp", 17)]:
        assert patch_once(decoder, IOI.clean, IOI.corrupted, where=where, layer=layer,
                          position=0) == 0.0
    # after the last layer only the last position is read
    assert patch_once(decoder, FACTUAL.clean, FACTUAL.corrupted, where="resid", layer=layers,
                      position=3) == 0.0


@pytest.mark.slow
def test_the_residual_grid_is_exact_where_the_answer_is_known(decoder, ioi_resid):
    p, layers = ioi_resid, decoder.num_layers
    n = len(decoder.encode(IOI.clean))
    diff = _first_difference(decoder, IOI)                        # " John" / " Mary", alone
    assert (decoder.encode(IOI.clean) != decoder.encode(IOI.corrupted)).sum() == 1
    assert p.effect.shape == (layers + 1, n) and p.complete and p.done == p.effect.size
    assert p.answer_tokens == (" Mary", " John")
    # layer 0 at the one token that differs is the whole clean input; elsewhere nothing
    assert p.effect[0, diff] == pytest.approx(1, abs=1e-6)
    assert np.all(p.effect[0, np.arange(n) != diff] == 0)
    # before that token the two runs are the same at every layer (causal)
    assert np.all(p.effect[:, :diff] == 0)
    # after the last layer: the last position is the output, the others are never read
    assert p.effect[layers, -1] == pytest.approx(1, abs=1e-6)
    assert np.all(p.effect[layers, :-1] == 0)
    # the name moves to the last position in between (IOI's story): the last position ends it
    assert p.effect[layers - 1, -1] > 0.5 and abs(p.effect[layers - 1, diff]) < 0.1


def _stream_close(actual, expected):
    """Streams computed in other batches agree up to float32 rounding, not to the bit: a BLAS
    kernel may sum a row's products in another order in another batch, and 30 layers carry
    the difference on (OpenBLAS's Haswell kernel against its SkylakeX one: ≤ 2e-4 on streams
    of ~40, 5e-6 of each row's largest). The bound: 1e-4 of each row's largest."""
    scale = np.abs(expected).max(axis=-1, keepdims=True)
    assert (np.abs(actual - expected) <= 1e-4 * scale).all()


def test_a_sequence_in_a_batch_is_computed_as_it_would_be_alone(decoder):
    # a patched run batched with others gives its own numbers, up to rounding
    rng = np.random.default_rng(0)
    ids = decoder.encode(IOI.clean)
    h = decoder.token_embeddings(ids)[None] + rng.standard_normal((3, len(ids), decoder.d_model)
                                                       ).astype(np.float32) * 0.01
    together = decoder.run_layers(h, 27)
    for i in range(3):
        _stream_close(together[i], decoder.run_layers(h[i:i + 1], 27)[0])


def test_the_exact_ends_need_no_arithmetic_to_agree(decoder):
    """The 0 and 1 ends are exact by construction, not because a batch of patched runs gives
    the bits of a run alone: a patch that is one of the two runs reads that run's metric."""
    from attnviz.models.readers.patching import _Runs

    runs = _Runs(decoder, IOI.clean, IOI.corrupted, None)
    n, layers, first = len(runs.clean_ids), decoder.num_layers, runs.first
    assert runs.known("resid", 0, first) == runs.clean          # the one token that differs
    assert runs.known("resid", layers, n - 1) == runs.clean     # the output's last row
    assert runs.known("resid", layers, first) == runs.corrupted   # a row the output never reads
    assert runs.known("resid", 0, 0) == runs.corrupted           # a token both prompts share
    assert runs.known("resid", 5, n - 1) is None                 # a patch that must run
    assert runs.known("heads", 5, (0, slice(None))) is None


def test_the_layers_on_later_tokens_after_a_cache_are_the_layers_on_the_whole(decoder):
    from attnviz.models.decoders.llama_layer import KVCache

    ids = decoder.encode(IOI.clean)
    whole = decoder.run_layers(decoder.token_embeddings(ids))                # (n, d_model)
    cache = KVCache(decoder.num_layers, decoder.num_kv_heads, len(ids), decoder.d_k)
    decoder.run_layers(decoder.token_embeddings(ids[:5])[None], cache=cache)
    cache.advance(5)
    later = decoder.run_layers(decoder.token_embeddings(ids[5:])[None], cache=cache)[0]
    _stream_close(later, whole[5:])
    with raises_message("error.layer.cache", batch=2, positions=len(ids) + 5):
        decoder.run_layers(np.repeat(decoder.token_embeddings(ids)[None], 2, axis=0), cache=cache)


# ---- against transformers -------------------------------------------------------------------

def _hf_effects(torch, hf_decoder, pair, answers, patches):
    """Normalised effects of `patches` [(where, layer, position or head)] computed in
    transformers: clean activations read with forward hooks, put into the corrupted run with
    forward hooks (attn: self_attn's output; mlp: mlp's output; heads: o_proj's input, the
    head's 64 columns; resid: a forward pre-hook on the decoder layer)."""
    model, tok = hf_decoder
    layers = model.model.layers
    d_head = model.config.hidden_size // model.config.num_attention_heads
    ids = [torch.tensor([tok(text)["input_ids"]]) for text in (pair.clean, pair.corrupted)]
    a, b = (tok(x)["input_ids"][0] for x in answers)

    def metric(input_ids, hooks):
        handles = [register(fn) for register, fn in hooks]
        try:
            with torch.no_grad():
                logits = model(input_ids).logits[0, -1]
        finally:
            for h in handles:
                h.remove()
        return float(logits[a] - logits[b])

    clean = {}

    def keep(key, value):
        clean[key] = value.detach().clone()

    reads = []
    for i, layer in enumerate(layers):
        reads += [
            (layer.register_forward_pre_hook,
             lambda m, args, i=i: keep(("resid", i), args[0])),
            (layer.self_attn.register_forward_hook,
             lambda m, args, out, i=i: keep(("attn", i), out[0])),
            (layer.mlp.register_forward_hook,
             lambda m, args, out, i=i: keep(("mlp", i), out)),
            (layer.self_attn.o_proj.register_forward_pre_hook,
             lambda m, args, i=i: keep(("heads", i), args[0]))]
    m_clean = metric(ids[0], reads)
    m_corrupted = metric(ids[1], [])
    effects = []
    for where, i, at in patches:
        layer = layers[i]
        source = clean[(where, i)]
        if where == "resid":
            def put(m, args, source=source, at=at):
                h = args[0].clone()
                h[:, at] = source[:, at]
                return (h,) + args[1:]
            hook = (layer.register_forward_pre_hook, put)
        elif where == "attn":
            def put(m, args, out, source=source, at=at):
                o = out[0].clone()
                o[:, at] = source[:, at]
                return (o,) + tuple(out[1:])
            hook = (layer.self_attn.register_forward_hook, put)
        elif where == "mlp":
            def put(m, args, out, source=source, at=at):
                o = out.clone()
                o[:, at] = source[:, at]
                return o
            hook = (layer.mlp.register_forward_hook, put)
        else:                                                     # heads: (head, positions)
            head, pos = at
            cols = slice(head * d_head, (head + 1) * d_head)

            def put(m, args, source=source, cols=cols, pos=pos):
                z = args[0].clone()
                z[:, pos, cols] = source[:, pos, cols]
                return (z,) + args[1:]
            hook = (layer.self_attn.o_proj.register_forward_pre_hook, put)
        effects.append((metric(ids[1], [hook]) - m_corrupted) / (m_clean - m_corrupted))
    return effects, m_clean, m_corrupted


@pytest.mark.slow
@pytest.mark.parametrize("pair", [IOI, FACTUAL], ids=lambda p: p.name)
def test_a_sample_of_patches_agrees_with_transformers(torch, decoder, hf_decoder, pair):
    answers = (pair.clean_answer, pair.corrupted_answer)
    n = len(decoder.encode(pair.clean))
    last = n - 1
    attn = decoder.patch(pair.clean, pair.corrupted, answers=answers, where="attn")
    mlp = decoder.patch(pair.clean, pair.corrupted, answers=answers, where="mlp")
    heads = decoder.patch(pair.clean, pair.corrupted, answers=answers, where="heads")
    layers, h = decoder.num_layers, decoder.num_heads
    assert attn.effect.shape == mlp.effect.shape == (layers, n)
    assert heads.effect.shape == (layers, h)
    # the heads that matter most, and a few more; attention and MLP where the answer is read
    (l1, h1), _ = heads.top(1)[0]
    sample = [("heads", l1, (h1, slice(None))), ("heads", 3, (5, slice(None))),
              ("heads", 29, (0, slice(None))),
              ("attn", l1, last), ("attn", 0, 3), ("attn", 15, last),
              ("mlp", 0, 3), ("mlp", 20, last), ("mlp", 29, last),
              ("resid", 12, last), ("resid", 5, 3)]
    expected, m_clean, m_corrupted = _hf_effects(torch, hf_decoder, pair, answers, sample)
    assert attn.clean == pytest.approx(m_clean, abs=2e-3)        # the logits: ~2e-4 apart
    assert attn.corrupted == pytest.approx(m_corrupted, abs=2e-3)
    resid = {(12, last): patch_once(decoder, pair.clean, pair.corrupted, where="resid",
                                    layer=12, position=last, answers=answers),
             (5, 3): patch_once(decoder, pair.clean, pair.corrupted, where="resid", layer=5,
                                position=3, answers=answers)}
    got = []
    for (where, layer, at) in sample:
        if where == "heads":
            got.append(heads.effect[layer, at[0]])
        elif where == "resid":
            got.append(resid[(layer, at)])
        else:
            got.append((attn if where == "attn" else mlp).effect[layer, at])
    np.testing.assert_allclose(got, expected, atol=EFFECT_ATOL)
    assert max(abs(e) for e in expected) > 0.1                   # the sample holds real effects


@pytest.mark.slow
def test_each_head_at_each_position_agrees_with_transformers(torch, decoder, hf_decoder):
    pair = IOI
    answers = (pair.clean_answer, pair.corrupted_answer)
    p = decoder.patch(pair.clean, pair.corrupted, answers=answers, where="heads_pos", layer=23)
    n = len(decoder.encode(pair.clean))
    assert p.effect.shape == (decoder.num_heads, n) and p.layer == 23
    (head, pos), _ = p.top(1)[0]
    sample = [("heads", 23, (head, pos)), ("heads", 23, (0, n - 1)), ("heads", 23, (3, 9))]
    expected, _, _ = _hf_effects(torch, hf_decoder, pair, answers, sample)
    got = [p.effect[hp] for _, _, hp in sample]
    np.testing.assert_allclose(got, expected, atol=EFFECT_ATOL)


# ---- the pairs the model answers --------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("pair", PATCHING_PAIRS, ids=lambda p: p.name)
def test_smollm2_answers_each_pair_right_in_transformers(torch, decoder, hf_decoder, pair):
    model, tok = hf_decoder
    clean, corrupted = (tok(x)["input_ids"] for x in (pair.clean, pair.corrupted))
    assert len(clean) == len(corrupted)                          # patchable
    for prompt, answer in [(clean, pair.clean_answer), (corrupted, pair.corrupted_answer)]:
        with torch.no_grad():                                    # greedy, two tokens
            out = model.generate(torch.tensor([prompt]), max_new_tokens=2, do_sample=False)
        assert tok.decode(out[0, len(prompt):]).startswith(answer), pair.name
    p = decoder.patch(pair.clean, pair.corrupted, where="resid")  # default answers: the tops
    assert p.clean > 0 > p.corrupted                             # each run prefers its own
    assert p.effect[0, _first_difference(decoder, pair)] != 0


# ---- stopping, resuming, progress -------------------------------------------------------------

@pytest.mark.slow
def test_a_stopped_patching_is_partial_and_resumes_to_the_whole(decoder):
    pair, calls, asked = FACTUAL, [], [0]

    def stop_after_two():
        asked[0] += 1
        return asked[0] > 2

    full = decoder.patch(pair.clean, pair.corrupted, where="mlp", batch=4,
                         progress=lambda done, total: calls.append((done, total)))
    assert calls[-1] == (full.effect.size, full.effect.size)
    assert [d for d, _ in calls] == sorted(d for d, _ in calls)
    part = decoder.patch(pair.clean, pair.corrupted, where="mlp", batch=4,
                         should_stop=stop_after_two)
    assert not part.complete and np.isnan(part.effect).any()
    assert 0 < part.done < part.effect.size
    done = ~np.isnan(part.effect)
    np.testing.assert_array_equal(part.effect[done], full.effect[done])
    resumed = decoder.patch(pair.clean, pair.corrupted, where="mlp", batch=4, resume=part)
    assert resumed.complete
    np.testing.assert_array_equal(resumed.effect, full.effect)
    with raises_message("error.patch.resume"):
        decoder.patch(pair.clean, pair.corrupted, where="attn", resume=part)


# ---- errors ---------------------------------------------------------------------------------

def test_prompts_of_different_lengths_are_refused_with_both_counts(decoder):
    clean, other = "The Eiffel Tower is in the city of", "The Big Ben is in the city of"
    counts = len(decoder.encode(clean)), len(decoder.encode(other))
    assert counts[0] != counts[1]
    with raises_message("error.patch.lengths", clean=counts[0], corrupted=counts[1]) as caught:
        decoder.patch(clean, other)
    message = caught.value.message
    assert " Big" in message.params["corrupted_tokens"]          # the tokens are shown too
    for lang in ("en", "zh"):
        text = render(message.msg_id, lang, **message.params)
        assert str(counts[0]) in text and str(counts[1]) in text


@pytest.mark.parametrize("call, msg_id", [
    (dict(where="neurons"), "error.patch.where"),
    (dict(where="resid", layer=3), "error.patch.layer"),
    (dict(where="heads_pos"), "error.patch.layer"),
    (dict(answers=(" Mary", " Mary")), "error.patch.same_answers"),
    (dict(answers=(" Mary", " Johnathan")), "error.patch.answer_tokens"),
    (dict(answers=" Mary"), "error.patch.answers"),
])
def test_unknown_or_wrong_settings_are_refused(decoder, call, msg_id):
    with raises_message(msg_id) as caught:
        decoder.patch("When Mary and John went", "When John and Mary went", **call)
    message = caught.value.message
    for lang in ("en", "zh"):
        assert render(message.msg_id, lang, **message.params)


def test_the_same_prompt_twice_has_nothing_to_measure(decoder):
    with raises_message("error.patch.same_metric"):
        decoder.patch("The cat sat on the", "The cat sat on the", answers=(" mat", " floor"))
