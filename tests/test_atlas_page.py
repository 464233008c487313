"""The Head atlas page (issue 39) in AppTest on SmolLM2, with a corpus of two short texts so
that a build takes seconds: the page opens in both languages, Build draws every head with the
numbers of the public API (``attnviz.head_atlas``, itself held to transformers in
tests/test_atlas.py), a click opens a head, and a link brings back every pick without
building again."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest

from attnviz.app import keys
from attnviz.i18n import render, use_language
from attnviz.io.head_atlas import HeadAtlas
from attnviz.models import heavy
from attnviz.tutorials import atlas_corpus
from tests.apptest_helpers import (charts_keyed, click_points, decode, no_exceptions,
                                   open_page, record_downloads, shows)

pytestmark = pytest.mark.slow

TEXTS = ["The cat sat on the mat. The cat sat on the mat.", "小猫坐在垫子上。小猫坐在垫子上。"]
X, Y = "sink", "previous_token"          # the scatter's metrics (not the defaults)
COLUMN = {"sink": "sink", "previous_token": "prev_token"}   # HeadAtlas.metrics's columns


def atlas_page(lang: str = "en", **state):
    return open_page("pages/atlas.py", params={"lang": lang}, at_corpus="custom",
                     at_texts="\n\n".join(TEXTS), **state)


@pytest.fixture(scope="module")
def expected():
    """The atlas of the two texts through the public API, in this process."""
    import attnviz

    return attnviz.head_atlas(TEXTS, model="smollm2", workers=1)


@pytest.fixture(scope="module")
def built():
    """The page after Build: the job queued, computed by the server's queue, shown."""
    return press_and_await_the_queue(atlas_page(at_x=X, at_y=Y), keys.AT_BUILD)


def press_and_await_the_queue(at, key: str):
    """Press the button `key`, let the server's queue compute the job it asks for, run again."""
    [button] = [b for b in at.button if b.key == key]
    button.click().run()
    no_exceptions(at)
    assert heavy.default_queue().wait_idle(300)
    at.run()
    no_exceptions(at)
    return at


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_page_opens_with_the_bundled_corpus_of_its_language_counted(lang):
    at = open_page("pages/atlas.py", params={"lang": lang})
    no_exceptions(at)
    assert at.title[0].value == render("nav.atlas", lang)
    assert at.session_state[keys.AT_CORPUS] == lang
    with use_language(lang):
        assert shows(at.caption, "atlas.corpus.source")
        assert shows(at.markdown, "atlas.count", window=512)
    assert [b.label for b in at.button if b.key == keys.AT_BUILD] == [
        render("atlas.build", lang, texts=len(atlas_corpus.texts(lang)))]
    assert not charts_keyed(at, keys.AT_SCATTER)          # nothing built before the press


