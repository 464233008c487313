"""A converted model's files in memory shared by the processes of one machine that load them
(opt-in: ATTNVIZ_SHARE_WEIGHTS=1, which ``attnviz app --share-weights`` sets), so that two
replicas of the server hold one copy of a decoder's weights, not two.

Issue 34's guarantee holds (``disk_cache``): what a process computes with is exactly what was
checked, and nothing can cut it short or change it afterwards. The cache's files are still not
mapped; they are copied into a *sealed memfd*, a file in memory (``os.memfd_create``) that,
once sealed with F_SEAL_WRITE, F_SEAL_SHRINK, F_SEAL_GROW and F_SEAL_SEAL, nobody (its maker
included) can write, shrink, grow or unseal again: a map of it can neither SIGBUS nor show
other numbers later.

- The first process: each file of the verified folder is copied into the memfd at a
  page-aligned offset (``os.sendfile``), its CRC-32 computed on the memfd's bytes through a
  read-only map (``disk_cache.verify(read=…)``); then the memfd is sealed and kept open for the
  process's life, and ``.<folder>.shared-<pid>`` beside the folder (JSON: pid, fd, the memfd's
  size, each file's offset, the folder's manifest; written whole by a rename) says where.
- The next process: a registered memfd whose process is alive, which ``/proc/<pid>/fd/<fd>``
  opens, that carries the four seals, and whose bytes' CRC-32s are those of the folder's
  manifest is mapped read-only (no copy), and the process registers itself too, so a restart
  finds the memfd while any process holding it lives. A registry file whose process or fd is
  gone is deleted; any other mismatch is passed over (the process then makes its own memfd).
  A process mapping another's memfd reads none of the folder's files, only its manifest:
  damage done to them since is found, and repaired, by the first process to load when no
  holder is left; the bytes computed with are the manifest's either way. A lock
  (``.<folder>.shared.lock``) makes two processes starting at once share as well.
- Without memfd or /proc (not Linux, a sandbox's EPERM): each process reads its own copy, as
  without sharing; where the registry file cannot be written (a read-only cache), each keeps a
  memfd of its own. Either is said once in the log.

The memfd's pages are shmem, which gets no transparent huge pages where
/sys/kernel/mm/transparent_hugepage/shmem_enabled is ``never``: decoding can be slower than
from the private read's anonymous memory, hence opt-in (``benchmarks/bench_share.py``
measures both).
"""

from __future__ import annotations

import fcntl
import json
import logging
import mmap
import os
import re
import zlib
from pathlib import Path

from attnviz.i18n import Message
from attnviz.models import disk_cache
from attnviz.models.disk_cache import Damage

ENV = "ATTNVIZ_SHARE_WEIGHTS"
SEALS = (fcntl.F_SEAL_WRITE | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL
         if hasattr(fcntl, "F_SEAL_SEAL") else 0)          # none but on Linux
_PAGE = mmap.ALLOCATIONGRANULARITY

log = logging.getLogger("attnviz.models.shared_weights")
_held: dict[Path, int] = {}          # folder → the memfd this process registered for it
_told = False                        # that sharing is unavailable, said once


def enabled() -> bool:
    """Whether this process shares the weights (ATTNVIZ_SHARE_WEIGHTS=1)."""
    return os.environ.get(ENV) == "1"


def verify(folder: Path, stamp: dict, names: set[str], contents: dict) -> bool:
    """``disk_cache.verify(folder, stamp, names, contents)``, each contents[name] a read-only
    view of a sealed memfd holding the file's checked bytes, shared with every other process
    loading the folder (module docstring). The same answers and Damage otherwise."""
    if not os.path.lexists(folder) or not _available():
        return disk_cache.verify(folder, stamp, names, contents)
    with disk_cache.locked(folder.parent / f"{folder.name}.shared"):
        if _attach(folder, stamp, names, contents):
            return True
        try:
            return _hold(folder, stamp, names, contents)
        except _Unavailable as exc:
            _tell_unavailable(str(exc))
    contents.clear()
    return disk_cache.verify(folder, stamp, names, contents)


