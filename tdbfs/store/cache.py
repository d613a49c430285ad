"""A thread-safe LRU cache bounded by bytes, for decoded tiles and file contents."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Callable, Hashable


class ByteLRU:
    """Maps keys to values with a known byte cost; evicts least recently used past `capacity`.

    `get_or_make` makes a value once even when several threads ask for it at
    the same time (the others wait on a per-key lock), so a tile read in many
    128 KiB pieces is decoded once.
    """

    def __init__(self, capacity: int):
        self.capacity = capacity
        self._items: OrderedDict[Hashable, tuple[object, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self._making: dict[Hashable, threading.Lock] = {}
        self.hits = 0
        self.misses = 0

    @property
    def size_bytes(self) -> int:
        return self._bytes

    def get(self, key):
        with self._lock:
            item = self._items.get(key)
            if item is None:
                return None
            self._items.move_to_end(key)
            self.hits += 1
            return item[0]

    def put(self, key, value, cost: int) -> None:
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self._bytes -= old[1]
            if cost > self.capacity:
                return  # too big to keep: the caller still has its value
            self._items[key] = (value, cost)
            self._bytes += cost
            while self._bytes > self.capacity and self._items:
                _, (_, c) = self._items.popitem(last=False)
                self._bytes -= c

    def get_or_make(self, key, make: Callable[[], tuple[object, int]]):
        value = self.get(key)
        if value is not None:
            return value
        with self._lock:
            key_lock = self._making.setdefault(key, threading.Lock())
        with key_lock:
            value = self.get(key)
            if value is not None:
                return value
            with self._lock:
                self.misses += 1
            value, cost = make()
            self.put(key, value, cost)
        with self._lock:
            self._making.pop(key, None)
        return value

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._bytes = 0
