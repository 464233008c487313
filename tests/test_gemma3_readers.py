"""Issue 37.4, the readers on Gemma 3 270M itself, each held to transformers loading the same
GGUF and read with its own forward hooks (tests/gemma_readers_reference.py: computed once,
kept): the logit lens (its rows are transformers' final norm and lm_head on its streams, the
last the model's output), activation patching (its two exact ends, and a sample of patches of
every kind against the same patch made with a hook), information flow (with Gemma's norm after
attention each head's term is divided by the norm's one number per token and scaled by its
gain, and the terms still sum back within 1e-4), value norms, the ablation ranking (a head
removed = its slice of o_proj's input zeroed), the head statistics and the head detector on
the repeated random sequence, and the tuned lens (fitted for Gemma, kept under its own name).

Tolerances: issue 37's for Gemma (logits 1e-3, attentions 1e-4); a log-probability and a KL
are differences of logits, so 2e-3."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from tests import gemma_reference, gemma_readers_reference as readers

pytestmark = [pytest.mark.reference, pytest.mark.slow]

CLEAN, CORRUPTED = "The Eiffel Tower is in the city of", "The Colosseum is in the city of"
LOGP_ATOL = 2e-3
LONG_TEXT = " ".join(f"Line {i}: the cat sat on the mat." for i in range(80))   # > 512 tokens


@pytest.fixture(scope="module")
def gemma():
    from attnviz.models.decoders.decoder import DecoderModel

    return DecoderModel.load(name="gemma3-270m")


@pytest.fixture(scope="module")
def inputs(gemma):
    return make_inputs(gemma)


def make_inputs(gemma) -> readers.Inputs:
    """What transformers is asked (the ids as attnviz's tokenizer reads them)."""
    from attnviz.models.decoders.decoder_reading import repeated_random_text

    clean, corrupted = gemma.encode(CLEAN), gemma.encode(CORRUPTED)
    n = len(clean)
    first = int(np.flatnonzero(clean != corrupted)[0])
    last = n - 1
    patches = [("resid", 0, first), ("resid", 9, last), ("resid", 9, first + 1),
               ("resid", gemma.num_layers, last), ("attn", 5, last), ("attn", 11, first),
               ("mlp", 0, first), ("mlp", 17, last), ("heads", 5, 0), ("heads", 10, 2),
               ("heads", 16, 3)]
    answers = (int(gemma.encode(" Paris")[-1]), int(gemma.encode(" Rome")[-1]))
    return readers.Inputs(
        lens_ids=clean.tolist(), clean_ids=clean.tolist(), corrupted_ids=corrupted.tolist(),
        answers=answers, patches=patches,
        ablated=[(layer, head) for layer in readers.FLOW_LAYERS
                 for head in range(gemma.num_heads)],
        targets=list(answers), repeated_ids=repeated_random_text(gemma)[1].tolist(),
        long_ids=gemma.encode(LONG_TEXT)[-512:].tolist())


@pytest.fixture(scope="module")
def ref(gemma, inputs):
    return readers.reference(gemma.path, inputs)


# ---- the logit lens ------------------------------------------------------------------------------

def test_the_lens_rows_are_transformers_final_norm_and_lm_head_on_its_streams(gemma, inputs, ref):
    """Gemma's embeddings are scaled by √d_model before the first row and its final norm's gain
    is transformers' (1 + w): each row, the sublayers' included, reads as transformers' would."""
    lens = gemma.logit_lens(np.array(inputs.lens_ids), sublayers=True, k=readers.TOP)
    assert [f"{kind}:{layer}" for kind, layer in lens.rows] == ref["lens_rows"].tolist()
    # the streams, to float32's rounding of Gemma's largest entries (up to 1e5)
    streams = ref["resid_pre"]
    scale = np.abs(streams).max(axis=-1, keepdims=True)
    assert (np.abs(lens.residuals[lens.layer_rows] - streams) <= 1e-5 * scale).all()
    # the probabilities float32 holds (a top-10 token of the embeddings' row can be e^-800)
    held = ref["lens_top_logp"] > -60
    with np.errstate(divide="ignore"):
        logp = np.log(lens.top_probs.astype(np.float64))
    np.testing.assert_allclose(logp[held], ref["lens_top_logp"][held], rtol=0, atol=LOGP_ATOL)
    assert (lens.top_probs[~held] < 1e-25).all()
    # the top token wherever transformers' first two are not within the tolerance
    clear = ref["lens_top_logp"][..., 0] - ref["lens_top_logp"][..., 1] > 2 * LOGP_ATOL
    assert clear.mean() > 0.8
    np.testing.assert_array_equal(lens.top_ids[..., 0][clear], ref["lens_top_ids"][..., 0][clear])
    np.testing.assert_array_equal(lens.target, ref["lens_target"])
    held = ref["lens_target_logp"] > -60
    with np.errstate(divide="ignore"):
        target_logp = np.log(lens.target_prob.astype(np.float64))
    np.testing.assert_allclose(target_logp[held], ref["lens_target_logp"][held], rtol=0,
                               atol=LOGP_ATOL)
    np.testing.assert_allclose(lens.kl, ref["lens_kl"], rtol=1e-3, atol=LOGP_ATOL)
    assert (lens.target_rank[-1] == 1).all() and (ref["lens_target_rank"][-1] == 1).all()
    assert (np.abs(lens.target_rank - ref["lens_target_rank"]) <= 1).mean() > 0.95
    # the embeddings' row knows nothing of the answer; the output does
    paris = inputs.answers[0]
    assert lens.target[-1] == paris and lens.target_rank[0, -1] > 100


def test_the_lens_last_row_is_the_models_output(gemma, inputs):
    lens = gemma.logit_lens(np.array(inputs.lens_ids), k=5)
    run = gemma.run(CLEAN)
    np.testing.assert_array_equal(lens.logits(-1), run.logits)
    assert lens.top_ids[-1, -1, 0] == inputs.answers[0]
    # a target given as text: its one token (Gemma's BOS is the text's, not the token's)
    assert gemma.logit_lens(CLEAN, target=" Paris").target.tolist() == \
        [inputs.answers[0]] * len(inputs.lens_ids)


# ---- activation patching ---------------------------------------------------------------------

def test_patching_ends_are_exact_and_each_kind_agrees_with_transformers(gemma, inputs, ref):
    from attnviz.models.readers.patching import patch_once

    answers = (" Paris", " Rome")           # as text: one token each, BOS not counted
    layers = gemma.num_layers
    assert patch_once(gemma, CLEAN, CORRUPTED, where="resid", layer=0, answers=answers) == 1.0
    assert patch_once(gemma, CLEAN, CORRUPTED, where="resid", layer=layers,
                      answers=answers) == 1.0
    for where, layer in [("resid", 0), ("attn", 4), ("mlp", 17)]:     # BOS, "The": shared
        assert patch_once(gemma, CLEAN, CORRUPTED, where=where, layer=layer, position=1,
                          answers=answers) == 0.0
    clean, corrupted = float(ref["metric_clean"]), float(ref["metric_corrupted"])
    assert clean > 0 > corrupted                  # each prompt answers its own city
    expected = (ref["metric_patched"] - corrupted) / (clean - corrupted)
    got = [patch_once(gemma, CLEAN, CORRUPTED, where=where, layer=layer,
                      **({"head": at} if where == "heads" else {"position": at}),
                      answers=answers) for where, layer, at in inputs.patches]
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-3)
    assert np.ptp(expected) > 0.5                 # the sample is not all one number


