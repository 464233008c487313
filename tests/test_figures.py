"""Figures: the numbers drawn are the trace's, and the heatmap conventions of SPEC.md hold."""

import json

import numpy as np
import pytest

import attnviz
from attnviz import figures

TOKENS = ["the", "cat", "<b>sat</b>", "the"]


@pytest.fixture(scope="module")
def trace():
    w = attnviz.MultiHeadWeights.random(8, 2, seed=0)
    return attnviz.trace_attention(attnviz.embed_tokens(TOKENS, 8), w, causal=True)


def z_of(fig, i=0) -> np.ndarray:
    return np.array(fig.data[i].z, dtype=float)


def test_heatmap_reads_like_a_table(trace):
    fig = figures.heatmap(trace.scores[0], row_labels=TOKENS, col_labels=TOKENS)
    np.testing.assert_array_equal(z_of(fig), trace.scores[0])
    assert fig.layout.yaxis.autorange == "reversed"              # first token on top
    labels = list(fig.data[0].y)
    assert labels == list(fig.layout.yaxis.categoryarray) and len(set(labels)) == 4
    assert labels[0] != labels[3] and labels[0].startswith("the")  # duplicates kept apart
    assert "%{z" in fig.data[0].hovertemplate                    # exact value on hover


def test_labels_are_escaped(trace):
    fig = figures.heatmap(trace.scores[0], row_labels=TOKENS, col_labels=TOKENS)
    assert fig.data[0].x[2] == fig.data[0].y[2] == "&lt;b&gt;sat&lt;/b&gt;"
    assert "<b>" not in json.loads(fig.to_json())["data"][0]["hovertemplate"]


def test_colour_scales(trace):
    weights = figures.heatmap(trace.weights[0], row_labels=TOKENS, col_labels=TOKENS,
                              kind="weights")
    assert (weights.data[0].zmin, weights.data[0].zmax) == (0, 1)
    signed = figures.heatmap(trace.scores[0], row_labels=TOKENS, col_labels=TOKENS)
    assert signed.data[0].zmid == 0 and signed.data[0].colorscale is not None


def test_masked_cells_are_drawn_apart(trace):
    fig = figures.step_figure(trace, "masked_scores", tokens_q=TOKENS)
    upper = np.triu(np.ones((4, 4), bool), 1)
    assert np.isnan(z_of(fig)[upper]).all() and not np.isnan(z_of(fig)[~upper]).any()
    overlay = fig.data[1]
    assert overlay.name == "masked" and "masked" in overlay.hovertemplate
    assert (~np.isnan(np.array(overlay.z, dtype=float)) == upper).all()


def test_values_in_cells_only_when_small():
    small = figures.heatmap(np.ones((3, 3)), row_labels=list("abc"), col_labels=list("abc"))
    assert small.data[0].texttemplate
    big = figures.heatmap(np.ones((64, 64)), row_labels=[str(i) for i in range(64)],
                          col_labels=[str(i) for i in range(64)])
    assert big.data[0].texttemplate is None
    assert big.data[0].z.dtype == np.float32                    # compact JSON


@pytest.mark.parametrize("name", ["x", "q", "k", "v", "scores", "scaled_scores",
                                  "masked_scores", "weights", "z", "output"])
def test_step_figure_draws_the_steps_array(trace, name):
    fig = figures.step_figure(trace, name, head=1, tokens_q=TOKENS)
    want = trace.step_array(name, 1)
    got = z_of(fig)
    finite = ~np.isnan(got)
    np.testing.assert_array_equal(got[finite], np.asarray(want, dtype=float)[finite])


def test_weighted_values_for_one_query(trace):
    fig = figures.step_figure(trace, "weighted_values", head=1, tokens_q=TOKENS, query=2)
    np.testing.assert_allclose(z_of(fig), trace.weighted_values(1)[2])
    assert len(fig.data[0].y) == trace.n_k and len(fig.data[0].x) == trace.d_v


def test_heads_grid_one_facet_per_head_on_one_scale(trace):
    fig = figures.heads_grid(trace, TOKENS)
    heat = [d for d in fig.data if d.name and not d.name.endswith("masked")]
    assert len(heat) == 2
    for h, d in enumerate(heat):
        got = np.array(d.z, dtype=float)
        np.testing.assert_array_equal(np.nan_to_num(got), trace.weights[h])
        assert d.coloraxis == "coloraxis"
    assert (fig.layout.coloraxis.cmin, fig.layout.coloraxis.cmax) == (0, 1)


def test_heads_grid_of_128_tokens_and_12_heads_stays_small():
    tokens = [f"w{i}" for i in range(128)]
    w = attnviz.MultiHeadWeights.random(96, 12, dtype=np.float32)
    t = attnviz.trace_attention(attnviz.embed_tokens(tokens, 96).astype(np.float32), w)
    size = len(figures.heads_grid(t, tokens).to_json())
    assert size <= 3 * 1024 * 1024, size


def test_concat_marks_head_boundaries(trace):
    fig = figures.concat_figure(trace, TOKENS)
    np.testing.assert_array_equal(z_of(fig), trace.concat)
    lines = [s.x0 for s in fig.layout.shapes]
    assert lines == [trace.d_v - 0.5]                            # between head 0 and head 1
    assert [a.text for a in fig.layout.annotations if a.text.startswith("head")] == \
        ["head 0", "head 1"]


def test_query_vector_view_follows_one_row(trace):
    fig = figures.query_vector_figure(trace, 2, head=1, tokens_q=TOKENS)
    np.testing.assert_allclose(np.array(fig.data[0].y), trace.scores[1, 2])
    np.testing.assert_allclose(np.array(fig.data[2].y), trace.weights[1, 2])
    assert np.array(fig.data[2].y)[3] == 0                       # a later key, masked


def test_bad_arguments_are_domain_errors(trace):
    with pytest.raises(attnviz.AttnvizInputError, match="row_labels has 3 labels"):
        figures.heatmap(np.ones((4, 4)), row_labels=list("abc"), col_labels=list("abcd"))
    with pytest.raises(attnviz.AttnvizInputError, match="kind must be one of"):
        figures.heatmap(np.ones((2, 2)), row_labels=list("ab"), col_labels=list("ab"),
                        kind="rainbow")
    with pytest.raises(attnviz.AttnvizInputError, match="no step named"):
        figures.step_figure(trace, "nope")


def test_figures_serialise(trace):
    for fig in (figures.heads_grid(trace, TOKENS), figures.concat_figure(trace, TOKENS),
                figures.query_vector_figure(trace, 0, tokens_q=TOKENS)):
        json.loads(fig.to_json())
