"""The head atlas's bundled corpus: short English and Chinese texts written for attnviz (source
and licence in README.md beside them), one text per blank-line-separated paragraph."""

from __future__ import annotations

from pathlib import Path

__all__ = ["NAMES", "texts"]

HERE = Path(__file__).resolve().parent
NAMES = ("en", "zh", "all")


def texts(name: str = "all") -> list[str]:
    """The bundled corpus `name` (en, zh, or all: English then Chinese) as a list of texts."""
    if name == "all":
        return texts("en") + texts("zh")
    if name not in NAMES:
        raise KeyError(name)
    content = (HERE / f"{name}.txt").read_text(encoding="utf-8")
    return [t.strip() for t in content.split("\n\n") if t.strip()]
