"""No NaN drawn as data (issue 26): a real model whose weights are damaged — built here from the
loaded one with ``dataclasses.replace`` and copies of its arrays, never by touching the disk
cache — raises error.model.not_finite naming where its numbers stopped being finite (the layer
and its step, the logits, the embeddings, the new token of a generation), and every page that
shows those runs says so with st.error instead of drawing a chart.

Where each damage must show is worked out here, independently of attnviz's checks: which ids
the text has (so a damaged row of E is or is not read as an embedding), and for weights of 1e30
that the queries and keys stay finite while their dot products overflow float32."""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest

from attnviz import DecoderModel, PretrainedModel
from attnviz.core.errors import AttnvizInputError
from attnviz.core.weights import MultiHeadWeights
from attnviz.i18n import Message, t, use_language
from attnviz.models.decoders import decoder_reading
from attnviz.models.encoder import pretrained
from attnviz.session import encoder_runs
from tests.apptest_helpers import button, charts, no_exceptions, open_page, plain

# a text no other test runs: the pages' caches (shared by every session) hold no clean run of it
TEXT = "Numbers that are not finite are never drawn as data"
OTHER = "A giraffe reads the damaged weights"
DAMAGED_ROW = 1000          # a row of E (a token id) that TEXT does not hold


# ---- damaged copies of the real models -------------------------------------------------------------

def with_blocks(model, layer: int, **changes):
    """`model` with layer `layer`'s block changed (the other arrays are the model's own)."""
    blocks = list(model._blocks)
    blocks[layer] = dataclasses.replace(blocks[layer], **changes)
    return dataclasses.replace(model, _blocks=tuple(blocks))


def overwritten_embed(decoder: DecoderModel, row: int) -> DecoderModel:
    """What the issue did to embed.npy: 256 bytes overwritten (with 0xFF: 64 float32 NaN), at
    the start of row `row` of a copy of E."""
    e = decoder._embed.copy()                     # the loaded model's own array stays untouched
    start = row * e.shape[1] * e.itemsize
    e.view(np.uint8).reshape(-1)[start:start + 256] = 0xFF
    assert np.isnan(e[row, :64]).all() and np.isfinite(np.delete(e, row, axis=0)).all()
    return dataclasses.replace(decoder, _embed=e)


def decoder_overflowing_qk(decoder: DecoderModel, layer: int) -> DecoderModel:
    """Layer `layer`'s W_Q and W_K (the first (H + H_kv) d_k columns of W_QKV) all 1e30."""
    c, block = decoder.config, decoder._blocks[layer]
    w = block.w_qkv.copy()
    w[:, :(c.num_heads + c.num_kv_heads) * c.d_k] = 1e30
    return with_blocks(decoder, layer, w_qkv=w, attention=MultiHeadWeights.from_qkv(
        w, block.attention.w_o, c.num_heads, c.num_kv_heads))


def raised(compute) -> AttnvizInputError:
    with pytest.raises(AttnvizInputError) as caught:
        compute()
    return caught.value


def assert_where(exc: AttnvizInputError, part: str, layer: int | None = None,
                 token: int | None = None) -> None:
    assert exc.msg_id == "error.model.not_finite"
    assert (exc.part, exc.layer, exc.token) == (part, layer, token)
    where = Message(f"model.where.{part}") if layer is None else \
        Message("model.where.layer", layer=layer, part=Message(f"model.part.{part}"))
    if token is not None:
        where = Message("model.where.token", token=token, where=where)
    assert exc.params["where"] == where


# ---- SmolLM2 -----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def issue_damage(decoder) -> DecoderModel:
    assert DAMAGED_ROW not in decoder.encode(TEXT)
    return overwritten_embed(decoder, DAMAGED_ROW)


@pytest.fixture(scope="module")
def overflow_3(decoder) -> DecoderModel:
    return decoder_overflowing_qk(decoder, 3)


@pytest.mark.slow
def test_the_issues_overwritten_embedding_is_said_to_be_in_the_logits(decoder, issue_damage):
    clean = decoder.run(TEXT)
    assert np.isfinite(clean.logits).all()               # the clean model: nothing to say
    # the text never reads row 1000 as an embedding: only E as the output matrix meets it
    exc = raised(lambda: issue_damage.run(TEXT))
    assert_where(exc, "logits")
    assert_where(raised(lambda: issue_damage.next_tokens(TEXT)), "logits")
    assert_where(raised(lambda: issue_damage.next_token_logprobs(TEXT)), "logits")
    assert_where(raised(lambda: issue_damage.generate(TEXT, 3)), "logits", token=1)
    with use_language("zh"):
        assert "logits" in str(exc) and str(exc) != exc.render("en")


