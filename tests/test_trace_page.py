"""The "Trace the answer" page (issue 28): its three tabs on SmolLM2 in AppTest, and MiniLM
said. The numbers expected come from transformers, from what patching is (a patch that puts
the whole clean input back gives the clean run; one that puts back what the corrupted run
already has changes nothing) or from an independent computation here — never from attnviz.
"""

from __future__ import annotations

import io
import json

import numpy as np
import pytest

from attnviz.app import keys
from attnviz.i18n import render, use_language
from attnviz.models import heavy
from attnviz.tutorials.patching_pairs import patching_pair
from tests.apptest_helpers import (charts, heatmap_z, no_exceptions, open_page, plain,
                                   record_downloads, shows)

pytestmark = pytest.mark.slow

IOI = patching_pair("ioi")
FACTUAL = patching_pair("factual")
WEEKDAY = patching_pair("weekday_zh")


def patch_button(at):
    found = [b for b in at.button if b.key == keys.TR_PATCH]
    assert found, [b.key for b in at.button]
    return found[0]


def patched(at):
    """Patch pressed: the page queues the job and returns at once; the page again once the
    server's queue has computed it."""
    patch_button(at).click().run()
    no_exceptions(at)
    assert heavy.default_queue().wait_idle(300)
    return at.run()


def patching_page(lang: str = "en", **state):
    return open_page("pages/trace.py", params={"lang": lang}, model="smollm2",
                     tr_view=render("trace.tab.patching", lang), **state)


def effect_maps(at) -> list[dict]:
    return [f for f in charts(at) if f["data"] and f["data"][0]["type"] == "heatmap"]


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_minilm_is_said_and_one_click_gives_the_language_model(lang):
    at = open_page("pages/trace.py", params={"lang": lang})
    assert at.session_state[keys.MODEL] == "minilm"
    assert not at.tabs
    [button] = [b for b in at.button if b.key == keys.TR_USE_LM]
    with use_language(lang):            # AppTest formats the widgets' values in this thread
        assert shows(at.info, "trace.needs_language_model")
        button.click().run()
    no_exceptions(at)
    assert at.session_state[keys.MODEL] == "smollm2"
    assert [tab.label for tab in at.tabs] == [render(f"trace.tab.{n}", lang)
                                             for n in ("lens", "patching", "flow")]


def hf_metric(torch, hf_decoder, text: str, answers: tuple[str, str]) -> float:
    """logit(a) − logit(b) at the last position, in transformers."""
    model, tok = hf_decoder
    a, b = (tok(x)["input_ids"][0] for x in answers)
    with torch.no_grad():
        logits = model(torch.tensor([tok(text)["input_ids"]])).logits[0, -1]
    return float(logits[a] - logits[b])