# ---- information flow and value norms ------------------------------------------------------

def _proximity(z, y):
    return np.maximum(np.abs(y).sum(-1) - np.abs(y - z).sum(-1), 0)


def test_flow_terms_sum_back_through_the_post_norm_and_weigh_as_the_formula(gemma, inputs, ref):
    from attnviz.models.readers.flow import head_terms

    ids = np.array(inputs.lens_ids)
    f = gemma.information_flow(ids)
    run = gemma.run(CLEAN)
    for layer in readers.FLOW_LAYERS:
        terms = ref[f"terms_{layer}"]                                  # (H, n, n, d)
        pre, mid = ref["resid_pre"][layer], ref["resid_mid"][layer]
        # transformers' own: each term α / r_i · (f ⊙ g) sums back to what joins the stream
        # (the bound: _within's)
        assert _within(terms.sum(axis=(0, 2)), mid - pre), layer
        # attnviz's terms sum back to what its layer adds to the stream
        alpha, parts = head_terms(gemma, layer, run.attentions[layer], run._values[layer])
        ours = np.einsum("hij,hjd->id", alpha.astype(np.float64), parts.astype(np.float64))
        assert _within(ours, _attn_out(gemma, ids, layer)), layer
        near_heads = _proximity(terms, mid[None, :, None, :])          # (H, n, n)
        near_residual = _proximity(pre, mid)
        total = near_heads.sum(axis=(0, 2)) + near_residual
        np.testing.assert_allclose(f.head_weights[layer], near_heads / total[None, :, None],
                                   rtol=0, atol=1e-4)
        np.testing.assert_allclose(f.attn_residual[layer], near_residual / total, rtol=0,
                                   atol=1e-4)
    assert f.head_weights.max() > 0.1


