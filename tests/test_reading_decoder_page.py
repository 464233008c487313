"""The Read the model page on SmolLM2 (issue 22), in AppTest: each view with the decoder chosen
(``model`` = "smollm2" in the session, as the sidebar's selector sets it), its numbers computed
here from the model's run (itself held to transformers in test_decoder.py) with loops and torch,
never with the page's own helpers; and each view in Chinese."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from attnviz.i18n import t, use_language
from attnviz.models.decoders import decoder_reading
from tests.apptest_helpers import (Runs, click_points, decode, heatmap_z, no_exceptions,
                                   open_page, shown_tokens, shows, titled)
from tests.i18n_walker import english_sentences, visible_texts

pytestmark = pytest.mark.slow        # each test runs pages or processes: see tests/conftest.py

PAGE = "pages/reading.py"
TEXT = "The animal didn't cross the street because it was too tired"


@pytest.fixture(scope="module")
def run(decoder):
    return decoder.run(TEXT)


def decoder_page(**state):
    at = open_page(PAGE, model="smollm2", sentence=TEXT, **state)
    assert not at.error
    return at


@pytest.fixture(scope="module")
def shared():
    """The page on SmolLM2 and TEXT, one run per state shared by the tests that only read it."""
    runs = Runs()

    def page(**state):
        at = runs(PAGE, model="smollm2", sentence=TEXT, **state)
        assert not at.error
        return at
    return page


def frame_with(at, column: str) -> pd.DataFrame:
    return next(d.value for d in at.dataframe if column in d.value.columns)


def metric(at, msg_id: str) -> str:
    """The value of the metric labelled with the message `msg_id`."""
    return next(m.value for m in at.metric if m.label == t(msg_id))


def lens_row(kind: str, layer: int | None = None) -> str:
    """A logit lens row's name: reading.lens.row.<kind> (embeddings, attention, layer)."""
    return t(f"reading.lens.row.{kind}", **({} if layer is None else {"layer": layer}))


LENS_TAB = t("reading.tab.lens")            # a tab is seeded by its label


def test_the_page_reads_smollm2_when_the_sidebar_chose_it(run):
    at = decoder_page(rd_view=t("reading.tab.rollout"))
    assert "SmolLM2-135M-Instruct" in at.caption[0].value
    assert "270" in at.caption[0].value
    line = next(m.value for m in at.markdown if "`" in m.value)
    for token in run.tokens:                     # a space at either end written ␣ (34.8)
        core = token.strip(" ")
        assert "␣" * (len(token) - len(token.lstrip(" "))) + core in line
    minilm = open_page(PAGE, sentence=TEXT, rd_view=t("reading.tab.rollout"))
    assert "all-MiniLM-L6-v2" in minilm.caption[0].value


@pytest.mark.reference
def test_rollout_is_causal_and_is_the_product_of_the_layers(torch, run):
    at = decoder_page(rd_view=t("reading.tab.rollout"), ro_layer=29, ro_token=8)
    shown = heatmap_z(titled(at, "reading.rollout.title", layer=29))
    n = len(run.ids)
    a = torch.tensor(run.attentions, dtype=torch.float64).mean(dim=1)     # (30, n, n)
    mixed = 0.5 * a + 0.5 * torch.eye(n, dtype=torch.float64)
    mixed = mixed / mixed.sum(-1, keepdim=True)
    expected = mixed[0]
    for layer in range(1, 30):
        expected = mixed[layer] @ expected
    np.testing.assert_allclose(shown, expected.numpy(), atol=1e-5)
    assert np.abs(np.triu(shown, k=1)).max() == 0 and np.allclose(shown.sum(-1), 1, atol=1e-5)
    bars = decode(titled(at, "reading.rollout.row_title", token=8,
                         layer=29)["data"][0]["y"])
    np.testing.assert_allclose(bars, expected.numpy()[8], atol=1e-5)
    assert bars[9:].max() == 0                # row 8 holds nothing of a later token


