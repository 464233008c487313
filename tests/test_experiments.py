"""The Experiments: each computation proves its point, and the page shows the proof."""

import json
import math

import numpy as np
import pytest

import attnviz
from attnviz.i18n import t
from attnviz.tutorials import experiments
from tests.apptest_helpers import (Runs, charts, decode, heatmap_z, no_exceptions, open_page,
                                   shows, titled)

W = attnviz.MultiHeadWeights.random(16, 2, seed=1)
TOKENS = attnviz.tokenize("the quick brown fox jumps over the lazy dog")


@pytest.mark.slow
@pytest.mark.parametrize("d_k", [1, 16, 64, 512])
def test_dot_product_variance_grows_as_d_k(d_k):
    r = experiments.scaling(d_k)
    assert r.variance == pytest.approx(d_k, rel=0.1)
    assert r.scaled_variance == pytest.approx(1.0, rel=0.1)


@pytest.mark.slow
def test_scaling_keeps_softmax_from_saturating():
    r = experiments.scaling(512, seed=3)
    assert r.row_unscaled.max() > 0.99            # one key takes nearly everything
    assert r.row_scaled.max() < r.row_unscaled.max()
    assert r.entropy(r.row_scaled) > r.entropy(r.row_unscaled)
    assert r.entropy(np.full(8, 1 / 8)) == pytest.approx(3.0)


def test_tied_scores_are_symmetric_and_separate_ones_are_not():
    x = np.random.default_rng(0).random((5, 10))
    r = experiments.tied_vs_separate(x, d_k=8)
    assert r.asymmetry(r.tied) < 1e-12
    assert r.asymmetry(r.separate) > 1e-3


def test_raw_self_attention_is_softmax_of_x_xt_times_x():
    x = np.array([[1.0, 0], [0, 1], [1, 1]])
    t = experiments.raw_self_attention(x)
    e = np.exp(x @ x.T)
    np.testing.assert_allclose(t.output, (e / e.sum(1, keepdims=True)) @ x)


def test_shuffling_only_moves_rows_without_positions_and_changes_them_with():
    r = experiments.word_order(TOKENS, W, shuffle_seed=2)
    assert sorted(r.shuffled_tokens) == sorted(TOKENS) and r.shuffled_tokens != TOKENS
    # independent check: the row of each token, looked up by where it went
    for new_pos, old_pos in enumerate(r.order):
        np.testing.assert_allclose(r.plain_shuffled.output[new_pos], r.plain.output[old_pos],
                                   atol=1e-12)
    assert r.plain_difference < 1e-12
    assert r.encoded_difference > 1e-3


def test_padding_is_masked_and_long_sentences_are_cut():
    r = experiments.pad_and_mask(TOKENS[:4], 7, W)
    assert r.tokens[4:] == ["[PAD]"] * 3
    assert (r.trace.weights[:, :, 4:] == 0).all()
    np.testing.assert_allclose(r.trace.weights.sum(-1), 1.0)
    cut = experiments.pad_and_mask(TOKENS, 5, W, causal=True)
    assert cut.truncated == len(TOKENS) - 5 and cut.tokens == TOKENS[:5]
    assert (cut.trace.weights[0][np.triu(np.ones((5, 5), bool), 1)] == 0).all()


def test_cross_attention_is_queries_by_keys():
    t = experiments.cross_attention(["a", "b", "c"], ["x", "y"], W)
    assert t.weights.shape == (2, 3, 2)
    np.testing.assert_allclose(t.k[0], attnviz.embed_tokens(["x", "y"], 16) @ W.w_k[0])


def test_scaling_after_softmax_breaks_the_row_sums():
    t = attnviz.trace_attention(attnviz.embed_tokens(TOKENS, 16), W)
    r = experiments.scale_after_softmax(t)
    np.testing.assert_allclose(r.correct.sum(1), 1.0)
    np.testing.assert_allclose(r.buggy.sum(1), 1 / math.sqrt(8))
    np.testing.assert_allclose(r.correct, t.weights[0])


# ---- the page ------------------------------------------------------------------------------------

def metrics(at) -> dict[str, str]:
    """The page's metrics, label → value."""
    return {m.label: m.value for m in at.metric}


def metric(at_or_metrics, msg_id: str, /, **params) -> str:
    """The value of the metric labelled with the message `msg_id`."""
    found = metrics(at_or_metrics) if not isinstance(at_or_metrics, dict) else at_or_metrics
    return found[t(msg_id, **params)]


def tied(kind: str) -> dict:
    """The parameters of experiments.tied.asymmetry for W_Q and W_K `kind` (tied, separate)."""
    return dict(name=t(f"experiments.tied.{kind}"))