def test_residual_patching_of_the_ioi_pair(torch, hf_decoder, monkeypatch):
    """The preset's map: the embeddings row is 1 exactly at the one position the prompts
    differ in (the whole clean input put back) and 0 exactly elsewhere (nothing changes);
    the last row is 1 at the last position (the clean run's final stream). Both runs' logit
    differences are transformers'. The .npz download holds the same map."""
    made = record_downloads(monkeypatch)
    at = patching_page()
    assert at.text_input(key=keys.TR_CLEAN).value == IOI.clean
    assert at.text_input(key=keys.TR_CORRUPTED).value == IOI.corrupted
    assert not effect_maps(at)                           # nothing runs before the click
    patched(at)
    no_exceptions(at)
    [fig] = effect_maps(at)
    z = heatmap_z(fig)
    clean_ids = np.array(hf_decoder[1](IOI.clean)["input_ids"])
    corrupted_ids = np.array(hf_decoder[1](IOI.corrupted)["input_ids"])
    n = len(clean_ids)
    assert z.shape == (31, n)                            # boundaries 0 … 30 × positions
    [differ] = np.flatnonzero(clean_ids != corrupted_ids)
    expected_row0 = np.zeros(n)
    expected_row0[differ] = 1.0
    np.testing.assert_array_equal(z[0], expected_row0)
    assert z[-1, -1] == 1.0
    clean = hf_metric(torch, hf_decoder, IOI.clean, (IOI.clean_answer, IOI.corrupted_answer))
    corrupted = hf_metric(torch, hf_decoder, IOI.corrupted,
                          (IOI.clean_answer, IOI.corrupted_answer))
    assert _close_metric(at, clean, corrupted)
    saved = np.load(io.BytesIO(made["attnviz_patching_resid.npz"]()))
    np.testing.assert_array_equal(saved["effect"], z)
    doc = json.loads(made["attnviz_patching_resid.json"]())
    assert doc["where"] == "resid" and doc["complete"] is True
    np.testing.assert_array_equal(np.array(doc["effect"]), z)
    # the export says what it is: the model, the prompts and their tokens, the kind, the axes
    assert str(saved["model"]) == doc["model"] == "SmolLM2-135M-Instruct"
    assert str(saved["where"]) == "resid" and int(saved["layer"]) == -1
    assert list(saved["prompts"]) == [IOI.clean, IOI.corrupted]
    assert [doc["clean_prompt"], doc["corrupted_prompt"]] == [IOI.clean, IOI.corrupted]
    assert "".join(saved["clean_tokens"]) == IOI.clean and len(saved["clean_tokens"]) == n
    assert "".join(saved["corrupted_tokens"]) == IOI.corrupted
    assert len(saved["axes"]) == 2 and "embeddings" in str(saved["axes"][0])
    assert doc["axes"]["rows"] == str(saved["axes"][0]) and "position" in doc["axes"]["columns"]


def _close_metric(at, clean: float, corrupted: float) -> bool:
    """The page's two numbers (4 decimals) within 1e-3 of transformers'."""
    import re

    from tests.apptest_helpers import plain
    for m in at.markdown:
        found = re.findall(r"-?\d+\.\d{4}", plain(m))
        if len(found) == 2:
            return abs(float(found[0]) - clean) < 1e-3 and abs(float(found[1]) - corrupted) < 1e-3
    return False


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_chinese_pair_compares_the_first_piece_of_its_answers_named_as_characters(
        torch, hf_decoder, lang):
    """Issue 34.8: the Chinese preset's answer boxes were empty and its result read
    "<0xE5><0x9B> − <0xE5><0x85>"; typing 四 was refused (two tokens). Now the boxes hold
    四 and 六, a note says the first token of each is compared, the result names them as the
    prompt's chips do (四[1/2]), and both runs' numbers are transformers' logit difference of
    the first token of each answer as transformers' tokenizer reads it."""
    tok = hf_decoder[1]
    at = patching_page(lang, tr_pair="weekday_zh", tr_where="heads_pos")
    assert at.text_input(key=keys.TR_ANSWER_CLEAN).value == WEEKDAY.clean_answer == "四"
    assert at.text_input(key=keys.TR_ANSWER_CORRUPTED).value == WEEKDAY.corrupted_answer
    for answer in (WEEKDAY.clean_answer, WEEKDAY.corrupted_answer):
        ids = tok(answer)["input_ids"]
        assert len(ids) == 2                                 # two byte pieces
        with use_language(lang):
            assert shows(at.caption, "trace.patch.answer.first_token", text=f"`{answer}`",
                         count=2, token=f"`{answer}[1/2]`")
    if not effect_maps(at):             # the other language's result is every learner's
        with use_language(lang):
            at = patched(at)
    no_exceptions(at)
    [line] = [plain(m) for m in at.markdown if "四[1/2]" in m.value]
    assert "六[1/2]" in line and "<0x" not in line and "\ufffd" not in line
    assert render("tokens.notation.title", lang) in [e.label for e in at.expander]
    answers = (WEEKDAY.clean_answer, WEEKDAY.corrupted_answer)
    clean = hf_metric(torch, hf_decoder, WEEKDAY.clean, answers)     # first tokens
    corrupted = hf_metric(torch, hf_decoder, WEEKDAY.corrupted, answers)
    assert _close_metric(at, clean, corrupted)
    assert effect_maps(at)


