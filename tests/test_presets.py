"""The tutorials' worked examples, number for number as the tutorials print them."""

import math

import numpy as np
import pytest

import attnviz
from attnviz.tutorials.presets import PRESET_NAMES
from tests.message_helpers import raises_message


def test_every_preset_loads_with_a_title_description_and_tutorial():
    assert len(PRESET_NAMES) == 6
    for p in attnviz.presets():
        assert p.title and p.description and p.tutorial
        t = p.trace()
        assert len(p.tokens) == t.n_q
        np.testing.assert_allclose(t.weights.sum(-1), 1.0)


def test_three_inputs_tutorial_003():
    p = attnviz.load_preset("three_inputs")
    t = p.trace()
    # every number below is printed in tutorial 003
    np.testing.assert_array_equal(t.k[0], [[0, 1, 1], [4, 4, 0], [2, 3, 1]])
    np.testing.assert_array_equal(t.q[0], [[1, 0, 2], [2, 2, 2], [2, 1, 3]])
    np.testing.assert_array_equal(t.v[0], [[1, 2, 3], [2, 8, 0], [2, 6, 3]])
    np.testing.assert_array_equal(t.scores[0], [[2, 4, 4], [4, 16, 12], [4, 12, 10]])
    np.testing.assert_array_equal(t.scaled_scores, t.scores)  # no scaling in this tutorial
    np.testing.assert_allclose(t.weights[0], [[6.3379e-02, 4.6831e-01, 4.6831e-01],
                                              [6.0337e-06, 9.8201e-01, 1.7986e-02],
                                              [2.9539e-04, 8.8054e-01, 1.1917e-01]], rtol=1e-4)
    np.testing.assert_allclose(t.weights[0, 0], [0.063379, 0.468311, 0.468311], atol=1e-6)
    np.testing.assert_allclose(t.output[0], [1.936621, 6.683105, 1.595068], atol=1e-6)
    # tutorial 003's weighted values for Input 1 use the rounded weights [0, .5, .5]
    note, rounded = p.side_notes["rounded_weights"]
    assert note.msg_id == "preset.three_inputs.rounded_note"
    np.testing.assert_allclose(rounded[:, :, None] * t.v[0][None], np.array(
        [[[0, 0, 0], [1, 4, 0], [1, 3, 1.5]], [[0, 0, 0], [2, 8, 0], [0, 0, 0]],
         [[0, 0, 0], [1.8, 7.2, 0], [0.2, 0.6, 0.3]]]), atol=1e-12)
    np.testing.assert_allclose(rounded @ t.v[0], [[2, 7, 1.5], [2, 8, 0], [2, 7.8, 0.3]],
                               atol=1e-12)


def test_two_queries_tutorial_002():
    t = attnviz.load_preset("two_queries").trace()
    assert t.d_k == 3 and t.scale == pytest.approx(1 / math.sqrt(3))
    np.testing.assert_allclose(t.scaled_scores[0], [[0.577, 0.577], [0.577, 1.155]], atol=5e-4)
    # each weight row is softmax of its scaled scores, computed here by hand
    row2 = np.exp([0.57735, 1.1547])
    np.testing.assert_allclose(t.weights[0, 1], row2 / row2.sum(), atol=1e-4)
    np.testing.assert_allclose(t.weights[0, 0], [0.5, 0.5])


@pytest.mark.reference
def test_thinking_machines_8_heads_of_64_and_w_o_as_torch_computes(torch):
    p = attnviz.load_preset("thinking_machines")
    t = p.trace()
    assert p.tokens == ["Thinking", "Machines"]
    assert (t.num_heads, t.d_k, t.scale) == (8, 64, 1 / 8)
    assert t.concat.shape == (2, 512) and t.output.shape == (2, 512)
    mha = p.weights.to_torch().eval()
    x = torch.tensor(p.x)
    with torch.no_grad():
        out, weights = mha(x, x, x, need_weights=True, average_attn_weights=False)
    np.testing.assert_allclose(t.weights, weights.numpy(), atol=1e-10)
    np.testing.assert_allclose(t.output, out.numpy(), atol=1e-10)


def test_zao_shang_hao_tutorial_001_raw_self_attention():
    p = attnviz.load_preset("zao_shang_hao")
    t = p.trace()
    x = p.x
    assert p.tokens == ["早", "上", "好"]
    similarity = x @ x.T
    a = np.exp(similarity) / np.exp(similarity).sum(axis=1, keepdims=True)
    np.testing.assert_allclose(t.scores[0], similarity)
    np.testing.assert_allclose(t.output, a @ x)
    # tutorial 001: 早 gives 0.4 to itself, 0.4 to 上 and 0.2 to 好
    np.testing.assert_allclose(t.weights[0, 0].round(1), [0.4, 0.4, 0.2])


def test_tied_qk_tutorial_004_symmetric_only_when_tied():
    p = attnviz.load_preset("tied_qk")
    assert p.x.shape == (5, 10) and p.weights.d_k == 8
    tied = p.trace().scores[0]
    separate = attnviz.trace_attention(p.x, p.alt_weights, scale=p.scale).scores[0]
    assert np.abs(tied - tied.T).max() < 1e-12
    assert np.abs(separate - separate.T).max() > 1e-3


def test_it_sentence_tutorial_000():
    p = attnviz.load_preset("it")
    assert p.sentence == "The animal didn't cross the street because it was too tired"
    assert p.tokens[7] == "it" and "didn't" in p.tokens and len(p.tokens) == 11
    assert p.trace().weights.shape == (8, 11, 11)


def test_unknown_preset_names_the_known_ones():
    with raises_message("error.preset.unknown", name="'nope'", names=", ".join(PRESET_NAMES)):
        attnviz.load_preset("nope")
