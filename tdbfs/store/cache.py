"""A thread-safe LRU cache bounded by bytes, for decoded tiles and file contents."""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor, wait
from typing import Callable, Hashable

from .stopping import STOP, Stopped

#: at most this many values waiting to be made in the background (a reader needs two ahead)
MAX_PENDING = 4
#: background threads making values ahead: zstd releases the GIL, so each decodes on a core of its
#: own, but the FUSE loop and the reader need one too. On 2 vCPUs a second thread made a sparse `cat`
#: slower (0.49 against 0.53 GB/s, 8 interleaved runs) unless every thread ran under one real-time
#: priority (0.56 against 0.53), docs/performance.md §5; from 3 cores on, two.
AHEAD_THREADS = max(1, min(2, len(os.sched_getaffinity(0)) - 1))


#: sub-bounds for groups of keys (a key's group is its first element). Decoded data tiles
#: ("tile") get at most this much of the bound: once a tile_K.bin is read the kernel's page cache
#: holds it (keep_cache), so more would only duplicate it, and in this VM memory touched for the
#: first time is far slower than recycled memory (docs/performance.md §1): a small tile area is reused sooner.
GROUP_CAPACITY = {"tile": 64 << 20}
#: values served to their end (`note_served`) stay up to this many bytes in all, for the other views of
#: the same tile (tile_K.txt after tile_K.bin); beyond it the oldest go, and their memory is reused
SERVED_KEEP = 4 << 20
#: how many keys of values dropped once served (`note_served`) are remembered, so that they are not
#: made again ahead: the kernel's page cache holds them, and another reader's tile is no next tile to
#: make (16 readers at once, each decoding two ahead, decoded a quarter of the tiles twice)
SERVED_REMEMBERED = 4096