def test_prompts_of_different_lengths_show_both_token_lists_and_no_button():
    at = patching_page(tr_pair="custom", tr_clean="The cat sat", tr_corrupted="The big cat sat")
    no_exceptions(at)
    assert shows(at.warning, "trace.patch.lengths", clean=3, corrupted=4)
    assert any("cat" in m.value and "big" not in m.value for m in at.markdown)
    assert any("big" in m.value for m in at.markdown)
    assert not [b for b in at.button if b.key == keys.TR_PATCH]


def test_breaks_in_a_prompt_are_written_visibly_in_its_token_list():
    """Issue 34.5: \\t \\x0b \\x0c \\r were drawn raw in the patching token lists."""
    at = patching_page(tr_pair="custom", tr_clean="a\tb\x0bc\x0cd\re", tr_corrupted="a b")
    no_exceptions(at)
    from tests.message_helpers import message_pattern

    clean = message_pattern("trace.patch.tokens.clean")
    lines = [m.value for m in at.markdown if clean.match(m.value)]
    assert len(lines) == 1 and not any(c in lines[0] for c in "\t\x0b\x0c\r")
    assert all(any(mark in line for line in lines) for mark in "⇥␋␌␍")


def test_one_answer_typed_is_said():
    at = patching_page(tr_pair="custom", tr_clean=FACTUAL.clean, tr_corrupted=FACTUAL.corrupted,
                       tr_answer_clean=" Paris", tr_answer_corrupted="")
    assert shows(at.error, "trace.patch.one_answer")


def test_a_prompt_too_long_is_refused_with_its_count_once(decoder):
    long = "one two three four five six seven eight nine ten " * 4
    at = patching_page(tr_pair="custom", tr_clean=long, tr_corrupted=long)
    assert shows(at.error, "trace.patch.too_long", tokens=len(decoder.encode(long)), limit=32)
    assert len(at.error) == 1
    assert shows(at.caption, "trace.patch.limits", tokens=32)     # said before, too
    assert not [b for b in at.button if b.key in (keys.TR_PATCH, keys.TR_STOP)]


def test_an_answer_of_two_tokens_is_read_as_its_first_before_any_press(decoder):
    """Issue 34.9: a two-token answer was accepted by the form and refused after the press;
    now the form says, before any press, that its first token is compared (34.8)."""
    assert len(decoder.encode("四")) == 2
    at = patching_page(tr_pair="custom", tr_clean=FACTUAL.clean, tr_corrupted=FACTUAL.corrupted,
                       tr_answer_clean=" Paris", tr_answer_corrupted="四")
    no_exceptions(at)
    assert not at.error
    assert shows(at.caption, "trace.patch.answer.first_token", text="`四`", count=2,
                 token="`四[1/2]`")
    assert [b for b in at.button if b.key == keys.TR_PATCH]


def test_the_work_of_one_click_is_said_before_and_bounded(decoder):
    """The preset's work is said on the form (positions before the first difference are
    neither patched nor recomputed); two 32-token prompts differing at their first token ask
    for 31 × 32 patches of 32 tokens each: refused, with no button."""
    clean, corrupted = decoder.encode(IOI.clean), decoder.encode(IOI.corrupted)
    n, first = len(clean), int(np.flatnonzero(clean != corrupted)[0])
    at = patching_page()
    assert shows(at.caption, "trace.patch.budget", patches=31 * (n - first),
                 tokens=n - first, work=31 * (n - first) ** 2, limit=10_000)
    words = " cat" * 31
    assert len(decoder.encode("A" + words)) == len(decoder.encode("B" + words)) == 32
    at = patching_page(tr_pair="custom", tr_clean="A" + words, tr_corrupted="B" + words)
    assert shows(at.error, "trace.patch.over_budget", patches=31 * 32, tokens=32,
                 work=31 * 32 * 32, limit=10_000)
    assert not [b for b in at.button if b.key == keys.TR_PATCH]


