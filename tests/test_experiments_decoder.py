"""The Experiments page's two decoder experiments (issue 22): RoPE makes the score depend on
the distance, and the attention sink. The expected numbers come from a closed form written
here with math.cos / math.sin, from transformers' apply_rotary_pos_emb, and from transformers
running the same GGUF (its attentions, its logits with an attention_mask) — never from attnviz."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from attnviz.core.errors import AttnvizInputError
from attnviz.i18n import t, use_language
from attnviz.tutorials import experiments
from tests.apptest_helpers import decode, no_exceptions, open_page, plain, shows, titled
from tests.message_helpers import message_pattern
from tests.i18n_walker import CJK, english_runs

TEXT = "The capital of France is"


# ---- RoPE: the independent computations ---------------------------------------------------------

def closed_form_score(q, k, m: int, n: int, base: float) -> float:
    """RoPE's q·k written out pair by pair: feature pair i = (x_i, x_{i+d/2}) turned by p·θ_i
    (θ_i = base^(−2i/d)) at position p, so for q = (a, b), k = (c, e) the turned pair's dot
    product is (a c + b e) cos((n − m) θ_i) + (b c − a e) sin((n − m) θ_i)."""
    d = len(q)
    half = d // 2
    total = 0.0
    for i in range(half):
        theta = base ** (-2.0 * i / d)
        a, b, c, e = q[i], q[i + half], k[i], k[i + half]
        phi = (n - m) * theta
        total += (a * c + b * e) * math.cos(phi) + (b * c - a * e) * math.sin(phi)
    return total


def transformers_score(q, k, m: int, n: int, base: float) -> float:
    """q at m and k at n rotated by transformers' Llama apply_rotary_pos_emb (float64)."""
    import torch
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    d = len(q)
    inv_freq = 1.0 / base ** (torch.arange(0, d, 2, dtype=torch.float64) / d)
    pos = torch.tensor([m, n], dtype=torch.float64)
    emb = torch.cat([torch.outer(pos, inv_freq)] * 2, dim=-1)            # (2, d)
    cos, sin = emb.cos()[None], emb.sin()[None]                          # (1, 2, d)
    x = torch.tensor(np.stack([q, k]), dtype=torch.float64)[None, None]  # (1, 1, 2, d)
    rotated, _ = apply_rotary_pos_emb(x, x, cos, sin)
    return float(rotated[0, 0, 0] @ rotated[0, 0, 1])


@pytest.mark.parametrize("d, m, n, base", [(64, 7, 3, 100000.0), (8, 0, 5, 10000.0),
                                           (128, 1000, 20, 10000.0), (2, 3, 3, 500.0)])
def test_rope_moving_both_keeps_the_score_and_moving_one_changes_it(d, m, n, base):
    q, k = np.random.default_rng(d + m).standard_normal((2, d))
    r = experiments.rope_shift(q, k, m=m, n=n, base=base, max_offset=300)
    for s in (0, 1, 17, 300):
        assert r.shifted_scores[s] == pytest.approx(closed_form_score(q, k, m + s, n + s, base),
                                                    abs=1e-9)
        assert r.distance_scores[s] == pytest.approx(closed_form_score(q, k, n + s, n, base),
                                                     abs=1e-9)
    # the closed form depends on n − m alone: every shifted pair has the first pair's score
    assert r.shift_change < 1e-10 * max(1.0, abs(r.score))
    assert r.score == pytest.approx(closed_form_score(q, k, m, n, base), abs=1e-9)
    assert r.distance_range > 0.1                       # moving one of them does change it
    assert r.offsets.tolist() == r.distances.tolist() == list(range(301))


@pytest.mark.reference
@pytest.mark.parametrize("m, n, s", [(7, 3, 0), (7, 3, 250), (0, 40, 9), (513, 512, 1)])
def test_rope_rotation_is_transformers_apply_rotary_pos_emb(m, n, s):
    q, k = experiments.random_qk(64, seed=m)
    r = experiments.rope_shift(q, k, m=m, n=n, base=100000.0, max_offset=max(s, 1))
    assert r.shifted_scores[s] == pytest.approx(
        transformers_score(q, k, m + s, n + s, 100000.0), abs=1e-9)