class ByteLRU:
    """Maps keys to values with a known byte cost; evicts least recently used past `capacity`,
    and within a group of keys (see GROUP_CAPACITY) past that group's own bound.

    `get_or_make` makes a value once even when several threads ask for it at
    the same time (the others wait on a per-key lock), so a tile read in many
    128 KiB pieces is decoded once.
    """

    def __init__(self, capacity: int, group_capacity: dict | None = None, served_keep: int | None = None,
                 drop_served: bool = True):
        self.capacity = capacity
        self.served_keep = SERVED_KEEP if served_keep is None else served_keep
        caps = GROUP_CAPACITY if group_capacity is None else group_capacity
        self.group_capacity = {g: min(c, capacity) for g, c in caps.items()}
        self._items: OrderedDict[Hashable, tuple[object, int]] = OrderedDict()
        self._bytes = 0
        self._groups = {g: OrderedDict() for g in self.group_capacity}  # group -> keys, oldest first
        self._group_bytes = {g: 0 for g in self.group_capacity}
        self._lock = threading.Lock()
        self._making: dict[Hashable, threading.Lock] = {}
        self._soon: dict = {}  # key -> the bytes it will take, from make_soon until made
        self._helpers: dict[Hashable, Callable[[], None]] = {}  # key being made -> how another thread joins in
        self._here = threading.local()  # the key this thread is making
        self._served: dict[Hashable, int] = {}  # key -> bytes of it handed to readers so far
        self._done: OrderedDict[Hashable, int] = OrderedDict()  # served to their end, oldest first -> cost
        self._done_bytes = 0
        self._done_group_bytes = {g: 0 for g in self.group_capacity}  # the same, by group
        self._gone: OrderedDict[Hashable, None] = OrderedDict()  # dropped once served, newest last
        #: drop a value once every byte of it has been served (`note_served`); off where served bytes
        #: are not kept by the reader's side (a mount with `-o direct_io`)
        self.drop_served = drop_served
        self._pending: set = set()  # futures of the makes started by make_soon, until done
        self._worker: ThreadPoolExecutor | None = None
        self.hits = 0
        self.misses = 0
        self.made_ahead = 0

    @property
    def size_bytes(self) -> int:
        return self._bytes

    def group_bytes(self, group) -> int:
        return self._group_bytes.get(group, 0)

    def _group(self, key):
        g = key[0] if isinstance(key, tuple) and key else None
        return g if g in self._groups else None

    def get(self, key):
        with self._lock:
            item = self._items.get(key)
            if item is None:
                return None
            self._items.move_to_end(key)
            g = self._group(key)
            if g is not None:
                self._groups[g].move_to_end(key)
            self.hits += 1
            return item[0]

    def _drop(self, key) -> None:
        self._served.pop(key, None)
        done = self._done.pop(key, 0)
        self._done_bytes -= done
        _, cost = self._items.pop(key)
        self._bytes -= cost
        g = self._group(key)
        if g is not None:
            del self._groups[g][key]
            self._group_bytes[g] -= cost
            self._done_group_bytes[g] -= done

    def put(self, key, value, cost: int) -> None:
        with self._lock:
            if key in self._items:
                self._drop(key)
            if cost > self.capacity:
                return  # too big to keep: the caller still has its value
            self._items[key] = (value, cost)
            self._bytes += cost
            g = self._group(key)
            if g is not None:
                self._groups[g][key] = None
                self._group_bytes[g] += cost
                # A value over its group's bound still stays (alone in the group): a tile bigger
                # than the tile area must not be decoded again for every piece read of it.
                while self._group_bytes[g] > self.group_capacity[g] and len(self._groups[g]) > 1:
                    self._drop(next(iter(self._groups[g])))
            while self._bytes > self.capacity and self._items:
                self._drop(next(iter(self._items)))

    def get_or_make(self, key, make: Callable[[], tuple[object, int]]):
        if STOP.is_set():   # shutting down: a render of many pieces ends here (store/stopping.py)
            raise Stopped()
        value = self.get(key)
        if value is not None:
            return value
        with self._lock:
            key_lock = self._making.setdefault(key, threading.Lock())
            helper = self._helpers.get(key)
        if helper is not None:
            # another thread is making it and has offered a share of the work (`offer_help`): do that
            # share instead of idling on the lock
            helper()
        with key_lock:
            value = self.get(key)
            if value is not None:
                return value
            with self._lock:
                self.misses += 1
            outer = getattr(self._here, "key", None)  # a make may make other values on its way (metadata)
            self._here.key = key
            try:
                value, cost = make()
            finally:
                self._here.key = outer
                with self._lock:
                    self._helpers.pop(key, None)
            self.put(key, value, cost)
        with self._lock:
            self._making.pop(key, None)
        return value

    def offer_help(self, work: Callable[[], None]) -> None:
        """Called from within a `make`: a thread that asks for the same key meanwhile runs `work`
        (which must be safe to run on several threads, and to run after the make is done) before it
        waits for the value. A reader waiting for the tile being decoded ahead then decodes chunks of
        it itself: on 2 cores the FUSE loop would otherwise sit idle while one thread decodes."""
        key = getattr(self._here, "key", None)
        if key is not None:
            with self._lock:
                self._helpers[key] = work

    def note_served(self, key, nbytes: int, whole: int) -> None:
        """A reader was handed `nbytes` more of the value at `key`, of `whole` bytes in all. Once that
        adds up to the whole, the value joins the ones served to their end, of which only the newest
        `served_keep` bytes stay: the kernel's page cache holds what was served, and the memory of the
        others is reused at once by the next values made, where otherwise the tile area would fill with
        fresh memory first (in this VM a first touch costs more than decoding into memory already used:
        a tenth of a sparse `cat`, docs/performance.md §5). A reader that comes back for a part the
        page cache no longer holds has it decoded again."""
        with self._lock:
            got = self._served.get(key, 0) + nbytes
            if got < whole:
                if len(self._served) > 10000:  # readers that stopped halfway: forget, never grow
                    self._served.clear()
                self._served[key] = got
                return
            self._served.pop(key, None)
            item = self._items.get(key)
            if item is None or key in self._done:
                return
            self._done[key] = item[1]
            self._done_bytes += item[1]
            g = self._group(key)
            if g is not None:
                self._done_group_bytes[g] += item[1]
            while self.drop_served and self._done_bytes > self.served_keep and self._done:
                gone = next(iter(self._done))
                self._drop(gone)
                self._gone.pop(gone, None)  # served again: remembered as the newest
                self._gone[gone] = None
                if len(self._gone) > SERVED_REMEMBERED:
                    self._gone.popitem(last=False)

    def make_soon(self, key, make: Callable[[], tuple[object, int]], nbytes: int = 0, reading=None) -> bool:
        """Start `make` for `key` (a value of about `nbytes`) on a background thread unless it is cached,
        being made, too many are waiting or it has no room; True if started. A reader going through
        tiles in order then finds the next one decoded: zstd and numpy release the GIL, so on 2 cores it
        decodes while the FUSE loop answers reads. Not a value served already (`note_served`): the
        page cache holds it. `reading`: (key, bytes) of the value the reader is on, which needs its
        room too though it may not be made yet. A failure is dropped (the value is not cached; a real
        read makes it again and reports)."""
        with self._lock:
            if (key in self._items or key in self._making or key in self._soon or key in self._gone
                    or len(self._soon) >= MAX_PENDING):
                return False
            if not self._room_ahead(key, nbytes, reading):
                return False
            self._soon[key] = nbytes
            if self._worker is None:
                self._worker = ThreadPoolExecutor(AHEAD_THREADS, thread_name_prefix="tdbfs-ahead")

        def run():
            try:
                self.get_or_make(key, make)
                with self._lock:
                    self.made_ahead += 1
            except (Exception, Stopped):
                pass
            finally:
                with self._lock:
                    self._soon.pop(key, None)

        future = self._worker.submit(run)
        with self._lock:
            self._pending.add(future)
        future.add_done_callback(self._pending.discard)
        return True

    def _room_ahead(self, key, nbytes: int, reading) -> bool:
        """Whether a value of `nbytes` made now fits beside the values of its group (or of the whole
        cache) not yet served to their end, and the ones on their way: otherwise it would push out a
        tile a reader is still reading, to be decoded again (a reader of 1 MiB tiles in 128 KiB pieces
        with a tile area of 1.5 MiB had every tile decoded twice)."""
        g = self._group(key)
        if g is None:
            cap, used, served = self.capacity, self._bytes, self._done_bytes
        else:
            cap, used, served = self.group_capacity[g], self._group_bytes[g], self._done_group_bytes[g]
        if reading is not None and reading[0] not in self._items and reading[0] not in self._soon:
            used += reading[1]
        return used - served + sum(self._soon.values()) + nbytes <= cap

    def wait_idle(self) -> None:
        """Block until background makes are done (tests); a no-op handed to one of several threads
        could finish before the others do."""
        with self._lock:
            pending = list(self._pending)
        wait(pending)

    def clear(self) -> None:
        with self._lock:
            self._served.clear()
            self._done.clear()
            self._done_bytes = 0
            self._done_group_bytes = dict.fromkeys(self._done_group_bytes, 0)
            self._gone.clear()
            self._items.clear()
            self._bytes = 0
            for g in self._groups:
                self._groups[g].clear()
                self._group_bytes[g] = 0
