"""Reading SmolLM2's heads (issue 22, Read the model on the decoder): causal rollout, the sink
share, TransformerLens's head-detector scores and head ablation on the next token's
log-probability. Expected numbers come from loops written here over r.attentions, from torch,
or from transformers running the same GGUF with a hook that zeroes the head."""

from __future__ import annotations

import re

import numpy as np
import pytest

from attnviz.core import reading
from attnviz.core.errors import AttnvizInputError
from attnviz.core.reading import (attention_rollout, causal_head_stats, detection_pattern,
                                  detection_scores, sink_share)
from attnviz.models.decoders import decoder_reading
from tests.i18n_walker import CJK, english_runs

TEXT = "The animal didn't cross the street because it was too tired"


@pytest.fixture(scope="module")
def run(decoder):
    return decoder.run(TEXT)


@pytest.fixture(scope="module")
def repeated(decoder):
    text, ids = decoder_reading.repeated_random_text(decoder)
    return decoder.run(text), ids


# ---- rollout and the sink ---------------------------------------------------------------------

@pytest.mark.reference
def test_causal_rollout_rows_sum_to_one_over_earlier_tokens_only(torch, run):
    rollout = attention_rollout(run.attentions)                     # (30, n, n)
    n = len(run.ids)
    assert rollout.shape == (30, n, n)
    np.testing.assert_allclose(rollout.sum(axis=-1), 1, atol=1e-5)
    assert np.abs(np.triu(rollout, k=1)).max() == 0                # never a later token
    # torch, layer by layer: ½ mean_h(A) + ½ I, rows renormalised, multiplied from layer 0 up
    a = torch.tensor(run.attentions, dtype=torch.float64).mean(dim=1)
    mixed = 0.5 * a + 0.5 * torch.eye(n, dtype=torch.float64)
    mixed = mixed / mixed.sum(-1, keepdim=True)
    expected = mixed[0]
    for layer in range(1, 30):
        expected = mixed[layer] @ expected
    np.testing.assert_allclose(rollout[-1], expected.numpy(), atol=1e-5)
    assert rollout[-1, -1, 0] > 0.05          # the first token keeps a share of the last one


def test_sink_share_is_the_mean_weight_on_the_first_token(run):
    a = run.attentions
    share = sink_share(a)
    for layer, head in ((0, 0), (5, 3), (29, 8)):
        by_hand = sum(float(a[layer, head, i, 0]) for i in range(a.shape[2])) / a.shape[2]
        assert share[layer, head] == pytest.approx(by_hand, abs=1e-6)
    assert share.max() > 0.5                  # SmolLM2 has heads that park weight on token 0
    table = causal_head_stats(a)
    np.testing.assert_allclose(table["sink"].to_numpy().reshape(30, 9), share, atol=1e-12)
    row = table[(table["layer"] == 5) & (table["head"] == 3)].iloc[0]
    prev = [float(a[5, 3, i, i - 1]) for i in range(1, a.shape[2])]
    assert row["on_prev"] == pytest.approx(sum(prev) / len(prev), abs=1e-6)
    ent = [-sum(float(w) * np.log2(float(w)) for w in a[5, 3, i] if w > 0)
           for i in range(a.shape[2])]
    assert row["entropy"] == pytest.approx(sum(ent) / len(ent), abs=1e-5)


# ---- the head detector ------------------------------------------------------------------------

def test_detection_patterns_are_transformer_lens_s_on_a_small_sequence():
    ids = [5, 7, 5, 7, 9]
    assert detection_pattern(ids, "previous_token").tolist() == [
        [0, 0, 0, 0, 0], [1, 0, 0, 0, 0], [0, 1, 0, 0, 0], [0, 0, 1, 0, 0], [0, 0, 0, 1, 0]]
    assert detection_pattern(ids, "duplicate_token").tolist() == [
        [0, 0, 0, 0, 0], [0, 0, 0, 0, 0], [1, 0, 0, 0, 0], [0, 1, 0, 0, 0], [0, 0, 0, 0, 0]]
    # query 2 (a 5) should look at 1, the token after the earlier 5; query 3 (a 7) at 2
    assert detection_pattern(ids, "induction").tolist() == [
        [0, 0, 0, 0, 0], [0, 0, 0, 0, 0], [0, 1, 0, 0, 0], [0, 0, 1, 0, 0], [0, 0, 0, 0, 0]]


def test_the_repeated_random_sequence_is_twice_the_same_random_words(decoder, repeated):
    r, ids = repeated
    assert len(ids) == 2 * decoder_reading.REPEAT_LENGTH
    assert ids[:20].tolist() == ids[20:].tolist() and len(set(ids[:20].tolist())) == 20
    assert r.ids.tolist() == ids.tolist()
    again, _ = decoder_reading.repeated_random_text(decoder)
    assert decoder.encode(again).tolist() == ids.tolist()             # seeded: the same
    other, _ = decoder_reading.repeated_random_text(decoder, seed=1)
    assert decoder.encode(other).tolist() != ids.tolist()


