"""Ranged reads run ahead in a bounded pool, held until the reader asks for that exact range (prefetch.py).

The reads run in a pool of threads, or, given an event loop and a coroutine to fetch with, as tasks on
that loop, at most `workers` at a time: a request in flight then costs no thread of its own (2,000
footers through 16 threads cost half again as much CPU as through one loop, measured against moto).
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from concurrent.futures import ThreadPoolExecutor

#: requests in flight at once: enough to hide an object store's latency, few enough not to be throttled
WORKERS = 8


class ReadAhead:
    """One plan at a time: `plan(items, budget)` drops what the previous plan left and starts reading the new
    one's ranges, holding at most `budget` bytes; `take(key)` hands a range over (waiting if it is in flight)
    and frees its share of the budget."""

    def __init__(self, fetch, workers: int = WORKERS, loop=None, fetch_async=None):
        self._fetch = fetch            # fetch(item) -> bytes; item = (key, size, ...)
        self._workers = max(1, workers)
        self._loop, self._fetch_async = loop, fetch_async   # await fetch_async(item) on `loop`, if given
        self._slots: asyncio.Semaphore | None = None      # made on the loop, on first use
        self._cond = threading.Condition()
        self._pool: ThreadPoolExecutor | None = None
        self._generation = 0
        self._queue: deque = deque()
        self._pending: set = set()
        self._ready: dict = {}
        self._held = 0
        self._budget = 0

    def plan(self, items: list, budget: int) -> None:
        with self._cond:
            self._generation += 1
            self._queue = deque(items)
            self._pending.clear()
            self._ready.clear()
            self._held = 0
            self._budget = budget
            if self._pool is None and items and self._loop is None:
                self._pool = ThreadPoolExecutor(self._workers, thread_name_prefix="tdbfs-read-ahead")
            self._start_more()
            self._cond.notify_all()

    def _start_more(self) -> None:
        """Under the lock: send what the budget allows (always at least one range when nothing is held)."""
        while self._queue and (self._held == 0 or self._held + self._queue[0][1] <= self._budget):
            item = self._queue.popleft()
            self._held += item[1]
            self._pending.add(item[0])
            if self._loop is not None:
                asyncio.run_coroutine_threadsafe(self._run_async(self._generation, item), self._loop)
            else:
                self._pool.submit(self._run, self._generation, item)

    def _run(self, generation: int, item) -> None:
        if generation != self._generation:
            return   # a plan dropped before its turn came
        try:
            data = self._fetch(item)
        except Exception as exc:  # noqa: BLE001 -- the reader's own read reports it
            data = exc
        self._done(generation, item, data)

    async def _run_async(self, generation: int, item) -> None:
        if self._slots is None:
            self._slots = asyncio.Semaphore(self._workers)
        async with self._slots:
            if generation != self._generation:
                return
            try:
                data = await self._fetch_async(item)
            except Exception as exc:  # noqa: BLE001 -- the reader's own read reports it
                data = exc
        self._done(generation, item, data)

    def _done(self, generation: int, item, data) -> None:
        with self._cond:
            if generation != self._generation:
                return
            self._pending.discard(item[0])
            self._ready[item[0]] = (data, item[1])
            self._cond.notify_all()

    def take(self, key) -> bytes | None:
        """The bytes read ahead for `key`, or None when it was not planned or its read failed (then the reader
        reads it itself, and meets the failure as its own)."""
        with self._cond:
            while key in self._pending:
                self._cond.wait()
            got = self._ready.pop(key, None)
            if got is None:
                return None
            data, size = got
            self._held -= size
            self._start_more()
        return None if isinstance(data, BaseException) else data