def test_value_weighted_shows_the_runs_value_norms_and_the_first_tokens_share(decoder, run,
                                                                            shared):
    from attnviz.session.decoder_runs import cached_decoder_run

    at = shared(rd_view=t("reading.tab.value"), vw_layer=4, vw_head=7)
    # the page read the session's shared run (the Pretrained model page's), its norms made on it
    assert "value_norms" in vars(cached_decoder_run(TEXT, 64, decoder))
    np.testing.assert_allclose(heatmap_z(titled(at, "reading.value.norms_title", layer=4, head=7)),
                               run.value_norms[4, 7], rtol=1e-6)
    np.testing.assert_array_equal(heatmap_z(titled(at, "reading.value.weights_title", layer=4,
                                                   head=7)),
                                  run.attentions[4, 7])
    table = frame_with(at, "share of weight").set_index("keys")
    a, v = run.attentions[4, 7].astype(float), run.value_norms[4, 7].astype(float)
    first = table.loc[t("reading.value.group.first", token=run.tokens[0])]
    assert first["share of weight"] == pytest.approx(a[:, 0].sum() / a.sum())
    assert first["share of ‖αf(x)‖"] == pytest.approx(v[:, 0].sum() / v.sum())
    assert table["share of weight"].sum() == pytest.approx(1)        # the groups: every key


def test_a_group_of_keys_the_text_lacks_shows_a_dash_not_none(run, shared):
    # issue 27, item 7: the text has no punctuation token, so that group holds no key and
    # takes no weight: there is no ratio to show, and the table said "None"
    assert all(any(c.isalnum() for c in token) for token in run.tokens)
    at = shared(rd_view=t("reading.tab.value"), vw_layer=4, vw_head=7)
    table = frame_with(at, "share of weight").set_index("keys")
    assert not table.isna().any().any(), table                # nothing drawn as "None"
    empty = table.loc[t("reading.value.group.punctuation")]
    assert empty["count"] == 0 and empty["share of weight"] == 0
    assert empty["survives"] == "—"
    a, v = run.attentions[4, 7].astype(float), run.value_norms[4, 7].astype(float)
    ratio = (v[:, 0].sum() / v.sum()) / (a[:, 0].sum() / a.sum())
    assert table.loc[t("reading.value.group.first", token=run.tokens[0]), "survives"] == \
        f"{ratio:.3f}"
    said = t("reading.value.survives_none", none="—")          # what the dash means
    assert any(said in c.value for c in at.caption)


def test_head_statistics_have_the_sink_and_the_head_detectors_scores(decoder, run):
    at = decoder_page(rd_view=t("reading.tab.stats"), hs_column="induction")
    table = frame_with(at, "induction")
    assert len(table) == 270
    a = run.attentions.astype(float)
    np.testing.assert_allclose(table["sink"].to_numpy().reshape(30, 9),
                               a[..., 0].mean(axis=-1), atol=1e-6)
    text, ids = decoder_reading.repeated_random_text(decoder)
    r = decoder.run(text)
    n, half = len(ids), len(ids) // 2
    # induction by hand: in the second half, query i should look at i − half + 1
    induction = table["induction"].to_numpy().reshape(30, 9)
    layer, head = np.unravel_index(induction.argmax(), induction.shape)
    by_hand = sum(float(r.attentions[layer, head, i, i - half + 1])
                  for i in range(half, n)) / n
    assert induction[layer, head] == pytest.approx(by_hand, abs=1e-6)
    assert induction.max() > 0.2
    np.testing.assert_allclose(heatmap_z(titled(at, "reading.stats.induction")), induction)
    prev = table["previous_token"].to_numpy().reshape(30, 9)
    by_hand = sum(float(r.attentions[2, 3, i, i - 1]) for i in range(1, n)) / n
    assert prev[2, 3] == pytest.approx(by_hand, abs=1e-6)
    assert at.button(key="pt_step_through").label == t("pretrained.step_through.label")


@pytest.mark.reference
def test_heads_off_change_the_next_tokens_log_probability(torch, decoder, run):
    at = decoder_page(rd_view=t("reading.tab.ablation"))
    probs = torch.softmax(torch.tensor(run.logits[-1], dtype=torch.float64), -1)
    top = int(probs.argmax())
    assert at.selectbox(key="ab_target").value == top
    assert float(metric(at, "reading.decoder_ablation.full.label")) == pytest.approx(
        float(torch.log(probs[top])), abs=1e-4)
    at.text_input(key="ab_heads").input("L3H2, L20H5").run()
    no_exceptions(at)
    mask = np.ones((30, 9))
    mask[3, 2] = mask[20, 5] = 0
    expected = decoder.next_token_logprobs(TEXT, head_mask=mask)[top]   # the run's own path
    assert float(metric(at, "reading.decoder_ablation.off.label")) == \
        pytest.approx(expected, abs=1e-4)