def test_a_finite_row_of_e_whose_logit_overflows_is_said_to_be_in_the_logits(decoder):
    h = decoder.run(TEXT).hidden_states[-1]        # the last layer's output, clean
    x = h / np.sqrt(np.mean(h * h, axis=-1, keepdims=True)
                    + np.float32(decoder.config.rms_eps)) * decoder._final_norm
    e = decoder._embed.copy()
    e[DAMAGED_ROW] = np.sign(x[-1]) * np.float32(1e37)   # finite, and the text never reads it
    damaged = dataclasses.replace(decoder, _embed=e)
    with np.errstate(over="ignore"):
        assert not np.isfinite(x[-1] @ e[DAMAGED_ROW])     # computed here: the last one's is inf
    assert_where(raised(lambda: damaged.run(TEXT)), "logits")
    assert_where(raised(lambda: damaged.generate(TEXT, 1)), "logits", token=1)


def test_a_damaged_embedding_of_a_token_in_the_text_is_said_to_be_the_embeddings(decoder):
    row = int(decoder.encode(TEXT)[2])
    damaged = overwritten_embed(decoder, row)
    assert_where(raised(lambda: damaged.run(TEXT)), "embeddings")
    assert_where(raised(lambda: damaged.generate(TEXT, 2)), "embeddings", token=1)


# what a memory-mapped cache rewritten under a running server did (issue 34): E changed in place
# AFTER the model had measured it (its max |E|, which spares the logits' scan). The cache is
# read into memory now, so only a copy made writable here can change; what a page writes as a
# probability — Generate's, the lens's — is checked itself, and the error is said instead.
STALE_TEXT = "Weights changed after they were measured are never drawn as data"


@pytest.fixture
def changed_after_use(decoder) -> DecoderModel:
    assert DAMAGED_ROW not in decoder.encode(STALE_TEXT)
    e = decoder._embed.copy()
    changed = dataclasses.replace(decoder, _embed=e)
    changed.generate(STALE_TEXT, 1)                 # the model measures E, as a first page does
    start = DAMAGED_ROW * e.shape[1] * e.itemsize
    e.view(np.uint8).reshape(-1)[start:start + 256] = 0xFF     # then 64 NaN, in place
    assert np.isnan(e[DAMAGED_ROW, :64]).all()
    return changed


@pytest.mark.slow
def test_weights_changed_after_use_give_the_error_not_nan_probabilities(changed_after_use):
    m = changed_after_use
    assert_where(raised(lambda: m.generate(STALE_TEXT, 2)), "logits", token=1)
    assert_where(raised(lambda: m.next_tokens(STALE_TEXT)), "logits")
    assert_where(raised(lambda: m.next_token_logprobs(STALE_TEXT)), "logits")
    assert_where(raised(lambda: m.logit_lens(STALE_TEXT)), "logits")
    assert_where(raised(lambda: m.logit_lens(STALE_TEXT, positions=[-1])), "logits")


@pytest.mark.slow
def test_generate_says_the_error_not_nan_when_weights_changed_after_use(monkeypatch,
                                                                        changed_after_use):
    serve(monkeypatch, DecoderModel, changed_after_use)
    at = open_page("pages/generate.py", params={"lang": "en"}, gen_prompt=STALE_TEXT)
    shows_the_error_and_no_chart(at, raised(lambda: changed_after_use.next_tokens(STALE_TEXT)))
    written = " ".join(plain(e) for e in [*at.markdown, *at.caption, *at.info, *at.warning])
    assert not re.search(r"\bnan\b", written, re.I), written      # "nan%" of the issue


def test_weights_of_1e30_overflow_the_scores_of_their_layer(decoder, overflow_3):
    # computed here: layer 3's input is the clean run's (layers 0–2 are untouched); with W_Q and
    # W_K at 1e30 the queries and keys are finite and their dot products are not
    c, block = decoder.config, overflow_3._blocks[3]
    h = decoder.run(TEXT).hidden_states[3]                                # (n, d_model)
    x = h / np.sqrt(np.mean(h * h, axis=-1, keepdims=True) + np.float32(c.rms_eps)) \
        * block.attn_norm
    with np.errstate(over="ignore", invalid="ignore"):
        q = x @ block.w_qkv[:, :c.d_k]                                    # head 0
        k = x @ block.w_qkv[:, c.num_heads * c.d_k:(c.num_heads + 1) * c.d_k]
        assert np.isfinite(q).all() and np.isfinite(k).all()
        assert not np.isfinite(q @ k.T).all()
    assert_where(raised(lambda: overflow_3.run(TEXT)), "scores", layer=3)
    assert_where(raised(lambda: overflow_3.next_tokens(TEXT)), "scores", layer=3)
    assert_where(raised(lambda: overflow_3.generate(TEXT, 2)), "scores", layer=3, token=1)
    two = decoder.generate(TEXT, 2)                           # made by the clean model
    assert_where(raised(lambda: overflow_3.generate_more(two, 2)), "scores", layer=3, token=3)


