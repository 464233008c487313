"""Tokens, embeddings, positional encoding and matrices typed by a user."""

import json
import math
import subprocess
import sys

import numpy as np
import pytest

import attnviz
from attnviz import AttnvizInputError
from attnviz.core import matrix_text
from attnviz.core.inputs import truncate
from attnviz.i18n import Message
from tests.message_helpers import between, cell_at, raises_message


@pytest.mark.parametrize("text, tokens", [
    ("The animal didn't cross the street", ["The", "animal", "didn't", "cross", "the", "street"]),
    ("早上好", ["早", "上", "好"]),
    ("Hello, world!", ["Hello", ",", "world", "!"]),
    ("  a well-known\tfact \n", ["a", "well-known", "fact"]),
    ("我爱NLP。", ["我", "爱", "NLP", "。"]),
    ("pi is 3.14", ["pi", "is", "3.14"]),
    ("<b>x</b>", ["<", "b", ">", "x", "<", "/", "b", ">"]),
    ("it's 'quoted'", ["it's", "'", "quoted", "'"]),
])
def test_tokenize(text, tokens):
    assert attnviz.tokenize(text) == tokens


@pytest.mark.parametrize("text", ["", "   ", "\n\t"])
def test_tokenize_refuses_empty_text(text):
    with raises_message("error.sentence.empty"):
        attnviz.tokenize(text)


def test_truncate_keeps_the_first_tokens_and_says_so():
    tokens = [str(i) for i in range(70)]
    kept, notice = truncate(tokens, 64)
    assert kept == tokens[:64]
    assert notice == Message("notice.tokens.cut_at_limit", count=70, used=64, maximum=512)
    assert truncate(tokens[:10], 64) == (tokens[:10], None)
    with raises_message("error.whole_number", name="max_tokens", bounds=between(1, 512),
                        value="513"):
        truncate(tokens, 513)


def test_truncation_notice_suggests_only_what_the_user_can_do():
    tokens = [str(i) for i in range(600)]
    _, below = truncate(tokens, 100)             # below the maximum: raise the limit
    assert below == Message("notice.tokens.cut_at_limit", count=600, used=100, maximum=512)
    kept, at_max = truncate(tokens, 512)         # at it: nothing to raise
    assert kept == tokens[:512]
    assert at_max == Message("notice.tokens.cut_at_maximum", count=600, used=512, maximum=512)


def test_embeddings_are_per_token_string_and_seed():
    e = attnviz.embed_tokens(["the", "cat", "the"], 16)
    assert e.shape == (3, 16)
    np.testing.assert_array_equal(e[0], e[2])
    assert not np.array_equal(e[0], e[1])
    assert not np.array_equal(e, attnviz.embed_tokens(["the", "cat", "the"], 16, seed=1))


@pytest.mark.slow
def test_embeddings_are_the_same_in_another_process():
    code = ("import sys; sys.path.insert(0, '.'); import attnviz, json; "
            "print(json.dumps(attnviz.embed_tokens(['早', 'word'], 8).tolist()))")
    for hash_seed in ("1", "2"):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             check=True, env={"PYTHONHASHSEED": hash_seed, "PATH": ""})
        np.testing.assert_array_equal(json.loads(out.stdout),
                                      attnviz.embed_tokens(["早", "word"], 8))


