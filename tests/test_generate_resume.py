"""Continuing a generation (``DecoderModel.generate_more``) instead of running it again from the
prompt: the real SmolLM2. A generation made in pieces is held to one made at once by
``generate`` (an independent run of the same model, not the code path under test); the page's
"Next token" is held to ``generate`` and observed not to run the prompt again."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from attnviz import DecoderModel
from attnviz.models.decoders.decoder import MAX_NEW_TOKENS
from tests.message_helpers import between, raises_message
from tests.test_generate_page import PROMPT, click, page

# float32 tolerance for a step's probabilities and attention rows: continuing rebuilds the KV
# cache by ONE batched prefill over the prompt and the tokens made so far, where the
# uninterrupted run computed those tokens' keys, values and hidden states one row at a time.
# BLAS blocks a (n, d) @ (d, k) product differently from a (1, d) @ (d, k) one, so sums are
# added in another order: a few float32 ulps (eps 1.2e-7) per product, grown over 30 layers.
# Measured on this prompt: at most 2.1e-6 absolute, 2.4e-5 relative (8x inside the bounds
# below); a wrong cache (a missing or shifted position) changes rows by 1e-2 and more.
RTOL, ATOL = 1e-4, 1e-6


def _probabilities(step) -> dict[str, float]:
    return dict(step.top)


def assert_same_generation(whole, pieces) -> None:
    """`pieces` (made by continuing) is `whole` (made at once), up to float32 rounding."""
    assert pieces.ids.tolist() == whole.ids.tolist()
    assert pieces.tokens == whole.tokens and pieces.text == whole.text
    assert pieces.prompt_length == whole.prompt_length and pieces.stopped == whole.stopped
    assert len(pieces.steps) == len(whole.steps)
    for a, b in zip(whole.steps, pieces.steps):
        assert (b.id, b.token, b.piece) == (a.id, a.token, a.piece)
        assert (b.query_position, b.cache_tokens, b.cache_bytes) == \
            (a.query_position, a.cache_tokens, a.cache_bytes)
        assert b.attentions.shape == a.attentions.shape
        np.testing.assert_allclose(b.attentions, a.attentions, rtol=RTOL, atol=ATOL)
        np.testing.assert_allclose(b.probability, a.probability, rtol=RTOL, atol=ATOL)
        assert [t for t, _ in b.top] == [t for t, _ in a.top]
        np.testing.assert_allclose([p for _, p in b.top], [p for _, p in a.top],
                                   rtol=RTOL, atol=ATOL)


@pytest.mark.slow
def test_greedy_in_pieces_is_the_same_as_at_once(decoder):
    whole = decoder.generate(PROMPT, max_new_tokens=12)
    first = decoder.generate(PROMPT, max_new_tokens=5)
    second = decoder.generate_more(first, 3)
    third = decoder.generate_more(second, 4)
    assert whole.stopped == "length" and len(third.steps) == 12
    assert_same_generation(whole, third)
    # the steps already made are carried over as they were, not computed again
    assert third.steps[:5] == first.steps and third.steps[:8] == second.steps
    # and the earlier generations are left as they were
    assert len(first.steps) == 5 and len(first.ids) == first.prompt_length + 5
    # the cache grows by one position per step, from the prompt on
    assert [s.cache_tokens for s in third.steps] == list(range(5, 17))


@pytest.mark.slow
def test_sampling_in_pieces_continues_the_same_random_stream(decoder):
    story = "Once upon a time"                   # (from PROMPT, seed 3 ends after 5 tokens)
    whole = decoder.generate(story, max_new_tokens=12, temperature=0.9, seed=3)
    first = decoder.generate(story, max_new_tokens=4, temperature=0.9, seed=3)
    pieces = decoder.generate_more(decoder.generate_more(first, 5), 3)
    assert_same_generation(whole, pieces)
    # the stream matters here: the sampler started again from seed 3 would draw other tokens
    restarted = dataclasses.replace(
        first, rng_state=np.random.default_rng(3).bit_generator.state)
    assert decoder.generate_more(restarted, 8).ids.tolist() != whole.ids.tolist()


@pytest.mark.slow
@pytest.mark.parametrize("special_tokens", [False, True])
def test_continuing_a_chat_keeps_how_the_prompt_was_read(decoder, special_tokens):
    """Issue 26: a prompt in the chat template, typed control tokens read as text (or, asked
    for, as control tokens): continued, it is the same as one run of ``generate``, and says
    how its prompt was read."""
    typed = "Say hello.<|im_end|>"
    whole = decoder.generate(typed, max_new_tokens=6, chat=True, special_tokens=special_tokens,
                           stop_at_eos=False)
    first = decoder.generate(typed, max_new_tokens=2, chat=True, special_tokens=special_tokens,
                           stop_at_eos=False)
    pieces = decoder.generate_more(first, 4)
    assert_same_generation(whole, pieces)
    assert (pieces.chat, pieces.special_tokens) == (True, special_tokens)
    prompt = decoder.chat_ids(typed, special_tokens=special_tokens).tolist()
    assert pieces.ids[:pieces.prompt_length].tolist() == prompt
    assert prompt.count(decoder.config.eos_id) == (3 if special_tokens else 2)


@pytest.mark.slow
def test_continuing_keeps_stop_at_eos_false(decoder):
    whole = decoder.generate(PROMPT, max_new_tokens=40, stop_at_eos=False)
    eos = decoder.config.eos_id
    assert eos in whole.new_ids.tolist()[:-1]           # it went on past <|im_end|>
    before = whole.new_ids.tolist().index(eos)          # the pieces meet at <|im_end|>
    first = decoder.generate(PROMPT, max_new_tokens=before + 1, stop_at_eos=False)
    assert first.stopped == "length" and first.steps[-1].id == eos
    assert decoder.generate_more(first, 40 - before - 1).ids.tolist() == whole.ids.tolist()


@pytest.mark.slow
def test_a_generation_that_ended_cannot_be_continued(decoder):
    ended = decoder.generate(PROMPT, max_new_tokens=40)
    assert ended.stopped == "eos" and len(ended.steps) < 40
    with raises_message("error.decoder.more.ended", steps=len(ended.steps)):
        decoder.generate_more(ended, 1)


@pytest.mark.parametrize("n", [0, -2, 254, 1.5, True, "3"])
def test_bad_n_says_what_is_wrong(decoder, n):
    three = decoder.generate(PROMPT, max_new_tokens=3)        # 256 - 3 = 253 left
    with raises_message("error.whole_number", name="n", bounds=between(1, 253), value=repr(n)):
        decoder.generate_more(three, n)


def test_only_a_generation_with_room_left_can_be_continued(decoder):
    with raises_message("error.decoder.more.not_generation", type="str"):
        decoder.generate_more(PROMPT, 1)
    one = decoder.generate(PROMPT, max_new_tokens=1)
    full = dataclasses.replace(one, steps=one.steps * MAX_NEW_TOKENS)
    with raises_message("error.decoder.more.full", steps=MAX_NEW_TOKENS, limit=MAX_NEW_TOKENS):
        decoder.generate_more(full, 1)


# ---- the page --------------------------------------------------------------------------------

@pytest.fixture
def forward_calls(monkeypatch) -> list[tuple[int, list[int]]]:
    """Every ``DecoderModel._forward`` call, as (the cache's length before it, the ids it
    runs): the real method runs; only its arguments are written down."""
    calls = []
    real = DecoderModel._forward

    def watched(self, ids, cache, *args, **kwargs):
        calls.append((cache.length, [int(i) for i in ids]))
        return real(self, ids, cache, *args, **kwargs)

    monkeypatch.setattr(DecoderModel, "_forward", watched)
    return calls


@pytest.mark.slow
def test_next_token_three_times_is_generate_three(decoder):
    at = page()
    for _ in range(3):
        click(at, "gen_next")
    gen = decoder.generate(PROMPT, max_new_tokens=3)
    shown = at.session_state["generate_run"]["generation"]
    assert_same_generation(gen, shown)
    assert at.subheader[3].value == "Generated: 3 new tokens"
    assert at.code[-1].value == gen.text.rstrip("\n")        # (a code block drops it)


@pytest.mark.slow
def test_next_token_continues_instead_of_running_the_prompt_again(decoder, forward_calls):
    at = page()
    click(click(at, "gen_next"), "gen_next")
    made = at.session_state["generate_run"]["generation"]
    prompt = decoder.encode(PROMPT).tolist()
    assert made.ids.tolist()[:len(prompt)] == prompt and len(made.steps) == 2
    forward_calls.clear()
    click(at, "gen_next")                                        # the third token
    # one prefill of the prompt and the two tokens made, then the new token chosen from it:
    # no run of the prompt alone and no step repeated (today's main ran the prompt, then
    # tokens 1 and 2 one at a time again)
    assert forward_calls == [(0, made.ids.tolist())]
    assert len(at.session_state["generate_run"]["generation"].steps) == 3

    forward_calls.clear()
    at.number_input(key="gen_count").set_value(4).run()
    forward_calls.clear()
    click(at, "gen_many")                                        # 4 more: 7 in all
    ids = at.session_state["generate_run"]["generation"].ids.tolist()
    assert len(ids) == len(prompt) + 7
    n = len(prompt) + 3                                          # what the prefill reads
    assert forward_calls == [(0, ids[:n])] + [(p, [ids[p]]) for p in range(n, n + 3)]
    assert ids == decoder.generate(PROMPT, max_new_tokens=7).ids.tolist()


@pytest.mark.slow
def test_a_changed_seed_starts_from_the_prompt(decoder, forward_calls):
    state = dict(gen_sampling="sample", gen_temperature=0.9, gen_seed=3)
    at = click(page(**state), "gen_next")
    at.number_input(key="gen_seed").set_value(4).run()
    forward_calls.clear()
    click(at, "gen_next")
    prompt = decoder.encode(PROMPT).tolist()
    assert forward_calls == [(0, prompt)]                        # the prompt alone, anew
    shown = at.session_state["generate_run"]["generation"]
    assert shown.ids.tolist() == \
        decoder.generate(PROMPT, max_new_tokens=1, temperature=0.9, seed=4).ids.tolist()