def test_random_qk_is_numpys_standard_normal():
    q, k = experiments.random_qk(6, seed=4)
    rng = np.random.default_rng(4)
    np.testing.assert_array_equal(q, rng.standard_normal(6))
    np.testing.assert_array_equal(k, rng.standard_normal(6))


def test_rope_on_a_real_head_gives_the_models_own_score(torch, decoder, hf_decoder):
    """q and k of SmolLM2's layer 3 (before rotation) at their real positions: the
    experiment's score at s = 0 is transformers' pre-softmax score × √d_k for that pair."""
    model, tokenizer = hf_decoder
    ids = tokenizer(TEXT).input_ids
    tr = decoder.run(TEXT).trace(3)
    with torch.no_grad():
        weights = model(torch.tensor([ids]), output_attentions=True).attentions[3][0]
    n = len(ids)
    for head, i, j in ((0, n - 1, 0), (4, 3, 2), (8, 2, 2)):
        r = experiments.rope_shift(tr.q[head, i], tr.k[head, j], m=i, n=j,
                                   base=decoder.rope_base, max_offset=64)
        # the softmax row of transformers, turned back into scores: log w_ij − log w_i0
        # equals (s_ij − s_i0)/√d_k; the same differences from the experiment's scores
        w = weights[head, i].double().numpy()
        r0 = experiments.rope_shift(tr.q[head, i], tr.k[head, 0], m=i, n=0,
                                    base=decoder.rope_base, max_offset=1)
        assert (r.score - r0.score) / 8 == pytest.approx(math.log(w[j]) - math.log(w[0]),
                                                         abs=2e-3)
        assert r.shift_change < 1e-9 * max(1.0, abs(r.score))


BAD_ROPE = [   # (call, id, what both languages must show)
    (lambda: experiments.rope_shift([1, 2], [1, 2, 3, 4], m=0, n=0, base=1e4),
     "error.experiment.rope.sizes", ["2", "4"]),
    (lambda: experiments.rope_shift([1, 2, 3], [1, 2, 3], m=0, n=0, base=1e4),
     "error.experiment.rope.odd", ["3"]),
    (lambda: experiments.rope_shift([1, 2], [1, 2], m=-1, n=0, base=1e4),
     "error.experiment.rope.position", ["m", "-1", "100000"]),
    (lambda: experiments.rope_shift([1, 2], [1, 2], m=0, n=0, base=1e4, max_offset=0),
     "error.experiment.rope.offset", ["4096", "0"]),
    (lambda: experiments.rope_shift([1, 2], [1, 2], m=0, n=0, base=0.5),
     "error.experiment.rope.base", ["0.5"]),
    (lambda: experiments.rope_shift(["a", "b"], [1, 2], m=0, n=0, base=1e4),
     "error.experiment.rope.not_numbers", ["q"]),
    (lambda: experiments.rope_shift([[1, 2]], [1, 2], m=0, n=0, base=1e4),
     "error.experiment.rope.not_vector", ["q", "(1, 2)"]),
    (lambda: experiments.rope_shift([1, np.nan], [1, 2], m=0, n=0, base=1e4),
     "error.experiment.rope.not_finite", ["q"]),
    (lambda: experiments.scaling(0), "error.experiment.d_k", ["512", "0"]),
    (lambda: experiments.word_order(["a"], None), "error.experiment.word_order.too_short",
     ["1"]),
    (lambda: experiments.pad_and_mask(["a"], 0, None), "error.experiment.max_len", ["0"]),
]


def said_in_both(exc: AttnvizInputError, msg_id: str, parts) -> None:
    assert exc.msg_id == msg_id
    english, chinese = str(exc), exc.render("zh")
    assert not CJK.search(english) and CJK.search(chinese)
    assert english_runs(chinese) == [], chinese
    for part in parts:
        assert part in english and part in chinese, (part, english, chinese)