def test_a_link_that_was_patched_restores_the_form_but_patches_nothing():
    """tr_ran=1 for prompts nobody patched: the form comes back with the Patch button and a
    word saying to press it; no job reaches the server's queue."""
    queue = heavy.default_queue()
    started = queue.started
    at = open_page("pages/trace.py", params={
        "model": "smollm2", "tr_pair": "custom", "tr_where": "mlp",
        "tr_clean": "The cat sat on the mat", "tr_corrupted": "The dog sat on the mat",
        "tr_ran": "1", "tr_view": render("trace.tab.patching", "en")})
    no_exceptions(at)
    assert at.text_input(key=keys.TR_CLEAN).value == "The cat sat on the mat"
    assert shows(at.info, "trace.patch.from_link")
    patch_button(at)
    assert not effect_maps(at) and not [b for b in at.button if b.key == keys.TR_STOP]
    assert queue.started == started and queue.status() == (0, 0)


def test_a_link_of_a_patched_view_patches_again_in_a_fresh_session(torch, hf_decoder):
    """Every setting goes into the link (pair, kind, tab, that it was patched): a fresh
    session opening it shows the same map — here attention outputs of the factual pair, whose
    rows are the 30 layers; a patch before the prompts' first difference changes nothing."""
    at = patching_page("zh", tr_pair="factual", tr_where="attn")
    with use_language("zh"):
        patched(at)
    no_exceptions(at)
    assert not [b for b in at.button if b.key == keys.TR_STOP]      # finished: no Stop left
    link = {k: v for k, v in at.query_params.items()}
    assert link[keys.TR_PAIR] == "factual" and link[keys.TR_WHERE] == "attn"
    assert link[keys.TR_RAN] == "1"
    started = heavy.default_queue().started
    with use_language("zh"):
        again = open_page("pages/trace.py",
                          params={k: v[0] if isinstance(v, list) else v for k, v in link.items()})
    no_exceptions(again)
    assert heavy.default_queue().started == started         # shown, not computed again
    [before], [after] = effect_maps(at), effect_maps(again)
    z = heatmap_z(after)
    np.testing.assert_array_equal(z, heatmap_z(before))
    assert z.shape == (30, 9)
    tok = hf_decoder[1]
    a = np.array(tok(FACTUAL.clean)["input_ids"])
    b = np.array(tok(FACTUAL.corrupted)["input_ids"])
    first = int(np.flatnonzero(a != b)[0])
    assert (z[:, :first] == 0).all()


# ---- information flow --------------------------------------------------------------------------

EIFFEL = "The Eiffel Tower is in the city of"


def flow_page(lang: str = "en", **state):
    return open_page("pages/trace.py", params={"lang": lang}, model="smollm2", sentence=EIFFEL,
                     tr_view=render("trace.tab.flow", lang), **state)


def proximity_shares(parts: list[np.ndarray], y: np.ndarray) -> np.ndarray:
    """Ferrando & Voita's importances of `parts` (summing to y): max(0, ‖y‖₁ − ‖y − z‖₁),
    normalised."""
    near = np.array([max(0.0, np.abs(y).sum() - np.abs(y - z).sum()) for z in parts])
    return near / near.sum()


