"""Issue 37, memory: with ATTNVIZ_SHARE_WEIGHTS=1 (``attnviz app --share-weights``) the
processes of one machine loading the same converted model share one sealed memfd of its
checked files (attnviz/models/shared_weights.py). A second process maps the first's memfd and
computes the same logits, bit for bit, as a process reading its own copy; a registered memfd
that is not sealed, holds other bytes or whose process is dead is never used; the seals refuse
every write, cut and growth; without sharing, or where memfds are refused, nothing changes.

On the tiny Llama GGUF (tests/tiny_llama.py), converted once for the module; each test works
on its own copy of the cache folder."""

from __future__ import annotations

import errno
import fcntl
import json
import logging
import mmap
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from attnviz.models import shared_weights
from attnviz.models.decoders import gguf_llama
from tests import tiny_llama

ROOT = Path(__file__).resolve().parents[1]
TEXT = "The capital of France is the"
TIMEOUT = 300
SEALS = fcntl.F_SEAL_WRITE | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL
MEMFD = "/memfd:attnviz-"

# a fresh process: load the GGUF argv[1], save the logits of TEXT to argv[2], print the inodes
# of the memfds it maps, then wait for its stdin to close (so a later process finds it alive)
LOAD = f"""
import json, sys
import numpy as np
sys.path.insert(0, {str(ROOT)!r})
from attnviz import DecoderModel
m = DecoderModel.load(sys.argv[1])
np.save(sys.argv[2], m.run({TEXT!r}).logits)
maps = [line.split() for line in open("/proc/self/maps") if {MEMFD!r} in line]
print(json.dumps({{"memfds": sorted({{int(fields[4]) for fields in maps}})}}), flush=True)
sys.stdin.read()
"""