def test_ranking_every_head_is_each_head_removed_alone(decoder, run):
    from attnviz.models import heavy

    at = decoder_page(rd_view=t("reading.tab.ablation"))
    at.button(key="ab_rank").click().run()           # on the server's queue: the page goes on
    assert heavy.default_queue().wait_idle(1200)     # 270 heads: minutes on a busy machine
    at.run()
    no_exceptions(at)
    top = frame_with(at, "change")
    assert len(top) == 10 and (np.diff(top["change"].to_numpy()) >= 0).all()
    target = int(np.argmax(run.logits[-1]))
    full = decoder.next_token_logprobs(TEXT)[target]
    for _, row in top.head(2).iterrows():
        mask = np.ones((30, 9))
        mask[int(row["layer"]), int(row["head"])] = 0
        alone = decoder.next_token_logprobs(TEXT, head_mask=mask)[target]
        assert row["change"] == pytest.approx(alone - full, abs=1e-4)
    change = heatmap_z(titled(at, "reading.decoder_ranking.map_title"))
    assert change.shape == (30, 9)
    assert change[int(top["layer"][0]), int(top["head"][0])] == pytest.approx(
        top["change"][0], abs=1e-6)
    again = decoder_page(rd_view=t("reading.tab.ablation"))               # computed once for every learner
    assert len(frame_with(again, "change")) == 10


def test_a_ranking_under_way_leaves_the_page_usable_and_stops_when_nobody_waits(monkeypatch):
    """The press puts the ranking on the server's queue (a link or a rerun never does): the
    page shows its progress with Stop; Stop ends the job (nobody else waits), says so, and
    offers the button again."""
    import threading
    import time

    from attnviz.models import heavy

    queue = heavy.HeavyQueue(workers=1)
    monkeypatch.setattr(heavy, "default_queue", lambda: queue)
    layers_done, ended = [], threading.Event()

    def slowly(model, run, targets, on_progress=None):     # a layer every 20 ms, until stopped
        try:
            for layer in range(10_000):
                time.sleep(0.02)
                layers_done.append(layer)
                on_progress(min(layer + 1, 29), 30)
        finally:
            ended.set()

    monkeypatch.setattr(decoder_reading, "single_head_logprobs", slowly)
    at = open_page(PAGE, model="smollm2", sentence="A ranking stopped half way", rd_view=t("reading.tab.ablation"))
    assert queue.started == 0 and not layers_done
    at.button(key="ab_rank").click().run()
    no_exceptions(at)
    assert [b.key for b in at.button if b.key == "ab_rank_stop"]
    assert shows(at.caption, "reading.decoder_ranking.other_tabs")
    at.button(key="ab_rank_stop").click().run()
    assert ended.wait(10) and queue.wait_idle(10) and queue.started == 1
    assert shows(at.info, "reading.decoder_ranking.stopped")
    assert [b.key for b in at.button if b.key == "ab_rank"] and not frame_has(at, "change")


def frame_has(at, column: str) -> bool:
    return any(column in d.value.columns for d in at.dataframe)


TABS = [f"reading.tab.{tab}" for tab in ("rollout", "value", "stats", "ablation", "lens")]


@pytest.mark.parametrize("tab", TABS)
def test_each_decoder_view_in_chinese_has_no_english_sentence(tab, shared):
    with use_language("zh"):
        labels = [t(msg_id) for msg_id in TABS]
    at = shared(lang="zh", rd_view=labels[TABS.index(tab)])
    texts = visible_texts(at)
    assert any(text.where.startswith("chart") for text in texts)
    assert english_sentences(texts, ignore=shown_tokens(at)) == []
    assert [shown.label for shown in at.tabs] == labels


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_an_empty_sentence_says_so_in_the_readers_language(lang):
    at = open_page(PAGE, model="smollm2", sentence="", lang=lang)
    no_exceptions(at)
    with use_language(lang):
        assert shows(at.info, "reading.empty_decoder", model="SmolLM2-135M-Instruct")
    assert not at.error and not at.tabs


@pytest.mark.parametrize("typed, off", [
    ("L3H2", [(3, 2)]),                                  # not also L13H2 and L23H2
    ("L0", [(0, h) for h in range(9)]),                  # layer 0 only, not 10 and 20
    ("L*H8, L29H0", [(l, 8) for l in range(30)] + [(29, 0)]),
])
def test_typed_heads_switch_off_exactly_those_heads(typed, off):
    """Issue 27.6: typing "L3H2" and Enter switched off L3H2, L13H2 and L23H2 (a search's
    "select 3 matches"); the page reads what was typed exactly, and its map shows it."""
    at = decoder_page(rd_view=t("reading.tab.ablation"))
    at.text_input(key="ab_heads").input(typed).run()
    no_exceptions(at)
    assert not at.error
    expected = np.ones((30, 9))
    for layer, head in off:
        expected[layer, head] = 0
    np.testing.assert_array_equal(heatmap_z(titled(at, "reading.ablation.map.title")), expected)


