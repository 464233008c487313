"""The message catalogues (issue 21): every id in every language, the same placeholders, the
tutorials' vocabulary, formulas and numbers kept; the active language; errors that carry an id
and speak the language of whoever reads them."""

from __future__ import annotations

import ast
import csv
import importlib
import json
import logging
import os
import pickle
import re
import string
import subprocess
import sys
import threading
from functools import partial
from pathlib import Path

import numpy as np
import pytest

import attnviz
from attnviz.plot import figures as plot_figures
from attnviz.core import reading
from attnviz.tutorials.presets import load_preset, presets as all_presets
from attnviz import i18n
from attnviz.describe import steps
from attnviz.i18n import MissingMessage, Message, t, use_language
from attnviz.core.errors import AttnvizInputError
from attnviz.session.build import build_view
from attnviz.session.settings import Settings
from tests.i18n_walker import CJK, english_runs

ROOT = Path(__file__).resolve().parents[1]
LOCALES = ROOT / "attnviz" / "i18n" / "locales"
GLOSSARY = LOCALES / "glossary.csv"
TUTORIALS = Path(os.environ.get("ATTNVIZ_TUTORIALS", "/work/shared/tutorials"))
# modules whose errors are all message ids; a module converted later joins this list
CONVERTED_MODULES = [
    "core.reading",
    "tutorials.experiments",
    "core.arrays",
    "core.weights",
    "core.trace",
    "core.diff",
    "core.engine",
    "core.inputs",
    "session.edits",
    "session.settings",
    "session.in_use",
    "session.build",
    "session.overflow",
    "session.view_files",
    "plot.diff_figures",
    "plot.figures",
    "describe.labels",
    "models.trainer.toy_plan",
    "models.trainer.training",
    "models.encoder.pretrained",
    "models.trainer.toy",
    "models.decoders.decoder",
    "io.matrix_files",
    "io.files",
    "core.torch_interop",
    "app.links",
    "models.decoders.gguf_llama",
    "plot.model_figures",
    "plot.decoder_figures",
    "tutorials.presets",
    "models.trainer.toy_tasks",

]


def entries(lang: str) -> dict:
    return i18n.catalogue(lang)


def all_text(entry) -> str:
    return " ".join(entry.forms)


def shown(text: str) -> str:
    """A message's text as words: placeholders dropped ("{value}" is not the word value)."""
    return re.sub(r"\{[^{}]*\}", " ", text)


# ---- the catalogues --------------------------------------------------------------------------

def test_the_languages_are_the_catalogues_present():
    assert i18n.languages() == ("en", "zh")
    assert [i18n.native_name(lang) for lang in i18n.languages()] == ["English", "中文"]


@pytest.mark.parametrize("lang", ["zh"])
def test_every_message_exists_and_is_translated_in_every_language(lang):
    english, other = entries("en"), entries(lang)
    assert sorted(set(english) - set(other)) == [], "missing in " + lang
    assert sorted(set(other) - set(english)) == [], "not in the English catalogue"
    for catalogue in (english, other):
        untranslated = [k for k, e in catalogue.items() if not all(e.forms) or e.fuzzy]
        assert untranslated == []


def test_ids_are_dotted_names_and_each_is_written_once():
    for path in LOCALES.glob("*.po"):
        ids = re.findall(r'^msgid "(.+)"$', path.read_text(encoding="utf-8"), re.M)
        assert [i for i in ids if not i18n.ID_PATTERN.fullmatch(i)] == [], path.name
        assert len(ids) == len(set(ids)), f"{path.name} has an id twice"


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_placeholders_are_the_same_in_every_language_and_every_plural_form(lang):
    for msg_id, entry in entries(lang).items():
        english = entries("en")[msg_id]
        want = i18n.placeholders(english.forms[0])
        for form in entry.forms:
            assert i18n.placeholders(form) == want, (lang, msg_id, form)
            for _, name, _, _ in string.Formatter().parse(form):
                assert name is None or name.isidentifier(), (msg_id, name)   # {row}, not {0}


