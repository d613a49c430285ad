"""What every store shares, whatever the layout of the folder it reads (TileDB 2.x or 0.x).

Nothing is parsed when a store is created; listings are read again on each call so that
fragments written, consolidated or vacuumed while mounted appear and disappear. TileDB files are
written once and never modified, so whatever is parsed from a file is kept for as long as that
file (its size and mtime) stays the same. The files are only ever read.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict

from ..format.generic_tile import GenericTile, read_generic_tile
from .cache import ByteLRU
from .problems import Problem, ProblemLog, unique
from .storage import Entry, Storage, open_storage

#: Fragment objects kept with their parsed metadata (~12 KiB each, outside the byte bound):
#: the least recently asked for beyond this are dropped, and parsed again when asked for.
#: A walk of 10,000 fragments then holds 256 of them, not 10,000.
FRAGMENTS_KEPT = 256


class BaseStore:
    """One folder's files read through its Storage, parsed once each, kept in a byte-bounded cache."""

    #: the AES-256-GCM key generic tiles are decrypted with (only TileDB 2.x arrays have one; never shown)
    key = None
    #: "array" or "workspace" for the TileDB 0.x layout (views and `check` serve each their own way)
    legacy0x_layout: str | None = None

    def __init__(self, storage: Storage | str, cache_bytes: int = 512 << 20, cache: ByteLRU | None = None):
        """`storage` is the folder's Storage, or a location open_storage opens; `cache` is shared with other
        stores (the arrays of a workspace), else one of `cache_bytes` is made."""
        self.storage = storage if isinstance(storage, Storage) else open_storage(storage)
        self.path = self.storage.uri
        self.cache = cache if cache is not None else ByteLRU(cache_bytes)
        self.problems = ProblemLog()
        self._lock = threading.RLock()
        self._parsed: dict = {}          # (kind, relpath, size, mtime) -> parsed object
        self._fragments: OrderedDict = OrderedDict()  # fragment relpath -> fragment, least recent first
        # fragment relpath -> its ProblemLog, which outlives a dropped fragment: what was found stays shown
        self._problem_logs: dict = {}
        self._findings: dict = {}   # fragment relpath -> (state, its listing findings), see fragment_findings

    # -- files: every access goes through the storage (no symlink followed, regular files only) ---
    def listdir(self, rel: str = "") -> list[str]:
        """Every name in the folder `rel` (whatever kind of entry), sorted; [] when there is no such folder."""
        return self.storage.names(rel)

    def entries(self, rel: str = "") -> list[Entry]:
        """Every entry of the folder `rel` as lstat sees it, sorted by name."""
        return self.storage.entries(rel)

    def entry(self, rel: str) -> Entry | None:
        return self.storage.entry(rel)

    def isdir(self, rel: str) -> bool:
        """A real folder (a symlink to one is not)."""
        return self.storage.is_dir(rel)

    def isfile(self, rel: str) -> bool:
        """A regular file (a symlink to one is not)."""
        return self.storage.is_file(rel)

    def stat(self, rel: str) -> Entry:
        """The entry at `rel` as lstat sees it ('' is the root); OSError when there is none."""
        return self.storage.stat(rel)

    def mtime(self, rel: str) -> float:
        """The mtime of `rel` in seconds, 0.0 when there is nothing there to ask."""
        try:
            return self.storage.stat(rel).mtime
        except OSError:
            return 0.0

    def file_size(self, rel: str) -> int:
        return self.storage.file_size(rel)

    def pread(self, rel: str, offset: int, size: int) -> bytes:
        """At most `size` bytes from `offset`: fewer where the file ends (its size bounds every read)."""
        return self.storage.pread(rel, offset, size)

    def _version_of(self, rel: str) -> tuple[int, int]:
        """(size, mtime_ns) of a regular file: what caches of its contents are keyed on, so a file that
        changes (a fragment still being written, a file damaged while mounted) is read again."""
        e = self.storage.regular_entry(rel)
        return e.size, e.mtime_ns

    def read_file(self, rel: str) -> bytes:
        """A whole file, cached under the store's path, its own, its size and mtime (the arrays of a
        workspace share one cache)."""
        version = self._version_of(rel)

        def make():
            data = self.storage.read(rel)
            return data, len(data)

        return self.cache.get_or_make(("file", self.path, rel, version), make)

    def file_tail(self, rel: str, size: int) -> tuple[bytes, int]:
        """(data, start): the file from byte `start` to its end, at least its last `size` bytes. The whole
        file when it is that small or already read; else its tail alone, in one read (a footer without
        the rest of its file: one ranged GET on an object store)."""
        version = self._version_of(rel)
        whole = self.cache.get(("file", self.path, rel, version))
        if whole is not None or version[0] <= size:
            return (whole if whole is not None else self.read_file(rel)), 0
        start = version[0] - size

        def make():
            data = self.storage.pread(rel, start, size)
            return data, len(data)

        return self.cache.get_or_make(("tail", self.path, rel, version, start), make), start

    def parsed(self, kind: str, rel: str, parse):
        """`parse(bytes)` of a file, computed once per (kind, file, size, mtime)."""
        key = (kind, rel, self._version_of(rel))
        with self._lock:
            if key in self._parsed:
                return self._parsed[key]
        value = parse(self.read_file(rel))
        with self._lock:
            self._parsed[key] = value
        return value

    def generic_tile(self, rel: str, offset: int, structure: str, problems: ProblemLog | None = None) -> GenericTile:
        """The generic tile at `offset` of a file, decoded once and kept in the bounded cache. Checksums that
        fail are recorded in `problems` (default: the store's), the tile is still returned."""
        version = self._version_of(rel)

        def make():
            tile = read_generic_tile(self.read_file(rel), offset, rel, structure, key=self.key)
            # header, pipeline and per-chunk records: ~1.6 KiB for a one-chunk tile (tracemalloc)
            return tile, len(tile.payload) + 1024 + 600 * len(tile.chunks)

        tile = self.cache.get_or_make(("gtile", self.path, rel, version, offset), make)
        log = problems if problems is not None else self.problems
        for failure in tile.checksum_failures:
            log.add(Problem(rel, f"{structure} generic tile", tile.header.payload_offset, failure))
        return tile

    def attempt(self, fn, file: str, structure: str):
        """fn(), or None with its failure recorded among the store's problems."""
        return self.problems.attempt(fn, file, structure)

    def disk_usage(self) -> dict:
        """Bytes and files under the folder, by top-level folder (lstat: symlinks count as themselves)."""
        by_dir: dict = {}
        total = files = 0
        todo = [""]
        while todo:
            rel = todo.pop()
            for e in self.entries(rel):
                sub = f"{rel}/{e.name}" if rel else e.name
                if e.is_dir:
                    todo.append(sub)
                    continue
                top = rel.split("/")[0] if rel else "."
                total += e.size
                files += 1
                by_dir[top] = by_dir.get(top, 0) + e.size
        return {"total_bytes": total, "files": files, "bytes_by_folder": dict(sorted(by_dir.items()))}

    #: the folders whose entries commit fragments (see commits_state)
    COMMIT_FOLDERS: tuple[str, ...] = ("",)

    def commits_state(self):
        """A key that changes whenever an entry that commits a fragment comes or goes (the mtimes of
        COMMIT_FOLDERS), or None while one changed within the last second: directory mtimes tick
        coarsely, so two changes in one tick would look like one."""
        stamps = []
        now = time.time_ns()
        for rel in self.COMMIT_FOLDERS:
            try:
                stamp = self.storage.stat(rel).mtime_ns
            except OSError:
                stamp = None
            if stamp is not None and now - stamp < 1_000_000_000:
                return None
            stamps.append(stamp)
        return tuple(stamps)

    # -- fragments: each layout lists and makes its own ------------------------------------------
    def fragment_paths(self) -> list[str]:
        """Relative paths of the fragment folders."""
        return []

    def _make_fragment(self, rel: str):
        raise NotImplementedError

    def fragment(self, rel: str):
        with self._lock:
            frag = self._fragments.get(rel)
            if frag is not None:
                self._fragments.move_to_end(rel)
                return frag
            frag = self._make_fragment(rel)
            frag.problems = self._problem_logs.setdefault(rel, frag.problems)
            self._fragments[rel] = frag
            if len(self._fragments) > FRAGMENTS_KEPT:
                self._fragments.popitem(last=False)
            return frag

    def fragments(self) -> list:
        paths = self.fragment_paths()
        live = set(paths)
        with self._lock:
            for kept in (self._fragments, self._problem_logs, self._findings):
                for gone in set(kept) - live:
                    del kept[gone]
        return [self.fragment(p) for p in paths]

    def loaded_fragments(self) -> list:
        with self._lock:
            return list(self._fragments.values())

    # -- problems ------------------------------------------------------------------------------
    def listing_findings(self) -> list[Problem]:
        """What the listings of the folder (not of its fragments) show is wrong: each layout says."""
        raise NotImplementedError

    def fragment_findings(self, frag) -> list[Problem]:
        """What the listing of a fragment's folder shows is wrong: each layout says."""
        raise NotImplementedError

    def findings(self) -> list[Problem]:
        """Every problem known now: the listings' findings and what decoding found (array.yaml, check)."""
        from .findings import all_findings
        return all_findings(self)

    def all_problems(self) -> list[Problem]:
        """What decoding found: the store's problems, then each fragment's (dropped fragments' too)."""
        with self._lock:
            logs = list(self._problem_logs.values())
        return unique(self.problems.items, *(log.items for log in logs))
