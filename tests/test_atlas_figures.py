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


def test_a_heads_map_coloured_by_token_gives_each_frequent_token_a_colour_the_rest_grey():
    """The sample's 10 most frequent tokens (ties in code-point order) each one trace of its
    queries and keys, named as the pages write a token (␣ a space, ↵ a line break), the other
    tokens in one grey trace last; circles are queries, diamonds keys."""
    from collections import Counter

    written = {" the": "␣the", " cat": "␣cat", "\n": "↵", " ": "␣", "猫": "猫", "sat": "sat",
               " on": "␣on", ".": ".", ",": ",", " mat": "␣mat", "a": "a", "b": "b"}
    tokens = ([" the"] * 5 + ["\n"] * 4 + [" cat"] * 3 + ["猫"] * 3 + [" "] * 2 + ["sat", " on",
              ".", ",", " mat", "a", "b"])
    rng = np.random.default_rng(5)
    tokens = [tokens[i] for i in rng.permutation(len(tokens))]
    s = len(tokens)
    points = np.arange(4 * s, dtype=float).reshape(2 * s, 2)     # row r at x = 2r: its own x
    counts = Counter(written[tok] for tok in tokens)
    top = [name for name, _ in sorted(counts.items(), key=lambda c: (-c[1], c[0]))[:10]]
    assert len(counts) == 12 and len(top) == 10
    fig = atlas_figures.qk_map(points, s, tokens=tokens, layer=1, head=0, method="PCA",
                               by_token=True)
    assert [tr.name for tr in fig.data] == top + [t("figure.atlas.map.other_tokens")]
    assert not any("▁" in tr.name or "<0x" in tr.name for tr in fig.data)
    colours = [tr.marker.color for tr in fig.data]
    assert len(set(colours)) == 11 and colours[-1] == atlas_figures.OTHER_TOKENS_COLOUR
    assert fig.layout.legend.title.text == t("figure.atlas.map.token")
    for trace in fig.data:
        group = top.index(trace.name) if trace.name in top else None
        want = [i for i in range(s) if (written[tokens[i]] == trace.name if group is not None
                                        else written[tokens[i]] not in top)]
        rows = [int(x) // 2 for x in trace.x]
        assert rows == want + [s + i for i in want]              # its queries, then its keys
        assert list(trace.marker.symbol) == ["circle"] * len(want) + ["diamond"] * len(want)
        assert list(trace.text) == [written[tokens[i]] for i in want] * 2
    with use_language("zh"):
        zh = atlas_figures.qk_map(points, s, tokens=tokens, layer=1, head=0, method="PCA",
                                  by_token=True)
        assert zh.data[-1].name == t("figure.atlas.map.other_tokens")
    assert zh.data[-1].name != fig.data[-1].name


def test_a_heads_map_hover_names_each_points_token_and_its_text():
    """With the sample's texts, every point's hover gives its token (text) and the text it
    came from (hovertext, escaped for plotly), in each colouring; without, no text line."""
    points = np.arange(12, dtype=float).reshape(6, 2)
    tokens, texts = ["a", "b", "<c>"], ["one & two", "three", "four <five>"]
    written = ["one &amp; two", "three", "four &lt;five&gt;"]
    for options in ({}, {"positions": [0, 1, 2]}):
        fig = atlas_figures.qk_map(points, 3, tokens=tokens, layer=0, head=0, method="PCA",
                                   texts=texts, **options)
        for trace in fig.data:
            assert list(trace.text) == ["a", "b", "&lt;c&gt;"]
            assert list(trace.hovertext) == written
            assert "%{text}" in trace.hovertemplate and "%{hovertext}" in trace.hovertemplate
            assert t("figure.atlas.map.text") in trace.hovertemplate
    fig = atlas_figures.qk_map(points, 3, tokens=tokens, layer=0, head=0, method="PCA",
                               texts=texts, by_token=True)
    for trace in fig.data:                       # each trace: its queries, then its keys
        rows = [int(x) // 2 for x in trace.x]
        assert list(trace.hovertext) == [written[r % 3] for r in rows]
        assert "%{hovertext}" in trace.hovertemplate
    plain = atlas_figures.qk_map(points, 3, tokens=tokens, layer=0, head=0, method="PCA")
    assert all(tr.hovertext is None and "%{hovertext}" not in tr.hovertemplate
               for tr in plain.data)


def test_every_heads_pca_map_is_one_cell_of_one_figure_of_two_traces():
    """2 layers × 3 heads, 100 sampled positions: two Scattergl traces (queries, keys), each
    head's 30 evenly spaced positions as queries and the same positions as keys (60 a head),
    in the cell centred at (head, −layer), scaled so the farthest is GRID_RADIUS away; a
    point that is not finite is left out; the picked head framed."""
    rng = np.random.default_rng(3)
    maps = rng.normal(size=(2, 3, 200, 2))
    maps[1, 2, 0] = np.nan                                       # query row 0 of L1H2
    fig = atlas_figures.pca_grid(maps, 100, model="M", picked=(1, 2))
    assert [tr.type for tr in fig.data] == ["scattergl", "scattergl"]
    assert [tr.name for tr in fig.data] == [t("figure.atlas.map.queries"),
                                            t("figure.atlas.map.keys")]
    rows = np.unique(np.linspace(0, 99, 30).round().astype(int))
    assert len(rows) == 30
    for kind, trace in enumerate(fig.data):
        data = np.asarray(trace.customdata)
        for layer in range(2):
            for head in range(3):
                mine = (data[:, 0] == layer) & (data[:, 1] == head)
                want_rows = rows + 100 * kind
                if (layer, head, kind) == (1, 2, 0):
                    want_rows = want_rows[1:]                    # the NaN left out
                assert data[mine, 2].tolist() == want_rows.tolist()
                drawn = maps[layer, head, np.concatenate([rows, rows + 100])]
                scale = atlas_figures.GRID_RADIUS / np.nanmax(np.abs(drawn))
                want = maps[layer, head, want_rows] * scale + [head, -layer]
                got = np.stack([np.asarray(trace.x)[mine], np.asarray(trace.y)[mine]], 1)
                np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    [frame] = [s for s in fig.layout.shapes if s.type == "rect"]
    assert (frame.x0, frame.x1, frame.y0, frame.y1) == (1.5, 2.5, -0.5, -1.5)
    assert fig.layout.title.text == t("figure.atlas.grid.title", model="M")