def test_plural_messages_have_one_form_per_plural_of_the_language():
    for lang, count in (("en", 2), ("zh", 1)):
        plural = {k: e for k, e in entries(lang).items() if e.plural is not None}
        assert plural, lang
        assert {k: len(e.forms) for k, e in plural.items()} == {k: count for k in plural}
    assert t("sidebar.size_fix.heads", count=1) == "1 head"
    assert t("sidebar.size_fix.heads", count=3) == "3 heads"
    with use_language("zh"):
        assert t("sidebar.size_fix.heads", count=1) == "1 个头"


def test_the_chinese_keeps_formulas_numbers_and_matrix_names_as_written():
    kept = re.compile(r"[A-Za-z]+_[A-Za-z0-9]+|√d_k|√\d+|\[CLS\]|\[SEP\]|\d+(?:\.\d+)?")
    for msg_id, entry in entries("en").items():
        zh = all_text(entries("zh")[msg_id])
        missing = [m for m in kept.findall(shown(all_text(entry))) if m not in zh]
        assert missing == [], (msg_id, missing)


def test_no_english_sentence_in_the_chinese_catalogue():
    # argument names a notebook passes (attentions, tokens) stay as they are
    code = re.compile(r"\b(?:run\.)?attentions(?:\[None\])?|\btokens\b")
    found = {k: english_runs(shown(code.sub(" ", all_text(e))))
             for k, e in entries("zh").items()}
    assert {k: v for k, v in found.items() if v} == {}


def test_every_chinese_message_is_chinese():
    # a message may equal its English (a file format, a proper name), but then it has no words
    # to translate
    words = re.compile(r"[A-Za-z]{3,}")
    for msg_id, entry in entries("zh").items():
        text = all_text(entry)
        if not CJK.search(text):
            english = all_text(entries("en")[msg_id])
            assert text.lower() == english.lower() and not english_runs(english, 2), msg_id
            assert all(w in ("NumPy", "npz", "JSON", "Xavier", "Kaiming", "English")
                       for w in words.findall(text)), msg_id


# ---- the glossary ----------------------------------------------------------------------------

def glossary() -> list[dict]:
    with open(GLOSSARY, encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f))


def test_the_chinese_catalogue_uses_the_glossarys_word_wherever_the_english_has_the_term():
    problems = []
    for row in glossary():
        term = re.compile(rf"\b(?:{row['en']})\b", re.I)
        for msg_id, entry in entries("en").items():
            if term.search(shown(all_text(entry))) and row["zh"] not in all_text(
                    entries("zh")[msg_id]):
                problems.append(f"{msg_id}: '{row['en']}' without {row['zh']}")
    assert problems == []


def test_the_glossary_holds_the_tutorials_vocabulary():
    words = {row["zh"] for row in glossary()}
    assert {"查询", "键", "值", "分数", "缩放", "权重", "加权值", "多头注意力", "拼接",
            "输出投影", "掩码", "位置编码", "词元", "注意力"} <= words
    for row in glossary():
        assert row["en"] and row["zh"] and row["source"], row
        re.compile(row["en"])


@pytest.mark.skipif(not TUTORIALS.is_dir(), reason="the tutorials' text is not here")
def test_the_glossarys_words_from_the_tutorials_are_the_tutorials_own():
    text = "".join(p.read_text(encoding="utf-8") for p in TUTORIALS.glob("*.txt"))
    cited = [row for row in glossary() if re.match(r"\d{3}", row["source"])]
    assert len(cited) >= 20
    assert [row["zh"] for row in cited if row["zh"] not in text] == []


# ---- the presets and steps name things as the library does ----------------------------------

def test_a_presets_words_are_read_in_the_readers_language():
    for p in all_presets():
        english = (p.title, p.description)
        assert english == (t(f"preset.{p.name}.title"), t(f"preset.{p.name}.description"))
        with use_language("zh"):
            chinese = (p.title, p.description)
            assert CJK.search(chinese[0]) and CJK.search(chinese[1]), p.name
        assert chinese != english
    note = load_preset("three_inputs").side_notes["rounded_weights"][0]
    with use_language("zh"):
        assert CJK.search(str(note)) and "[[2, 7, 1.5], [2, 8, 0], [2, 7.8, 0.3]]" in str(note)


def test_the_article_of_each_preset_is_named_in_chinese():
    with use_language("zh"):
        for p in all_presets():
            title = t(f"preset.{p.name}.title")
            article = re.sub(r"^\d{3} ", "", p.tutorial.split(" / ")[0])
            assert title.endswith(f"— 《{article}》"), (title, p.tutorial)