def open_tab(tab: str, **state):
    """The Experiments page with the tab whose label is message `tab` open (only the open tab
    is computed and drawn), in a run of its own (for a test that sets its widgets)."""
    return open_page("pages/experiments.py", experiment=t(tab), **state)


@pytest.fixture(scope="module")
def tab_run():
    """The Experiments page with one tab open, one run per tab shared by the tests that only
    read it."""
    runs = Runs()
    return lambda tab: runs("pages/experiments.py", experiment=t(tab))


# the tabs by their labels' message ids (a tab's state is its label)
SCALING, TIED, RAW, ORDER, MASKS, CROSS, BUG = TABS = tuple(
    f"experiments.tab.{tab}" for tab in ("scaling", "tied", "raw", "order", "masks", "cross",
                                         "bug"))


@pytest.mark.slow
def test_page_shows_each_experiments_proof(tab_run):
    m = {}
    for tab in TABS:
        at = tab_run(tab)
        assert charts(at), tab
        m.update(metrics(at))
    assert float(metric(m, "experiments.scaling.variance")) == pytest.approx(64, rel=0.1)
    assert float(metric(m, "experiments.tied.asymmetry", **tied("tied"))) == 0
    assert float(metric(m, "experiments.tied.asymmetry", **tied("separate"))) > 0
    assert float(metric(m, "experiments.order.plain")) < 1e-9
    assert float(metric(m, "experiments.order.encoded")) > 1e-3
    assert float(metric(m, "experiments.masks.largest")) == 0
    assert float(metric(m, "experiments.bug.correct")) == pytest.approx(1)
    assert float(metric(m, "experiments.bug.buggy")) == pytest.approx(0.5, abs=1e-4)


@pytest.mark.slow
def test_only_the_open_tab_is_drawn(tab_run):
    assert set(metrics(tab_run(MASKS))) == {t("experiments.masks.largest")}


@pytest.mark.slow
def test_page_variance_follows_the_d_k_slider():
    at = open_tab(SCALING)
    at.slider(key="exp_dk").set_value(400).run()
    assert float(metric(at, "experiments.scaling.variance")) == pytest.approx(400, rel=0.1)


def test_page_masks_give_exact_zero_weights_on_pads():
    at = open_tab(MASKS, sentence="one two three")
    at.number_input(key="exp_len").set_value(6).run()
    table = next(d.value for d in at.dataframe if "[PAD] (6)" in list(d.value.columns))
    assert table.shape == (6, 6)
    assert (table.iloc[:, 3:].to_numpy() == 0).all()
    np.testing.assert_allclose(table.to_numpy().sum(1), 1.0)
    fig = titled(at, "experiments.masks.weights")
    shown = heatmap_z(fig)
    assert np.isnan(shown[:, 3:]).all() and not np.isnan(shown[:, :3]).any()  # masked: grey
    assert fig["data"][1]["name"] == "masked"


@pytest.mark.slow
def test_page_cross_attention_is_not_square_and_labelled():
    at = open_tab(CROSS, sentence="the cat sat")
    at.text_input(key="exp_cross_text").input("le chat").run()
    fig = titled(at, "experiments.cross.title", queries=3, keys=2)
    assert heatmap_z(fig).shape == (3, 2)
    assert "chat" in str(fig["data"][0]["x"]) and "cat" in str(fig["data"][0]["y"])


def formula(at, start: str) -> dict:
    """The one chart whose title, a formula no language translates, starts with `start`."""
    found = [f for f in charts(at) if str(f["layout"].get("title", {}).get("text", ""))
             .startswith(start)]
    assert len(found) == 1, (start, [f["layout"].get("title") for f in charts(at)])
    return found[0]


