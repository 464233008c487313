"""Matrices typed or pasted by the user, read exactly as written: text (one row per line, or a
JSON list of lists) → a float64 matrix, each problem naming its row and column; one number as
typed (`number_at`), a cell as the page names it (`cell_name`), an uploaded file's bytes as text
(`decode_text`)."""

from __future__ import annotations

import codecs
import csv
import json
import math
import re
import unicodedata

import numpy as np

from attnviz.core.errors import AttnvizInputError
from attnviz.core.inputs import INVISIBLE
from attnviz.i18n import Message

MAX_CELLS = 1 << 20         # the most numbers a typed or pasted matrix may hold (1024 × 1024)
_MINUS = str.maketrans({"−": "-", "–": "-", "\u00a0": " "})
# What a Chinese or Japanese keyboard types for digits, signs and separators: full-width forms
# (１２，３；－．) read as their ASCII twins (Unicode's NFKC of that block only: NFKC of the
# whole text would also turn "²" into "2"), the ideographic space as a space and the
# enumeration comma 、 as a comma.
_WIDE = str.maketrans({**{chr(c): unicodedata.normalize("NFKC", chr(c))
                          for c in range(0xFF01, 0xFF5F)},
                       "\u3000": " ", "\u3001": ",", "\uff64": ",", "\ufe50": ","})
_DECIMAL_COMMA = re.compile(r"[+-]?\d+,\d+(?:[eE][+-]?\d+)?")
_CSV_SEPARATORS = ";,"        # split by the csv module: a quoted cell may hold the separator


def parse_matrix(text: str, *, max_rows: int | None = None, max_cols: int | None = None,
                 name: str | None = None) -> np.ndarray:
    """A float64 matrix from text: one row per line, cells split by commas, tabs or spaces;
    or a JSON list of lists. Errors name the row and column (counted from 1), after `name`
    (the matrix as the page names it, e.g. "W_Q of head 0") when given.

    On one line, a semicolon ends a row, as MATLAB and numpy write a matrix: "1,2,3;4,5,6"
    and "1 2 3; 4 5 6" are two rows (see ``_semicolon_rows`` for when). Also read as a
    spreadsheet or a Chinese keyboard writes them: semicolons between cells (then a comma
    inside a number is its decimal point: "1,5;2,5" is 1.5, 2.5 — on one line too: each part
    is one number), quoted numbers ("1","2"), full-width digits and separators (１，２), a
    byte-order mark. The size is judged before any number is read: an oversized paste is
    refused at once."""
    return parse_matrix_with_notes(text, max_rows=max_rows, max_cols=max_cols, name=name)[0]


def parse_matrix_with_notes(text: str, *, max_rows: int | None = None,
                            max_cols: int | None = None,
                            name: str | None = None) -> tuple[np.ndarray, list[str]]:
    """`parse_matrix`, and sentences saying how an ambiguous text was read (a decimal comma:
    "read '1,5' as 1.5"), for the page to show beside the matrix."""
    if not isinstance(text, str):
        raise AttnvizInputError("error.matrix.not_text", type=type(text).__name__)
    prefix = name or None
    text = text.strip()
    _check_raw_size(text, prefix, max_rows)        # judged before anything else is done
    if not text.isascii():               # (an ASCII text has nothing to translate: skipped)
        text = INVISIBLE.sub("", text).translate(_MINUS).translate(_WIDE).strip()
    if not text:
        raise _matrix_error(prefix, "error.matrix.empty")
    notes: list[str] = []
    if text.startswith("["):
        _check_json_size(text, prefix, max_rows, max_cols)
        rows = _json_rows(text, name)
    else:
        lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
        separator = _separator(text)
        rows_of_line = _semicolon_rows(lines)
        if rows_of_line is not None:             # one line, a semicolon after each row
            lines, separator = rows_of_line, None
        _check_size(prefix, [_width(ln, separator) for ln in lines], max_rows, max_cols)
        rows = _text_rows(lines, separator, name, notes)
    _check_size(prefix, [len(r) for r in rows], max_rows, max_cols)
    return np.array(rows, dtype=np.float64), notes