def _traces():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 4))
    w = attnviz.MultiHeadWeights.random(4, 2, seed=0, bias=True)
    yield attnviz.trace_attention(x, w, causal=True)
    yield attnviz.trace_attention(x, w, context=rng.standard_normal((2, 4)))
    yield attnviz.trace_qkv(*(rng.standard_normal((1, 3, 2)) for _ in range(3)))
    yield load_preset("three_inputs").trace()
    view = build_view(Settings(mode="Preset", preset="three_inputs", rounded=True))
    assert view.trace.weights_given is not None
    yield view.trace


def test_every_step_title_is_in_the_catalogue_and_names_the_step_as_step_texts_does():
    for trace in _traces():
        for s in trace.steps:
            assert steps.title(trace, s.name) == s.title, (steps.title_id(trace, s.name))
            with use_language("zh"):
                assert CJK.search(steps.title(trace, s.name)), s.name


# ---- rendering, the active language ------------------------------------------------------

def test_a_missing_or_untranslated_message_fails_loudly_in_tests():
    with pytest.raises(MissingMessage):
        t("home.no_such_message")
    with pytest.raises(MissingMessage):
        t("home.tokens")                             # its placeholder left unfilled
    with pytest.raises(MissingMessage):
        t("home.title", stray=1)                     # a parameter no placeholder takes
    with pytest.raises(MissingMessage):
        i18n.set_language("fr")


STRICTNESS = """
import json, sys
import pytest                                   # a notebook that happens to import pytest
from attnviz import i18n
shown = i18n.t("home.no_such_message")
i18n.set_strict(True)
try:
    i18n.t("home.no_such_message")
    raised = False
except i18n.MissingMessage:
    raised = True
print(json.dumps([shown, raised]))
"""


@pytest.mark.slow
def test_strictness_is_a_switch_not_whether_pytest_is_imported():
    env = {k: v for k, v in os.environ.items() if k != "ATTNVIZ_I18N_STRICT"}
    done = subprocess.run([sys.executable, "-c", STRICTNESS], capture_output=True, text=True,
                          cwd=ROOT, env=env, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    shown, raised = json.loads(done.stdout.strip().splitlines()[-1])
    assert shown == "home.no_such_message"          # text (the id), logged: not an error
    assert raised                                   # switched on: an error
    for flag, strict in (("1", True), ("0", False)):  # the variable overrides the switch
        code = (f"from attnviz import i18n\ni18n.set_strict({not strict})\n"
                "print(i18n.strict())")
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              cwd=ROOT, env={**env, "ATTNVIZ_I18N_STRICT": flag}, timeout=120)
        assert done.stdout.split() == [str(strict)], done.stderr[-2000:]


@pytest.fixture
def more_catalogues(tmp_path, monkeypatch):
    """The catalogues in a folder of the test's own (caches cleared before and after)."""
    for path in LOCALES.glob("*.po"):
        (tmp_path / path.name).write_bytes(path.read_bytes())
    monkeypatch.setattr(i18n, "LOCALES", tmp_path)
    i18n._languages.cache_clear()
    i18n.catalogue.cache_clear()
    yield tmp_path
    i18n._languages.cache_clear()
    i18n.catalogue.cache_clear()


def test_a_third_language_is_one_more_file(more_catalogues):
    fr = (more_catalogues / "en.po").read_text(encoding="utf-8")
    fr = fr.replace('"Language: en\\n"', '"Language: fr\\n"').replace(
        'msgid "language.name"\nmsgstr "English"', 'msgid "language.name"\nmsgstr "Français"'
    ).replace('msgid "home.title"\nmsgstr "Self-attention, one step at a time"',
              'msgid "home.title"\nmsgstr "L\'auto-attention, pas à pas"')
    (more_catalogues / "fr.po").write_text(fr, encoding="utf-8")
    assert i18n.languages() == ("en", "fr", "zh")
    assert i18n.best_language("fr-CA") == "fr"
    assert i18n.native_name("fr") == "Français"
    with use_language("fr"):
        assert t("home.title") == "L'auto-attention, pas à pas"