def softmax(s):
    e = np.exp(s - s.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


NEEDS_WEIGHTS = {ORDER: "experiments.order.needs", MASKS: "experiments.masks.needs",
                 CROSS: "experiments.cross.needs"}


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["Preset", "Q, K, V", "Matrix X", "Pretrained model"])
@pytest.mark.parametrize("tab", TABS)
def test_every_tab_runs_on_other_inputs(mode, tab):
    """Each tab shows its proof on every kind of input — checked here against the tutorial's
    numbers or numpy — or, with Q, K, V entered (no X, no weights), says what it needs."""
    from attnviz.session.build import build_view
    from attnviz.session.settings import Settings

    at = open_tab(tab, mode=mode)
    no_exceptions(at)
    assert not at.error
    m = metrics(at)
    if mode == "Q, K, V" and tab in NEEDS_WEIGHTS:
        assert shows(at.info, NEEDS_WEIGHTS[tab]), [i.value for i in at.info]
        assert not charts(at)
        return
    if tab == SCALING:                          # the same experiment whatever the input
        assert metric(m, "experiments.scaling.theory") == "64"
        assert float(metric(m, "experiments.scaling.variance")) == pytest.approx(64, rel=0.1)
        assert float(metric(m, "experiments.scaling.scaled_variance")) == \
            pytest.approx(1, rel=0.1)
    elif tab == TIED:                           # tutorial 004's X until "your input X"
        assert float(metric(m, "experiments.tied.asymmetry", **tied("tied"))) <= 1e-12
        assert float(metric(m, "experiments.tied.asymmetry", **tied("separate"))) > 1e-3
    elif tab == RAW:                            # tutorial 001's 早上好 until "your input X"
        x = attnviz.load_preset("zao_shang_hao").x
        np.testing.assert_allclose(heatmap_z(formula(at, "X Xᵀ")), x @ x.T, rtol=1e-12)
        np.testing.assert_allclose(heatmap_z(formula(at, "softmax(X Xᵀ)")), softmax(x @ x.T),
                                   rtol=1e-9)
    elif tab == ORDER:
        assert float(metric(m, "experiments.order.plain")) < 1e-9
        assert float(metric(m, "experiments.order.encoded")) > 1e-3
    elif tab == MASKS:                          # padded by 3: the last 3 keys are [PAD]
        assert metric(m, "experiments.masks.largest") == "0.0"
        shown = heatmap_z(titled(at, "experiments.masks.weights"))
        assert np.isnan(shown[:, -3:]).all() and not np.isnan(shown[:, :-3]).any()
        np.testing.assert_allclose(np.nansum(shown, axis=1), 1.0, rtol=1e-6)
    elif tab == CROSS:                          # keys: "Le chat est assis", 4 tokens
        shown = heatmap_z(titled(at, "experiments.cross.title", keys=4))
        assert shown.shape[1] == 4
        np.testing.assert_allclose(shown.sum(axis=1), 1.0, rtol=1e-6)
    else:                                       # the bug: rows sum to 1/√d_k, not 1
        d_k = build_view(Settings(mode=mode)).trace.d_k
        assert metric(m, "experiments.bug.correct") == "1.0000"
        assert metric(m, "experiments.bug.buggy") == f"{1 / math.sqrt(d_k):.4f}"


@pytest.mark.slow
def test_the_histogram_sends_its_counts_not_every_sample():
    """80 bars per histogram, each counting what np.histogram counts on the raw samples; the
    page's √d_k tab used to send all 20,000 samples twice (253 KB, the same for every learner)."""
    at = open_tab(SCALING)
    at.slider(key="exp_dk").set_value(16).run()
    hist = next(c for c in at.get("plotly_chart") if "dot products" in c.proto.spec)
    fig = json.loads(hist.proto.spec)
    rng = np.random.default_rng(0)                             # the experiment's own recipe
    q, k = rng.standard_normal((20_000, 16)), rng.standard_normal((20_000, 16))
    dots = (q * k).sum(axis=1)
    for bars, values in zip(fig["data"][:2], (dots, dots / 4)):
        expected, edges = np.histogram(values, bins=80)
        np.testing.assert_array_equal(decode(bars["y"]), expected)
        np.testing.assert_allclose(decode(bars["x"]), (edges[:-1] + edges[1:]) / 2, rtol=1e-9)
    assert len(hist.proto.spec) < 30_000


def test_on_the_scaling_tab_one_colour_means_unscaled_and_another_scaled_everywhere(tab_run):
    """Issue 18 item 11: the histogram drew q·k in red and the softmax bars drew the scaled row
    in red (the theme's second colour). Every trace of the tab is named by what it shows; its
    colour must follow whether it is scaled (the name divides by √d_k) or not."""
    at = tab_run(SCALING)
    colours = {"scaled": set(), "unscaled": set()}
    traces = [tr for fig in charts(at) for tr in fig["data"]]
    assert len(traces) == 4                          # two histograms, two rows of bars
    for tr in traces:
        colour = tr.get("marker", {}).get("color")
        assert isinstance(colour, str), (tr["name"], colour)   # set, not left to the theme
        colours["scaled" if "√d_k" in tr["name"] else "unscaled"].add(colour.lower())
    assert len(colours["unscaled"]) == 1 and len(colours["scaled"]) == 1, colours
    assert colours["unscaled"] != colours["scaled"]
    table = at.table[0].value
    unscaled_row, scaled_row = t("experiments.scaling.without"), t("experiments.scaling.with")
    assert list(table.index) == [unscaled_row, scaled_row]
    assert "red" in unscaled_row and "blue" in scaled_row        # the table's words agree
    assert colours == {"unscaled": {"#d62728"}, "scaled": {"#1f77b4"}}     # red, blue
