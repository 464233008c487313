"""Taking a trace out as files: every intermediate as .npz, a zip of CSVs, and JSON (numpy only;
the HTML report, which needs plotly, is attnviz.io.report).

Names are the trace's field names (q, k, v, scores, …); per-head arrays keep their head axis in
.npz and JSON, and become one CSV per head in the zip. Beside the intermediates each file carries
what is needed to take the model away and re-run it: the token labels (``tokens_q``,
``tokens_k``), the parameters (``w_q``, ``w_k``, ``w_v``, ``w_o`` and the biases ``b_q`` … that
exist; none for a trace of Q, K, V entered directly) and the settings (``scale``, ``num_heads``,
``causal``, the boolean ``mask``, and the app's settings where given: input mode, sentence,
d_model, heads, initialisation, seed, …). Used as methods of AttentionTrace: ``t.to_npz(file)``,
``t.to_csv_zip(file)``, ``t.to_json()``;
``MultiHeadWeights.from_npz(file)`` reads the parameters back, and
``attnviz.session.view_files.view_from_file(file)`` the app's whole view. In CSV, a label that starts
like a spreadsheet formula (``=``, ``+``, ``-``, ``@`` …) gets a leading ``'``.
"""

from __future__ import annotations

import csv
import io
import json
import math
import zipfile
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from attnviz.core.errors import AttnvizInputError
from attnviz.describe.labels import matrix_labels, step_layout, trace_tokens
from attnviz.core.trace import set_trace_writers
from attnviz.core.weights import PARAMETERS

ARRAY_FIELDS = ("embedded", "x", "context", "q", "k", "v", "q_normed", "k_normed", "q_rotated",
                "k_rotated", "scores", "scaled_scores", "masked_scores", "weights", "z", "concat",
                "output", "output_normed")


def arrays_of(trace) -> dict[str, np.ndarray]:
    """Every stored intermediate of `trace` by name (those that are None are left out)."""
    out = {name: np.asarray(getattr(trace, name)) for name in ARRAY_FIELDS
           if getattr(trace, name) is not None}
    if trace.mask is not None:
        out["mask"] = np.asarray(trace.mask)
    return out


def parameters_of(trace) -> dict[str, np.ndarray]:
    """W_Q, W_K, W_V, W_O and the biases that exist; empty for a trace_qkv trace (no weights)."""
    w = trace.params
    if w is None:
        return {}
    return {name: np.asarray(getattr(w, name)) for name in PARAMETERS
            if getattr(w, name) is not None}


def is_causal(trace) -> bool:
    """True when the trace's boolean mask is exactly the causal one (key j > query i) in every
    head."""
    if trace.mask is None:
        return False
    shape = (trace.num_heads, trace.n_q, trace.n_k)
    future = np.triu(np.ones((trace.n_q, trace.n_k), dtype=bool), k=1)   # (n_q, n_k)
    return bool(np.array_equal(np.broadcast_to(trace.mask, shape),
                               np.broadcast_to(future, shape)))


def to_npz(trace, file, tokens_q=None, tokens_k=None, settings=None) -> None:
    """Save every intermediate, the token labels, the parameters and the settings to `file`, a
    path or a binary file object. Labels are unicode arrays, so ``np.load(file,
    allow_pickle=False)`` reads everything. `settings` (the app's, name → str, int or bool:
    ``Settings.to_dict()``) is saved as JSON text under the key ``settings``."""
    tokens_q, tokens_k = trace_tokens(trace, tokens_q, tokens_k)
    extra = {} if settings is None else {"settings": np.array(_settings_json(settings))}
    np.savez_compressed(file, scale=np.array(trace.scale, dtype=np.float64),
                        num_heads=np.array(trace.num_heads), causal=np.array(is_causal(trace)),
                        tokens_q=np.array(tokens_q, dtype=str),
                        tokens_k=np.array(tokens_k, dtype=str),
                        **extra, **arrays_of(trace), **parameters_of(trace))


def to_json(trace, tokens_q=None, tokens_k=None, settings=None) -> str:
    """Every intermediate and parameter as nested lists under "arrays" (−∞, in masked scores,
    is written as null), the token labels (at the top and in "arrays", as in the .npz), the
    settings and the steps' texts; the app's `settings` (as in `to_npz`) under "settings"."""
    tokens_q, tokens_k = trace_tokens(trace, tokens_q, tokens_k)
    arrays = {name: _json_array(a)
              for name, a in {**arrays_of(trace), **parameters_of(trace)}.items()}
    arrays.update(tokens_q=tokens_q, tokens_k=tokens_k)
    doc = {"scale": trace.scale, "num_heads": trace.num_heads, "causal": is_causal(trace),
           "tokens_q": tokens_q, "tokens_k": tokens_k, "warnings": list(trace.warnings),
           **({} if settings is None else {"settings": json.loads(_settings_json(settings))}),
           "steps": [{"name": s.name, "title": s.title, "formula": s.formula,
                      "explanation": s.explanation, "axes": list(s.axes)} for s in trace.steps],
           "arrays": arrays}
    return json.dumps(doc, ensure_ascii=False, allow_nan=False)


def _settings_json(settings) -> str:
    return json.dumps(dict(settings), ensure_ascii=False, allow_nan=False)