@pytest.mark.parametrize("call, msg_id, parts", BAD_ROPE, ids=[b[1] for b in BAD_ROPE])
def test_every_experiment_error_is_an_id_said_in_both_languages(call, msg_id, parts):
    with pytest.raises(AttnvizInputError) as caught:
        call()
    said_in_both(caught.value, msg_id, parts)


# ---- the attention sink -------------------------------------------------------------------------

@pytest.fixture(scope="module")
def hf_sink(torch, hf_decoder):
    """transformers on TEXT: its attentions and the next token's log-probabilities with every
    token visible and with the first token's key masked (attention_mask 0 at position 0)."""
    model, tokenizer = hf_decoder
    ids = torch.tensor([tokenizer(TEXT).input_ids])
    with torch.no_grad():
        plain = model(ids, output_attentions=True)
        mask = torch.ones_like(ids)
        mask[0, 0] = 0
        masked = model(ids, attention_mask=mask)
    return (torch.stack(plain.attentions)[:, 0].double().numpy(),        # (layers, heads, n, n)
            torch.log_softmax(plain.logits[0, -1].double(), -1).numpy(),
            torch.log_softmax(masked.logits[0, -1].double(), -1).numpy(), tokenizer)


def test_the_sink_numbers_are_transformers_own(decoder, hf_sink):
    attentions, before, after, tokenizer = hf_sink
    r = experiments.attention_sink(decoder, TEXT)
    n = attentions.shape[-1]
    np.testing.assert_allclose(r.first_weight_per_head, attentions[:, :, 1:, 0].mean(-1),
                               atol=1e-4)
    np.testing.assert_allclose(r.first_weight, attentions[:, :, 1:, 0].mean(axis=(1, 2)),
                               atol=1e-4)
    assert r.even == pytest.approx(sum(1 / (i + 1) for i in range(1, n)) / (n - 1))
    np.testing.assert_allclose(r.logprobs_before, before, atol=1e-3)
    np.testing.assert_allclose(r.logprobs_after, after, atol=1e-3)
    top_before = np.argsort(-before)[:5].tolist()
    top_after = np.argsort(-after)[:5].tolist()
    assert [i for i, _, _ in r.top()] == top_before
    assert [i for i, _, _ in r.top(after=True)] == top_after
    assert [p for _, p, _ in r.top()] == [tokenizer.decode([i]) for i in top_before]
    paris = top_before[0]
    assert r.change(paris) == pytest.approx(after[paris] - before[paris], abs=1e-3)
    # what the page reports, measured: the sink is real and the prediction needs it
    assert r.first_weight.mean() > 2 * r.even
    assert r.top()[0][1] == " Paris" and r.change(paris) < -1


def test_a_key_mask_of_ones_changes_nothing_and_hiding_a_key_is_transformers_attention_mask(
        torch, decoder, hf_decoder):
    model, tokenizer = hf_decoder
    text = "早上好！今天的天气很好，我们去公园散步吧。"
    ids = tokenizer(text).input_ids
    n = len(ids)
    plain = decoder.next_token_logprobs(text)
    np.testing.assert_array_equal(decoder.next_token_logprobs(text, key_mask=np.ones(n)), plain)
    keep = np.ones(n, dtype=bool)
    keep[[0, 3, 7]] = False
    with torch.no_grad():
        mask = torch.from_numpy(keep.astype(np.int64))[None]               # (1, n)
        out = model(torch.tensor([ids]), attention_mask=mask)
    expected = torch.log_softmax(out.logits[0, -1].double(), -1).numpy()
    got = decoder.next_token_logprobs(text, key_mask=keep)
    np.testing.assert_allclose(got, expected, atol=1e-3)
    assert np.abs(got - plain).max() > 0.1               # hiding the keys did matter


