"""What a storage asked its backend for: requests by kind and bytes read (the check's progress, the bench)."""

from __future__ import annotations

import threading
from dataclasses import dataclass


@dataclass(frozen=True)
class Counts:
    """Requests sent to the backend and the bytes they brought back, at one moment."""

    lists: int = 0       # LIST requests (each page of a paginated listing is one)
    gets: int = 0        # GET requests (ranged or whole)
    bytes_read: int = 0  # bytes those GETs brought back
    cache_hits: int = 0  # reads served by the on-disk range cache instead of a GET

    @property
    def requests(self) -> int:
        return self.lists + self.gets


class RequestCounters:
    """Thread-safe running totals, shared by a storage and every child of it."""

    def __init__(self):
        self._lock = threading.Lock()
        self._counts = Counts()

    def add(self, lists: int = 0, gets: int = 0, bytes_read: int = 0, cache_hits: int = 0) -> None:
        with self._lock:
            c = self._counts
            self._counts = Counts(c.lists + lists, c.gets + gets, c.bytes_read + bytes_read,
                                  c.cache_hits + cache_hits)

    def snapshot(self) -> Counts:
        with self._lock:
            return self._counts
