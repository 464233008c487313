"""The head atlas's figures (attnviz.plot.atlas_figures): every head a point with its (layer,
head), NaN heads left out, titles by message id in both languages; one head's joint map in
two traces, queries then keys."""

import numpy as np

from attnviz.i18n import t, use_language
from attnviz.plot import atlas_figures


def test_every_head_is_a_point_with_its_layer_and_head_and_nan_is_left_out():
    rng = np.random.default_rng(0)
    means = {"entropy": rng.random((3, 4)), "induction": rng.random((3, 4))}
    means["induction"][2, 1] = np.nan
    fig = atlas_figures.heads_scatter(means, "entropy", "induction", model="M")
    (trace,) = fig.data
    assert len(trace.x) == 11
    for (layer, head), x, y in zip(trace.customdata, trace.x, trace.y):
        assert (x, y) == (means["entropy"][layer, head], means["induction"][layer, head])
        assert np.isfinite(y)
    assert list(trace.marker.color) == [int(l) for l, _ in trace.customdata]
    assert fig.layout.title.text == t("figure.atlas.heads.title", model="M")
    assert fig.layout.xaxis.title.text == t("atlas.metric.entropy")
    with use_language("zh"):
        zh = atlas_figures.heads_scatter(means, "entropy", "induction",
                                         model="M")
        assert zh.layout.yaxis.title.text == t("atlas.metric.induction")
    assert zh.layout.yaxis.title.text != fig.layout.yaxis.title.text


def test_a_heads_map_draws_queries_then_keys_with_their_tokens():
    points = np.arange(20, dtype=float).reshape(10, 2)
    fig = atlas_figures.qk_map(points, 5, tokens=list("abcde"), layer=3, head=1, method="PCA")
    queries, keys = fig.data
    assert list(queries.x) == list(points[:5, 0]) and list(keys.y) == list(points[5:, 1])
    assert list(queries.text) == list("abcde") == list(keys.text)
    assert queries.name == t("figure.atlas.map.queries") and keys.name == t("figure.atlas.map.keys")
    assert fig.layout.title.text == t("figure.atlas.map.title", layer=3, head=1, method="PCA")


def test_a_heads_map_coloured_by_position_gives_each_point_its_samples_position():
    points = np.arange(20, dtype=float).reshape(10, 2)
    positions = [3, 0, 9, 4, 7]
    fig = atlas_figures.qk_map(points, 5, tokens=list("abcde"), layer=0, head=2,
                               method="t-SNE", positions=positions)
    queries, keys = fig.data
    assert list(queries.marker.color) == positions == list(keys.marker.color)
    assert list(queries.customdata) == positions == list(keys.customdata)
    assert queries.marker.symbol != keys.marker.symbol               # told apart by shape
    assert (queries.marker.cmin, queries.marker.cmax) == (0, 9) == (keys.marker.cmin,
                                                                     keys.marker.cmax)
    assert [queries.marker.showscale, keys.marker.showscale] == [True, False]   # one scale
    assert list(keys.x) == list(points[5:, 0])
    assert fig.layout.title.text == t("figure.atlas.map.title", layer=0, head=2, method="t-SNE")
    assert fig.layout.xaxis.title.text == t("figure.atlas.map.axis_tsne", n=1)
    assert queries.marker.colorbar.title.text == t("figure.atlas.map.position")


def test_heads_coloured_by_cluster_carry_their_cluster_in_colour_and_hover():
    rng = np.random.default_rng(1)
    means = {"entropy": rng.random((2, 3)), "sink": rng.random((2, 3))}
    clusters = np.array([[0, 2, 1], [1, 0, 2]])
    fig = atlas_figures.heads_scatter(means, "entropy", "sink", model="M", clusters=clusters)
    (trace,) = fig.data
    assert [int(c) for c in trace.marker.color] == [clusters[l, h] for l, h in trace.customdata]
    assert trace.text[1].endswith(f"{t('figure.atlas.cluster')} 2")
    assert trace.marker.colorbar.title.text == t("figure.atlas.cluster")
    by_layer = atlas_figures.heads_scatter(means, "entropy", "sink", model="M")
    assert by_layer.data[0].marker.colorbar.title.text == t("figure.atlas.layer")