@pytest.mark.parametrize("key_mask, msg_id, parts", [
    (np.ones(3), "error.decoder.key_mask.shape", ["5", "(3,)"]),
    (np.full(5, 2), "error.decoder.key_mask.values", ["0", "1"])])
def test_a_bad_key_mask_is_said_in_both_languages(decoder, key_mask, msg_id, parts):
    with pytest.raises(AttnvizInputError) as caught:
        decoder.next_token_logprobs(TEXT, key_mask=key_mask)
    said_in_both(caught.value, msg_id, parts)


@pytest.mark.parametrize("text, msg_id, parts", [
    ("", "error.experiment.sink.empty", []), ("Hi", "error.experiment.sink.too_short", []),
    (" ".join(["word"] * 200), "error.experiment.sink.too_long", ["200", "128"])])
def test_a_text_the_sink_cannot_use_is_said_in_both_languages(decoder, text, msg_id, parts):
    with pytest.raises(AttnvizInputError) as caught:
        experiments.attention_sink(decoder, text)
    said_in_both(caught.value, msg_id, parts)


# ---- the page ------------------------------------------------------------------------------

ROPE_TAB, SINK_TAB = "experiments.tab.rope", "experiments.tab.sink"    # their labels' ids


def metric_values(at) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def tab(msg_id: str) -> str:
    """A tab's label, its state (the experiments page is seeded with it)."""
    return t(msg_id)


def test_the_rope_intro_states_each_decoders_bases():
    """The RoPE tab's words on the sidebar's decoder's bases, read from its config: SmolLM2's
    one base (100,000), Gemma 3 270M's two (10,000 on sliding-window layers, 1,000,000 on the
    global layers 5, 11 and 17)."""
    from attnviz.app.shared.model_words import rope_words
    from attnviz.models.catalogue import registry

    ids = ("experiments.rope.base_one", "experiments.rope.bases_per_kind")
    for lang in ("en", "zh"):
        with use_language(lang):
            assert rope_words(registry.get("smollm2").sizes(), "M", *ids) == t(
                ids[0], model="M", base="100,000")
            assert rope_words(registry.get("gemma3-270m").sizes(), "M", *ids) == t(
                ids[1], model="M", local="10,000", base="1,000,000", layers="5, 11, 17")


@pytest.mark.slow
def test_the_rope_tab_shows_the_same_score_for_every_shift_random_q_k():
    """Random q and k; the words name the sidebar's decoder, here Gemma 3 270M, and its bases
    (not SmolLM2's)."""
    at = open_page("pages/experiments.py", experiment=tab(ROPE_TAB), exp_rope_source="random",
                   exp_rope_offset=300, model="gemma3-270m")
    assert not at.error
    gemma = "Gemma 3 270M"
    bases = t("experiments.rope.bases_per_kind", model=gemma, local="10,000",
              base="1,000,000", layers="5, 11, 17")
    assert shows(at.markdown, "experiments.rope.intro", model=gemma, bases=bases)
    q, k = np.random.default_rng(0).standard_normal((2, 64))  # seed 0, d_k 64: the defaults
    shown = metric_values(at)
    expected = closed_form_score(q, k, 7, 3, 10000.0)
    assert float(shown[t("experiments.rope.score", m=7, n=3)]) == pytest.approx(expected,
                                                                                abs=1e-6)
    assert float(shown[t("experiments.rope.shift_change")]) < 1e-10
    table = at.table[0].value
    together = table.iloc[:, 1].tolist()
    assert together[0] == f"(7, 3) → {expected:.6f}" and together[-1] == \
        f"(307, 303) → {expected:.6f}"
    assert len({row.split("→")[1] for row in together}) == 1       # one score, every shift
    apart = table.iloc[:, 2].tolist()
    assert apart[-1] == f"(303, 3) → {closed_form_score(q, k, 303, 3, 10000.0):.6f}"
    fig = titled(at, "figure.experiment.rope.title", base="10000", d=64)
    flat, curve = (decode(tr["y"]) for tr in fig["data"])
    assert len(flat) == len(curve) == 301
    assert np.ptp(flat) < 1e-10 and np.ptp(curve) > 1
    assert curve[100] == pytest.approx(closed_form_score(q, k, 103, 3, 10000.0), abs=1e-9)