def test_the_flow_graphs_top_edges_are_transformers_mlp_and_residual_shares(hf_decoder,
                                                                             monkeypatch):
    """The edges into the top node (the last position after the last layer): the MLP's and
    the residual's shares of resid_post, computed here from transformers' own activations;
    every edge in the download is at least the threshold."""
    from tests.hf_reference import hf_activations

    made = record_downloads(monkeypatch)
    at = flow_page()
    no_exceptions(at)
    assert any(f["data"] and any(tr.get("meta") == "head" for tr in f["data"])
               for f in charts(at))
    doc = json.loads(made["attnviz_flow.json"]())
    ids = hf_decoder[1](EIFFEL)["input_ids"]
    last = len(ids) - 1
    assert doc["ids"] == ids and doc["position"] == last and doc["threshold"] == 0.04
    assert all(e["weight"] >= 0.04 for e in doc["edges"])
    got = hf_activations(hf_decoder, ids, [29])
    mid, mlp = got[(29, "resid_mid")][0, last], got[(29, "mlp_out")][0, last]
    expected = dict(zip(("mlp", "mlp_residual"),
                        proximity_shares([mlp.astype(np.float64), mid.astype(np.float64)],
                                         (mid + mlp).astype(np.float64))))
    top = {e["kind"]: e["weight"] for e in doc["edges"]
           if e["layer"] == 29 and e["target"] == last and e["kind"] in expected}
    assert top, doc["edges"][:4]
    for kind, weight in top.items():
        assert weight == pytest.approx(expected[kind], abs=1e-4)


def test_a_click_on_a_head_edge_names_it_and_opens_that_head_step_by_step():
    from tests.apptest_helpers import click_points

    at = flow_page("zh")
    head_traces = [(i, tr) for f in charts(at) for i, tr in enumerate(f["data"])
                   if tr.get("meta") == "head"]
    assert head_traces
    curve, trace = head_traces[0]
    layer, head, source, target, kind = trace["customdata"][0]
    with use_language("zh"):
        click_points(at, keys.FL_GRAPH, [{"x": trace["x"][0], "y": trace["y"][0],
                                           "curve_number": curve, "point_number": 0,
                                           "point_index": 0,
                                           "customdata": trace["customdata"][0]}])
        no_exceptions(at)
        assert at.session_state[keys.FL_EDGE] == (layer, head, source, target, kind)
        assert shows(at.markdown, "trace.flow.edge.head", layer=layer, head=head)
        assert shows(at.markdown, "trace.flow.edge.open")
        [step] = [b for b in at.button if b.key == keys.PT_STEP_THROUGH]
        step.click().run()
    no_exceptions(at)
    assert at.session_state[keys.LAYER] == layer and at.session_state[keys.HEAD] == head
    from attnviz.core.modes import Mode
    assert at.session_state[keys.MODE] == Mode.PRETRAINED.value


