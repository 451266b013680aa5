"""A least-recently-used cache bounded by the bytes of what it holds (thread-safe).

Used for the decoded images, their resized copies and the detector objects of a data
folder: each entry is charged ``size_of(value)`` bytes; inserting past ``limit`` evicts
the least recently used entries, but the newest one always stays.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class ByteLRU(Generic[K, V]):
    """``get`` / ``put`` with LRU eviction past ``limit`` bytes (module docstring)."""

    def __init__(self, limit: int, size_of: Callable[[V], int]) -> None:
        self.limit = limit
        self._size_of = size_of
        self._items: OrderedDict[K, V] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        """The number of entries held."""
        with self._lock:
            return len(self._items)

    def clear(self) -> None:
        """Drop every entry."""
        with self._lock:
            self._items.clear()
            self._bytes = 0

    def get(self, key: K, *, touch: bool = True) -> V | None:
        """The value of ``key`` (None when absent); ``touch`` marks it most recently used."""
        with self._lock:
            hit = self._items.get(key)
            if hit is not None and touch:
                self._items.move_to_end(key)
            return hit

    def put(self, key: K, value: V) -> V:
        """Keep ``value`` under ``key`` and return what the cache holds for it: the value
        another thread stored first, if one did."""
        with self._lock:
            if key in self._items:
                return self._items[key]
            self._items[key] = value
            self._bytes += self._size_of(value)
            while self._bytes > self.limit and len(self._items) > 1:
                _, old = self._items.popitem(last=False)
                self._bytes -= self._size_of(old)
            return value