def registry_file(folder: Path, pid: int) -> Path:
    """Where process `pid` says which memfd holds `folder`'s files."""
    return folder.parent / f".{folder.name}.shared-{pid}"


# ---- the first process: a memfd of its own -----------------------------------------------

def _hold(folder: Path, stamp: dict, names: set[str], contents: dict) -> bool:
    """Verify `folder` into a new memfd, seal it and register it. _Unavailable when this
    system refuses the memfd, a read-only descriptor of it or its seals."""
    manifest = _manifest(folder)
    fd = _unless_refused(os.memfd_create, f"attnviz-{folder.name}",
                         os.MFD_ALLOW_SEALING | os.MFD_CLOEXEC)
    try:
        copy = _Copy(fd)
        try:
            found = disk_cache.verify(folder, stamp, names, contents, read=copy.read)
        finally:
            os.close(copy.readable)      # its maps keep their own reference
        if not found:
            os.close(fd)
            return False
        _unless_refused(fcntl.fcntl, fd, fcntl.F_ADD_SEALS, SEALS)
    except BaseException:
        contents.clear()
        os.close(fd)
        raise
    if manifest is not None:
        _register(folder, fd, copy.offsets, manifest)
    return True


class _Copy:
    """Files copied one after another into the memfd `fd`, each at a page-aligned offset
    (`offsets`), their bytes given back as a read-only map of the memfd."""

    def __init__(self, fd: int) -> None:
        self.fd, self.offsets, self.end = fd, {}, 0
        # maps through a read-only descriptor: a writable one's would make sealing fail (EBUSY)
        self.readable = _unless_refused(os.open, f"/proc/self/fd/{fd}",
                                        os.O_RDONLY | os.O_CLOEXEC)

    def read(self, path: Path, size: int) -> memoryview:
        """The file's `size` bytes, copied here; Damage ("model_cache.size") when it holds
        fewer or more."""
        offset = self.end
        os.ftruncate(self.fd, offset + size)
        os.lseek(self.fd, offset, os.SEEK_SET)
        with open(path, "rb", buffering=0) as f:
            done = 0
            while done < size and (n := os.sendfile(self.fd, f.fileno(), done, size - done)):
                done += n
            if done < size or os.pread(f.fileno(), 1, size):
                raise Damage(Message("model_cache.size", file=path.name,
                                     size=os.fstat(f.fileno()).st_size, expected=size))
        self.offsets[path.name] = offset
        self.end = -(-(offset + size) // _PAGE) * _PAGE
        return _mapped(self.readable, offset, size)


def _mapped(fd: int, offset: int, size: int) -> memoryview:
    """A read-only shared map of `size` bytes of the file `fd` from `offset`."""
    if size == 0:
        return memoryview(b"")
    return memoryview(mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ, offset=offset))


def _register(folder: Path, fd: int, offsets: dict[str, int], manifest: dict) -> None:
    """Say in `folder`'s registry file for this process that the memfd `fd` holds its files
    (written whole: a temporary file renamed); keep `fd` open for the process's life."""
    before = _held.get(folder)
    if before is not None and before != fd:
        os.close(before)                 # its maps, if any are left, keep the memfd
    _held[folder] = fd
    path = registry_file(folder, os.getpid())
    entry = {"pid": os.getpid(), "fd": fd, "size": os.fstat(fd).st_size, "offsets": offsets,
             "manifest": manifest}
    partial = path.with_name(path.name + ".tmp")
    try:
        partial.write_text(json.dumps(entry), encoding="utf-8")
        os.replace(partial, path)
    except OSError as exc:               # a read-only cache: nobody else finds this memfd
        _tell_unavailable(f"{path.name} not written: {type(exc).__name__}: {exc}")


# ---- the next process: another's memfd ------------------------------------------------------