def test_an_untranslated_entry_is_an_error_not_a_silent_fallback(more_catalogues, monkeypatch,
                                                                 caplog):
    zh = more_catalogues / "zh.po"
    zh.write_text(zh.read_text(encoding="utf-8").replace(
        'msgstr "自注意力，一步一步来"', 'msgstr ""'), encoding="utf-8")
    with use_language("zh"), pytest.raises(MissingMessage, match="home.title"):
        t("home.title")
    # in a running app (not strict) the reader gets the English text, and the log says why
    monkeypatch.setenv("ATTNVIZ_I18N_STRICT", "0")
    with use_language("zh"), caplog.at_level(logging.WARNING, logger="attnviz.i18n"):
        assert t("home.title") == "Self-attention, one step at a time"
    assert "home.title" in caplog.text and "zh" in caplog.text


def test_the_active_language_is_the_innermost_use_language_then_the_source_then_english():
    assert i18n.language() == "en"
    previous = i18n.set_language_source(lambda: "zh")
    try:
        assert t("nav.home") == "首页"
        with use_language("en"):
            assert t("nav.home") == "Home"
            with use_language("zh"):
                assert t("nav.home") == "首页"
            assert t("nav.home") == "Home"
        i18n.set_language_source(lambda: None)          # outside a session: English
        assert t("nav.home") == "Home"
    finally:
        i18n.set_language_source(previous)


def test_use_language_belongs_to_its_own_thread():
    seen = {}
    with use_language("zh"):
        worker = threading.Thread(target=lambda: seen.setdefault("other", t("nav.home")))
        worker.start()
        worker.join()
        seen["here"] = t("nav.home")
    assert seen == {"other": "Home", "here": "首页"}


@pytest.mark.parametrize("tag, lang", [("zh-CN", "zh"), ("zh-Hant-TW", "zh"), ("zh", "zh"),
                                       ("ZH_cn", "zh"), ("en-GB", "en"), ("fr-FR", "en"),
                                       ("", "en"), (None, "en")])
def test_a_browsers_language_tag_picks_its_catalogue_or_english(tag, lang):
    assert i18n.best_language(tag) == lang


def test_a_message_renders_in_the_language_of_whoever_shows_it():
    m = Message("reading.position.row", layer=1, head=2, query=3)
    assert str(m) == "layer 1, head 2, query 3"
    with use_language("zh"):
        assert str(m) == "层 1、头 2、查询 3"
    nested = Message("link.notice", notice=m)
    assert nested.render("zh") == "共享链接：层 1、头 2、查询 3。"
    assert m == Message("reading.position.row", layer=1, head=2, query=3)


# ---- errors ------------------------------------------------------------------------------------

UNIFORM = np.full((1, 2, 3, 3), 1 / 3)
BAD_READING = [   # (call, id, the numbers and names each language's message must show)
    (lambda: reading.attention_rollout([[1, 2], [3]]), "error.attentions.not_numbers", []),
    (lambda: reading.attention_rollout(np.ones((2, 2, 2))), "error.attentions.one_layer",
     ["3", "(2, 2, 2)", "attentions[None]"]),
    (lambda: reading.attention_rollout(np.ones((2, 2))), "error.attentions.not_4d",
     ["2", "(2, 2)"]),
    (lambda: reading.attention_rollout(np.ones((1, 1, 2, 3)) / 3),
     "error.attentions.not_square", ["2", "3"]),
    (lambda: reading.attention_rollout(np.where(np.eye(3) == 1, -0.5, 0.75)[None, None]),
     "error.attentions.negative", ["0"]),
    (lambda: reading.attention_rollout(np.concatenate([UNIFORM, 2 * UNIFORM])),
     "error.attentions.row_sum", ["1", "0", "2"]),
    (lambda: reading.head_stats(UNIFORM, "abc"), "error.tokens.not_a_list", ["str"]),
    (lambda: reading.head_stats(UNIFORM, ["a", "b"]), "error.tokens.count", ["2", "3"]),
    (lambda: reading.head_stats(UNIFORM, ["a", "b", 3]), "error.tokens.not_strings", []),
]
ENGLISH_READING = {   # what the English says, word for word (as before the catalogues)
    "error.attentions.negative": "attentions has a negative weight at layer 0, head 0, query 0,"
                                 " key 0: softmax weights are never negative",
    "error.attentions.row_sum": "the weights of layer 1, head 0, query 0 sum to 2, not 1: each "
                                "query's weights over the keys must sum to 1 (softmax weights "
                                "do)",
    "error.tokens.count": "there are 2 tokens but the attentions have 3 positions: give one "
                          "token per position ([CLS] and [SEP] included)",
}


