"""What every store shares, whatever the layout of the folder it reads (TileDB 2.x or 0.x).

Nothing is parsed when a store is created; listings are read again on each call so that
fragments written, consolidated or vacuumed while mounted appear and disappear. TileDB files are
written once and never modified, so whatever is parsed from a file is kept for as long as that
file (its size and mtime) stays the same. The files are only ever read.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections import OrderedDict
from contextlib import contextmanager

from ..format.generic_tile import GenericTile, read_generic_tile
from .cache import ByteLRU
from .checked import Checked
from .fragment_digest import digest_table
from .problems import Problem, ProblemLog, unique
from .storage import Entry, Storage
from .storage.opening import open_storage

#: Fragment objects kept with their parsed metadata (~12 KiB each, outside the byte bound):
#: the least recently asked for beyond this are dropped, and parsed again when asked for.
#: A walk of 10,000 fragments then holds 256 of them, not 10,000.
FRAGMENTS_KEPT = 256

#: folder listings one_pass keeps: those of the fragment at hand (its folder, and the array's own folders)
PASS_FOLDERS = 16
#: file versions one_pass keeps: those of the fragment at hand (a byte map of its metadata file asks for
#: one version per generic tile, some 30)
PASS_FILES = 64

#: directory mtimes tick coarsely: a listing whose folder changed within this many ns may change again
#: within the same tick, unseen, so what is derived from it is not kept
MTIME_TICK_NS = 1_000_000_000


class _KeptLog(ProblemLog):
    """A fragment's problem log, which the store keeps from its first problem on, whatever becomes of the
    fragment object (dropped from the LRU, still held by a view): array.yaml lists every problem found.
    Logs without a problem are not kept, so a walk of 100,000 fragments holds no log per fragment."""

    def __init__(self, store: "BaseStore", rel: str):
        super().__init__()
        self._store, self._rel = store, rel

    def add(self, p: Problem) -> None:
        super().add(p)
        with self._store._lock:
            self._store._problem_logs.setdefault(self._rel, self)


class BaseStore:
    """One folder's files read through its Storage, parsed once each, kept in a byte-bounded cache."""

    #: the AES-256-GCM key generic tiles are decrypted with (only TileDB 2.x arrays have one; never shown)
    key = None
    #: "array" or "workspace" for the TileDB 0.x layout (views and `check` serve each their own way)
    legacy0x_layout: str | None = None

    def __init__(self, storage: Storage | str, cache_bytes: int = 512 << 20, cache: ByteLRU | None = None,
                 drop_served: bool = True):
        """`storage` is the folder's Storage, or a location open_storage opens; `cache` is shared with other
        stores (the arrays of a workspace), else one of `cache_bytes` is made, which drops a value once
        served to its end unless `drop_served` is False (ByteLRU)."""
        self.storage = storage if isinstance(storage, Storage) else open_storage(storage)
        self.path = self.storage.uri
        self.cache = cache if cache is not None else ByteLRU(cache_bytes, drop_served=drop_served)
        self.problems = ProblemLog()
        self._lock = threading.RLock()
        self._parsed: dict = {}          # (kind, relpath, size, mtime) -> parsed object
        self._fragments: OrderedDict = OrderedDict()  # fragment relpath -> fragment, least recent first
        # fragment relpath -> its ProblemLog once it holds a problem: it outlives a dropped fragment, so what
        # was found stays shown; the logs of fragment objects alive without a problem are only looked up
        self._problem_logs: dict = {}
        self._live_logs: weakref.WeakValueDictionary = weakref.WeakValueDictionary()
        self._per_listing: dict = {}   # kind -> (listing stamps, value), see per_listing
        self._pass = threading.local()  # .entries (folders listed last), .stamps, .versions: during one_pass
        # committed fragments' digests, for the array-wide summaries (fragment_digest.py): outside the cache
        # so that a pass over 100,000 footers does not evict them
        self.digests = digest_table(self.cache.capacity)
        # how far the problems found go (array.yaml's `checked:`): marked by `check` and a mount's background check
        self.checked = Checked()
        # fragment footers (0.x: book-keeping files) decoded by this store: what a look at a summary costs
        # beyond its listings, counted so that tests can tell a kept summary from one made again
        self._footers_decoded = 0

    @property
    def footers_decoded(self) -> int:
        """How many fragment footers (0.x: book-keeping files) this store has decoded so far."""
        return self._footers_decoded

    def note_footer_decoded(self) -> None:
        with self._lock:
            self._footers_decoded += 1

    # -- files: every access goes through the storage (no symlink followed, regular files only) ---
    def listdir(self, rel: str = "") -> list[str]:
        """Every name in the folder `rel` (whatever kind of entry), sorted; [] when there is no such folder."""
        return self.storage.names(rel)

    def entries(self, rel: str = "") -> list[Entry]:
        """Every entry of the folder `rel` as lstat sees it, sorted by name (within `one_pass`, the last
        PASS_FOLDERS folders listed are not listed again)."""
        seen = getattr(self._pass, "entries", None)
        if seen is None:
            return self.storage.entries(rel)
        got = seen.get(rel)
        if got is None:
            got = seen[rel] = self.storage.entries(rel)
            if len(seen) > PASS_FOLDERS:
                seen.popitem(last=False)
        else:
            seen.move_to_end(rel)
        return got

    @contextmanager
    def one_pass(self):
        """A summary's render: a fragment's folder is asked for by its signature, its findings and its
        files one after another, and listed once for them all (a few listings kept, not 100,000). A
        file's version (size, mtime) is taken once too, so the render reads each file as one version."""
        outer = getattr(self._pass, "entries", None) is not None
        if not outer:
            self._pass.entries, self._pass.stamps, self._pass.versions = OrderedDict(), {}, OrderedDict()
        try:
            with self.storage.pinned():   # an object store's listings as the pass began (storage/listings.py)
                yield
        finally:
            if not outer:
                self._pass.entries = self._pass.stamps = self._pass.versions = None

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
        return self._version_of(rel)[0]

    def pread(self, rel: str, offset: int, size: int) -> bytes:
        """At most `size` bytes from `offset`: fewer where the file ends (its size bounds every read)."""
        return self.storage.pread(rel, offset, size)

    def _version_of(self, rel: str) -> tuple[int, int]:
        """(size, mtime_ns) of a regular file: what caches of its contents are keyed on, so a file that
        changes (a fragment still being written, a file damaged while mounted) is read again. Within
        `one_pass`, the version first seen."""
        seen = getattr(self._pass, "versions", None)
        if seen is None:
            e = self.storage.regular_entry(rel)
            return e.size, e.mtime_ns
        got = seen.get(rel)
        if got is None:
            e = self.storage.regular_entry(rel)
            got = seen[rel] = (e.size, e.mtime_ns)
            if len(seen) > PASS_FILES:
                seen.popitem(last=False)
        else:
            seen.move_to_end(rel)
        return got

    def read_file(self, rel: str) -> bytes:
        """A whole file, cached under the store's path, its own, its size and mtime (the arrays of a
        workspace share one cache)."""
        return self._read_whole(rel, self._version_of(rel))

    def _read_whole(self, rel: str, version: tuple[int, int]) -> bytes:
        def make():
            data = self.storage.read(rel)
            return data, len(data)

        return self.cache.get_or_make(("file", self.path, rel, version), make)

    def file_head(self, rel: str, size: int) -> bytes:
        """The first `size` bytes of a file: from the whole file when it is in the cache (a fragment's metadata
        read for its footer), else one read of them alone."""
        whole = self.cache.get(("file", self.path, rel, self._version_of(rel)))
        return bytes(whole[:size]) if whole is not None else self.storage.pread(rel, 0, size)

    def file_tail(self, rel: str, size: int) -> tuple[bytes, int]:
        """(data, start): the file from byte `start` to its end, at least its last `size` bytes. The whole
        file when it is that small or already read; else its tail alone, in one read (a footer without
        the rest of its file: one ranged GET on an object store)."""
        version = self._version_of(rel)
        whole = self.cache.get(("file", self.path, rel, version))
        if whole is not None or version[0] <= size:
            return (whole if whole is not None else self._read_whole(rel, version)), 0
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
            tile = read_generic_tile(self._read_whole(rel, version), offset, rel, structure, key=self.key)
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

    def disk_usage(self, known: dict | None = None) -> dict:
        """Bytes and files under the folder, by top-level folder (lstat: symlinks count as themselves).
        `known`: folder -> (bytes, files) of folders without sub-folders listed already (not listed again)."""
        by_dir: dict = {}
        total = files = 0
        todo = [""]
        known = known or {}
        while todo:
            rel = todo.pop()
            if rel in known:
                size, n = known[rel]
                top = rel.split("/")[0]
                total += size
                files += n
                by_dir[top] = by_dir.get(top, 0) + size
                continue
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
        return self.listing_stamps(self.COMMIT_FOLDERS)

    def listing_stamps(self, folders) -> tuple | None:
        """The mtimes of `folders` (None for one that is not there): they change whenever an entry of
        theirs comes or goes. None while one changed within the last tick (MTIME_TICK_NS). Within
        `one_pass`, taken once: every fragment's findings ask for the commits' state."""
        seen = getattr(self._pass, "stamps", None)
        if seen is not None:
            folders = tuple(folders)
            if folders not in seen:
                seen[folders] = self._listing_stamps(folders)
            return seen[folders]
        return self._listing_stamps(folders)

    def _listing_stamps(self, folders) -> tuple | None:
        stamps = []
        now = time.time_ns()
        for rel in folders:
            try:
                stamp = self.storage.stat(rel).mtime_ns
            except OSError:
                stamp = None
            if stamp is not None and now - stamp < MTIME_TICK_NS:
                return None
            stamps.append(stamp)
        return tuple(stamps)

    def per_listing(self, kind: str, folders, make):
        """make(), reused while the listings of `folders` stay as they are (listing_stamps): one stat per
        folder instead of a listing of 100,000 fragments. The result is shared: callers only read it."""
        return self._kept_while(kind, self.listing_stamps(folders), make)

    def _kept_while(self, kind: str, state, make):
        """make(), reused while `state` stays the same (never kept while it is None: something is changing)."""
        if state is not None:
            with self._lock:
                hit = self._per_listing.get(kind)
            if hit is not None and hit[0] == state:
                return hit[1]
        value = make()
        if state is not None:
            with self._lock:
                self._per_listing[kind] = (state, value)
        return value

    def kept_listing(self, kind: str, folders):
        """Within `one_pass`, what per_listing(kind, folders, ...) keeps if it is current; else None, and
        nothing is listed (outside a pass the stamps would cost more than the lookup they save)."""
        if getattr(self._pass, "stamps", None) is None:
            return None
        state = self.listing_stamps(folders)
        with self._lock:
            hit = self._per_listing.get(kind)
        return hit[1] if state is not None and hit is not None and hit[0] == state else None

    def kept_committed_fragment_names(self) -> dict | None:
        """The committed fragments' names, when a summary's pass has them at hand (each layout says)."""
        return None

    #: the folders whose listings the array-wide summaries come from (each layout says)
    SUMMARY_FOLDERS: tuple[str, ...] = ("",)

    def summary_state(self):
        """What the array-wide summaries (array.yaml, stats.csv, timeline.csv, fragments.svg) depend on
        that can change: the listings of SUMMARY_FOLDERS, the files of the fragments not yet committed
        (still being written) and the number of problems found. None while a listing changed within the
        last tick: render again. A committed fragment's files are taken as written for good (TileDB never
        rewrites them), as its views are."""
        stamps = self.listing_stamps(self.SUMMARY_FOLDERS)
        if stamps is None:
            return None
        try:
            writing = tuple(self.fragment(rel).signature() for rel in self.uncommitted_fragment_paths())
        except OSError:
            return None
        with self._lock:
            found = len(self.problems.items) + sum(len(log.items) for log in self._problem_logs.values())
        return stamps, writing, found

    def per_summary(self, kind: str, make):
        """make(), reused while summary_state stays the same (the timeline behind as_of/'s listing)."""
        return self._kept_while(kind, self.summary_state(), make)

    def uncommitted_fragment_paths(self) -> list[str]:
        """The fragment folders no commit marks (yet)."""
        return [rel for rel in self.fragment_paths() if not self.fragment(rel).committed]

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
            # one log per fragment, whichever object of it finds a problem
            log = self._problem_logs.get(rel) or self._live_logs.get(rel)
            if log is None:
                log = self._live_logs[rel] = _KeptLog(self, rel)
            frag.problems = log
            self._fragments[rel] = frag
            if len(self._fragments) > FRAGMENTS_KEPT:
                self._fragments.popitem(last=False)
            return frag

    def forget_vanished(self, paths) -> None:
        """Drop what is kept of fragments no longer in `paths` (the fragment folders listed now)."""
        live = set(paths)
        with self._lock:
            for kept in (self._fragments, self._problem_logs):
                for gone in set(kept) - live:
                    del kept[gone]
        self.digests.forget_except(live)
        self.checked.forget_except(live)

    def fragments(self) -> list:
        paths = self.fragment_paths()
        self.forget_vanished(paths)
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

    def problem_log(self, rel: str) -> ProblemLog | None:
        """The problems found in the fragment `rel`, kept whatever became of its object (None: none found)."""
        with self._lock:
            return self._problem_logs.get(rel)

    def all_problems(self) -> list[Problem]:
        """What decoding found: the store's problems, then each fragment's (dropped fragments' too)."""
        with self._lock:
            logs = list(self._problem_logs.values())
        return unique(self.problems.items, *(log.items for log in logs))
