"""A cache shared by every session of the server, bounded by the bytes its entries hold.

Entries are kept least-recently-used first out, while their values' arrays and their keys
(often a learner's whole text) add up to at most `max_bytes` (the newest entry is always kept,
however large: dropping it would recompute it on the very next rerun). Sessions asking for
the same key at the same time wait for one computation of it.

An entry nobody has asked for in `max_idle` seconds goes too, so memory comes back once a class
has left: a sweeper thread looks every SWEEP_SECONDS and, after anything was dropped, collects
the garbage; each round it hands the freed pages back to the operating system (glibc's
malloc_trim: numpy's blocks of a few MB, and a large message's copies, are otherwise kept in
the allocator's heaps). The server starts the sweeper (:func:`start_sweeper`, from
attnviz.app.threads); making a cache starts nothing, so a notebook's process keeps its threads
as they were and its entries leave by the bounds alone.

Why not cachetools: its ``LRUCache(maxsize, getsizeof=…)`` bounds by bytes and ``cached(…,
condition=…)`` computes a key once, but its expiry (``TTLCache``, ``TLRUCache``) is fixed when an
entry is stored, not renewed by each read, so a class still on a page would see its traces
recomputed every minute; it refuses a value larger than the whole bound (``ValueError``) where
this keeps the newest entry; it has one bound, not bytes and entries; and it counts values
only, not a learner's long text in the key. ``st.cache_resource`` (the app's layer) cannot sit
in the core, which notebooks use without streamlit.
"""

from __future__ import annotations

import atexit
import ctypes
import ctypes.util
import gc
import sys
import threading
import time
import weakref
from collections import OrderedDict
from typing import Callable, Hashable, TypeVar

import numpy as np

T = TypeVar("T")

IDLE_SECONDS = 60.0       # an entry nobody asked for this long is dropped
SWEEP_SECONDS = 10.0      # how often the sweeper looks


def arrays_in(obj):
    """Every numpy array reachable from `obj` through dataclass and object fields, lists,
    tuples and dicts, once each."""
    seen: set[int] = set()
    stack = [obj]
    while stack:
        o = stack.pop()
        if id(o) in seen:
            continue
        seen.add(id(o))
        if isinstance(o, np.ndarray):
            yield o
        elif isinstance(o, (list, tuple)):
            stack.extend(o)
        elif isinstance(o, dict):
            stack.extend(o.values())
        elif hasattr(o, "__dict__") and not isinstance(o, type):
            stack.extend(vars(o).values())


def nbytes(obj, skip: frozenset[int] = frozenset()) -> int:
    """The bytes of the arrays in `obj` (see :func:`arrays_in`), each memory block counted once
    (views share their base's); arrays whose id is in `skip` (shared with others, like a
    model's weights) are not counted."""
    counted: set[int] = set()
    total = 0
    for a in arrays_in(obj):
        if id(a) in skip:
            continue
        base = a
        while isinstance(base.base, np.ndarray):
            base = base.base
        if id(base) not in counted and id(base) not in skip:
            counted.add(id(base))
            total += base.nbytes
    return total


def key_bytes(key) -> int:
    """The memory a cache key holds: sys.getsizeof of it and of everything inside its tuples,
    lists and frozensets (a key of a 256-token text holds that text)."""
    total, stack = 0, [key]
    while stack:
        k = stack.pop()
        total += sys.getsizeof(k)
        if isinstance(k, (tuple, list, frozenset)):
            stack.extend(k)
    return total


