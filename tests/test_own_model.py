"""Issue 37.3: your own model. ``attnviz app --model PATH.gguf`` (repeatable) and
``ATTNVIZ_MODELS`` add local GGUF files of the four families read to the model choice, named
from the file's own metadata; only the person who starts the server chooses files, and a file
that cannot be read is refused before the server starts, in words."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from tests.browser_helpers import VIEWPORT, first_heatmap, streamlit_server, wait_for_app


def test_a_file_attnviz_cannot_read_is_refused_before_the_server_starts(tmp_path):
    not_gguf = tmp_path / "notes.gguf"
    not_gguf.write_text("not a model")
    for path in (tmp_path / "missing.gguf", not_gguf):
        done = subprocess.run([sys.executable, "-m", "attnviz.cli", "app", "--model", str(path)],
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 2
        assert str(path) in done.stderr and "Traceback" not in done.stderr


def test_the_model_options_are_parsed_and_the_rest_goes_to_streamlit(tmp_path):
    from attnviz import cli

    models, rest = cli._models(["--model", "a.gguf", "--server.port", "8600",
                                f"--model={tmp_path}/b.gguf"])
    assert [m.name for m in models] == ["a.gguf", "b.gguf"] and models[0].is_absolute()
    assert rest == ["--server.port", "8600"]


def test_local_entries_are_named_from_the_files_metadata(tiny_decoders, tmp_path):
    from attnviz.models.catalogue import registry

    files = [tiny_decoders[(arch, "Q8_0")].path for arch in ("gemma3", "qwen3")]
    unreadable = tmp_path / "broken.gguf"
    unreadable.write_bytes(b"GGUF")
    entries = registry.local_entries(os.pathsep.join([str(files[0]), str(unreadable),
                                                     str(files[1]), str(files[0])]))
    assert [e.file for e in entries] == [files[0], files[1], files[0]]     # the broken one left out
    assert len({e.name for e in entries}) == 3                            # a clash gets -2
    assert entries[2].name == entries[0].name + "-2"
    assert all(e.causal and e.lm_head for e in entries)
    assert entries[0].sizes().d_k == 256                                  # head_dim, not d/H
    assert not {e.name for e in entries} & set(registry.NAMES)


def test_the_file_type_is_the_headers_and_a_file_changed_is_read_again(tiny_decoders, tmp_path):
    """The Generate caption's file type is the header's general.file_type as the fixture wrote
    it; the metadata kept for a file is read again once the file is another (its size and
    time changed): a server's own file replaced while it runs."""
    import shutil

    from attnviz.models.decoders import gguf_llama

    for (arch, dtype), written in tiny_decoders.items():
        assert gguf_llama.file_type(written.path) == dtype, (arch, dtype)
    path = tmp_path / "mine.gguf"
    shutil.copy(tiny_decoders[("qwen3", "F32")].path, path)
    assert (gguf_llama.file_type(path), gguf_llama.read_config(path).num_layers) == ("F32", 2)
    shutil.copy(tiny_decoders[("gemma3", "Q8_0")].path, path)
    assert gguf_llama.file_type(path) == "Q8_0"
    assert gguf_llama.read_metadata(path)[0]["general.architecture"] == "gemma3"


@pytest.mark.browser
@pytest.mark.slow
def test_a_gguf_added_by_the_server_is_a_model_on_the_pretrained_page(browser, tiny_decoders,
                                                                      tmp_path):
    """The server started with ATTNVIZ_MODELS (what ``attnviz app --model`` sets): the tiny
    Gemma 3 file is a choice, and the Pretrained model page draws its own attention, each row of
    a causal head summing to 1 over the keys up to it."""
    from attnviz.i18n import render
    from attnviz.models.catalogue import registry
    from attnviz.models.decoders.decoder import DecoderModel

    path = tiny_decoders[("gemma3", "F32")].path
    entry = registry.local_entries(str(path))[0]
    sentence = "the is the 机制"
    expected = DecoderModel.load(path, cache_dir=tmp_path / "cache").run(sentence)
    env = {"ATTNVIZ_MODELS": str(path), "ATTNVIZ_CACHE_DIR": str(tmp_path / "cache")}
    with streamlit_server(120, env=env) as (url, _):
        context = browser.new_context(viewport=VIEWPORT)
        try:
            page = context.new_page()
            page.goto(f"{url}/pretrained?model={entry.name}&sentence=" +
                      sentence.replace(" ", "+"))
            wait_for_app(page, timeout_ms=120_000)
            assert page.get_by_text(path.name).count() > 0                # its caption names it
            # its tokenizer's own note: SentencePiece-style, not byte-level BPE
            assert page.get_by_text(render("decoder.pieces_note", "en")).count() == 1
            assert page.get_by_text(render("decoder.bytes_note", "en")).count() == 0
            z = np.array(first_heatmap(page)["z"], dtype=float)
            n = len(expected.ids)
            assert z.shape == (n, n)
            assert np.isnan(z[np.triu_indices(n, 1)]).all()                # the causal mask
            z = np.nan_to_num(z)
            assert any(np.allclose(z, expected.attentions[layer, head], atol=1e-3)
                       for layer in range(expected.attentions.shape[0])
                       for head in range(expected.attentions.shape[1]))
        finally:
            context.close()