def test_the_reading_helpers_say_the_layer_of_a_variant_that_overflows(decoder, overflow_3):
    run = decoder.run(TEXT)
    masks = np.ones((1, decoder.num_layers, decoder.num_heads))
    masks[0, 0, 4] = 0                               # starts at layer 0: meets layer 3
    assert_where(raised(lambda: decoder_reading.logprobs_without_heads(overflow_3, run, masks)),
                 "scores", layer=3)
    assert_where(raised(lambda: decoder_reading.single_head_logprobs(overflow_3, run, [0])),
                 "scores", layer=3)
    late = np.ones_like(masks)
    late[0, 5, 4] = 0                                # starts after layer 3, from the clean run
    assert np.isfinite(decoder_reading.logprobs_without_heads(overflow_3, run, late)).all()


def test_nan_in_a_feed_forward_weight_is_said_to_be_that_layers_feed_forward(decoder):
    block = decoder._blocks[5]
    down = block.down.copy()
    down[7, 11] = np.nan
    damaged = with_blocks(decoder, 5, down=down)
    assert_where(raised(lambda: damaged.run(TEXT)), "mlp", layer=5)
    assert_where(raised(lambda: damaged.generate(TEXT, 2)), "mlp", layer=5, token=1)


def test_value_norms_that_overflow_are_said_with_their_layer(decoder):
    a = decoder._blocks[7].attention
    damaged = with_blocks(decoder, 7, attention=MultiHeadWeights(a.w_q, a.w_k, a.w_v,
                                                                 a.w_o * np.float32(1e19)))
    run = damaged.run(TEXT)               # the weights and logits stay finite; the sizes of
    assert np.isfinite(run.attentions).all() and np.isfinite(run.logits).all()
    assert_where(raised(lambda: run.value_norms), "value_norms", layer=7)   # v W_O overflow


# ---- MiniLM ------------------------------------------------------------------------------------

def minilm_with_nan_word(model: PretrainedModel, text: str, position: int) -> PretrainedModel:
    word = model._word.copy()
    word[model.encode(text).ids[position]] = np.nan
    return dataclasses.replace(model, _word=word)


def test_minilm_says_where_its_numbers_stop_being_finite(minilm):
    damaged = minilm_with_nan_word(minilm, TEXT, 2)
    for compute in (lambda: damaged.run(TEXT), lambda: damaged.embed(TEXT),
                    lambda: damaged.head_ablation_effects(TEXT, OTHER)):
        assert_where(raised(compute), "embeddings")
    assert np.isfinite(damaged.embed(OTHER)).all()        # a text without that token is fine

    a = minilm._blocks[2].attention
    big = MultiHeadWeights(np.full_like(a.w_q, 1e30), np.full_like(a.w_k, 1e30), a.w_v, a.w_o,
                           b_q=a.b_q, b_k=a.b_k, b_v=a.b_v, b_o=a.b_o)
    overflow = with_blocks(minilm, 2, attention=big)
    x = minilm.run(TEXT).hidden_states[2]                  # layer 2's input, computed clean
    with np.errstate(over="ignore", invalid="ignore"):
        q, k = x @ big.w_q[0] + big.b_q[0], x @ big.w_k[0] + big.b_k[0]
        assert np.isfinite(q).all() and np.isfinite(k).all() and not np.isfinite(q @ k.T).all()
    for compute in (lambda: overflow.run(TEXT), lambda: overflow.embed(TEXT),
                    lambda: overflow.embed(TEXT, head_mask=np.eye(6, 12)),
                    lambda: overflow.head_ablation_effects(TEXT, OTHER)):
        assert_where(raised(compute), "scores", layer=2)

    w_2 = minilm._blocks[4].w_2.copy()
    w_2[3, 5] = np.inf
    ffn = with_blocks(minilm, 4, w_2=w_2)
    for compute in (lambda: ffn.run(TEXT), lambda: ffn.embed(TEXT)):
        assert_where(raised(compute), "mlp", layer=4)

    a = minilm._blocks[3].attention
    sizes = with_blocks(minilm, 3, attention=MultiHeadWeights(
        a.w_q, a.w_k, a.w_v, a.w_o * np.float32(1e19), b_q=a.b_q, b_k=a.b_k, b_v=a.b_v,
        b_o=a.b_o))
    run = sizes.run(TEXT)
    assert np.isfinite(run.attentions).all()
    assert_where(raised(lambda: run.value_norms), "value_norms", layer=3)