def text_shape(text: str) -> tuple[int, int]:
    """(rows, columns of the first row) of a typed or pasted matrix, counted without reading a
    number; (0, 0) for a text with no line."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if not lines:
        return 0, 0
    first = lines[0] if lines[0].isascii() else \
        INVISIBLE.sub("", lines[0]).translate(_MINUS).translate(_WIDE)
    rows_of_line = _semicolon_rows([first.strip()]) if len(lines) == 1 else None
    if rows_of_line is not None:
        return len(rows_of_line), _width(rows_of_line[0], None)
    separator = ";" if ";" in text or "；" in text else _separator(first)
    return len(lines), _width(first.strip(), separator)


# byte-order marks, longest first (UTF-32's little-endian mark starts with UTF-16's)
_BOMS = ((codecs.BOM_UTF32_LE, "utf-32-le"), (codecs.BOM_UTF32_BE, "utf-32-be"),
         (codecs.BOM_UTF8, "utf-8"), (codecs.BOM_UTF16_LE, "utf-16-le"),
         (codecs.BOM_UTF16_BE, "utf-16-be"))


def decode_text(data: bytes, name: str | Message | None = None
                ) -> tuple[str, Message | None]:
    """The text of a file's bytes, and a sentence naming the encoding when it was not UTF-8:
    a byte-order mark says which (UTF-8, UTF-16, UTF-32: Excel's "Unicode text" is UTF-16);
    UTF-16 without one shows as a zero byte beside each ASCII character; otherwise UTF-8, and
    what is not UTF-8 is read as Windows-1252 (Latin-1 with curly quotes and €), as spreadsheets
    in Western Europe save. AttnvizInputError for bytes that are no text (zero bytes in no
    UTF-16 pattern, e.g. an image or a spreadsheet's .xlsx). `name`: the file's name (None:
    "the file", in the reader's language)."""
    name = Message("file.unnamed") if name is None else name
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            try:
                text = data[len(bom):].decode(encoding)
            except UnicodeDecodeError:
                break
            return text, None if encoding == "utf-8" else \
                Message("notice.file.read_as", name=name, encoding=encoding.upper())
    if b"\x00" in data:
        even, odd = data[0::2].count(0), data[1::2].count(0)
        half = len(data) // 2
        for zeros, other, encoding in ((odd, even, "utf-16-le"), (even, odd, "utf-16-be")):
            if len(data) % 2 == 0 and zeros >= half * 0.5 and other == 0:
                try:
                    return data.decode(encoding), Message("notice.file.read_as", name=name,
                                                          encoding=encoding.upper())
                except UnicodeDecodeError:
                    pass
        raise AttnvizInputError("error.file.not_text", name=name)
    try:
        return data.decode("utf-8"), None
    except UnicodeDecodeError:
        pass
    try:
        return data.decode("cp1252"), Message("notice.file.not_utf8", name=name,
                                              encoding="Windows-1252")
    except UnicodeDecodeError:
        return data.decode("latin-1"), Message("notice.file.not_utf8", name=name,
                                               encoding="Latin-1")


def _check_raw_size(text: str, prefix: str, max_rows: int | None) -> None:
    """Refuse an oversized text by counting a few characters, before it is translated or
    split (C-speed counts: a 3500 × 3500 paste is refused in a tenth of a second): its lines
    (one row each, when `max_rows` is given) and its commas or semicolons (each separates, or
    is the decimal comma of, at least one number of its own)."""
    if max_rows is not None and not text.startswith("[") and text.count("\n") >= max_rows:
        rows = sum(1 for ln in text.splitlines() if ln.strip())
        if rows > max_rows:
            raise _matrix_error(prefix, "error.matrix.rows", rows=rows, max_rows=max_rows)
    if '"' in text:                       # a quoted cell may hold several commas
        return
    least = max(sum(text.count(c) for c in ",，、､﹐"), sum(text.count(c) for c in ";；"))
    if least > MAX_CELLS:
        raise _matrix_error(prefix, "error.matrix.more_cells", cells=f"{least:,}",
                            max_cells=f"{MAX_CELLS:,}")


def _semicolon_rows(lines: list[str]) -> list[str] | None:
    """The rows of a matrix written on one line with a semicolon after each row, as MATLAB and
    numpy write it ("1,2,3;4,5,6", "1 2 3; 4 5 6", a last ";" allowed); None for any other
    text (its rows are its lines, its semicolons a spreadsheet's cell separators).

    Read so only where rows are not otherwise separated — `lines` is one line — no cell is
    quoted (quotes are a CSV's: "1,5";"2,5" is a row of cells), and every part between the
    semicolons holds several numbers by commas or spaces. So "1;2;3" stays a spreadsheet's row
    of three cells. And the line that reads both ways, "1,5;2,5" (rows [1, 5] and [2, 5], or a
    spreadsheet's 1.5 and 2.5 with decimal commas), is decided as the spreadsheet's, as it was
    before and as "1,5;2,5" on several lines is, with the note that says so: when every part is
    one number with a decimal comma, the line is one row. Its rows are written "1 5; 2 5"."""
    if len(lines) != 1 or ";" not in lines[0] or '"' in lines[0]:
        return None
    parts = [p.strip() for p in lines[0].split(";")]
    if parts[-1] == "":
        parts.pop()                                   # MATLAB's [1 2; 3 4;]
    if len(parts) < 2 or any(_width(p, None) < 2 for p in parts) \
            or all(_DECIMAL_COMMA.fullmatch(p) for p in parts):
        return None
    return parts


def _separator(text: str) -> str | None:
    """The cells' separator for the whole text: ";" if any line has one (a spreadsheet in a
    language with decimal commas); a tab where tabs and commas both appear ("1,5<tab>2,5",
    a copied spreadsheet with decimal commas); otherwise None: each line by its commas, or
    by its spaces and tabs."""
    if ";" in text:
        return ";"
    if "\t" in text and "," in text:
        return "\t"
    return None


def _cells_of(line: str, separator: str | None) -> list[str]:
    if separator is None:
        separator = "," if "," in line else None
    if separator is None:
        cells = line.split()
    elif separator in _CSV_SEPARATORS and '"' in line:
        cells = next(csv.reader([line], delimiter=separator, skipinitialspace=True))
    else:
        cells = line.split(separator)
    cells = [c.strip() for c in cells]
    if separator is not None and len(cells) > 1 and cells[-1] == "":
        cells.pop()  # a trailing separator, as spreadsheets write
    return cells


def _width(line: str, separator: str | None) -> int:
    """How many cells `line` has, counted without splitting it (an upper bound where a quoted
    cell holds the separator): what the size check reads."""
    if separator is None:
        separator = "," if "," in line else None
    if separator is None:
        return len(line.split())
    return line.count(separator) + 1 - line.endswith(separator)


def _check_size(prefix: str, widths: list[int], max_rows: int | None,
                max_cols: int | None) -> None:
    """Refuse a matrix by its shape before its numbers are read: too many rows, columns or
    numbers, or rows of different lengths."""
    if max_rows is not None and len(widths) > max_rows:
        raise _matrix_error(prefix, "error.matrix.rows", rows=len(widths), max_rows=max_rows)
    widest = max(widths, default=0)
    if max_cols is not None and widest > max_cols:
        raise _matrix_error(prefix, "error.matrix.cols", cols=widest, max_cols=max_cols)
    if sum(widths) > MAX_CELLS:
        raise _matrix_error(prefix, "error.matrix.cells", cells=f"{sum(widths):,}",
                            max_cells=f"{MAX_CELLS:,}")
    for i, w in enumerate(widths):
        if w != widths[0]:
            raise _matrix_error(prefix, "error.matrix.ragged", row=i + 1, count=w,
                                first=widths[0])


def _text_rows(lines: list[str], separator: str | None, name: str | None,
               notes: list[str]) -> list[list[float]]:
    rows = []
    for i, line in enumerate(lines, start=1):
        row = []
        for j, cell in enumerate(_cells_of(line, separator), start=1):
            cell = cell.strip("\"'").strip()                  # "1.5" quoted, as CSV writes
            if _DECIMAL_COMMA.fullmatch(cell) and (separator or '"' in line):
                dotted = cell.replace(",", ".")
                if not notes:
                    notes.append(_decimal_comma_note(separator, cell, dotted, i, j))
                cell = dotted
            value = _plain_number(cell)
            row.append(number_at(cell, cell_name(name, i, j)) if value is None else value)
        rows.append(row)
    return rows


def _plain_number(cell: str) -> float | None:
    """The number in a plain decimal cell, or None when `number_at` must judge it (not plain,
    too large or too small): the quick path for the many cells that are fine."""
    if not _DECIMAL.fullmatch(cell):
        return None
    value = float(cell)
    if math.isinf(value) or (value == 0 and re.search(r"[1-9]", cell.lower().split("e")[0])):
        return None
    return value


def _decimal_comma_note(separator: str | None, cell: str, dotted: str, row: int,
                        col: int) -> Message:
    between = {";": "semicolons", "\t": "tabs"}.get(separator, "quoted")
    return Message("notice.matrix.decimal_comma", between=Message(f"matrix.between.{between}"),
                   row=row, col=col, cell=cell, dotted=dotted)


def _check_json_size(text: str, prefix: str, max_rows: int | None,
                     max_cols: int | None) -> None:
    """Judge a JSON matrix by counting before it is parsed: its nesting (a matrix is a list of
    lists; 5000 nested lists would exhaust Python's recursion), its rows (one "[" each) and
    numbers (one more than its commas)."""
    marks = np.frombuffer(re.sub(r'"(?:[^"\\]|\\.)*"', '""', text).encode("utf-8"),
                          dtype=np.uint8)
    opened = np.isin(marks, np.frombuffer(b"[{", np.uint8)).astype(np.int64)
    closed = np.isin(marks, np.frombuffer(b"]}", np.uint8)).astype(np.int64)
    if np.cumsum(opened - closed).max(initial=0) > 2:
        raise _matrix_error(prefix, "error.matrix.json_deep")
    rows = max(1, int(opened.sum()) - 1)
    first_row = text[:text.find("]") + 1].count(",") + 1
    if max_cols is not None and first_row > max_cols:
        raise _matrix_error(prefix, "error.matrix.cols", cols=first_row, max_cols=max_cols)
    if max_rows is not None and rows > max_rows:
        raise _matrix_error(prefix, "error.matrix.rows", rows=rows, max_rows=max_rows)
    if text.count(",") + 1 > MAX_CELLS:
        raise _matrix_error(prefix, "error.matrix.more_cells", cells=f"{MAX_CELLS:,}",
                            max_cells=f"{MAX_CELLS:,}")


def _json_rows(text: str, name: str | None) -> list[list[float]]:
    prefix = name or None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise _matrix_error(prefix, "error.matrix.json_invalid", problem=exc.msg,
                            line=exc.lineno, col=exc.colno) from None
    if isinstance(data, list) and data and not any(isinstance(r, list) for r in data):
        data = [data]  # a flat list is one row
    if not isinstance(data, list) or not data:
        raise _matrix_error(prefix, "error.matrix.json_empty")
    rows = []
    for i, row in enumerate(data, start=1):
        if not isinstance(row, list):
            raise _matrix_error(prefix, "error.matrix.json_row", row=i)
        rows.append([number_at(c, cell_name(name, i, j)) for j, c in enumerate(row, start=1)])
    return rows


# ---- one number, exactly as typed ------------------------------------------------------------

# A decimal number as people write it: optional sign, digits with an optional point (or a
# leading point), optional exponent. Nothing else: no "1,5", "1_000", "0x10", "nan" or "inf".
_DECIMAL = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")


def cell_name(matrix: str | Message | None, row: int, col: int,
              row_label: str | None = None, col_label: str | None = None) -> Message:
    """"W_Q of head 0, row 2 (d1), column 1 (q0)": where a cell is, as the page labels it, in
    the reader's language; row and column counted from 1, with the shown labels in brackets
    when given."""
    row_part = Message("cell.row_labelled", row=row, label=row_label) if row_label else \
        Message("cell.row", row=row)
    col_part = Message("cell.col_labelled", col=col, label=col_label) if col_label else \
        Message("cell.col", col=col)
    if matrix:
        return Message("cell.in_matrix", matrix=matrix, row=row_part, col=col_part)
    return Message("cell.at", row=row_part, col=col_part)


def _matrix_error(name: str | Message | None, msg_id: str, **params) -> AttnvizInputError:
    """The error `msg_id` about a matrix, after its name ("W_Q of head 0: …") when given."""
    if not name:
        return AttnvizInputError(msg_id, **params)
    return AttnvizInputError("error.matrix.named", name=name, problem=Message(msg_id, **params))


def number_at(cell, where: str | Message) -> float:
    """The float a person wrote in one cell, or AttnvizInputError "<where>: <what is wrong>".

    Text must be a plain decimal (scientific notation, a sign and a leading point are fine);
    a comma as decimal point, NaN, infinity, or a number beyond float64 are refused, never
    turned into another number."""
    if isinstance(cell, bool) or cell is None or isinstance(cell, (list, dict)):
        shown = json.dumps(cell) if not isinstance(cell, (list, dict)) else \
            Message("cell.a_list" if isinstance(cell, list) else "cell.an_object")
        raise AttnvizInputError("error.cell.not_a_number", where=where, value=shown)
    if isinstance(cell, str):
        text = cell if cell.isascii() else INVISIBLE.sub("", cell).translate(_WIDE)
        text = text.translate(_MINUS).strip()
        if text == "":
            raise AttnvizInputError("error.cell.empty", where=where)
        shown = repr(text if len(text) <= 20 else text[:20] + "…")
        if not _DECIMAL.fullmatch(text):
            if re.fullmatch(r"[+-]?\d*,\d+", text):
                raise AttnvizInputError("error.cell.decimal_comma", where=where, value=shown,
                                        dotted=text.replace(",", "."))
            raise AttnvizInputError("error.cell.not_a_number", where=where, value=shown)
        value = float(text)
        if math.isinf(value):
            raise AttnvizInputError("error.cell.too_large_text", where=where, value=shown)
        if value == 0 and re.search(r"[1-9]", text.lower().split("e")[0]):
            raise AttnvizInputError("error.cell.too_small", where=where, value=shown)
        return value
    value = float(cell)
    if math.isnan(value):
        raise AttnvizInputError("error.cell.nan", where=where)
    if math.isinf(value):
        raise AttnvizInputError("error.cell.too_large", where=where, value=repr(cell))
    return value