def _attach(folder: Path, stamp: dict, names: set[str], contents: dict) -> bool:
    """Map a registered memfd holding exactly the files `folder`'s manifest lists, and
    register it for this process too; False (`contents` empty) when there is none."""
    manifest = _manifest(folder)
    if manifest is None or manifest["stamp"] != stamp or set(manifest["files"]) != names:
        return False
    for path in _registry_files(folder):
        entry = _entry(path)
        if entry is None or entry["manifest"] != manifest:
            continue
        fd = _open_holder(path, entry)
        if fd is None:
            continue
        if _map_checked(fd, entry["offsets"], manifest["files"], contents):
            _register(folder, fd, entry["offsets"], manifest)
            return True
        os.close(fd)
        contents.clear()
    return False


def _registry_files(folder: Path) -> list[Path]:
    """The registry files beside `folder`, this process's own first."""
    pattern = re.compile(rf"\.{re.escape(folder.name)}\.shared-\d+")
    own = registry_file(folder, os.getpid())
    try:
        found = [p for p in folder.parent.iterdir() if pattern.fullmatch(p.name)]
    except OSError:
        return []
    return sorted(found, key=lambda p: (p != own, p.name))


def _entry(path: Path) -> dict | None:
    """A registry file's entry if it is one (pid, fd, offsets, manifest), else None."""
    try:
        entry = json.loads(path.read_text(encoding="utf-8"))
        ok = all(isinstance(entry[k], int) for k in ("pid", "fd")) and \
            isinstance(entry["offsets"], dict) and isinstance(entry["manifest"], dict)
    except (OSError, ValueError, TypeError, KeyError):
        return None
    return entry if ok else None


def _open_holder(path: Path, entry: dict) -> int | None:
    """The registered memfd opened read-only; None when it cannot be (the registry file
    deleted when its process or fd is gone)."""
    try:
        return os.open(f"/proc/{entry['pid']}/fd/{entry['fd']}", os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:            # a dead process's, or an fd closed since
        path.unlink(missing_ok=True)
    except OSError:                      # another user's process, say
        pass
    return None


def _map_checked(fd: int, offsets: dict, files: dict, contents: dict) -> bool:
    """Whether the file `fd` is a memfd carrying the four seals whose bytes at `offsets` are
    the `files` of a manifest (each size and CRC-32); contents[name] then each one's map."""
    try:
        if fcntl.fcntl(fd, fcntl.F_GET_SEALS) & SEALS != SEALS:
            return False
    except OSError:                      # not a memfd
        return False
    size = os.fstat(fd).st_size
    if set(offsets) != set(files):
        return False
    for name, f in files.items():
        offset = offsets[name]
        if not (isinstance(offset, int) and offset >= 0 and offset % _PAGE == 0
                and offset + f["size"] <= size):
            return False
        contents[name] = _mapped(fd, offset, f["size"])
        if f"{zlib.crc32(contents[name]):08x}" != f["crc32"]:
            return False
    return True


def _manifest(folder: Path) -> dict | None:
    """`folder`'s manifest if it is well formed (``disk_cache.read_manifest``), else None
    (``disk_cache.verify`` then says why)."""
    try:
        return disk_cache.read_manifest(folder)
    except Damage:
        return None


# ---- where nothing can be shared ------------------------------------------------------------

def _available() -> bool:
    """Whether this system has memfds with seals and /proc; said once in the log if not."""
    if hasattr(os, "memfd_create") and hasattr(fcntl, "F_ADD_SEALS") \
            and os.path.isdir("/proc/self/fd"):
        return True
    _tell_unavailable("no memfd with seals, or no /proc")
    return False


class _Unavailable(Exception):
    """This system refuses what sharing needs (a memfd, its seals, /proc): EPERM, ENOSYS…"""


def _unless_refused(call, *args):
    """call(*args); its OSError an _Unavailable."""
    try:
        return call(*args)
    except OSError as exc:
        raise _Unavailable(f"{call.__name__}: {type(exc).__name__}: {exc}") from None


def _tell_unavailable(why: str) -> None:
    global _told
    if not _told:
        _told = True
        log.warning("%s=1, but the weights cannot be shared here (%s): each process reads its "
                    "own copy", ENV, why)