def test_sinusoidal_positions_follow_the_paper():
    n, d = 7, 10
    pe = attnviz.sinusoidal_positions(n, d)
    for pos in range(n):
        for i in range(d // 2):
            angle = pos / 10000 ** (2 * i / d)
            assert pe[pos, 2 * i] == pytest.approx(math.sin(angle))
            assert pe[pos, 2 * i + 1] == pytest.approx(math.cos(angle))
    odd = attnviz.sinusoidal_positions(3, 5)
    assert odd.shape == (3, 5) and odd[2, 4] == pytest.approx(math.sin(2 / 10000 ** (4 / 5)))


@pytest.mark.parametrize("text", [
    "1, 2, 3\n4, 5, 6",
    "1 2 3\n4 5 6",
    "1\t2\t3\n4\t5\t6\n",
    "1,2,3,\n4,5,6,",
    "[[1, 2, 3], [4, 5, 6]]",
    "\n 1  2 3 \n\n 4 5  6\n",
])
def test_parse_matrix_formats(text):
    np.testing.assert_array_equal(attnviz.parse_matrix(text), [[1, 2, 3], [4, 5, 6]])


def test_parse_matrix_numbers():
    np.testing.assert_array_equal(attnviz.parse_matrix("−1.5 2e-3 +4"), [[-1.5, 0.002, 4]])
    np.testing.assert_array_equal(attnviz.parse_matrix("[1, 2]"), [[1, 2]])


def not_a_number(row: int, col: int, value: str) -> Message:
    return Message("error.cell.not_a_number", where=cell_at(row, col), value=value)


@pytest.mark.parametrize("text, message", [
    ("1 2 3\n4 5", Message("error.matrix.ragged", row=2, count=2, first=3)),
    ("1 2\n3 x", not_a_number(2, 2, "'x'")),
    ("1, ,3", Message("error.cell.empty", where=cell_at(1, 2))),
    ("1 nan", not_a_number(1, 2, "'nan'")),
    ("1 2\ninf 3", not_a_number(2, 1, "'inf'")),
    ("1 1e400", Message("error.cell.too_large_text", where=cell_at(1, 2), value="'1e400'")),
    ("[[1, NaN]]", Message("error.cell.nan", where=cell_at(1, 2))),
    ("1_0 2", not_a_number(1, 1, "'1_0'")),
    ("", Message("error.matrix.empty")),
    ("[]", Message("error.matrix.json_empty")),
    ("[[1, 2], [3]]", Message("error.matrix.ragged", row=2, count=1, first=2)),
    ("[[1, true]]", not_a_number(1, 2, "true")),
    ("[[1, 2]", Message("error.matrix.json_invalid", problem="Expecting ',' delimiter", line=1,
                        col=8)),
    ('[[1, "a"]]', not_a_number(1, 2, "'a'")),
])
def test_parse_matrix_errors_name_the_place(text, message):
    with pytest.raises(AttnvizInputError) as err:
        attnviz.parse_matrix(text)
    assert err.value.message == message


def test_parse_matrix_bounds():
    with raises_message("error.matrix.rows", rows=3, max_rows=2):
        attnviz.parse_matrix("1\n2\n3", max_rows=2)
    with raises_message("error.matrix.cols", cols=3, max_cols=2):
        attnviz.parse_matrix("1 2 3", max_cols=2)


@pytest.mark.parametrize("typed, value", [
    ("1e-3", 0.001), ("2.5e2", 250.0), ("-.5", -0.5), (".5", 0.5), ("+3", 3.0),
    ("−2", -2.0), (" 7 ", 7.0), ("1E+2", 100.0), ("0e-999", 0.0), ("5e-324", 5e-324),
])
def test_a_typed_number_is_stored_as_written(typed, value):
    assert matrix_text.number_at(typed, "X, row 1, column 1") == value


WHERE = "W_Q of head 0, row 2 (d1), column 1 (q0)"    # as the caller names the cell


@pytest.mark.parametrize("typed, msg_id, params", [
    ("1,5", "error.cell.decimal_comma", dict(value="'1,5'", dotted="1.5")),
    ("1e400", "error.cell.too_large_text", dict(value="'1e400'")),
    ("1e-400", "error.cell.too_small", dict(value="'1e-400'")),
    ("nan", "error.cell.not_a_number", dict(value="'nan'")),
    ("inf", "error.cell.not_a_number", dict(value="'inf'")),
    ("0x10", "error.cell.not_a_number", dict(value="'0x10'")),
    ("1_000", "error.cell.not_a_number", dict(value="'1_000'")),
    ("", "error.cell.empty", {}),
])
def test_a_typed_number_that_cannot_be_stored_exactly_is_refused(typed, msg_id, params):
    with raises_message(msg_id, where=WHERE, **params):
        matrix_text.number_at(typed, WHERE)


def test_parse_matrix_names_the_matrix_in_its_errors():
    with pytest.raises(attnviz.AttnvizInputError) as err:
        attnviz.parse_matrix("1 2\n3 oops", name="W_K of head 1")
    assert err.value.message == Message("error.cell.not_a_number",
                                        where=cell_at(2, 2, "W_K of head 1"), value="'oops'")


# ---- the edits module: one way in for a typed cell and a pasted matrix ------------------------

def test_a_cell_edit_and_a_pasted_matrix_give_new_arrays_and_leave_the_old_one():
    from attnviz.session import edits

    w_q = np.zeros((2, 3, 2))
    typed = edits.with_cells(w_q, "w_q", 1, {2: {"q1": "1e-3"}}, ["d0", "d1", "d2"],
                             ["q0", "q1"])
    assert typed[1, 2, 1] == 0.001 and typed.sum() == 0.001 and w_q.sum() == 0
    pasted = edits.with_matrix(w_q, "w_q", 0, np.ones((3, 2)))
    assert pasted[0].sum() == 6 and pasted[1].sum() == 0
    with raises_message("error.edits.shape", matrix=Message("edit.of_head", matrix="W_Q", head=0),
                        want="3 × 2", shape="2 × 3"):
        edits.with_matrix(w_q, "w_q", 0, np.ones((2, 3)))
    bias = edits.with_matrix(np.zeros(4), "b_o", None, np.array([[1.0, 2, 3, 4]]))
    np.testing.assert_array_equal(bias, [1, 2, 3, 4])


def test_edits_round_trip_through_a_link_and_garbage_is_an_input_error():
    from attnviz.session import edits

    stored = {"x": edits.make_edit("x", np.array([[1.0, 2.5e-300]]), ["a"]),
              "w_o": edits.make_edit("w_o", np.eye(2) / 3, ["a"])}
    back = edits.decode(edits.encode(stored))
    assert back["x"].tokens == ("a",) and back["w_o"].tokens is None
    for name in stored:
        np.testing.assert_array_equal(back[name].array, stored[name].array)   # exact: JSON reprs
    for garbage in ("", "!!", edits.encode({}).replace("e", "x"), "eJzLSM3JyVcozy_KSQEAGgQEXQ"):
        try:
            result = edits.decode(garbage)
        except AttnvizInputError:
            continue
        assert result == {}


def test_a_few_typed_cells_of_large_matrices_fit_a_link_as_those_cells_alone():
    from attnviz.session import edits
    from attnviz.app.shared.links import MAX_EDITS_CHARS

    rng = np.random.default_rng(0)
    generated = {"w_q": rng.standard_normal((4, 64, 16)), "w_k": rng.standard_normal((4, 64, 16))}
    typed = {name: a.copy() for name, a in generated.items()}
    cells = [(0, 0, 0, 2.0), (1, 5, 3, -0.25), (3, 63, 15, 3e-2), (2, 10, 1, 1e-300)]
    for name in typed:
        for h, r, c, value in cells:
            typed[name][h, r, c] = value
    stored = {name: edits.make_edit(name, a, None) for name, a in typed.items()}
    assert len(edits.encode(stored)) > MAX_EDITS_CHARS          # whole matrices do not fit
    text = edits.encode(stored, generated)
    assert len(text) <= MAX_EDITS_CHARS
    asked = []
    back = edits.decode(text, lambda: asked.append(1) or generated)
    assert asked == [1]
    for name in typed:
        np.testing.assert_array_equal(back[name].array, typed[name])   # exact, every cell
    with raises_message("error.edits.other_settings", matrix="W_Q"):   # another shape: refused
        edits.decode(text, lambda: {n: a[:, :32] for n, a in generated.items()})


@pytest.mark.parametrize("text, tokens", [
    ("a\u200bb c", ["ab", "c"]),                                  # zero-width space dropped
    ("\ufeffhello\u2060 world\u200c", ["hello", "world"]),
    ("👩\u200d💻 codes", ["👩\u200d💻", "codes"]),                  # a joined emoji stays whole
    ("ok 👍🏽!", ["ok", "👍🏽", "!"]),                                # with its skin tone
    ("x\u200d y", ["x", "y"]),                                     # a stray joiner is no token
])
def test_every_token_has_a_visible_label(text, tokens):
    assert attnviz.tokenize(text) == tokens


@pytest.mark.parametrize("text", ["\u200b\u200c\u200d\ufeff", " \u2060 ", "\u200d\u200d"])
def test_a_sentence_of_only_invisible_characters_is_empty(text):
    with raises_message("error.sentence.empty"):
        attnviz.tokenize(text)


# ---- issue 18.12: a token never splits a grapheme cluster; nothing invisible is a token --------

import unicodedata

import regex
from hypothesis import given, settings
from hypothesis import strategies as st

SCRIPTS = [   # (text, its words as a reader splits them at spaces and punctuation)
    ("नमस्ते दुनिया", ["नमस्ते", "दुनिया"]),                                   # Devanagari
    ("क्षत्रिय ने कहा।", ["क्षत्रिय", "ने", "कहा", "।"]),
    ("สวัสดีครับ ชาวโลก", ["สวัสดีครับ", "ชาวโลก"]),                          # Thai
    ("வணக்கம் உலகம்", ["வணக்கம்", "உலகம்"]),                                 # Tamil
    ("שָׁלוֹם עוֹלָם", ["שָׁלוֹם", "עוֹלָם"]),                                    # Hebrew, pointed
    ("مَرْحَبًا بِالْعَالَمِ!", ["مَرْحَبًا", "بِالْعَالَمِ", "!"]),                   # Arabic, harakat
    ("নমস্কার, বিশ্ব", ["নমস্কার", ",", "বিশ্ব"]),                              # Bengali
]


def _clusters_bounds(text: str) -> set[int]:
    """Where the grapheme clusters of `text` start and end (the regex package's \\X)."""
    return {0} | {m.end() for m in regex.finditer(r"\X", text)}


def _check_whole_clusters(text: str, tokens: list[str]) -> None:
    """Every token is a run of whole clusters of the text, in order, and none starts with a
    combining mark (a lone virama or vowel sign)."""
    text = unicodedata.normalize("NFC", text)
    bounds, pos = _clusters_bounds(text), 0
    for t in tokens:
        assert not unicodedata.category(t[0]).startswith("M"), f"{t!r} starts with a mark"
        start = text.index(t, pos)
        assert start in bounds and start + len(t) in bounds, f"{t!r} splits a cluster"
        assert regex.fullmatch(r"\X+", t)
        pos = start + len(t)


@pytest.mark.parametrize("text, words", SCRIPTS)
def test_tokens_of_every_script_are_whole_grapheme_clusters(text, words):
    tokens = attnviz.tokenize(text)
    assert tokens == words
    _check_whole_clusters(text, tokens)


# letters and marks of several scripts, spaces and punctuation: random "words"
_ALPHABET = st.sampled_from(list("नमसतेदुनियाक्षा ि ी ु ं") + list("สวัสดีครับ")
                            + list("வணக்கம்") + list("שָׁלוֹם") + list("abc'-., !?早上"))


@settings(max_examples=300, deadline=None)
@given(st.text(_ALPHABET, min_size=1, max_size=30))
def test_random_text_never_splits_a_cluster(text):
    try:
        tokens = attnviz.tokenize(text)
    except AttnvizInputError:
        assert not text.strip()
        return
    shown = [t.removeprefix(attnviz.core.inputs.DOTTED_CIRCLE) for t in tokens]
    # a cluster that starts with a mark (no letter before it) is shown on ◌, and only such a
    # cluster: '्क' is one cluster (virama, then the consonant it links to), shown as '◌्क'
    for t, s in zip(tokens, shown):
        assert (t != s) == unicodedata.category(s[0]).startswith("M"), (text, tokens)
    text = unicodedata.normalize("NFC", text)
    assert "".join(shown) == "".join(text.split())          # nothing lost, nothing added
    bounds, pos = _clusters_bounds(text), 0
    for t, s in zip(tokens, shown):
        start = text.index(s, pos)
        if t == s:                                           # ◌-tokens start inside a cluster
            assert start in bounds and start + len(s) in bounds, (text, tokens)
        pos = start + len(s)


def _drawn(token: str) -> bool:
    """Draws something: a letter, digit, punctuation mark or symbol that is not one of
    Unicode's default-ignorable code points (Hangul fillers are letters that draw nothing)."""
    return any(unicodedata.category(c)[0] in "LNPS"
               and not regex.match(r"\p{Default_Ignorable_Code_Point}", c) for c in token)


BIDI_CONTROLS = {"LRE", "RLE", "LRO", "RLO", "PDF", "LRI", "RLI", "FSI", "PDI"}


def invisible_characters() -> list[str]:
    """Every code point of category Cc or Cf or default-ignorable, in order. Made by the test
    that reads it, not at collection: a walk over all 1.1 million code points (one regex
    search over them all, not a match per code point)."""
    every = "".join(map(chr, range(0x110000)))
    ignorable = set(regex.findall(r"\p{Default_Ignorable_Code_Point}", every))
    return [c for c in every if unicodedata.category(c) in ("Cc", "Cf") or c in ignorable]


def test_invisible_and_control_characters_never_make_an_invisible_label():
    invisible = invisible_characters()
    assert {"\x00", "\x07", "\u00ad", "\u202e", "\u2066", "\ufeff", "\u3164"} <= set(invisible)
    for c in invisible:
        for text in (f"a{c}b", f"x {c} y", f"{c}", f"{c}{c}q", f"早{c}"):
            try:
                tokens = attnviz.tokenize(text)
            except AttnvizInputError as exc:
                assert exc.msg_id == "error.sentence.empty" and not _drawn(text), repr(text)
                continue
            for t in tokens:
                assert _drawn(t), f"{text!r} gave the invisible token {t!r}"
                assert not any(unicodedata.bidirectional(ch) in BIDI_CONTROLS for ch in t)


@pytest.mark.parametrize("text, tokens", [
    ("one \u202etwo three", ["one", "two", "three"]),     # the override is gone, order kept
    ("x\u00ady", ["xy"]),                                 # a soft hyphen is a hint, not a mark
    ("a\x00b c\x07", ["a", "b", "c"]),                    # a control character separates
    ("🇫🇷 👍🏽 👩‍💻", ["🇫🇷", "👍🏽", "👩‍💻"]),                  # emoji sequences stay whole
    ("\u0301a", ["◌\u0301", "a"]),                       # a mark with no letter, on ◌
])
def test_invisible_characters_are_dropped_and_what_is_drawn_is_kept(text, tokens):
    assert attnviz.tokenize(text) == tokens


def test_a_label_shows_its_invisible_characters_as_codes():
    from attnviz.describe.labels import unique, visible

    assert visible("a\u202eb\x00") == "a⟨U+202E⟩b⟨U+0000⟩"
    assert visible("👩\u200d💻") == "👩\u200d💻"                   # a joiner inside stays
    assert unique(["\u202e", "x"]) == ["⟨U+202E⟩", "x"]


def test_the_token_line_isolates_every_token():
    """A right-to-left token (or an override) cannot reorder its neighbours: each code span is
    wrapped in FSI … PDI and holds no bidi control of its own."""
    from attnviz.app.shared.text import token_line

    line = token_line(["one", "שָׁלוֹם", "\u202etwo", "three"])
    spans = line.split(" ")
    assert len(spans) == 4
    for span in spans:
        assert span.startswith("\u2068`") and span.endswith("`\u2069")
        inner = span[1:-1]
        assert not any(unicodedata.bidirectional(ch) in BIDI_CONTROLS for ch in inner)
    assert "⟨U+202E⟩two" in spans[2]


# ---- issue 18.14: a big paste is judged by its size before a number is read ---------------------
# Every cell below is "x", which is no number: an error about the size (not "'x' is not a
# number") shows the shape was judged before any cell was read.

OVERSIZED = {   # name: (the text, made on use; parse_matrix's bounds; the message id, its numbers)
    "3500 x 3500, app bounds": (lambda: "\n".join([",".join(["x"] * 3500)] * 3500),
                                dict(max_rows=512, max_cols=1024),
                                "error.matrix.rows", dict(rows=3500, max_rows=512)),
    "one row of a million": (lambda: " ".join(["x"] * 1_000_000),
                             dict(max_rows=512, max_cols=1024),
                             "error.matrix.cols", dict(cols=1_000_000, max_cols=1024)),
    "3500 x 3500, no bounds": (lambda: "\n".join([",".join(["x"] * 3500)] * 3500), {},
                               "error.matrix.more_cells", dict(max_cells="1,048,576")),
    "3500 x 3500 full-width": (lambda: "\n".join(["，".join(["ｘ"] * 3500)] * 3500), {},
                               "error.matrix.more_cells", dict(max_cells="1,048,576")),
    "600 x 2000 by spaces": (lambda: "\n".join([" ".join(["x"] * 2000)] * 600), {},
                             "error.matrix.cells", dict(cells="1,200,000")),
    "JSON of 1.2 million": (lambda: "[" + ",".join(['["x","x"]'] * 600_000) + "]", {},
                            "error.matrix.more_cells", dict(max_cells="1,048,576")),
    "JSON of 600 rows": (lambda: "[" + ",".join(['["x"]'] * 600) + "]", dict(max_rows=512),
                         "error.matrix.rows", dict(rows=600, max_rows=512)),
}


@pytest.mark.parametrize("case", OVERSIZED)
def test_an_oversized_paste_is_refused_by_its_size_before_its_numbers_are_read(case):
    make, bounds, msg_id, params = OVERSIZED[case]
    with raises_message(msg_id, **params):
        attnviz.parse_matrix(make(), **bounds)


@pytest.mark.slow
def test_a_matrix_of_the_largest_size_still_parses():
    big = "\n".join([" ".join(["0.5"] * 1024)] * 1024)          # 1024 × 1024: the limit
    assert attnviz.parse_matrix(big).shape == (1024, 1024)


@pytest.mark.parametrize("text", ["[" * 5000 + "]" * 5000,
                                  "[" + '{"a":' * 3000 + "1" + "}" * 3000 + "]",
                                  "[[1, [2]]]"])
def test_json_nested_deeper_than_a_matrix_is_refused_with_a_message(text):
    with raises_message("error.matrix.named", name="X",
                        problem=Message("error.matrix.json_deep")):
        attnviz.parse_matrix(text, name="X")


# ---- issue 18.15: pastes from a Chinese keyboard, a spreadsheet, other encodings --------------

@pytest.mark.parametrize("text, want", [
    ("1，2\n3，4", [[1, 2], [3, 4]]),                        # full-width comma
    ("１，２\n３，４", [[1, 2], [3, 4]]),                      # full-width digits
    ("1、2、3", [[1, 2, 3]]),                                 # enumeration comma
    ("1；2\n3；4", [[1, 2], [3, 4]]),                         # full-width semicolon
    ("１\u3000２\n３\u3000４", [[1, 2], [3, 4]]),              # ideographic space
    ("－１．５，２", [[-1.5, 2]]),                            # full-width minus and point
    ("1;2;3\n4;5;6", [[1, 2, 3], [4, 5, 6]]),                 # semicolon CSV
    ("1;2;3;\n4;5;6;", [[1, 2, 3], [4, 5, 6]]),
    ('"1","2"\n"3","4"', [[1, 2], [3, 4]]),                    # quoted numbers
    ('"1";"2"\n"3";"4"', [[1, 2], [3, 4]]),
    ("\ufeff1,2\n3,4", [[1, 2], [3, 4]]),                      # a pasted byte-order mark
    ("\ufeff[[1, 2], [3, 4]]", [[1, 2], [3, 4]]),
])
def test_spreadsheet_and_full_width_pastes_are_read_as_meant_without_a_note(text, want):
    matrix, notes = matrix_text.parse_matrix_with_notes(text)
    np.testing.assert_array_equal(matrix, want)
    assert notes == []


@pytest.mark.parametrize("text, want, between", [
    ("1,5;2,5\n3,5;4,5", [[1.5, 2.5], [3.5, 4.5]], "semicolons"),
    ("1,5\t2,5\n3,5\t4,5", [[1.5, 2.5], [3.5, 4.5]], "tabs"),
    ('"1,5","2,5"\n"3,5","4,5"', [[1.5, 2.5], [3.5, 4.5]], "quoted"),
    ("1，5；2，5", [[1.5, 2.5]], "semicolons"),
])
def test_a_decimal_comma_is_read_and_said(text, want, between):
    matrix, notes = matrix_text.parse_matrix_with_notes(text, name="X")
    np.testing.assert_array_equal(matrix, want)
    assert notes == [Message("notice.matrix.decimal_comma",
                             between=Message(f"matrix.between.{between}"), row=1, col=1,
                             cell="1,5", dotted="1.5")]
    np.testing.assert_array_equal(attnviz.parse_matrix(text), want)   # the same numbers


# ---- issue 27, item 9: a semicolon between rows on one line, as MATLAB and numpy write --------

@pytest.mark.parametrize("text, want", [
    ("1,2,3;4,5,6", [[1, 2, 3], [4, 5, 6]]),
    ("1 2 3; 4 5 6", [[1, 2, 3], [4, 5, 6]]),
    ("１，２，３；４，５，６", [[1, 2, 3], [4, 5, 6]]),            # a Chinese keyboard's
    ("1, 2, 3; 4, 5, 6;", [[1, 2, 3], [4, 5, 6]]),               # MATLAB's last semicolon
    ("1\t-2; 3.5\t4e1", [[1, -2], [3.5, 40]]),
    ("1 2;3 4;5 6", [[1, 2], [3, 4], [5, 6]]),
])
def test_a_semicolon_on_one_line_ends_a_row(text, want):
    matrix, notes = matrix_text.parse_matrix_with_notes(text)
    np.testing.assert_array_equal(matrix, want)
    assert notes == []
    assert matrix_text.text_shape(text) == np.shape(want)   # what a file's size check reads


@pytest.mark.parametrize("text, want, note", [
    # decided: one line whose every part between semicolons is one number stays a spreadsheet's
    # row of cells, as before — "1,5;2,5" is 1.5 and 2.5 (decimal commas, said), never the rows
    # [1, 5] and [2, 5]; for those, write "1 5; 2 5" or one row a line
    ("1,5;2,5", [[1.5, 2.5]], True),
    ("1;2;3", [[1, 2, 3]], False),
    ("1,5;2", [[1.5, 2]], True),
    ('"1,5";"2,5"', [[1.5, 2.5]], True),                          # quoted: a CSV's cells
])
def test_one_line_of_single_numbers_between_semicolons_stays_one_row(text, want, note):
    matrix, notes = matrix_text.parse_matrix_with_notes(text)
    np.testing.assert_array_equal(matrix, want)
    assert bool(notes) == note


def test_rows_between_semicolons_of_different_lengths_are_named():
    with pytest.raises(AttnvizInputError) as caught:
        attnviz.parse_matrix("1,2,3;4,5")
    assert caught.value.msg_id == "error.matrix.ragged"
    assert caught.value.params == {"row": 2, "count": 2, "first": 3}


def test_only_the_full_width_forms_are_translated():
    """NFKC of the whole text would read "2²" as 22 and "①" as 1: they stay refused."""
    for text in ("2²", "①", "½"):
        with raises_message("error.cell.not_a_number", where=cell_at(1, 1), value=repr(text)):
            attnviz.parse_matrix(text)


def test_a_typed_cell_in_full_width_digits_is_its_number():
    assert matrix_text.number_at("－１．５", "W_Q, row 1, column 1") == -1.5
    assert matrix_text.number_at("\ufeff2", "W_Q, row 1, column 1") == 2.0


@pytest.mark.parametrize("data, note, said", [
    ("1;2\r\n3;4\r\n".encode("utf-16"), "read_as", "UTF-16-LE"),      # Excel "Unicode text"
    ("1\t2\r\n3\t4\r\n".encode("utf-16-le"), "read_as", "UTF-16-LE"),  # no byte-order mark
    ("1\t2\n3\t4\n".encode("utf-16-be"), "read_as", "UTF-16-BE"),
    ("1;2\n3;4".encode("utf-32"), "read_as", "UTF-32-LE"),
    ("1\xa02\n3\xa04".encode("latin-1"), "not_utf8", "Windows-1252"),  # a no-break space
    ("\ufeff1,2\n3,4".encode("utf-8"), None, None),                    # Excel's UTF-8 CSV
])
def test_csv_files_in_other_encodings_are_read_and_their_encoding_said(data, note, said):
    from attnviz.io import matrix_files

    matrix, notes = matrix_files.read_matrix_file_with_notes("w.csv", data)
    np.testing.assert_array_equal(matrix, [[1, 2], [3, 4]])
    assert notes == ([] if note is None else
                     [Message(f"notice.file.{note}", name="w.csv", encoding=said)])


def test_a_binary_file_is_refused_as_no_text():
    from attnviz.io import matrix_files

    with raises_message("error.file.not_text", name="w.csv"):
        matrix_files.read_matrix_file("w.csv", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x01")


@pytest.mark.parametrize("piece, shown", [
    (" Paris", "␣Paris"), ("Paris ", "Paris␣"), ("  ", "␣␣"), (" a b ", "␣a b␣"),
    ("\n", "↵"), ("\tx", "⇥x"), ("丽", "丽"), ("", ""),
    ("\r", "␍"), ("a\x0bb", "a␋b"), ("\x0c ", "␌␣"), ("\x1c", "⟨U+001C⟩"), ("\u2028", "⟨U+2028⟩")])
def test_a_token_is_written_in_one_notation_on_every_page(piece, shown):
    # issue 27.13: Generate, the experiments and Read the model write a piece the same way
    from attnviz.describe.labels import token_shown
    assert token_shown(piece) == shown