def test_a_typed_item_that_is_no_head_is_named_and_nothing_is_switched_off():
    at = decoder_page(rd_view=t("reading.tab.ablation"))
    at.text_input(key="ab_heads").input("L3H2, L40H1").run()
    no_exceptions(at)
    assert [e.value for e in at.error] and "L40H1" in at.error[0].value
    np.testing.assert_array_equal(heatmap_z(titled(at, "reading.ablation.map.title")),
                                  np.ones((30, 9)))


def test_the_ablation_maps_axis_titles_stand_off_their_labels(shared):
    # issue 27.13: "层" (zh), a rotated title, touched the layers' tick labels; plotly moves a
    # title off its labels by title.standoff only where the axis grows its margin (automargin)
    with use_language("zh"):
        at = shared(lang="zh", rd_view=t("reading.tab.ablation"))
        fig = titled(at, "reading.ablation.map.title")
        assert fig["layout"]["yaxis"]["title"]["text"] == t("figure.axis.layer")
    for axis in ("xaxis", "yaxis"):
        layout = fig["layout"][axis]
        assert layout["automargin"] is True
        assert layout["title"]["standoff"] > 0


# ---- the logit lens (issue 28.1) ----------------------------------------------------------------

LENS_TEXT = "The Eiffel Tower is in the city of"