@pytest.mark.parametrize("call, msg_id, shown_in_both", BAD_READING,
                         ids=[b[1] for b in BAD_READING])
def test_every_reading_error_is_an_id_said_in_both_languages(call, msg_id, shown_in_both):
    with pytest.raises(AttnvizInputError) as caught:
        call()
    exc = caught.value
    assert isinstance(exc, ValueError) and exc.msg_id == msg_id
    english, chinese = str(exc), exc.render("zh")
    if msg_id in ENGLISH_READING:
        assert english == ENGLISH_READING[msg_id]
    assert not CJK.search(english)
    assert CJK.search(chinese) and chinese != english
    code = re.compile(r"\b(?:run\.)?attentions(?:\[None\])?|\btokens\b")
    assert english_runs(code.sub(" ", chinese)) == [], chinese
    for part in shown_in_both:
        assert part in english and part in chinese, (part, english, chinese)
    with use_language("zh"):              # raised in English, read in Chinese: str follows
        assert str(exc) == chinese


def test_an_error_keeps_its_id_and_parameters_through_pickle():
    exc = AttnvizInputError("error.tokens.count", tokens=2, positions=3)
    again = pickle.loads(pickle.dumps(exc))
    assert (again.msg_id, again.params, str(again)) == (exc.msg_id, exc.params, str(exc))
    assert isinstance(again, ValueError)


def test_an_unconverted_error_still_says_its_sentence():
    exc = AttnvizInputError("x has 5 columns, but the weights expect 4")
    assert str(exc) == "x has 5 columns, but the weights expect 4"
    assert exc.msg_id is None and exc.render("zh") == str(exc)


def _is_id(node) -> bool:
    """A message id written out: a string constant, or `id_a if … else id_b`."""
    if isinstance(node, ast.IfExp):
        return _is_id(node.body) and _is_id(node.orelse)
    return isinstance(node, ast.Constant) and isinstance(node.value, str) \
        and bool(i18n.ID_PATTERN.fullmatch(node.value))


def raise_sites() -> dict[str, list[str]]:
    """module → 'line: text' of each `raise AttnvizInputError(…)` whose message is not an id."""
    found = {}
    for path in sorted((ROOT / "attnviz").rglob("*.py")):
        module = ".".join(path.relative_to(ROOT / "attnviz").with_suffix("").parts)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            call = node.exc if isinstance(node, ast.Raise) else None
            if not (isinstance(call, ast.Call) and getattr(call.func, "id", "")
                    == "AttnvizInputError"):
                continue
            first = call.args[0] if call.args else None
            if not _is_id(first):
                found.setdefault(module, []).append(f"{node.lineno}: {ast.unparse(first)[:70]}")
    return found


def test_the_converted_modules_raise_only_message_ids():
    sites = raise_sites()
    assert {m: sites.get(m) for m in CONVERTED_MODULES} == {m: None for m in CONVERTED_MODULES}


def test_no_error_message_is_an_english_sentence_in_code():
    sites = raise_sites()
    count = sum(map(len, sites.values()))
    assert sites == {}, f"{count} raise sites in {len(sites)} modules say English sentences"


# ---- the ids the code uses ----------------------------------------------------------------------

def used_ids() -> tuple[set[str], set[str]]:
    """(ids, f-string prefixes) passed as the first argument of t, render, Message or
    AttnvizInputError anywhere in attnviz/, pages/ and app.py."""
    ids, prefixes = set(), set()
    files = [*(ROOT / "attnviz").rglob("*.py"), *(ROOT / "pages").glob("*.py"), ROOT / "app.py"]
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.Call) and node.args and getattr(
                    node.func, "id", getattr(node.func, "attr", "")) in (
                    "t", "Message", "AttnvizInputError", "render")):
                continue
            first = node.args[0]
            for one in (first.body, first.orelse) if isinstance(first, ast.IfExp) else (first,):
                if _is_id(one):
                    ids.add(one.value)
                elif isinstance(one, ast.JoinedStr) and isinstance(one.values[0], ast.Constant) \
                        and re.fullmatch(r"[a-z][a-z0-9_.]*\.", one.values[0].value):
                    prefixes.add(one.values[0].value)      # f"nav.{name}": an id family
    return ids, prefixes


