"""A folder of converted files on disk that proves itself: written whole or not at all, checked
on every load, and never left half-made by a killed process.

Writing: the files go into a temporary folder beside the final one, named
``<name>.tmp-<pid>-<hex>``; then, LAST, ``manifest.json`` (each file's size and CRC-32, and the
stamp of what the files were made from); every file and the folder are synced to the disk and
the folder is renamed into place. A reader therefore sees no folder, or a whole one.

Checking (:func:`verify`): the manifest is there and readable, made from the same stamp, and
every file it lists is a regular file of the recorded size and CRC-32. CRC-32 (zlib's) reads
the ~520 MB of SmolLM2's arrays in ~0.2 s warm here, about half of SHA-256's time
(``benchmarks/bench_decoder.py`` prints both); the cache guards against damage (a cut, a
flipped byte, an overwritten header), not against someone rewriting the manifest along with
the files, so a checksum that detects every accidental change of up to 32 bits and all but one
in 2³² of the others is enough.

Reading (``verify(..., contents=…)``, then :func:`npy_array`): each file is read whole into the
process's own memory and its checksum computed on those bytes, so what the process uses is
exactly what was checked. Nothing of the cache stays memory-mapped: a file cut short or
rewritten in place under a running server (``cp``, ``rsync --inplace``) cannot reach it — a
mapped page past a file's new end would kill the process with SIGBUS, and a rewritten one would
change its numbers after the check. Reads use ``read()``, which returns short at a file's end
instead (``benchmarks/bench_cache_copy.py`` measures what the copy costs).

Repairing is serialised by an exclusive ``fcntl.flock`` on ``.<name>.lock`` beside the folder
(:func:`locked`): of many processes starting at once, one converts and the others wait and then
read its folder. While the lock is held no conversion runs, so the folders this module makes
and a killed process left behind (``<name>.tmp-…``, ``<name>.damaged-…`` and the
``<name>.<8 characters>`` of tempfile.mkdtemp, which attnviz used before) are leftovers, and
:func:`remove_leftovers` deletes them; nothing else beside the folder is touched.
"""

from __future__ import annotations

import fcntl
import io
import json
import os
import re
import secrets
import shutil
import stat
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from attnviz.i18n import Message

MANIFEST = "manifest.json"
MANIFEST_FORMAT = 1


class Damage(Exception):
    """The folder is not a whole, unaltered copy; `reason` (a Message) says what is wrong."""

    def __init__(self, reason: Message) -> None:
        super().__init__(reason.msg_id)
        self.reason = reason


_CHUNK = 1 << 20            # bytes read at a time by checksum()


def checksum(path: Path) -> str:
    """The CRC-32 of the file's bytes, as 8 hex digits (read a chunk at a time: never mapped)."""
    crc = 0
    with open(path, "rb", buffering=0) as f:
        while chunk := f.read(_CHUNK):
            crc = zlib.crc32(chunk, crc)
    return f"{crc:08x}"


# ---- writing --------------------------------------------------------------------------------