def test_build_draws_every_head_at_the_apis_numbers(built, expected):
    metrics = expected.metrics
    [fig] = charts_keyed(built, keys.AT_SCATTER)
    trace = fig["data"][0]
    where = decode(trace["customdata"]).astype(int).reshape(-1, 2)   # (layer, head) a point
    assert len(where) == len(metrics) == 30 * 9
    row = where[:, 0] * 9 + where[:, 1]
    np.testing.assert_allclose(decode(trace["x"]), metrics[COLUMN[X]].to_numpy()[row],
                               rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(decode(trace["y"]), metrics[COLUMN[Y]].to_numpy()[row],
                               rtol=1e-12, atol=1e-12)
    assert shows(built.caption, "atlas.built", texts=2, heads=270)


def test_a_click_opens_the_head_and_its_link_brings_every_pick_back(built, expected):
    at = click_points(built, keys.AT_SCATTER,
                      [{"x": 0, "y": 0, "curve_number": 0, "point_index": 5 * 9 + 4,
                        "customdata": [5, 4]}])
    no_exceptions(at)
    assert (at.session_state[keys.AT_LAYER], at.session_state[keys.AT_HEAD]) == (5, 4)
    [fig] = charts_keyed(at, keys.AT_SCATTER)             # its point ringed
    ring = fig["data"][1]
    assert decode(ring["customdata"]).ravel().tolist() == [5, 4]
    assert (float(decode(ring["x"])[0]), float(decode(ring["y"])[0])) == tuple(
        float(expected.metrics[COLUMN[m]][5 * 9 + 4]) for m in (X, Y))
    # its top examples, each its text's row again: the row's largest weight is the score
    top = expected.top_examples(5, 4, k=5)
    rows = [charts_keyed(at, keys.AT_EXAMPLE(i)) for i in range(len(top))]
    assert all(len(r) == 1 for r in rows) and top
    for (text, position, score), [fig] in zip(top, rows):
        z = decode(fig["data"][0]["z"]).ravel()
        assert len(z) == position + 1                     # every key: the texts are short
        assert abs(float(np.nansum(z)) - 1) < 1e-5        # a whole row of weights
        assert abs(float(np.nanmax(z)) - score) < 1e-6
    if len(expected.partial.sample_pos):
        assert charts_keyed(at, keys.AT_MAP) and shows(at.caption, "atlas.map.caption")
    else:
        assert shows(at.info, "atlas.map.none")
    related = "  \n".join(render("atlas.related.item", "en", layer=l, head=h,
                                 similarity=f"{s:.3f}") for l, h, s in expected.related(5, 4))
    assert any(m.value == related for m in at.markdown)

    started = heavy.default_queue().started
    link = {k: v[0] if isinstance(v, list) else v for k, v in at.query_params.items()}
    assert {k: link.get(k) for k in ("at_x", "at_y", "at_layer", "at_head")} == \
        {"at_x": X, "at_y": Y, "at_layer": "5", "at_head": "4"}
    # the learner's corpus by its hash alone: no text of it travels in the link
    assert link["at_corpus"].startswith("user:") and len(link["at_corpus"]) <= 40
    assert not any(word in value for value in link.values() for text in TEXTS
                   for word in text.split())
    again = open_page("pages/atlas.py", params=link)
    no_exceptions(again)
    assert again.session_state[keys.AT_TEXTS] == "\n\n".join(TEXTS)
    assert (again.session_state[keys.AT_LAYER], again.session_state[keys.AT_HEAD]) == (5, 4)
    assert charts_keyed(again, keys.AT_SCATTER)           # built already, on this server
    assert heavy.default_queue().started == started        # the link built nothing


def test_the_downloads_are_the_apis_table_and_an_atlas_it_loads(built, expected, monkeypatch):
    import pandas as pd

    made = record_downloads(monkeypatch)
    built.run()                                        # the atlas built already: drawn again
    no_exceptions(built)
    [table] = [f for name, f in made.items() if name.endswith(".csv")]
    [npz] = [f for name, f in made.items() if name.endswith(".npz")]
    [records] = [f for name, f in made.items() if name.endswith(".json")]
    csv = pd.read_csv(io.StringIO(table()))
    pd.testing.assert_frame_equal(csv, expected.metrics, check_exact=False, rtol=1e-12)
    # the JSON: one record a head, the CSV's columns in its order and its values (NaN as null)
    rows = json.loads(records())
    assert len(rows) == len(csv) and all(list(row) == list(csv.columns) for row in rows)
    from_json = pd.DataFrame([{c: np.nan if v is None else v for c, v in row.items()}
                              for row in rows])
    pd.testing.assert_frame_equal(from_json, csv, check_exact=True)
    loaded = HeadAtlas.load(io.BytesIO(npz()))
    np.testing.assert_array_equal(loaded.partial.counts, expected.partial.counts)
    assert loaded.maps.shape[:2] == (30, 9)
    assert loaded.top_examples(5, 4) == expected.top_examples(5, 4)


def test_a_link_to_a_corpus_not_built_brings_it_back_and_an_unknown_one_is_said():
    """The link of a corpus typed but not built: the texts come back from the server (by the
    link's hash), the Build button is offered and nothing is built. A link whose hash this
    server does not have says so and offers the bundled corpus of its language."""
    started = heavy.default_queue().started
    typed = "Another text, never built.\n\nOne more."
    first = open_page("pages/atlas.py", params={"lang": "en", "at_layer": "3"},
                      at_corpus="custom", at_texts=typed)
    no_exceptions(first)
    link = {k: v[0] if isinstance(v, list) else v for k, v in first.query_params.items()}
    assert "at_texts" not in link and "never" not in link["at_corpus"]
    at = open_page("pages/atlas.py", params=link)
    no_exceptions(at)
    assert at.session_state[keys.AT_CORPUS] == "custom"
    assert at.session_state[keys.AT_TEXTS] == typed
    assert at.session_state[keys.AT_LAYER] == 3
    assert [b.key for b in at.button if b.key == keys.AT_BUILD] == [keys.AT_BUILD]
    assert not charts_keyed(at, keys.AT_SCATTER) and not at.warning
    assert heavy.default_queue().started == started

    gone = open_page("pages/atlas.py", params={"lang": "zh", "at_corpus": "user:" + "0" * 32,
                                               "at_x": "induction"})
    no_exceptions(gone)
    with use_language("zh"):
        assert shows(gone.warning, "atlas.corpus.unknown")
    assert gone.session_state[keys.AT_CORPUS] == "zh"
    assert gone.session_state[keys.AT_X] == "induction"
    assert [b.label for b in gone.button if b.key == keys.AT_BUILD] == [
        render("atlas.build", "zh", texts=len(atlas_corpus.texts("zh")))]
    assert heavy.default_queue().started == started


def test_a_stopped_build_resumed_is_the_atlas_of_one_build(expected):
    """Stop after the first text, then Resume: the page's job merges the partial of the
    texts read with that of the texts left — the atlas of the public API's one pass."""
    from attnviz.app.atlas import atlas_view
    from attnviz.models.decoders.decoder import DecoderModel

    work = atlas_view._work(DecoderModel.load(name="smollm2"), ("resumed",), TEXTS)
    seen = []
    first = work(None, lambda done, total: seen.append((done, total)), lambda: True)
    assert (first.done, first.complete, first.maps) == (1, False, None) and seen == [(1, 2)]
    whole = work(first, lambda done, total: seen.append((done, total)), lambda: False)
    assert whole.complete and seen[-1] == (2, 2)
    want = expected.partial
    np.testing.assert_allclose(whole.partial.sums, want.sums, rtol=1e-9, atol=1e-12)
    for name in ("counts", "top_text", "top_pos", "sample_pos"):
        np.testing.assert_array_equal(getattr(whole.partial, name), getattr(want, name))
    assert whole.maps.shape[:2] == (30, 9)


def test_texts_too_short_to_read_are_said_and_offer_no_build():
    at = open_page("pages/atlas.py", params={"lang": "zh"}, at_corpus="custom",
                   at_texts="a\n\nb")
    no_exceptions(at)
    with use_language("zh"):
        assert shows(at.info, "atlas.none_read")
    assert not [b for b in at.button if b.key == keys.AT_BUILD]


def test_the_opened_heads_map_before_rope_by_position_then_its_tsne_from_the_queue(
        built, expected):
    """Heads coloured by cluster (scikit-learn's, on the public mean patterns) and one row of
    each tenth of the largest weight listed; the map before RoPE, coloured by position: the
    PCA of the unturned sample (the joint cloud and its SVD written out here); then t-SNE: asked with the button, computed by the server's
    queue, drawn with every sampled query and key; the link carries the three picks and
    computes nothing again."""
    p = expected.partial
    if not len(p.sample_pos):
        pytest.skip("no query or key sampled from these texts")
    at = built
    at.session_state[keys.AT_LAYER], at.session_state[keys.AT_HEAD] = 5, 4
    at.session_state[keys.AT_ROTATED] = False
    at.session_state[keys.AT_COLOUR] = "position"
    at.session_state[keys.AT_HEADS_COLOUR] = "cluster"
    at.run()
    no_exceptions(at)
    with use_language("en"):
        assert shows(at.caption, "atlas.map.rotated.no")
        # one row of each tenth the reservoirs hold, at its position and score
        for d in range(10):
            pos = int(p.res_pos[5, 4, d, 0])
            assert (pos >= 0) == shows(at.markdown, "atlas.deciles.item", low=f"{d / 10:.1f}",
                                       high=f"{(d + 1) / 10:.1f}", position=pos,
                                       score=f"{p.res_score[5, 4, d, 0]:.3f}")
    # the heads coloured by scikit-learn's clusters of their mean patterns (cosine, average)
    from sklearn.cluster import AgglomerativeClustering

    x = np.nan_to_num(p.mean_pattern().reshape(270, -1))
    x /= np.where(np.linalg.norm(x, axis=1, keepdims=True) > 0,
                  np.linalg.norm(x, axis=1, keepdims=True), 1)
    want_clusters = AgglomerativeClustering(n_clusters=8, metric="cosine",
                                            linkage="average").fit_predict(x)
    [scatter] = charts_keyed(at, keys.AT_SCATTER)
    where = decode(scatter["data"][0]["customdata"]).astype(int).reshape(-1, 2)
    colours = decode(scatter["data"][0]["marker"]["color"]).astype(int)
    assert colours.tolist() == want_clusters[where[:, 0] * 9 + where[:, 1]].tolist()
    [fig] = charts_keyed(at, keys.AT_MAP)
    # the joint cloud of the unturned q (head 4) and k (its key/value head: 4 // 3 of 3)
    q = p.sample_q[:, 5, 4].astype(np.float64)
    k = p.sample_k[:, 5, 4 // 3].astype(np.float64)
    k = k + q.mean(0) - k.mean(0)
    alpha = np.sqrt(np.linalg.norm(k, axis=1).mean() / np.linalg.norm(q, axis=1).mean())
    x = np.concatenate([q * alpha, k / alpha])
    x -= x.mean(0)
    _, _, vt = np.linalg.svd(x, full_matrices=False)
    want = x @ vt[:2].T
    got = np.concatenate([np.stack([decode(tr["x"]), decode(tr["y"])], 1) for tr in fig["data"]])
    np.testing.assert_allclose(np.abs(got), np.abs(want), rtol=1e-6, atol=1e-6)
    # every head at once, before RoPE as the map: head 4 of layer 5 in the cell centred at
    # (4, -5), its drawn rows (customdata: layer, head, row) those of the same SVD, scaled so
    # that the farthest is GRID_RADIUS from the centre (each axis's sign is SVD's choice)
    from attnviz.plot.atlas_figures import GRID_RADIUS

    [grid] = charts_keyed(at, keys.AT_GRID)
    assert [tr["type"] for tr in grid["data"]] == ["scattergl", "scattergl"]
    cell = []
    for trace in grid["data"]:
        data = decode(trace["customdata"]).astype(int).reshape(-1, 3)
        xy = np.stack([decode(trace["x"]), decode(trace["y"])], 1)
        assert {(l, h) for l, h, _ in data} == {(l, h) for l in range(30) for h in range(9)}
        assert max(np.bincount(data[:, 0] * 9 + data[:, 1])) <= 30     # ≤ 60 a head in all
        mine = (data[:, 0] == 5) & (data[:, 1] == 4)
        cell.append((data[mine, 2], xy[mine] - [4, -5]))
    rows = np.concatenate([r for r, _ in cell])
    drawn = np.concatenate([xy for _, xy in cell])
    np.testing.assert_allclose(np.abs(drawn), np.abs(want[rows]) * GRID_RADIUS
                               / np.abs(want[rows]).max(), rtol=1e-5, atol=1e-5)
    assert sorted(rows[rows >= len(p.sample_pos)] - len(p.sample_pos)) == \
        sorted(rows[rows < len(p.sample_pos)])               # the same positions' keys
    for trace in fig["data"]:
        assert decode(trace["marker"]["color"]).astype(int).tolist() == p.sample_pos.tolist()
        # hover: each point's text (the texts are shorter than the hover's 60 characters)
        assert trace["hovertext"] == [p.corpus[np.uint64(i)] for i in p.sample_text]
        assert max(map(len, TEXTS)) <= 60

    # coloured by token: the sample's 10 most frequent tokens (ties in code-point order), each
    # its trace, spaces and line breaks written ␣ and ↵; the others grey, last
    from collections import Counter

    def written(token: str) -> str:
        core = token.strip(" ")
        lead = len(token) - len(token.lstrip(" "))
        return ("␣" * lead + core + "␣" * (len(token) - lead - len(core)) if core
                else "␣" * len(token)).replace("\n", "↵")

    at.session_state[keys.AT_COLOUR] = "token"
    at.run()
    no_exceptions(at)
    counts = Counter(written(str(s)) for s in p.sample_token)
    top = [name for name, _ in sorted(counts.items(), key=lambda c: (-c[1], c[0]))[:10]]
    [fig] = charts_keyed(at, keys.AT_MAP)
    names = [tr["name"] for tr in fig["data"]]
    assert names == top + ([render("figure.atlas.map.other_tokens", "en")]
                           if len(counts) > 10 else [])
    assert sum(len(decode(tr["x"])) for tr in fig["data"]) == 2 * len(p.sample_pos)
    assert shows(at.caption, "atlas.map.colour.token_caption", tokens=len(top))
    at.session_state[keys.AT_COLOUR] = "position"

    at.session_state[keys.AT_METHOD] = "tsne"
    at.run()
    no_exceptions(at)
    assert not charts_keyed(at, keys.AT_MAP)             # nothing until asked
    press_and_await_the_queue(at, keys.AT_TSNE_RUN)
    [fig] = charts_keyed(at, keys.AT_MAP)
    xy = np.concatenate([np.stack([decode(tr["x"]), decode(tr["y"])], 1) for tr in fig["data"]])
    assert xy.shape == (2 * len(p.sample_pos), 2) and np.isfinite(xy).all()
    assert render("figure.atlas.map.title", "en", layer=5, head=4, method="t-SNE") in \
        fig["layout"]["title"]["text"]

    started = heavy.default_queue().started
    link = {k: v[0] if isinstance(v, list) else v for k, v in at.query_params.items()}
    assert {k: link.get(k) for k in ("at_method", "at_colour", "at_rotated",
                                     "at_heads_colour")} == \
        {"at_method": "tsne", "at_colour": "position", "at_rotated": "0",
         "at_heads_colour": "cluster"}
    again = open_page("pages/atlas.py", params=link)
    no_exceptions(again)
    [fig_again] = charts_keyed(again, keys.AT_MAP)       # kept for every learner: drawn at once
    assert [again.session_state[k] for k in (keys.AT_METHOD, keys.AT_COLOUR, keys.AT_ROTATED,
                                              keys.AT_HEADS_COLOUR)] == \
        ["tsne", "position", False, "cluster"]
    assert fig_again["data"][0]["x"] == fig["data"][0]["x"]
    assert heavy.default_queue().started == started
    # a click on a point of the grid's cell of head 1 of layer 2 opens that head
    clicked = click_points(again, keys.AT_GRID, [{"x": 1, "y": -2, "curve_number": 0,
                                                   "point_index": 0, "customdata": [2, 1, 0]}])
    assert (clicked.session_state[keys.AT_LAYER], clicked.session_state[keys.AT_HEAD]) == (2, 1)


def test_each_top_example_opens_its_text_on_step_by_step_at_its_layer_and_head(built, expected):
    """Each top example's button (and each decile's line) links to Step by step with the
    sidebar's model, the example's text up to its query (a start of it, read to position + 1
    tokens), the layer and the head; the link opened shows that head's weights on that layer,
    the query's row the last, its largest weight the example's score."""
    from urllib.parse import parse_qsl, urlsplit

    at = built
    at.session_state[keys.AT_LAYER], at.session_state[keys.AT_HEAD] = 5, 4
    at.run()
    no_exceptions(at)
    top = expected.top_examples(5, 4, k=5)
    urls = [b.proto.url for b in at.get("link_button")]
    assert len(urls) == len(top)
    decile_lines = [m.value for m in at.markdown if "](steps?" in m.value]
    assert decile_lines                                   # the deciles' lines link there too
    for url, (text, position, score) in zip(urls, top):
        where = urlsplit(url)
        link = dict(parse_qsl(where.query))
        assert where.path == "steps"
        assert {k: link[k] for k in ("mode", "model", "layer", "head", "max_tokens")} == {
            "mode": "Pretrained model", "model": "smollm2", "layer": "5", "head": "4",
            "max_tokens": str(position + 1)}
        assert text.startswith(link["sentence"]) and link["sentence"]
    text, position, score = top[0]
    link = dict(parse_qsl(urlsplit(urls[0]).query))
    steps = open_page("pages/steps.py", params=link)
    no_exceptions(steps)
    assert [steps.session_state[k] for k in ("mode", "model", "layer", keys.HEAD, keys.STEP)] \
        == ["Pretrained model", "smollm2", 5, 4, "weights"]
    [fig] = charts_keyed(steps, keys.STEP_MAP("weights"))
    z = decode(fig["data"][0]["z"]).reshape(position + 1, position + 1)
    assert abs(float(np.nanmax(z[-1])) - score) < 1e-5 and abs(float(np.nansum(z[-1])) - 1) < 1e-5