class SizedCache:
    """key → value, computed once and kept within `max_bytes` (and `max_entries`); an entry's
    size is `size_of(value)` when it is stored, plus its key's (`key_bytes`)."""

    def __init__(self, max_bytes: int, max_entries: int,
                 size_of: Callable[[object], int] = nbytes,
                 max_idle: float | None = IDLE_SECONDS):
        self.max_bytes, self.max_entries, self._size_of = max_bytes, max_entries, size_of
        self.max_idle = max_idle
        self._entries: OrderedDict[Hashable, object] = OrderedDict()
        self._sizes: dict[Hashable, int] = {}             # measured once, when stored
        self._used: dict[Hashable, float] = {}            # time.monotonic() of the last get
        self._guard = threading.Lock()                    # held briefly: never while computing
        self._computing: dict[Hashable, threading.Lock] = {}
        _CACHES.add(self)

    def get(self, key: Hashable, compute: Callable[[], T]) -> T:
        while True:
            with self._guard:
                if key in self._entries:
                    self._entries.move_to_end(key)
                    self._used[key] = time.monotonic()
                    return self._entries[key]
                lock = self._computing.get(key)
                if lock is None:                          # nobody computes it: we do
                    lock = self._computing[key] = threading.Lock()
                    lock.acquire()
                    break
            with lock:                                    # wait for whoever computes it,
                pass                                      # then look again
        try:
            value = compute()
            size = self._size_of(value) + key_bytes(key)
            with self._guard:
                self._entries[key], self._sizes[key] = value, size
                self._used[key] = time.monotonic()
                self._evict()
            return value
        finally:
            with self._guard:
                del self._computing[key]
            lock.release()

    def peek(self, key: Hashable, default=None):
        """The value kept under `key` (counted as used), or `default`: never computed."""
        with self._guard:
            if key not in self._entries:
                return default
            self._entries.move_to_end(key)
            self._used[key] = time.monotonic()
            return self._entries[key]

    def _evict(self) -> None:
        """Drop the least recently used entries until the rest fit."""
        while len(self._entries) > 1 and (sum(self._sizes.values()) > self.max_bytes
                                          or len(self._entries) > self.max_entries):
            key, _ = self._entries.popitem(last=False)
            _EVICTED[0] += self._sizes.pop(key)
            del self._used[key]

    def expire(self, now: float | None = None) -> int:
        """Drop the entries nobody has asked for in `max_idle` seconds (the newest too);
        the bytes dropped."""
        if self.max_idle is None:
            return 0
        now = time.monotonic() if now is None else now
        with self._guard:
            idle = [k for k, t in self._used.items() if now - t > self.max_idle]
            freed = sum(self._sizes[k] for k in idle)
            for k in idle:
                del self._entries[k], self._sizes[k], self._used[k]
        return freed

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._entries

    @property
    def bytes(self) -> int:
        """What the entries and their keys held when they were stored (compute values whole:
        an entry that grows later, e.g. by a cached_property, is not measured again)."""
        with self._guard:
            return sum(self._sizes.values())

    def clear(self) -> None:
        with self._guard:
            self._entries.clear()
            self._sizes.clear()
            self._used.clear()


def per_process(make: Callable[[], T]) -> Callable[[], T]:
    """A function giving the process's one object made by `make`: made at its first call (two
    threads calling at once get the same one), closed when the process exits (its close())."""
    made: list[T] = []
    lock = threading.Lock()

    def get() -> T:
        with lock:
            if not made:
                made.append(make())
                atexit.register(made[0].close)
            return made[0]

    return get


# ---- giving memory back ---------------------------------------------------------------------

_CACHES: "weakref.WeakSet[SizedCache]" = weakref.WeakSet()
_EVICTED = [0]          # bytes evicted over budget since the last sweep (then trimmed too)
_sweeper: threading.Thread | None = None
_sweeper_lock = threading.Lock()


def sweep() -> bool:
    """One round: expire every cache's idle entries; if anything was freed (or evicted over
    budget since the last round), collect the garbage. Then, every round, give the allocator's
    free pages back to the OS: what the caches freed, and what left with a session (a large
    message's copies, held until Streamlit drops the session: issue 26 measured 62 MB kept
    after four 4 MB messages). A round with nothing to give back costs ~0.05 ms; the next
    large computation takes back the pages it needs (~0.05 s for a 512-token forward pass).
    True if a cache freed anything."""
    freed = sum(c.expire() for c in list(_CACHES)) > 0 or _EVICTED[0] > 0
    _EVICTED[0] = 0
    if freed:
        gc.collect()
    release_to_os()
    return freed


def start_sweeper() -> None:
    """Start the thread that calls :func:`sweep` every SWEEP_SECONDS, once per process (the
    server's; a daemon: it never holds the process up)."""
    global _sweeper
    with _sweeper_lock:
        if _sweeper is None:
            _sweeper = threading.Thread(target=_sweep_forever, daemon=True,
                                        name="attnviz-memory-sweeper")
            _sweeper.start()


def _sweep_forever() -> None:
    while True:
        time.sleep(SWEEP_SECONDS)
        sweep()


def release_to_os() -> bool:
    """Hand the allocator's free pages back to the operating system (glibc's malloc_trim(0),
    every arena); False where there is no glibc."""
    libc = _libc()
    if libc is None:
        return False
    libc.malloc_trim(0)
    return True


_LIBC: list = []


def _libc():
    if not _LIBC:
        name = ctypes.util.find_library("c")
        try:
            lib = ctypes.CDLL(name) if name else None
            _LIBC.append(lib if lib is not None and hasattr(lib, "malloc_trim") else None)
        except OSError:
            _LIBC.append(None)
    return _LIBC[0]


def python_bytes(obj, limit: int = 500_000) -> int:
    """An estimate of the memory `obj` holds: sys.getsizeof over every object reachable from
    it (numpy arrays by their buffers), classes, modules and functions left out (shared, not
    owned). For values whose arrays are not what matters, e.g. a plotly figure, whose Python
    objects take many times its JSON's size. Stops after `limit` objects."""
    import sys
    import types

    shared = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType,
              types.MethodType)
    seen, stack, total = set(), [obj], 0
    while stack and len(seen) < limit:
        o = stack.pop()
        if id(o) in seen or isinstance(o, shared):
            continue
        seen.add(id(o))
        total += o.nbytes if isinstance(o, np.ndarray) and o.base is None else sys.getsizeof(o)
        stack.extend(gc.get_referents(o))
    return total
