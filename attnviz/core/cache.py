"""A cache shared by every session of the server, bounded by the bytes its entries hold.

Entries are kept least-recently-used first out, while their values' arrays and their keys
(often a learner's whole text) add up to at most `max_bytes` (the newest entry is always kept,
however large: dropping it would recompute it on the very next rerun). Sessions asking for
the same key at the same time wait for one computation of it.

An entry nobody has asked for in `max_idle` seconds goes too, so memory comes back once a class
has left: :func:`expire_all` drops every cache's idle entries, which the server's memory
sweeper (attnviz.app.runtime.sweeper: a thread, the garbage collector, malloc_trim) calls every few
seconds; making a cache starts nothing, so a notebook's process keeps its threads as they were
and its entries leave by the bounds alone.

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


# ---- what the server's sweeper expires ------------------------------------------------------

_CACHES: "weakref.WeakSet[SizedCache]" = weakref.WeakSet()
_EVICTED = [0]          # bytes evicted over budget since the last expire_all (then trimmed too)


def expire_all(now: float | None = None) -> bool:
    """Expire every cache's idle entries (:meth:`SizedCache.expire`). True if any cache freed
    anything, or evicted entries over its budget, since the last call: the server's sweeper
    (attnviz.app.runtime.sweeper) then collects the garbage."""
    freed = sum(c.expire(now) for c in list(_CACHES)) > 0 or _EVICTED[0] > 0
    _EVICTED[0] = 0
    return freed


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