def write(folder: Path, stamp: dict, write_files: Callable[[Path], None]) -> None:
    """Make `folder` with the files `write_files(tmp)` writes into an empty folder, and a
    manifest of them with `stamp`: in a temporary folder beside it, renamed into place once
    whole and on the disk. When a whole copy of `folder` appeared meanwhile, it is kept."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = folder.parent / f"{folder.name}.tmp-{os.getpid()}-{secrets.token_hex(4)}"
    tmp.mkdir()
    try:
        write_files(tmp)
        files = {}
        for path in sorted(tmp.iterdir()):
            _sync(path)
            files[path.name] = {"size": path.stat().st_size, "crc32": checksum(path)}
        manifest = {"format": MANIFEST_FORMAT, "stamp": stamp, "files": files}
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=1), encoding="utf-8")
        _sync(tmp / MANIFEST)
        _sync(tmp)
        try:
            tmp.rename(folder)
        except OSError:                  # taken: by a whole copy (kept), else an error
            if not verify(folder, stamp, set(files)):
                raise
        _sync(folder.parent)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _sync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | (os.O_DIRECTORY if path.is_dir() else 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# ---- checking -------------------------------------------------------------------------------

def verify(folder: Path, stamp: dict, names: set[str],
           contents: dict[str, np.ndarray] | None = None,
           read: Callable[[Path, int], memoryview] | None = None) -> bool:
    """Whether `folder` holds a whole copy: False when there is none; True when its manifest
    was made from `stamp`, lists exactly the files `names` and each is a regular file of the
    recorded size and checksum. Anything else raises Damage with the first problem found.
    With `contents` (a dict), each file is read whole into memory and checked there:
    contents[name] holds the checked bytes, which the caller then uses instead of the file;
    `read(path, size)`, if given, reads them instead of the process's own buffer (it raises
    Damage as this module's does: ``shared_weights`` reads them into memory shared by every
    process of the machine)."""
    if not os.path.lexists(folder):
        return False
    if not folder.is_dir():
        raise Damage(Message("model_cache.not_folder", folder=folder.name))
    manifest = read_manifest(folder)
    if manifest.get("stamp") != stamp:
        raise Damage(Message("model_cache.other_source"))
    files = manifest["files"]
    if set(files) != names:
        raise Damage(Message("model_cache.bad_manifest", file=MANIFEST))
    for name in sorted(files, key=lambda n: files[n]["size"]):       # small files first
        path, size = folder / name, files[name]["size"]
        try:
            info = path.lstat()
        except FileNotFoundError:
            raise Damage(Message("model_cache.missing", file=name)) from None
        if not stat.S_ISREG(info.st_mode):
            raise Damage(Message("model_cache.not_file", file=name))
        if info.st_size != size:
            raise Damage(Message("model_cache.size", file=name, size=info.st_size,
                                 expected=size))
        if contents is None:
            crc = checksum(path)
        else:
            contents[name] = (read or _read_whole)(path, size)
            crc = f"{zlib.crc32(contents[name]):08x}"
        if crc != files[name]["crc32"]:
            raise Damage(Message("model_cache.checksum", file=name))
    return True


_ALIGN = 4096             # where a buffer _read_whole reads into starts: a page boundary


def _read_whole(path: Path, size: int) -> np.ndarray:
    """The `size` bytes of the file at `path`, read into memory (uint8); Damage
    ("model_cache.size") when it holds fewer or more (cut or grown since it was measured).

    The buffer is numpy's, not a bytearray: numpy asks the kernel for transparent huge pages
    on allocations of 4 MB or more (``madvise``), and a matrix read one token at a time
    streams ~20 % faster from them here (fewer TLB misses: Gemma 3's output matrix 28 ms
    against 35 ms, ``benchmarks/bench_gemma3.py``'s decode). Nor is it zero-filled first,
    as a bytearray is: the read writes every byte.

    The bytes start on a page boundary (malloc's large blocks start 16 bytes past one): a .npy
    file's numbers start a multiple of 64 bytes in, so each array then starts on a cache line,
    and a one-row product streams a matrix ~10 % faster from there (Gemma 3's layers, 72
    products a token: 18.4 ms against 20.5 ms misaligned)."""
    spare = np.empty(size + _ALIGN, np.uint8)
    start = -spare.__array_interface__["data"][0] % _ALIGN
    data = spare[start:start + size]
    view, got = memoryview(data), 0
    with open(path, "rb", buffering=0) as f:
        while got < size and (n := f.readinto(view[got:])):
            got += n
        if got < size or f.read(1):
            raise Damage(Message("model_cache.size", file=path.name,
                                 size=os.fstat(f.fileno()).st_size, expected=size))
    return data


def npy_array(data: np.ndarray, name: str) -> np.ndarray:
    """The array of a .npy file's bytes `data` (read by ``verify``), as a read-only view of
    them: no copy (the caller keeps no other reference to `data`). Damage
    ("model_cache.unreadable") when they are not a .npy of numbers."""
    fmt = np.lib.format
    try:
        head = io.BytesIO(bytes(memoryview(data)[:1 << 16]))
        version = fmt.read_magic(head)
        read_header = {(1, 0): fmt.read_array_header_1_0, (2, 0): fmt.read_array_header_2_0}
        shape, fortran, dtype = read_header[version](head)
        offset = head.tell()
        if dtype.hasobject or offset + dtype.itemsize * int(np.prod(shape)) != len(data):
            raise ValueError(f"{shape} {dtype} does not fill {len(data)} bytes")
        # over a read-only view of the bytes: an array that nothing can make writable again,
        # which the engine keeps as it is (core.weights._immutable) instead of copying it
        flat = np.frombuffer(memoryview(data).toreadonly(), dtype, offset=offset,
                             count=int(np.prod(shape)))
        return flat.reshape(shape, order="F" if fortran else "C")
    except (ValueError, KeyError, TypeError, OverflowError) as exc:
        raise Damage(Message("model_cache.unreadable", file=name,
                             error=f"{type(exc).__name__}: {exc}"[:200])) from None


def read_manifest(folder: Path) -> dict:
    """`folder`'s manifest, well formed (this format, plain file names, each a size and a
    CRC-32); Damage saying what is wrong otherwise. Its stamp is the caller's to compare."""
    path = folder / MANIFEST
    if not os.path.lexists(path):
        raise Damage(Message("model_cache.no_manifest", file=MANIFEST))
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
        files = manifest["files"]
        well_formed = manifest["format"] == MANIFEST_FORMAT and all(
            isinstance(name, str) and "/" not in name and name not in ("", ".", "..", MANIFEST)
            and isinstance(f["size"], int) and isinstance(f["crc32"], str)
            for name, f in files.items())
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        well_formed = False
    if not well_formed:
        raise Damage(Message("model_cache.bad_manifest", file=MANIFEST))
    return manifest


# ---- repairing ------------------------------------------------------------------------------

@contextmanager
def locked(folder: Path, wait: bool = True) -> Iterator[bool]:
    """Hold the exclusive lock of `folder` (a flock on ``.<name>.lock`` beside it) within the
    block: True. False when it cannot be had: the place cannot be written (a read-only cache),
    or, with ``wait=False``, another process holds it."""
    fd = _lock_file(folder)
    if fd is None:
        yield False
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except OSError:               # held elsewhere (LOCK_NB), or no locks on this filesystem
            yield False
            return
        yield True
    finally:
        os.close(fd)                  # releases the lock


def _lock_file(folder: Path) -> int | None:
    path = folder.parent / f".{folder.name}.lock"
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        return os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError:
        pass
    try:
        return os.open(path, os.O_RDONLY)        # made by whoever baked a read-only cache
    except OSError:
        return None


def leftovers(folder: Path) -> list[Path]:
    """What this module (or tempfile.mkdtemp, before) made beside `folder` and a killed
    process may have left: ``<name>.tmp-<pid>-<hex>``, ``<name>.damaged-<pid>-<hex>``,
    ``<name>.<8 letters, digits or _>``. Only safe to remove while holding the lock."""
    pattern = re.compile(re.escape(folder.name)
                         + r"\.(?:(?:tmp|damaged)-\d+-[0-9a-f]{8}|[a-z0-9_]{8})")
    try:
        return sorted(p for p in folder.parent.iterdir() if pattern.fullmatch(p.name))
    except OSError:
        return []


def remove_leftovers(folder: Path) -> None:
    """Delete the leftovers beside `folder` (call while holding its lock)."""
    for path in leftovers(folder):
        _remove(path)


def tidy(folder: Path) -> None:
    """Delete the leftovers beside `folder` if there are any and no conversion is running (the
    lock is free); otherwise leave them to a later start."""
    if leftovers(folder):
        with locked(folder, wait=False) as held:
            if held:
                remove_leftovers(folder)


def discard(folder: Path) -> None:
    """Move a damaged `folder` (or a file in its place) aside, then delete it: the name is free
    at once, and a process killed while deleting leaves a leftover, not a damaged cache."""
    if not os.path.lexists(folder):
        return
    aside = folder.parent / f"{folder.name}.damaged-{os.getpid()}-{secrets.token_hex(4)}"
    folder.rename(aside)
    _remove(aside)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        try:
            path.unlink()
        except OSError:
            pass