def read_export(file) -> tuple[dict | None, dict[str, np.ndarray]]:
    """What a .npz or JSON export of `to_npz` / `to_json` holds to rebuild its input: (the
    settings, or None when it was saved without them; {"x" and each parameter present: float64
    array}). `file`: a path, bytes, JSON text or a binary file object. AttnvizInputError for
    a file that is neither."""
    if isinstance(file, (str, Path)) and not str(file).lstrip().startswith("{"):
        try:
            file = Path(file).read_bytes()
        except OSError as exc:
            raise AttnvizInputError("error.file.unreadable", file=str(file)[:80],
                                    problem=exc.strerror) from None
    data = file.encode() if isinstance(file, str) else file
    if not isinstance(data, bytes):
        data = data.read()
    if data[:2] == b"PK":                                   # a zip: .npz
        return _read_npz(data)
    try:
        doc = json.loads(data.decode("utf-8-sig"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise AttnvizInputError("error.file.not_an_export") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("arrays"), dict):
        raise AttnvizInputError("error.file.json_no_arrays")
    arrays = {}
    for name in ("x", *PARAMETERS):
        if doc["arrays"].get(name) is not None:
            arrays[name] = _float_array(doc["arrays"][name], name)
    return doc.get("settings"), arrays


def _read_npz(data: bytes) -> tuple[dict | None, dict[str, np.ndarray]]:
    unreadable = (OSError, ValueError, EOFError, zipfile.BadZipFile)
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as npz:
            arrays = {n: _float_array(npz[n], n) for n in ("x", *PARAMETERS)
                      if n in npz.files}
            text = str(npz["settings"]) if "settings" in npz.files else None
    except unreadable as exc:
        raise AttnvizInputError("error.npz.unreadable", problem=str(exc)) from None
    try:
        return (None if text is None else json.loads(text)), arrays
    except (ValueError, RecursionError):
        raise AttnvizInputError("error.npz.settings_json") from None


def _float_array(values, name: str) -> np.ndarray:
    try:
        a = np.array(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise AttnvizInputError("error.file.not_numbers", name=name) from None
    if a.ndim == 0 or not np.isfinite(a).all():
        raise AttnvizInputError("error.file.not_finite", name=name)
    return a


def _json_array(a: np.ndarray) -> list:
    if a.dtype == bool:
        return a.tolist()
    out = np.where(np.isfinite(a), a, np.nan).astype(object)
    out[~np.isfinite(a)] = None
    return out.tolist()


def to_csv_zip(trace, file, tokens_q=None, tokens_k=None) -> None:
    """A zip of CSV files, one per array (per head: ``weights_head0.csv``), with the token
    labels (queries, keys) or feature names (d0, d1, …) as row and column headers; the
    parameters too, where the trace has them (``w_q_head0.csv`` …, ``w_o.csv``, ``b_q.csv`` with
    one row per head, ``b_o.csv`` with one row)."""
    with zipfile.ZipFile(file, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for step in trace.steps:
            if step.on_demand:
                continue
            for h in range(trace.num_heads) if step.per_head else [None]:
                layout = step_layout(trace, step.name, h or 0, tokens_q, tokens_k)
                name = step.name if h is None else f"{step.name}_head{h}"
                zf.writestr(f"{name}.csv", _csv(layout.array, layout.rows, layout.cols))
        for name, a in parameters_of(trace).items():        # labelled as on the page
            if a.ndim == 3:                                  # (H, d_in, d_out): one per head
                for h, m in enumerate(a):
                    zf.writestr(f"{name}_head{h}.csv", _csv(m, *_param_labels(trace, name, m)))
            elif name == "w_o":                              # (H*d_v, d_out)
                zf.writestr("w_o.csv", _csv(a, *_param_labels(trace, name, a)))
            else:                                            # biases: one row per head, or one
                rows = [f"head{h}" for h in range(len(a))] if a.ndim == 2 else [name]
                a = np.atleast_2d(a)
                zf.writestr(f"{name}.csv", _csv(a, rows, _param_labels(trace, name, a)[1]))


def _param_labels(trace, name: str, a: np.ndarray) -> tuple[list[str], list[str]]:
    return matrix_labels(name, a.shape, (), trace.num_heads, trace.d_v)


# A cell starting with one of these is a formula to a spreadsheet (Excel, LibreOffice, Sheets):
# OWASP's CSV injection advice and ASVS 5.0 1.2.10 (which adds NUL)
FORMULA_START = ("=", "+", "-", "@", "\t", "\r", "\0")


def _csv(a: np.ndarray, rows: list[str], cols: list[str]) -> str:
    """One matrix as CSV text: a header row of column labels, then each row's label and its
    numbers. Labels (tokens: user text) are text cells, neutralised; numbers are written as
    numbers (a negative one stays ``-0.5``)."""
    buf = io.StringIO()
    writer = csv.writer(buf)     # RFC 4180: CRLF; quotes cells with , " CR or LF (tokens can)
    writer.writerow([""] + [text_cell(c) for c in cols])
    for label, row in zip(rows, a):
        writer.writerow([text_cell(label)] + [_number(v) for v in row])
    return buf.getvalue()


def text_cell(text) -> str:
    """A label as a cell a spreadsheet shows as text and never runs: one that starts like a
    formula gets a leading single quote (``=1+1`` → ``'=1+1``), as OWASP advises."""
    text = str(text)
    return "'" + text if text.startswith(FORMULA_START) else text


def _number(v) -> str:
    v = float(v)
    if math.isinf(v):
        return "-inf" if v < 0 else "inf"
    return repr(v)


# what AttentionTrace.to_npz, to_csv_zip and to_json call: the core writes no files itself
set_trace_writers(SimpleNamespace(to_npz=to_npz, to_csv_zip=to_csv_zip, to_json=to_json))