def _within(total: np.ndarray, added: np.ndarray) -> bool:
    """Whether the terms' sum (n, d_model) is what the attention adds to the stream within the
    issue's 1e-4 — or, where a row holds numbers of ~2,800 (Gemma's: float32 rounds them
    2.4e-4 apart, and the norm divides the whole row by one number), within 2e-6 of the row's
    largest."""
    bound = np.maximum(1e-4, 2e-6 * np.abs(added).max(axis=-1, keepdims=True))
    return bool((np.abs(total - added) <= bound).all())


def _attn_out(model, ids, layer):
    """(n, d_model) what layer `layer`'s attention adds to the stream (after its post-norm)."""
    got = {}

    def read(at, name, value):
        if at == layer and name == "attn_out":
            got["out"] = np.array(value[0], dtype=np.float64)

    model.run_layers(model.token_embeddings(ids), stop=layer + 1, hook=read)
    return got["out"]


def test_value_norms_are_each_term_as_it_joins_the_stream(gemma, ref):
    norms = gemma.run(CLEAN).value_norms                               # (L, H, n, n)
    expected = ref["value_norms"]
    np.testing.assert_allclose(norms, expected, rtol=1e-3, atol=1e-4 * expected.max())


# ---- heads removed, head statistics ------------------------------------------------------------

def test_a_removed_head_is_its_slice_of_o_proj_input_zeroed(gemma, inputs, ref):
    """The heads of FLOW_LAYERS, each removed alone (the ranking's masks: single_head_logprobs
    runs every layer's this way)."""
    from attnviz.models.decoders.decoder_reading import logprobs_without_heads

    run = gemma.run(CLEAN)
    masks = np.ones((len(inputs.ablated), gemma.num_layers, gemma.num_heads))
    for i, (layer, head) in enumerate(inputs.ablated):
        masks[i, layer, head] = 0
    got = logprobs_without_heads(gemma, run, masks)[:, inputs.targets]   # (heads, targets)
    np.testing.assert_allclose(got, ref["ablation"], rtol=0, atol=LOGP_ATOL)
    # removing a head changes the answer's log-probability somewhere
    assert np.abs(ref["ablation"] - ref["ablation_none"]).max() > 0.05