# ---- the pages -----------------------------------------------------------------------------------

def serve(monkeypatch, cls, damaged) -> None:
    """Every page's loader returns the damaged model (the disk and its cache are untouched)."""
    monkeypatch.setattr(cls, "load", classmethod(lambda _cls, *args, **kw: damaged))


def shows_the_error_and_no_chart(at, exc: AttnvizInputError, lang: str = "en") -> None:
    no_exceptions(at)
    with use_language(lang):
        said = str(exc)                       # the id and where, in the page's language
    errors = [plain(e) for e in at.error]
    assert any(said in e for e in errors), errors
    assert charts(at) == []


@pytest.fixture
def smollm2_damaged(monkeypatch, issue_damage):
    serve(monkeypatch, DecoderModel, issue_damage)
    return raised(lambda: issue_damage.run(TEXT))


@pytest.mark.parametrize("page, state", [
    ("pages/pretrained.py", {}),
    ("pages/reading.py", {}),
    ("pages/steps.py", {"mode": "Pretrained model", "step": "weights"}),
])
@pytest.mark.slow
def test_smollm2_pages_show_the_error_not_a_chart(smollm2_damaged, page, state):
    at = open_page(page, model="smollm2", sentence=TEXT, **state)
    shows_the_error_and_no_chart(at, smollm2_damaged)


@pytest.mark.slow
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_generate_shows_the_error_not_the_next_token_bars(smollm2_damaged, lang):
    at = open_page("pages/generate.py", params={"lang": lang}, gen_prompt=TEXT)
    shows_the_error_and_no_chart(at, smollm2_damaged, lang)


@pytest.mark.parametrize("state", [
    {"experiment": t("experiments.tab.sink"), "exp_sink_text": TEXT},
    {"experiment": t("experiments.tab.rope"), "exp_rope_text": TEXT},
])
@pytest.mark.slow
def test_the_experiments_smollm2_tabs_show_the_error_not_a_chart(smollm2_damaged, state):
    shows_the_error_and_no_chart(open_page("pages/experiments.py", **state), smollm2_damaged)


@pytest.mark.slow
def test_a_generation_that_overflows_is_said_with_its_layer_and_token(monkeypatch, decoder,
                                                                     overflow_3):
    text = TEXT + " (generated)"
    # clean: the bars drawn
    at = open_page("pages/generate.py", params={"lang": "en"}, gen_prompt=text, gen_count=3)
    serve(monkeypatch, DecoderModel, overflow_3)
    exc = raised(lambda: overflow_3.generate(text, 3))
    assert_where(exc, "scores", layer=3, token=1)
    button(at, "Generate 3").click().run()
    no_exceptions(at)
    assert any(str(exc) in plain(e) for e in at.error), [e.value for e in at.error]
    titles = [(c["layout"].get("title") or {}).get("text", "") for c in charts(at)]
    assert not any("New token" in title for title in titles), titles
    assert "generate_run" not in at.session_state


@pytest.fixture
def minilm_damaged(monkeypatch, minilm):
    encoder_runs._model_arrays()                 # the real minilm's arrays, as the cache counts
    damaged = minilm_with_nan_word(minilm, TEXT, 2)
    serve(monkeypatch, PretrainedModel, damaged)
    return damaged


@pytest.mark.parametrize("page, state", [
    ("pages/pretrained.py", {}),
    ("pages/reading.py", {}),
    ("pages/steps.py", {"mode": "Pretrained model", "step": "weights"}),
])
@pytest.mark.slow
def test_minilm_pages_show_the_error_not_a_chart(minilm_damaged, page, state):
    exc = raised(lambda: minilm_damaged.run(TEXT))
    assert_where(exc, "embeddings")
    at = open_page(page, sentence=TEXT, **state)
    shows_the_error_and_no_chart(at, exc)


def test_read_the_model_says_when_only_the_second_sentence_cannot_be_embedded(monkeypatch,
                                                                            minilm):
    encoder_runs._model_arrays()
    damaged = minilm_with_nan_word(minilm, OTHER, 2)          # "giraffe": only in OTHER
    assert "giraffe" not in minilm.tokenize(TEXT)
    serve(monkeypatch, PretrainedModel, damaged)
    exc = raised(lambda: damaged.embed(OTHER, max_tokens=64))
    assert_where(exc, "embeddings")
    at = open_page("pages/reading.py", sentence=TEXT, rd_view="Ablation", ab_other=OTHER)
    no_exceptions(at)
    assert any(str(exc) in plain(e) for e in at.error), [e.value for e in at.error]
    assert not at.metric                     # no similarity drawn from it
