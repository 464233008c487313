"""The head atlas in and out: a corpus read from files (a folder of .txt, a .txt of texts
separated by blank lines, .jsonl with a "text" field, .csv with a "text" column) and an atlas
written as one .npz (``models.readers.atlas.Partial.to_arrays`` and every head's PCA map), read back
without pickling."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import numpy as np

from attnviz.core.errors import AttnvizInputError
from attnviz.models.readers.atlas import Partial

__all__ = ["read_atlas", "read_corpus", "texts_of", "write_atlas"]

SUFFIXES = (".txt", ".jsonl", ".csv")


def texts_of(name: str, data: bytes) -> list[str]:
    """The texts in one file's bytes, by its suffix: .txt (blank-line separated), .jsonl (each
    line's "text"), .csv (the "text" column, or the first). Empty texts are left out."""
    content = data.decode("utf-8-sig")
    suffix = Path(name).suffix.lower()
    if suffix == ".jsonl":
        texts = []
        for line in content.splitlines():
            if line.strip():
                record = json.loads(line)
                texts.append(record["text"] if isinstance(record, dict) else str(record))
    elif suffix == ".csv":
        rows = list(csv.reader(io.StringIO(content)))
        column = rows[0].index("text") if rows and "text" in rows[0] else 0
        texts = [r[column] for r in rows[1 if rows and "text" in rows[0] else 0:]
                 if len(r) > column]
    elif suffix == ".txt":
        texts = content.replace("\r\n", "\n").split("\n\n")
    else:
        raise AttnvizInputError("error.atlas.corpus_kind", name=name,
                                kinds=", ".join(SUFFIXES))
    return [t.strip() for t in texts if t.strip()]


def read_corpus(path: str | Path) -> list[str]:
    """Every text in a file or a folder's files (sorted by name, those of SUFFIXES)."""
    path = Path(path)
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.suffix.lower() in SUFFIXES)
    elif path.is_file():
        files = [path]
    else:
        raise AttnvizInputError("error.atlas.corpus_missing", path=str(path))
    return [t for f in files for t in texts_of(f.name, f.read_bytes())]


def write_atlas(file, partial: Partial, maps: np.ndarray | None = None) -> None:
    """The atlas as a compressed .npz: the partial's arrays, and `maps` (L, H, 2S, 2) (every
    head's joint PCA map, ``atlas_map.pca_all``) when given."""
    arrays = partial.to_arrays()
    if maps is not None:
        arrays["pca_maps"] = np.asarray(maps, np.float32)
    np.savez_compressed(file, **arrays)


def read_atlas(file) -> tuple[Partial, np.ndarray | None]:
    """(partial, PCA maps or None) from ``write_atlas``'s file."""
    with np.load(file, allow_pickle=False) as data:
        arrays = {k: data[k] for k in data.files}
    maps = arrays.pop("pca_maps", None)
    return Partial.from_arrays(arrays), maps