def test_head_statistics_and_the_detector_read_as_on_transformers_attentions(gemma, inputs, ref):
    from attnviz.core.reading import causal_head_stats, detection_pattern, detection_scores
    from attnviz.models.decoders.decoder_reading import repeated_random_text

    text, ids = repeated_random_text(gemma)
    assert ids.tolist() == inputs.repeated_ids and ids[0] == gemma.config.bos_id
    run = gemma.run(text)
    theirs = ref["repeated_attentions"]
    np.testing.assert_allclose(run.attentions, theirs, rtol=0, atol=1e-4)
    ours_table, their_table = causal_head_stats(run.attentions), causal_head_stats(theirs)
    for column in ("entropy", "max_weight", "sink", "on_self", "on_prev"):
        np.testing.assert_allclose(ours_table[column], their_table[column], atol=1e-4)
    induction = None
    for name in ("previous_token", "duplicate_token", "induction"):
        pattern = detection_pattern(ids, name)
        ours = detection_scores(run.attentions, pattern)
        np.testing.assert_allclose(ours, detection_scores(theirs, pattern), atol=1e-4)
        induction = ours if name == "induction" else induction
    assert induction.max() > 0.3                  # Gemma 3 270M has induction heads


# ---- the tuned lens --------------------------------------------------------------------------

def test_the_tuned_lens_is_fitted_for_gemma_and_kept_under_its_own_name(gemma, tmp_path,
                                                                         monkeypatch):
    """A small fit (2 prompts, 8 tokens: the pipeline, not the quality, which
    tests/test_tuned_lens.py holds on SmolLM2): Gemma's shape, kept on disk and read back,
    in a folder SmolLM2's never shares."""
    from attnviz.models.readers import tuned_lens
    from attnviz.models.catalogue.builtin import package_file

    smollm2 = SimpleNamespace(path=package_file())
    assert tuned_lens.cache_folder(gemma, tmp_path) != tuned_lens.cache_folder(smollm2, tmp_path)
    monkeypatch.setattr(tuned_lens, "TRAINING_PROMPTS", tuned_lens.TRAINING_PROMPTS[:2])
    monkeypatch.setattr(tuned_lens, "NEW_TOKENS", 8)
    monkeypatch.setattr(tuned_lens, "_LOADED", {})
    fitted = tuned_lens.load(gemma, tmp_path)
    assert fitted.outcome == "fitted" and fitted.tokens == 2 * 8 + sum(
        len(gemma.encode(p)) for p in tuned_lens.TRAINING_PROMPTS)
    assert fitted.translators.shape == (gemma.num_layers, gemma.d_model + 1, gemma.d_model)
    assert fitted.eps == gemma.config.rms_eps
    monkeypatch.setattr(tuned_lens, "_LOADED", {})
    again = tuned_lens.kept(gemma, tmp_path)
    assert again.outcome == "verified"
    np.testing.assert_array_equal(again.translators, fitted.translators)
    lens = gemma.logit_lens(CLEAN, k=3)
    from attnviz.models.readers.lens import logit_lens

    tuned = logit_lens(gemma, CLEAN, k=3, tuned=again)
    np.testing.assert_array_equal(tuned.top_ids[-1], lens.top_ids[-1])   # the output's row
    assert not np.array_equal(tuned.top_probs[:-1], lens.top_probs[:-1])


# ---- generation past the sliding window -------------------------------------------------------

def test_a_generation_past_the_window_is_transformers_sliding_window_generation(gemma, inputs,
                                                                               ref):
    """A 512-token prompt and LONG_STEPS new tokens: their queries pass position 512, where a
    local layer's window no longer holds the first keys (transformers' sliding-window cache
    drops them)."""
    g = gemma.generate(LONG_TEXT, readers.LONG_STEPS, stop_at_eos=False)
    assert g.ids[:g.prompt_length].tolist() == inputs.long_ids          # its last 512 tokens
    assert g.new_ids.tolist() == ref["long_greedy"].tolist()
    np.testing.assert_allclose([s.probability for s in g.steps], ref["long_probability"],
                               rtol=0, atol=1e-3)
    # what each layer's cache holds: the local layers the last 512 positions, the global all
    last = g.steps[-1]
    local = set(gemma.config.sliding_layers)
    assert last.query_position == 512 + readers.LONG_STEPS - 2
    assert last.cache_kept == tuple(512 if layer in local else last.cache_tokens
                                    for layer in range(gemma.num_layers))
    assert last.cache_first[0] == last.query_position - 511 > 0
    assert (last.attentions[sorted(local)][..., :last.cache_first[0]] == 0).all()
