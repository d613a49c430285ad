"""What a storage asked its backend for: requests by kind and bytes read (the check's progress, the bench)."""

from __future__ import annotations

import threading
from contextlib import contextmanager
from dataclasses import dataclass, replace


@dataclass(frozen=True)
class Counts:
    """Requests sent to the backend and the bytes they brought back, at one moment."""

    lists: int = 0       # LIST requests (each page of a paginated listing is one)
    gets: int = 0        # GET requests (ranged or whole)
    bytes_read: int = 0  # bytes those GETs brought back
    cache_hits: int = 0  # reads served by the on-disk range cache instead of a GET
    most_in_flight: int = 0   # the most requests that were waiting for an answer at once

    @property
    def requests(self) -> int:
        return self.lists + self.gets


class RequestCounters:
    """Thread-safe running totals, shared by a storage and every child of it."""

    def __init__(self):
        self._lock = threading.Lock()
        self._counts = Counts()
        self._in_flight = 0

    def add(self, lists: int = 0, gets: int = 0, bytes_read: int = 0, cache_hits: int = 0) -> None:
        with self._lock:
            c = self._counts
            self._counts = Counts(c.lists + lists, c.gets + gets, c.bytes_read + bytes_read,
                                  c.cache_hits + cache_hits, c.most_in_flight)

    @contextmanager
    def in_flight(self):
        """Around one request (with its retries): counted among those waiting for an answer."""
        with self._lock:
            self._in_flight += 1
            if self._in_flight > self._counts.most_in_flight:
                self._counts = replace(self._counts, most_in_flight=self._in_flight)
        try:
            yield
        finally:
            with self._lock:
                self._in_flight -= 1

    def snapshot(self) -> Counts:
        with self._lock:
            return self._counts