@pytest.mark.slow
def test_every_id_the_code_names_is_in_the_catalogues():
    ids, prefixes = used_ids()
    assert len(ids) > 100 and "home.title" in ids and "nav." in prefixes
    known = set(entries("en"))
    assert sorted(ids - known) == []
    assert sorted(p for p in prefixes if not any(k.startswith(p) for k in known)) == []


# ---- the core's errors, said in both languages (issue 21) ----------------------------------------

_X = np.ones((3, 4))
_W = attnviz.MultiHeadWeights.random(4, 2, seed=0)
_T = attnviz.trace_attention(_X, _W)
CORE_ERRORS = [
    # (call, message id, parts both languages show: names, numbers)
    (lambda: attnviz.MultiHeadWeights.random(0, 1), "error.whole_number", ["d_model", "4096"]),
    (lambda: attnviz.MultiHeadWeights.random(8, 2.5), "error.whole_number", ["num_heads"]),
    (lambda: attnviz.embed_tokens(["a"], True), "error.whole_number", ["d_model"]),
    (lambda: attnviz.core.inputs.sinusoidal_positions(0, 4), "error.whole_number", ["n"]),
    (lambda: attnviz.core.inputs.truncate(["a"], 513), "error.whole_number", ["max_tokens", "512"]),
    (lambda: _T.step_array("weights", head=2), "error.whole_number", ["head", "0", "1"]),
    (lambda: attnviz.MultiHeadWeights.random(10, 3), "error.weights.head_dim",
     ["d_model", "10", "num_heads", "3"]),
    (lambda: attnviz.MultiHeadWeights.random(8, 2, init="uniform"), "error.weights.init",
     ["gaussian", "'uniform'"]),
    (lambda: attnviz.trace_attention(np.ones((3, 5)), _W), "error.engine.width", ["x", "5", "4"]),
    (lambda: attnviz.trace_attention(_X, _W, scale="big"), "error.engine.scale", ["'big'"]),
    (lambda: attnviz.trace_attention(_X, _W, attn_mask=np.ones((3, 3), dtype=int)),
     "error.engine.mask_integers", ["attn_mask"]),
    (lambda: attnviz.trace_attention(_X * 1e300, _W), "error.overflow.scores", ["Q Kᵀ"]),
    (lambda: attnviz.trace_attention(np.full((3, 4), np.nan), _W), "error.array.nan",
     ["x", "(0, 0)"]),
    (lambda: _T.step("nope"), "error.trace.no_step", ["'nope'", "weights"]),
    (lambda: attnviz.diff(_T, 3), "error.diff.not_a_trace", ["trace_b", "int"]),
    (lambda: attnviz.tokenize("  "), "error.sentence.empty", []),
    (lambda: attnviz.parse_matrix("1 2\n3", name="W_Q"), "error.matrix.named",
     ["W_Q", "2", "1"]),
    (lambda: attnviz.parse_matrix("1 x"), "error.cell.not_a_number", ["1", "2", "'x'"]),
    (lambda: attnviz.parse_matrix("1;2,5x"), "error.cell.not_a_number", ["'2,5x'"]),
    (lambda: attnviz.parse_matrix("1 1e999"), "error.cell.too_large_text", ["1e999", "1.8e308"]),
    (lambda: attnviz.parse_matrix('[[1, "a"]]'), "error.cell.not_a_number", ["1", "2", "'a'"]),
    # the plots (issue 20 item 5: diff_figures raises AttnvizInputError, never a bare ValueError)
    (lambda: _diff_figures().kl_bars([0.1, 0.2], ["a"]), "error.figure.kl_labels", ["1", "2"]),
    (lambda: _diff_figures().change_heatmap(np.ones(3), row_labels=["a"], col_labels=["b"]),
     "error.figure.not_2d", ["(3,)"]),
    (lambda: plot_figures.step_figure(_T, "weights", head=5), "error.whole_number",
     ["head", "5"]),
    # the app's settings and edits
    (lambda: Settings.from_dict({"mode": "Sentence", "colour": 1}), "error.settings.unknown",
     ["colour"]),
    (lambda: Settings.from_dict({"d_model": 0}), "error.settings.range", ["d_model", "0"]),
    (lambda: _edits().with_cells(np.zeros((2, 2, 2)), "w_q", 1, {0: {"q0": "1,5"}},
                                 ["d0", "d1"], ["q0", "q1"]),
     "error.cell.decimal_comma", ["W_Q", "1", "1.5", "q0", "d0"]),
    (lambda: _edits().entry("w_z"), "error.edits.not_editable", ["'w_z'", "w_q"]),
    # the models, files, figures and presets (converted later in issue 21)
    (lambda: _minilm().encode("   "), "error.text.empty_word", []),
    (lambda: _minilm().layer_weights(6), "error.whole_number", ["layer", "0", "5", "6"]),
    (lambda: _minilm().encode("a b", max_tokens=2), "error.pretrained.max_tokens",
     ["3", "512", "2", "[CLS]", "[SEP]"]),
    (lambda: _minilm()._check_head_mask(np.full((6, 12), 2)), "error.head_mask.cell",
     ["head_mask", "0", "1", "2"]),
    (lambda: _toy().make_config("copy", d_model=30, heads=4), "error.toy.head_dim",
     ["d_model", "30", "4"]),
    (lambda: _toy().make_config("induction"), "error.toy.min_layers", ["2", "1"]),
    (lambda: _toy().make_config("induction", layers=2, causal=False),
     "error.toy.induction_causal", []),
    (lambda: _toy().make_config("rot13"), "error.toy.unknown_task", ["'rot13'", "copy"]),
    (lambda: _toy().make_config("copy", steps=0), "error.toy.range", ["steps", "0"]),
    (lambda: _decoder()._check_limit(600, 512, "max_tokens"), "error.whole_number",
     ["max_tokens", "512", "600"]),
    (lambda: _gguf().load(Path("/tmp/0.gguf")), "error.gguf.missing", ["/tmp/0.gguf"]),
    (lambda: _matrix_files().read_matrix_file("w.npy", _npy(np.ones((2, 2)) * 1j)),
     "error.npy.complex", ["w.npy"]),
    (lambda: _files().read_export(b"{}"), "error.file.json_no_arrays", ["JSON", "arrays"]),
    (lambda: _files().read_export(b"\xff\xfe\x00"), "error.file.not_an_export",
     ["attnviz", ".npz", "JSON"]),
    (lambda: attnviz.MultiHeadWeights.from_torch(3), "error.torch.not_mha",
     ["from_torch", "torch.nn.MultiheadAttention", "int"]),
    (lambda: _model_figures().model_view(np.ones((2, 2))), "error.figure.not_4d",
     ["(2, 2)", "n_q"]),
    (lambda: _model_figures().head_view(np.full((2, 3, 3), 1 / 3), ["a", "b", "c"],
                                        min_weight=2), "error.figure.min_weight", ["(0, 1]", "2"]),
    (lambda: _decoder_figures().kv_sharing_figure(9, 2), "error.figure.kv_groups", ["9", "2"]),
    (lambda: load_preset("nope"), "error.preset.unknown", ["'nope'"]),
]