def _induction_by_hand(a, ids) -> float:
    """TransformerLens's "mul" score of one head (n, n) with loops: the weight each query i
    puts on every key j whose previous token j − 1 < i holds i's token, summed, over Σ a."""
    n = len(ids)
    hit = sum(float(a[i, j]) for i in range(n) for j in range(1, i + 1)
              if ids[j - 1] == ids[i] and j - 1 != i)
    return hit / float(a.sum())


def test_induction_scores_are_computed_by_hand_from_the_attentions(repeated):
    r, ids = repeated
    scores = detection_scores(r.attentions, detection_pattern(r.ids, "induction"))
    best = np.unravel_index(scores.argmax(), scores.shape)
    for layer, head in (best, (0, 0), (15, 4)):
        assert scores[layer, head] == pytest.approx(
            _induction_by_hand(r.attentions[layer, head], ids.tolist()), abs=1e-6)
    assert scores.max() > 0.2                 # SmolLM2 has induction heads
    n = len(ids)
    prev = detection_scores(r.attentions, detection_pattern(r.ids, "previous_token"))
    by_hand = sum(float(r.attentions[3, 1, i, i - 1]) for i in range(1, n)) / n
    assert prev[3, 1] == pytest.approx(by_hand, abs=1e-6)
    dup = detection_scores(r.attentions, detection_pattern(r.ids, "duplicate_token"))
    half = n // 2                             # query i ≥ 20 has one duplicate, at i − 20
    by_hand = sum(float(r.attentions[7, 2, i, i - half]) for i in range(half, n)) / n
    assert dup[7, 2] == pytest.approx(by_hand, abs=1e-6)


# ---- head ablation against transformers -----------------------------------------------------

def _hf_logprobs(hf_decoder, ids, removed: dict[int, list[int]]) -> np.ndarray:
    """log p(next token) from transformers with the heads `removed` (layer → heads) zeroed in
    the input of o_proj, (vocab,) float64."""
    import torch

    model, _ = hf_decoder

    def zero(heads):
        def hook(module, args):
            (z,) = args
            z = z.clone().reshape(z.shape[0], z.shape[1], 9, 64)
            z[:, :, heads] = 0
            return (z.reshape(z.shape[0], z.shape[1], -1),)
        return hook

    handles = [model.model.layers[layer].self_attn.o_proj.register_forward_pre_hook(zero(h))
               for layer, h in removed.items()]
    try:
        with torch.no_grad():
            logits = model(torch.tensor([list(ids)])).logits[0, -1].double()
    finally:
        for handle in handles:
            handle.remove()
    return torch.log_softmax(logits, -1).numpy()


def test_removing_heads_matches_transformers_with_the_heads_zeroed(decoder, hf_decoder, run):
    mask = np.ones((30, 9))
    mask[4, [1, 7]] = 0
    mask[17, 2] = 0
    got = decoder_reading.logprobs_without_heads(decoder, run, [mask, np.ones((30, 9))])
    np.testing.assert_allclose(got[0], _hf_logprobs(hf_decoder, run.ids, {4: [1, 7], 17: [2]}),
                               atol=2e-3)
    np.testing.assert_allclose(got[1], _hf_logprobs(hf_decoder, run.ids, {}), atol=2e-3)


def test_every_single_head_ranked_matches_transformers_on_the_heads_it_checks(
        decoder, hf_decoder, run):
    full = _hf_logprobs(hf_decoder, run.ids, {})
    top = int(full.argmax())
    logprobs = decoder_reading.single_head_logprobs(decoder, run, [top])      # (30, 9, 1)
    change = logprobs[..., 0] - full[top]
    worst = np.unravel_index(change.argmin(), change.shape)
    for layer, head in (worst, (0, 0), (29, 8), (12, 5)):
        expected = _hf_logprobs(hf_decoder, run.ids, {int(layer): [int(head)]})[top]
        assert logprobs[layer, head, 0] == pytest.approx(expected, abs=2e-3), (layer, head)
    assert change.min() < -0.1                # some head matters to the prediction


# ---- errors in both languages ----------------------------------------------------------------

BAD = [
    (lambda: detection_pattern([1, 2, 3], "copying"), "error.detector.unknown",
     ["copying", "induction"]),
    (lambda: detection_pattern([[1, 2]], "induction"), "error.detector.ids", ["(1, 2)"]),
    (lambda: detection_scores(np.full((1, 1, 3, 3), 1 / 3), np.eye(2)),
     "error.detector.pattern_shape", ["(2, 2)", "3"]),
    (lambda: sink_share(np.ones((2, 2))), "error.attentions.not_4d", ["(2, 2)"]),
]


@pytest.mark.parametrize("call, msg_id, shown", BAD, ids=[b[1] for b in BAD])
def test_detector_errors_are_ids_said_in_both_languages(call, msg_id, shown):
    with pytest.raises(AttnvizInputError) as caught:
        call()
    exc = caught.value
    assert exc.msg_id == msg_id
    english, chinese = str(exc), exc.render("zh")
    assert not CJK.search(english) and CJK.search(chinese)
    code = re.compile(r"\b(?:ids|pattern|attentions|previous_token|duplicate_token|induction"
                      r"|copying)\b")
    assert english_runs(code.sub(" ", chinese)) == [], chinese
    for part in shown:
        assert part in english and part in chinese, (part, english, chinese)