def test_the_logit_lens_grid_ends_in_the_models_own_next_tokens(decoder):
    """Each cell writes the lens's top token; the top row is the model's own next token at
    every position (argmax of run.logits, the model's output held to transformers in
    test_decoder.py), its colour that token's probability; the rank line ends at 1."""
    from attnviz.describe.labels import token_shown

    run = decoder.run(LENS_TEXT)
    at = open_page(PAGE, model="smollm2", sentence=LENS_TEXT, rd_view=LENS_TAB)
    no_exceptions(at)
    assert not at.error
    assert LENS_TAB in [tab.label for tab in at.tabs]
    assert shows(at.caption, "reading.lens.same")      # the same lens as Trace the answer's
    grid = titled(at, "reading.lens.grid_title")
    cells = grid["data"][0]
    z = heatmap_z(grid)                                        # (rows, n)
    assert z.shape == (decoder.num_layers + 1, len(run.ids))
    logits = run.logits.astype(np.float64)
    probs = np.exp(logits - logits.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    best = probs.argmax(-1)
    expected = [token_shown(decoder.piece_after(run.ids[:i + 1], int(j)))
                for i, j in enumerate(best)]
    cut = [e if len(e) <= 6 else e[:5] + "…" for e in expected]   # a cell holds 6 characters
    assert cells["text"][-1] == cut                            # the last row: the model's
    assert expected[-1] == "␣Paris"
    np.testing.assert_allclose(z[-1], probs[np.arange(len(best)), best], atol=1e-6)
    assert cells["y"][0] == lens_row("embeddings") and cells["y"][-1] == lens_row("layer", 29)
    rank = titled(at, "reading.lens.rank_title", token="␣Paris", position=8)
    assert decode(rank["data"][0]["y"])[-1] == 1
    bars = titled(at, "reading.lens.bars_title", position=8)
    np.testing.assert_allclose(decode(bars["data"][0]["x"])[0], probs[-1, best[-1]], atol=1e-6)


def test_the_logit_lens_after_each_attention_sublayer(decoder):
    at = open_page(PAGE, model="smollm2", sentence=LENS_TEXT, rd_view=LENS_TAB,
                   lens_sublayers=True)
    no_exceptions(at)
    assert not at.error
    rows = titled(at, "reading.lens.grid_title")["data"][0]["y"]
    assert len(rows) == 2 * decoder.num_layers + 1
    assert rows[:3] == [lens_row("embeddings"), lens_row("attention", 0), lens_row("layer", 0)]


def test_the_logit_lens_coloured_by_the_models_answer(torch, hf_decoder, decoder):
    """Coloured by the answer: each cell is the probability of the position's final top token
    at that layer, as transformers' norm and lm_head give it on its hidden states."""
    model, _ = hf_decoder
    at = open_page(PAGE, model="smollm2", sentence=LENS_TEXT, rd_view=LENS_TAB,
                   lens_colour="target")
    no_exceptions(at)
    assert not at.error
    z = heatmap_z(titled(at, "reading.lens.grid_title"))       # (L + 1, n)
    ids = decoder.encode(LENS_TEXT)
    with torch.no_grad():
        hidden = model(torch.tensor([ids.tolist()]), output_hidden_states=True).hidden_states
        logits = torch.stack([model.lm_head(model.model.norm(h) if i < len(hidden) - 1 else h)[0]
                              for i, h in enumerate(hidden)])           # (L + 1, n, vocab)
        probs = torch.softmax(logits.double(), -1).numpy()
    answer = probs[-1].argmax(-1)                                     # (n,)
    np.testing.assert_allclose(z, probs[:, np.arange(len(ids)), answer], atol=1e-3)
    assert z[-1].min() > 0 and (z[0] < 1e-3).sum() > 0                # answers rise, layer by layer


def _click_cell(at, row: int, position: int) -> None:
    """A click on the lens grid's cell (row, position), as the browser reports it: the cell's
    marker (the second trace: heatmap cells answer no click), its x and y as drawn."""
    grid, marks = titled(at, "reading.lens.grid_title")["data"][:2]
    point = row * len(grid["x"]) + position
    assert (marks["x"][point], marks["y"][point]) == (grid["x"][position], grid["y"][row])
    click_points(at, "lens_grid", [{"x": marks["x"][point], "y": marks["y"][point],
                                    "curve_number": 1, "point_number": point,
                                    "point_index": point}])
    no_exceptions(at)
    assert not at.error


def test_a_click_on_a_lens_cell_picks_it(torch, hf_decoder, decoder):
    """The position and layer pickers follow the click, and the bars are that cell's: its top
    10 at that layer, as transformers' hidden state after that layer through its norm and
    lm_head gives them."""
    model, _ = hf_decoder
    at = open_page(PAGE, model="smollm2", sentence=LENS_TEXT, rd_view=LENS_TAB)
    no_exceptions(at)
    ids = decoder.encode(LENS_TEXT)
    _click_cell(at, row=13, position=3)                      # after layer 12, position 3
    assert at.selectbox(key="lens_position").value == 3
    assert at.selectbox(key="lens_layer").value == 13
    bars = titled(at, "reading.lens.bars_title", position=3, row=lens_row("layer", 12))
    with torch.no_grad():
        hidden = model(torch.tensor([ids.tolist()]), output_hidden_states=True).hidden_states
        logits = model.lm_head(model.model.norm(hidden[13]))[0, 3]     # after 13 layers
        probs = torch.softmax(logits.double(), -1).numpy()
    np.testing.assert_allclose(decode(bars["data"][0]["x"]),
                               np.sort(probs)[::-1][:10], atol=1e-4)
    click_points(at, "lens_grid", [])                        # a click beside: nothing changes
    assert at.selectbox(key="lens_position").value == 3
    assert at.selectbox(key="lens_layer").value == 13


def test_a_click_on_an_attention_row_reads_that_layer_before_its_mlp(decoder):
    at = open_page(PAGE, model="smollm2", sentence=LENS_TEXT, rd_view=LENS_TAB,
                   lens_sublayers=True)
    no_exceptions(at)
    rows = titled(at, "reading.lens.grid_title")["data"][0]["y"]
    row = rows.index(lens_row("attention", 4))                # between after layer 3 and 4
    assert rows[row - 1] == lens_row("layer", 3) and rows[row + 1] == lens_row("layer", 4)
    _click_cell(at, row=row, position=8)
    assert at.selectbox(key="lens_position").value == 8
    assert at.selectbox(key="lens_layer").value == 5         # "after layer 4" …
    assert at.checkbox(key="lens_attention").value is True   # … before its MLP
    assert titled(at, "reading.lens.bars_title", position=8, row=lens_row("attention", 4))
    _click_cell(at, row=rows.index(lens_row("layer", 4)), position=8)
    assert at.selectbox(key="lens_layer").value == 5
    assert at.checkbox(key="lens_attention").value is False
    assert titled(at, "reading.lens.bars_title", position=8, row=lens_row("layer", 4))
    at.checkbox(key="lens_attention").check().run()          # the keyboard's way: the same row
    assert titled(at, "reading.lens.bars_title", position=8, row=lens_row("attention", 4))