# the modules the cases above use, imported when a case runs (models and figures load torch
# and plotly)
_toy = partial(importlib.import_module, "attnviz.models.trainer.toy")
_decoder = partial(importlib.import_module, "attnviz.models.decoders.decoder")
_gguf = partial(importlib.import_module, "attnviz.models.decoders.gguf_llama")
_matrix_files = partial(importlib.import_module, "attnviz.io.matrix_files")
_files = partial(importlib.import_module, "attnviz.io.files")
_model_figures = partial(importlib.import_module, "attnviz.plot.model_figures")
_decoder_figures = partial(importlib.import_module, "attnviz.plot.decoder_figures")
_diff_figures = partial(importlib.import_module, "attnviz.plot.diff_figures")
_edits = partial(importlib.import_module, "attnviz.session.edits")


def _minilm():
    from attnviz.models.encoder.pretrained import PretrainedModel
    return PretrainedModel.load()


def _npy(array) -> bytes:
    import io
    buf = io.BytesIO()
    np.save(buf, array)
    return buf.getvalue()


@pytest.mark.parametrize("call, msg_id, shown_in_both", CORE_ERRORS,
                         ids=[f"{i}-{c[1]}" for i, c in enumerate(CORE_ERRORS)])
def test_every_core_error_is_an_id_said_in_both_languages(call, msg_id, shown_in_both):
    with pytest.raises(AttnvizInputError) as caught:
        call()
    exc = caught.value
    assert exc.msg_id == msg_id, (exc.msg_id, str(exc))
    english, chinese = str(exc), exc.render("zh")
    assert not CJK.search(english), english
    assert CJK.search(chinese) and chinese != english
    names = re.compile(r"[a-z_]+(?:, [a-z_]+)+")          # a list of names: kept as written
    assert english_runs(names.sub(" ", chinese)) == [], chinese
    for part in shown_in_both:
        assert part in english and part in chinese, (part, english, chinese)