@pytest.mark.slow
def test_the_rope_tab_on_a_smollm2_head(decoder):
    at = open_page("pages/experiments.py", experiment=tab(ROPE_TAB), exp_rope_layer=5,
                   exp_rope_head=7)
    assert not at.error
    tr = decoder.run(TEXT).trace(5)
    n = tr.q.shape[1]
    q, k = tr.q[7, n - 1].astype(np.float64), tr.k[7, 0].astype(np.float64)
    shown = metric_values(at)
    label = t("experiments.rope.score", m=n - 1, n=0)
    assert float(shown[label]) == pytest.approx(closed_form_score(q, k, n - 1, 0, 100000.0),
                                                abs=1e-5)
    assert float(shown[t("experiments.rope.shift_change")]) < 1e-9
    assert shows(at.caption, "experiments.rope.pair", i=n - 1, j=0, layer=5, head=7, kv_head=2)


def test_the_sink_tab_shows_transformers_numbers(hf_sink):
    attentions, before, after, tokenizer = hf_sink
    at = open_page("pages/experiments.py", experiment=tab(SINK_TAB))
    assert not at.error
    shown = metric_values(at)
    assert float(shown[t("experiments.sink.mean")]) == pytest.approx(
        attentions[:, :, 1:, 0].mean(), abs=1e-3)
    assert shown[t("experiments.sink.top")] == "␣Paris"          # one notation (issue 27.13)
    paris = int(np.argmax(before))
    change = next(v for label, v in shown.items()
                  if message_pattern("experiments.sink.change").fullmatch(label))
    assert float(change) == pytest.approx(after[paris] - before[paris], abs=2e-3)
    tables = [d.value for d in at.dataframe]
    assert tables[0].iloc[0, 0] == "␣Paris"
    assert float(tables[0].iloc[0, 1]) == pytest.approx(before[paris], abs=2e-3)
    assert float(tables[1].iloc[0, 2]) == pytest.approx(after.max(), abs=2e-3)
    bars = titled(at, "figure.experiment.sink.title")
    np.testing.assert_allclose(decode(bars["data"][0]["y"]),
                               attentions[:, :, 1:, 0].mean(axis=(1, 2)), atol=1e-4)


@pytest.mark.slow
def test_the_decoder_tabs_say_what_is_wrong_in_the_page_in_both_languages():
    for lang in ("en", "zh"):
        with use_language(lang):
            sink, rope = tab(SINK_TAB), tab(ROPE_TAB)
        at = open_page("pages/experiments.py", params={"lang": lang}, experiment=sink,
                       exp_sink_text="")
        with use_language(lang):
            assert shows(at.error, "error.experiment.sink.empty"), [e.value for e in at.error]
        at = open_page("pages/experiments.py", params={"lang": lang}, experiment=sink,
                       exp_sink_text="Hi")
        with use_language(lang):
            assert shows(at.error, "error.experiment.sink.too_short"), \
                [e.value for e in at.error]
        assert at.title and at.tabs                     # the page goes on around the error
        at = open_page("pages/experiments.py", params={"lang": lang}, experiment=rope,
                       exp_rope_source="random", exp_rope_d=7)
        assert [e.value for e in at.error] != []
        assert re.search("7", at.error[0].value)


def test_the_chinese_page_keeps_the_open_tab_named_in_english():
    with use_language("zh"):
        label = experiments_tab_label("sink")
        mean = t("experiments.sink.mean")
    at = open_page("pages/experiments.py", params={"lang": "zh"}, experiment=tab(SINK_TAB))
    no_exceptions(at)                      # (the English label: a link made in English)
    assert at.session_state["experiment"] == label
    assert mean in metric_values(at)


def experiments_tab_label(name: str) -> str:
    from attnviz.app.experiments.experiments_view import tab_labels

    return tab_labels()[name]