def test_at_threshold_zero_the_most_important_edges_are_kept_said_and_walked_once(
        monkeypatch):
    """Threshold 0 keeps every edge into a kept node: from the top (2L, p) the MLP's 2, the
    last layer's residual and H · (p + 1) heads, then at each of the L − 1 layers below, for
    each of the p + 1 positions, 2 MLP edges and a residual, and H heads from each earlier
    token. The page keeps the 1,500 most important, says how many are left out, and a rerun
    walks nothing, builds no figure and no file again; a session's download buttons hold no
    importances."""
    import streamlit

    import attnviz.models.readers.flow as flow_module
    from attnviz.app.trace import trace_view
    from attnviz.models.readers.flow import InformationFlow
    from attnviz.plot import flow_figures
    from tests.apptest_helpers import reachable
    from tests.message_helpers import message_pattern

    counts = {"walk": 0, "figure": 0, "json": 0}

    def counted(name, original):
        def call(*args, **kwargs):
            counts[name] += 1
            return original(*args, **kwargs)
        return call

    monkeypatch.setattr(flow_module, "_walk", counted("walk", flow_module._walk))
    monkeypatch.setattr(flow_figures, "flow_graph", counted("figure", flow_figures.flow_graph))
    monkeypatch.setattr(InformationFlow, "to_json", counted("json", InformationFlow.to_json))
    spinners = []
    spinner = streamlit.spinner

    def said_spinner(text, **options):
        spinners.append(text)
        return spinner(text, **options)

    monkeypatch.setattr(streamlit, "spinner", said_spinner)
    for cache in (trace_view._GRAPHS, trace_view._FLOW_FIGURES, trace_view._FLOW_FILES):
        cache.clear()
    made = record_downloads(monkeypatch)
    at = flow_page(fl_threshold=0.0)
    layers, heads, p = 30, 9, 8                                  # 9 tokens, the last one
    total = 2 + 1 + heads * (p + 1) + (layers - 1) * (
        3 * (p + 1) + heads * (p + 1) * (p + 2) // 2)
    assert total == 12_612
    drawing = message_pattern("trace.flow.drawing", edges=1500, position=p)
    assert any(drawing.search(text) for text in spinners), spinners
    assert shows(at.info, "trace.flow.left_out", total=total, shown=1500, left=total - 1500)
    [fig] = [f for f in charts(at) if any(tr.get("meta") == "nodes" for tr in f["data"])]
    assert len(fig["layout"]["shapes"]) == 1500
    first = dict(counts)
    assert first["walk"] >= 1 and first["figure"] == 1
    at.run()                                                     # a rerun: nothing again
    no_exceptions(at)
    assert counts == first
    assert shows(at.info, "trace.flow.left_out", total=total, shown=1500)
    doc = json.loads(made["attnviz_flow.json"]())
    again = made["attnviz_flow.json"]()                          # a second click: the same
    assert counts["json"] == 1 and json.loads(again) == doc
    assert len(doc["edges"]) == 1500 and doc["total_edges"] == total
    assert doc["left_out"] == total - 1500 and doc["max_edges"] == 1500
    least = min(e["weight"] for e in doc["edges"])
    assert least > 0 and all(e["weight"] >= least for e in doc["edges"])
    # the buttons keep no importances: (L, H, n, n) arrays are the cache's, not the session's
    held = [o for o in reachable(made["attnviz_flow.npz"]) if isinstance(o, np.ndarray)]
    assert not any(a.ndim == 4 for a in held), [a.shape for a in held]
    with np.load(io.BytesIO(made["attnviz_flow.npz"]()), allow_pickle=False) as saved:
        assert saved["head_weights"].shape == (layers, heads, p + 1, p + 1)
        assert len(saved["edge_weight"]) == 1500 and int(saved["total_edges"]) == total


def test_a_links_threshold_and_position_are_used_and_a_threshold_beyond_1_is_moved(
        monkeypatch):
    made = record_downloads(monkeypatch)
    flow = {"model": "smollm2", "sentence": EIFFEL, "tr_view": "Information flow"}
    at = open_page("pages/trace.py", params={**flow, "fl_threshold": "0.2", "fl_position": "3"})
    no_exceptions(at)
    doc = json.loads(made["attnviz_flow.json"]())
    assert doc["position"] == 3 and doc["threshold"] == pytest.approx(0.2)
    assert doc["edges"] and all(e["weight"] >= 0.2 for e in doc["edges"])
    assert all(e["target"] <= 3 for e in doc["edges"])          # nothing after the position
    far = open_page("pages/trace.py", params={**flow, "fl_threshold": "5"})
    no_exceptions(far)
    assert far.session_state[keys.FL_THRESHOLD] == 1.0
    assert any("fl_threshold" in str(n) for n in far.session_state[keys.LINK_NOTICES])


def test_a_click_on_a_head_of_the_heads_map_opens_it_step_by_step():
    """Each head of the factual pair: the map's cell (layer 23, head 4) clicked names it and
    "Step through this head" opens it on Step by step."""
    from tests.apptest_helpers import click_points

    at = patching_page(tr_pair="factual", tr_where="heads")
    patched(at)
    [fig] = effect_maps(at)
    x, y = fig["data"][0]["x"], fig["data"][0]["y"]
    assert len(x) == 9 and len(y) == 30
    # what the browser sends: the cell's marker (the map's second trace), point r · 9 + c
    markers = fig["data"][1]
    assert (markers["x"][23 * 9 + 4], markers["y"][23 * 9 + 4]) == (x[4], y[23])
    click_points(at, keys.TR_MAP, [{"x": x[4], "y": y[23], "curve_number": 1,
                                    "point_number": 23 * 9 + 4,
                                    "point_index": 23 * 9 + 4}])
    no_exceptions(at)
    assert at.session_state[keys.TR_PICK] == ("heads", 23, 4)
    assert shows(at.markdown, "trace.patch.picked", layer=23, head=4)
    [step] = [b for b in at.button if b.key == keys.PT_STEP_THROUGH]
    step.click().run()
    no_exceptions(at)
    assert at.session_state[keys.LAYER] == 23 and at.session_state[keys.HEAD] == 4


def test_the_lens_tab_reads_the_sidebars_sentence_and_its_top_row_is_the_models_answer(
        torch, hf_decoder):
    """The lens tab on this page: its grid's top row writes, at each position, transformers'
    most likely next token (the last row of the lens is the model's own output)."""
    at = open_page("pages/trace.py", params={"lang": "en"}, model="smollm2", sentence=EIFFEL)
    no_exceptions(at)
    [grid] = [f for f in charts(at) if f["data"] and f["data"][0]["type"] == "heatmap"
              and len(f["data"][0]["y"]) == 31]
    model, tok = hf_decoder
    ids = tok(EIFFEL)["input_ids"]
    with torch.no_grad():
        best = model(torch.tensor([ids])).logits[0].argmax(-1).tolist()
    top_row = [str(s) for s in grid["data"][0]["text"][-1]]
    expected = [tok.decode([b]).replace(" ", "␣") for b in best]
    assert top_row == expected


COLUMN_TEXT = "The old lighthouse keeper counted the ships until"


def test_the_lens_draws_the_last_positions_column_first_then_the_grid_with_it(
        torch, hf_decoder, monkeypatch):
    """While the grid is computed, its place shows the last position's column first (every
    layer: where the answer appears): transformers' top next token and its probability at
    each layer boundary, from its hidden states; the grid then drawn holds that column as
    its last, the same numbers."""
    import html

    from attnviz.app.shared import widgets
    from attnviz.plot.lens_figures import CELL_CHARS

    drawn, real = [], widgets.chart

    def chart(fig, *, key, **how):
        drawn.append((key, json.loads(fig.to_json())))
        real(fig, key=key, **how)

    monkeypatch.setattr(widgets, "chart", chart)
    at = open_page("pages/trace.py", params={"lang": "en"}, model="smollm2",
                   sentence=COLUMN_TEXT)
    no_exceptions(at)
    order = [key for key, _ in drawn]
    assert order.index(keys.LENS_COLUMN) < order.index(keys.LENS_GRID)
    [column] = [fig for key, fig in drawn if key == keys.LENS_COLUMN]
    [grid] = [fig for key, fig in drawn if key == keys.LENS_GRID]
    model, tok = hf_decoder
    ids = tok(COLUMN_TEXT)["input_ids"]
    with torch.no_grad():
        hidden = model(torch.tensor([ids]), output_hidden_states=True).hidden_states
        last = len(hidden) - 1                               # transformers' last one is normed
        logits = torch.stack([model.lm_head(model.model.norm(h) if i < last else h)[0, -1]
                              for i, h in enumerate(hidden)]).double().numpy()   # (L + 1, V)
    probs = np.exp(logits - logits.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    z = heatmap_z(column)                                                # (L + 1, 1)
    assert z.shape == (len(hidden), 1)
    np.testing.assert_allclose(z[:, 0], probs.max(-1), atol=2e-3)
    words = [tok.decode([b]).replace(" ", "␣") for b in probs.argmax(-1)]
    expected = [w if len(w) <= CELL_CHARS else w[:CELL_CHARS - 1] + "…" for w in words]
    assert [html.unescape(str(row[0])) for row in column["data"][0]["text"]] == expected
    last_token = tok.decode([ids[-1]]).replace(" ", "␣")
    assert column["data"][0]["x"] == [f"{len(ids) - 1}: {last_token}"]      # its position
    np.testing.assert_array_equal(heatmap_z(grid)[:, -1], z[:, 0])     # the same numbers
    assert [row[-1] for row in grid["data"][0]["text"]] == \
        [row[0] for row in column["data"][0]["text"]]