def test_a_cell_is_named_in_the_readers_language():
    with pytest.raises(AttnvizInputError) as caught:
        attnviz.parse_matrix("1 2\n3 x", name="W_Q")
    assert str(caught.value) == "W_Q, row 2, column 2: 'x' is not a number"
    assert caught.value.render("zh") == "W_Q，第 2 行，第 2 列：'x' 不是数"


def test_the_core_has_one_whole_number_check():
    """Issue 20 item 3: one validator, one message; no copy of the check left in the core."""
    copies = []
    for path in (ROOT / "attnviz" / "core").glob("*.py"):
        text = path.read_text(encoding="utf-8")
        copies += [f"{path.name}: {m}" for m in re.findall(r".*whole number.*", text)
                   if path.name != "arrays.py" and "AttnvizInputError" in m]
        copies += [f"{path.name}: isinstance bool int" for _ in re.finditer(
            r"isinstance\(\w+, bool\) or not isinstance\(\w+, \(int, np\.integer\)\)", text)
            if path.name != "arrays.py"]
    assert copies == []


@pytest.mark.skipif(not TUTORIALS.is_dir(), reason="the tutorials' text is not here")
def test_the_steps_cited_are_tutorial_000s_steps():
    text = next(TUTORIALS.glob("000*.txt")).read_text(encoding="utf-8")
    step = {n: re.search(rf"第 {n} 步[^\n]*", text) for n in (4, 5, 6)}
    assert "Softmax" in step[4].group() and "Value" in step[5].group() \
        and "相加" in step[6].group()
    assert {n: k for k, n in steps.TUTORIAL_000_STEPS.items() if n >= 4} == \
        {4: "weights", 5: "weighted_values", 6: "z"}
    assert "第 2 步到第 6 步" in text                  # 2 … 6 are the scores to the sum


def test_an_edited_cell_names_its_matrix_and_head_in_the_readers_language():
    from attnviz.session import edits
    with pytest.raises(AttnvizInputError) as caught:
        edits.with_cells(np.zeros((2, 2, 2)), "w_q", 1, {1: {"q0": "x"}}, ["d0", "d1"],
                         ["q0", "q1"])
    assert str(caught.value) == "W_Q of head 1, row 2 (d1), column 1 (q0): 'x' is not a number"
    assert caught.value.render("zh") == "头 1 的 W_Q，第 2 行（d1），第 1 列（q0）：'x' 不是数"


def test_minilms_truncation_notice_is_said_in_the_readers_language():
    enc = _minilm().encode(" ".join(["word"] * 20), max_tokens=8)
    assert enc.total == 22                              # 20 words, [CLS] and [SEP]
    english = enc.notice
    with use_language("zh"):
        chinese = enc.notice
    assert not CJK.search(english) and CJK.search(chinese)
    for part in ("22", "8", "6", "[CLS]", "[SEP]"):
        assert part in english and part in chinese, (part, english, chinese)
    assert english_runs(chinese) == []


def test_a_links_bad_value_is_a_notice_in_the_readers_language():
    from attnviz.app.shared import links

    with pytest.raises(ValueError) as caught:
        links._parse("d_model", "x", 8)
    notice = Message("link.bad_value", name="d_model", value="'x'", why=caught.value.args[0])
    assert notice.render("en") == "the link's d_model='x' is not a whole number; using the default"
    assert notice.render("zh") == "链接中的 d_model='x' 不是整数；使用默认值"