@pytest.fixture(scope="module")
def gguf(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("gguf") / "tiny-llama.gguf"
    tiny_llama.write(path)
    return path


@pytest.fixture(scope="module")
def good(gguf, tmp_path_factory) -> Path:
    """The tiny model's cache folder, converted here without sharing."""
    place = tmp_path_factory.mktemp("good")
    assert gguf_llama.load(gguf, place).report.outcome == "converted"
    return gguf_llama.cache_folder(gguf, place)


@pytest.fixture(scope="module")
def private(gguf, good) -> dict:
    """The arrays as a process reading its own copy has them."""
    return gguf_llama.load(gguf, good.parent).arrays


@pytest.fixture
def place(good, tmp_path) -> Path:
    """A cache place of this test's own holding a copy of the good folder."""
    shutil.copytree(good, tmp_path / good.name)
    return tmp_path


def sharing(monkeypatch, on: bool) -> None:
    if on:
        monkeypatch.setenv(shared_weights.ENV, "1")
    else:
        monkeypatch.delenv(shared_weights.ENV, raising=False)


def registries(place: Path) -> list[Path]:
    return sorted(place.glob(".*.shared-*"))


def memfd_inodes(pid: int | str = "self") -> set[int]:
    """The inodes of the memfds of attnviz that process `pid` maps."""
    with open(f"/proc/{pid}/maps") as f:
        return {int(line.split()[4]) for line in f if MEMFD in line}


def assert_same_arrays(loaded: dict, private: dict) -> None:
    assert loaded.keys() == private.keys()
    for name, a in private.items():
        assert np.array_equal(loaded[name], a) and loaded[name].dtype == a.dtype, name


def start(gguf: Path, place: Path, out: Path, share: bool) -> subprocess.Popen:
    env = {**os.environ, "ATTNVIZ_CACHE_DIR": str(place), "OPENBLAS_NUM_THREADS": "1"}
    env.pop(shared_weights.ENV, None)
    if share:
        env[shared_weights.ENV] = "1"
    return subprocess.Popen([sys.executable, "-c", LOAD, str(gguf), str(out)], cwd=ROOT,
                            env=env, text=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)


def ready(p: subprocess.Popen) -> dict:
    """What the process (see LOAD) printed once it loaded and ran the model."""
    line = p.stdout.readline()
    if not line:
        assert False, p.communicate(timeout=TIMEOUT)[1]
    return json.loads(line)


@pytest.mark.slow
def test_processes_started_at_once_map_one_memfd_and_compute_the_same_logits(gguf, place,
                                                                             tmp_path):
    """Two processes sharing, started together (one makes the memfd, the other maps it: both
    map the one memfd and each registers it), and one reading its own copy: the same logits,
    bit for bit."""
    ways = {"first": True, "second": True, "own": False}
    processes = {name: start(gguf, place, tmp_path / f"{name}.npy", share)
                 for name, share in ways.items()}
    try:
        mapped = {name: ready(p)["memfds"] for name, p in processes.items()}
        folder = gguf_llama.cache_folder(gguf, place)
        held = set()
        for name in ("first", "second"):
            pid = processes[name].pid
            entry = json.loads(shared_weights.registry_file(folder, pid).read_text())
            held.add(os.stat(f"/proc/{pid}/fd/{entry['fd']}").st_ino)
        assert len(held) == 1 and mapped["first"] == mapped["second"] == list(held)
        assert mapped["own"] == [] and len(registries(place)) == 2
    finally:
        for p in processes.values():
            _, stderr = p.communicate("", timeout=TIMEOUT)
            assert p.returncode == 0 and "Traceback" not in stderr, stderr
    logits = {name: np.load(tmp_path / f"{name}.npy") for name in ways}
    assert np.array_equal(logits["first"], logits["own"])
    assert np.array_equal(logits["second"], logits["own"])


def fake_holder(folder: Path, fd: int, pid: int) -> None:
    """Register memfd `fd` of process `pid` as holding `folder`'s files, each at the next
    page-aligned offset, written there."""
    manifest = json.loads((folder / "manifest.json").read_text())
    offsets, end = {}, 0
    for name in sorted(manifest["files"]):
        data = (folder / name).read_bytes()
        os.pwrite(fd, data, end)
        offsets[name] = end
        end += -(-len(data) // mmap.PAGESIZE) * mmap.PAGESIZE
    os.ftruncate(fd, end)
    entry = {"pid": pid, "fd": fd, "size": end, "offsets": offsets, "manifest": manifest}
    shared_weights.registry_file(folder, pid).write_text(json.dumps(entry))


def dead_pid() -> int:
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


@pytest.mark.parametrize("holder", ["not sealed", "other bytes", "dead process"])
def test_a_holder_not_sealed_with_other_bytes_or_dead_is_not_used(holder, gguf, place,
                                                                   private, monkeypatch):
    sharing(monkeypatch, True)
    folder = gguf_llama.cache_folder(gguf, place)
    fd = os.memfd_create("attnviz-fake", os.MFD_ALLOW_SEALING)
    try:
        fake = os.fstat(fd).st_ino
        fake_holder(folder, fd, dead_pid() if holder == "dead process" else os.getpid())
        if holder == "other bytes":
            entry = json.loads(registries(place)[0].read_text())
            end = entry["offsets"]["embed.npy"] + entry["manifest"]["files"]["embed.npy"]["size"]
            os.pwrite(fd, bytes(b ^ 1 for b in os.pread(fd, 4, end - 4)), end - 4)
        if holder != "not sealed":
            fcntl.fcntl(fd, fcntl.F_ADD_SEALS, SEALS)
        loaded = gguf_llama.load(gguf, place)
        assert fake not in memfd_inodes()
        ours = json.loads(shared_weights.registry_file(folder, os.getpid()).read_text())
        assert os.stat(f"/proc/self/fd/{ours['fd']}").st_ino in memfd_inodes()
        if holder == "dead process":                # its registry file is gone
            assert registries(place) == [shared_weights.registry_file(folder, os.getpid())]
        assert_same_arrays(loaded.arrays, private)
    finally:
        os.close(fd)


def test_the_seals_refuse_every_write_cut_and_growth(gguf, place, private, monkeypatch):
    sharing(monkeypatch, True)
    loaded = gguf_llama.load(gguf, place)
    entry = json.loads(registries(place)[0].read_text())
    fd = os.open(f"/proc/self/fd/{entry['fd']}", os.O_RDWR)
    try:
        assert fcntl.fcntl(fd, fcntl.F_GET_SEALS) & SEALS == SEALS
        size = os.fstat(fd).st_size
        for change in (lambda: os.ftruncate(fd, 0), lambda: os.ftruncate(fd, size + 4096),
                       lambda: os.pwrite(fd, b"\0", 0), lambda: os.write(fd, b"\0"),
                       lambda: mmap.mmap(fd, size, mmap.MAP_SHARED,
                                         mmap.PROT_READ | mmap.PROT_WRITE)):
            with pytest.raises(PermissionError):
                change()
        assert os.fstat(fd).st_size == size
    finally:
        os.close(fd)
    for a in loaded.arrays.values():
        assert not a.flags.writeable
        with pytest.raises(ValueError):
            a.flags.writeable = True
    assert_same_arrays(loaded.arrays, private)


def test_without_sharing_there_is_no_memfd_and_no_registry(gguf, place, private, monkeypatch):
    sharing(monkeypatch, False)
    before = memfd_inodes()
    loaded = gguf_llama.load(gguf, place)
    assert memfd_inodes() == before and registries(place) == []
    assert_same_arrays(loaded.arrays, private)


def test_where_memfds_are_refused_each_process_reads_its_own_copy_said_once(
        gguf, place, private, monkeypatch, caplog):
    sharing(monkeypatch, True)
    monkeypatch.setattr(shared_weights, "_told", False)

    def refused(*args):
        raise PermissionError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(os, "memfd_create", refused)
    before = memfd_inodes()
    with caplog.at_level(logging.WARNING, logger=shared_weights.log.name):
        for _ in range(2):
            assert_same_arrays(gguf_llama.load(gguf, place).arrays, private)
    assert len([r for r in caplog.records if r.name == shared_weights.log.name]) == 1
    assert memfd_inodes() == before and registries(place) == []


def test_attnviz_app_share_weights_sets_the_servers_environment(monkeypatch):
    from attnviz import cli

    monkeypatch.setenv(shared_weights.ENV, "0")   # so that the variable cli sets is undone
    monkeypatch.delenv(shared_weights.ENV)
    started = []
    monkeypatch.setattr(cli, "run_app", started.append)
    cli.main(["app", "--share-weights", "--server.port", "8600"])
    assert started == [["--server.port", "8600"]]
    assert shared_weights.enabled()
