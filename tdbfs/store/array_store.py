"""The store: reads an array's files on demand, parses lazily, caches under a memory bound.

Nothing here is parsed when the store is created; listings are re-read on
each call so that fragments written, consolidated or vacuumed while mounted
appear and disappear. TileDB files are written once and never modified, so
whatever is parsed from a file is cached for as long as that file exists.
The array is only ever opened for reading.
"""

from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict

from ..format.generic_tile import GenericTile, read_generic_tile
from .cache import ByteLRU
from .problems import ProblemLog

SCHEMA_DIR = "__schema"
ENUMERATIONS_DIR = "__schema/__enumerations"
LEGACY_SCHEMA = "__array_schema.tdb"
FRAGMENTS_DIR = "__fragments"
COMMITS_DIR = "__commits"
FRAGMENT_META_DIR = "__fragment_meta"
META_DIR = "__meta"
LABELS_DIR = "__labels"
FRAGMENT_METADATA_FILE = "__fragment_metadata.tdb"


#: Fragment objects kept with their parsed metadata (~12 KiB each, outside the byte bound):
#: the least recently asked for beyond this are dropped, and parsed again when asked for.
#: A walk of 10,000 fragments then holds 256 of them, not 10,000.
FRAGMENTS_KEPT = 256


class NotAnArrayError(Exception):
    """The path exists but holds no TileDB array."""


class ArrayStore:
    def __init__(self, path: str, cache_bytes: int = 512 << 20, key=None):
        path = os.path.abspath(path)
        if not os.path.exists(path):
            raise FileNotFoundError(f"array not found: {path}")
        if not os.path.isdir(path):
            raise NotAnArrayError(f"not a TileDB array (not a directory): {path}")
        if not (os.path.isdir(os.path.join(path, SCHEMA_DIR)) or os.path.isfile(os.path.join(path, LEGACY_SCHEMA))):
            if os.path.exists(os.path.join(path, "__tiledb_group.tdb")) or os.path.isdir(os.path.join(path, "__group")):
                raise NotAnArrayError(f"not a TileDB array: {path} is a TileDB group")
            raise NotAnArrayError(f"not a TileDB array (no __schema/ and no __array_schema.tdb): {path}")
        self.path = path
        self.cache = ByteLRU(cache_bytes)
        self.problems = ProblemLog()
        self._lock = threading.RLock()
        self._parsed: dict = {}          # (kind, relpath, size) -> parsed object; files never change
        self._init_fragment_cache()
        self._commit_derived: dict = {}  # kind -> (commits_state, value), see _per_commits_state
        self.key = key                   # EncryptionKey of an AES-256-GCM array, or None (never shown)

    # -- files ---------------------------------------------------------------
    def abspath(self, rel: str) -> str:
        return os.path.join(self.path, rel)

    def listdir(self, rel: str = "") -> list[str]:
        try:
            return sorted(os.listdir(self.abspath(rel)))
        except (FileNotFoundError, NotADirectoryError):
            return []

    def isdir(self, rel: str) -> bool:
        return os.path.isdir(self.abspath(rel))

    def stat(self, rel: str) -> os.stat_result:
        return os.stat(self.abspath(rel))

    def file_size(self, rel: str) -> int:
        return os.stat(self.abspath(rel)).st_size

    def pread(self, rel: str, offset: int, size: int) -> bytes:
        fd = os.open(self.abspath(rel), os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        try:
            return os.pread(fd, size, offset)
        finally:
            os.close(fd)

    def read_file(self, rel: str) -> bytes:
        """A whole file, cached under its absolute path (files of an array are written once; the
        arrays of a workspace share one cache)."""
        size = self.file_size(rel)

        def make():
            with open(self.abspath(rel), "rb") as f:
                data = f.read()
            return data, len(data)

        return self.cache.get_or_make(("file", self.abspath(rel), size), make)

    def parsed(self, kind: str, rel: str, parse):
        """`parse(bytes)` of a file, computed once per (kind, file, size)."""
        try:
            size = self.file_size(rel)
        except FileNotFoundError:
            raise
        key = (kind, rel, size)
        with self._lock:
            if key in self._parsed:
                return self._parsed[key]
        value = parse(self.read_file(rel))
        with self._lock:
            self._parsed[key] = value
        return value

    def generic_tile(self, rel: str, offset: int, structure: str) -> GenericTile:
        """The generic tile at `offset` of a file, decoded once and kept in the bounded cache."""
        size = self.file_size(rel)

        def make():
            tile = read_generic_tile(self.read_file(rel), offset, rel, structure, key=self.key)
            # header, pipeline and per-chunk records: ~1.6 KiB for a one-chunk tile (tracemalloc)
            return tile, len(tile.payload) + 1024 + 600 * len(tile.chunks)

        return self.cache.get_or_make(("gtile", rel, size, offset), make)

    def encryption_type(self, rel: str | None = None) -> int:
        """encryption_type of the generic tile header of `rel` (default: the latest schema); 0 if unreadable.

        Only the unencrypted 34-byte header is read, so this works without the key.
        """
        rel = rel or self.latest_schema_file()
        if not rel:
            return 0
        try:
            head = self.pread(rel, 0, 34)
        except OSError:
            return 0
        return head[29] if len(head) == 34 else 0

    # -- schemas -------------------------------------------------------------
    def schema_files(self) -> list[str]:
        """Relative paths of every schema file: the legacy one first, then __schema/ by name."""
        out = []
        if os.path.isfile(self.abspath(LEGACY_SCHEMA)):
            out.append(LEGACY_SCHEMA)
        for name in self.listdir(SCHEMA_DIR):
            rel = f"{SCHEMA_DIR}/{name}"
            if os.path.isfile(self.abspath(rel)):
                out.append(rel)
        return out

    def schema(self, rel: str):
        from ..format.schema import parse_schema

        def parse(data):
            tile = read_generic_tile(data, 0, rel, "array schema", key=self.key)
            return parse_schema(tile.payload, rel)

        return self.parsed("schema", rel, parse)

    def schema_by_name(self, name: str):
        """The schema a fragment footer names (v>=10), or the legacy schema for ''."""
        if not name:
            return self.schema(LEGACY_SCHEMA)
        return self.schema(f"{SCHEMA_DIR}/{name}")

    def latest_schema_file(self) -> str | None:
        files = self.schema_files()
        modern = [f for f in files if f.startswith(SCHEMA_DIR + "/")]
        if modern:
            return max(modern, key=lambda f: _timestamp_key(os.path.basename(f)))
        return files[0] if files else None

    def enumeration_files(self) -> list[str]:
        return [f"{ENUMERATIONS_DIR}/{n}" for n in self.listdir(ENUMERATIONS_DIR)
                if os.path.isfile(self.abspath(f"{ENUMERATIONS_DIR}/{n}"))]

    def enumeration(self, rel: str):
        from ..format.enumeration import parse_enumeration

        def parse(data):
            return parse_enumeration(read_generic_tile(data, 0, rel, "enumeration", key=self.key).payload, rel)

        return self.parsed("enumeration", rel, parse)

    # -- fragments -----------------------------------------------------------
    def fragment_paths(self) -> list[str]:
        """Relative paths of fragment folders: `__fragments/*` and legacy ones at the root."""
        # scandir's d_type answers "is it a folder" without a stat per fragment (10,000 fragments)
        out = [f"{FRAGMENTS_DIR}/{n}" for n in self._subdirs(FRAGMENTS_DIR)]
        for n in self._subdirs(""):
            if n.startswith("__") and n not in _KNOWN_DIRS and _looks_like_fragment(n):
                out.append(n)
        return out

    def _subdirs(self, rel: str) -> list[str]:
        try:
            with os.scandir(self.abspath(rel)) as it:
                return sorted(e.name for e in it if e.is_dir())
        except (FileNotFoundError, NotADirectoryError):
            return []

    def fragment_path_of(self, name: str) -> str | None:
        """The relative path `fragment_paths` lists for the fragment folder `name`, or None; without
        listing the others (a lookup of one fragment among 10,000)."""
        if not name or "/" in name or name in (".", ".."):
            return None
        if self.isdir(f"{FRAGMENTS_DIR}/{name}"):
            return f"{FRAGMENTS_DIR}/{name}"
        if name.startswith("__") and name not in _KNOWN_DIRS and self.isdir(name) and _looks_like_fragment(name):
            return name
        return None

    def _init_fragment_cache(self) -> None:
        self._fragments: OrderedDict = OrderedDict()  # fragment relpath -> Fragment, least recent first
        # fragment relpath -> its ProblemLog, which outlives a dropped Fragment: what was found stays shown
        self._problem_logs: dict = {}

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

    def _make_fragment(self, rel: str):
        from .fragment import Fragment
        return Fragment(self, rel)

    def fragments(self) -> list:
        paths = self.fragment_paths()
        live = set(paths)
        with self._lock:
            for gone in set(self._fragments) - live:
                del self._fragments[gone]
            for gone in set(self._problem_logs) - live:
                del self._problem_logs[gone]
        return [self.fragment(p) for p in paths]

    def loaded_fragments(self) -> list:
        with self._lock:
            return list(self._fragments.values())

    # -- commits, metadata, consolidated fragment metadata ---------------------
    def commit_files(self) -> list[str]:
        out = [f"{COMMITS_DIR}/{n}" for n in self.listdir(COMMITS_DIR)]
        # Before format 12 commit markers and vacuum files lived at the root.
        out += [n for n in self.listdir("") if n.endswith((".ok", ".vac")) and not self.isdir(n)]
        return out

    def metadata_files(self) -> list[str]:
        return [f"{META_DIR}/{n}" for n in self.listdir(META_DIR) if not self.isdir(f"{META_DIR}/{n}")]

    def fragment_meta_files(self) -> list[str]:
        out = [f"{FRAGMENT_META_DIR}/{n}" for n in self.listdir(FRAGMENT_META_DIR)]
        out += [n for n in self.listdir("") if n.endswith(".meta") and not self.isdir(n)]
        return out

    def commits_state(self):
        """A key that changes whenever a commit, vacuum or root marker file comes or goes (the mtimes
        of __commits/ and of the root), or None while either changed within the last second:
        directory mtimes tick coarsely, so two changes in one tick would look like one."""
        stamps = []
        now = time.time_ns()
        for rel in (COMMITS_DIR, ""):
            try:
                stamp = os.stat(self.abspath(rel)).st_mtime_ns
            except OSError:
                stamp = None
            if stamp is not None and now - stamp < 1_000_000_000:
                return None
            stamps.append(stamp)
        return tuple(stamps)

    def _per_commits_state(self, kind: str, make):
        """make(), reused while `commits_state` is unchanged (fragment.yaml of 10,000 fragments would
        otherwise list and parse __commits 10,000 times). The result is shared: callers only read it."""
        state = self.commits_state()
        if state is not None:
            with self._lock:
                hit = self._commit_derived.get(kind)
            if hit is not None and hit[0] == state:
                return hit[1]
        value = make()
        if state is not None:
            with self._lock:
                self._commit_derived[kind] = (state, value)
        return value

    def committed_fragment_names(self) -> dict[str, str]:
        """Fragment name -> the commit that marks it (.wrt, .ok, or an entry of a .con file)."""
        return self._per_commits_state("committed", self._committed_fragment_names)

    def _committed_fragment_names(self) -> dict[str, str]:
        out = {}
        for rel in self.commit_files():
            base = os.path.basename(rel)
            if base.endswith(".wrt") or base.endswith(".ok"):
                out[base.rsplit(".", 1)[0]] = rel
            elif base.endswith(".con"):
                try:
                    from ..format.commits import parse_consolidated_commits
                    con = self.parsed("con", rel, lambda d: parse_consolidated_commits(d, rel))
                    for entry in con.entries:
                        p = entry.path.rsplit("/", 1)[-1]
                        if p.endswith(".wrt"):
                            out.setdefault(p[:-4], rel)
                except Exception as exc:  # recorded, the rest still works
                    self.problems.add_error(exc, rel, "consolidated commits")
        # Formats 1-4 had no marker: a root fragment folder with its metadata file counts as committed.
        for n in self.listdir(""):
            if n not in out and _legacy_unmarked(n) and os.path.isfile(self.abspath(f"{n}/{FRAGMENT_METADATA_FILE}")):
                out[n] = f"{n}/{FRAGMENT_METADATA_FILE}"
        return out

    def vacuum_lists(self) -> dict[str, str]:
        """Fragment name -> the vacuum file (`.vac`) that lists it as obsolete."""
        return self._per_commits_state("vacuum", self._vacuum_lists)

    def _vacuum_lists(self) -> dict[str, str]:
        from ..format.commits import parse_vacuum_file
        out = {}
        for rel in self.commit_files():
            if not rel.endswith(".vac"):
                continue
            try:
                entries = self.parsed("vac", rel, lambda d: list(parse_vacuum_file(d, rel)))
            except Exception as exc:
                self.problems.add_error(exc, rel, "vacuum file")
                continue
            for entry in entries:
                out.setdefault(os.path.basename(entry.rstrip("/")), rel)
        return out

    def all_problems(self) -> list[dict]:
        out = list(self.problems.items)
        with self._lock:
            logs = list(self._problem_logs.values())
        for log in logs:
            for p in log.items:
                if p not in out:
                    out.append(p)
        return out


_KNOWN_DIRS = {SCHEMA_DIR, META_DIR, COMMITS_DIR, FRAGMENT_META_DIR, FRAGMENTS_DIR, LABELS_DIR, "__enumerations"}


def _looks_like_fragment(name: str) -> bool:
    from ..format.names import parse_fragment_name
    try:
        return parse_fragment_name(name) is not None
    except Exception:
        return False


def _legacy_unmarked(name: str) -> bool:
    """A fragment name without a version suffix (formats 1-4), which TileDB commits without a marker."""
    from ..format.names import try_parse_name
    n = try_parse_name(name)
    return n is not None and not n.extension and n.format_version is None


def _timestamp_key(name: str):
    parts = name.lstrip("_").split("_")
    try:
        return (int(parts[0]), int(parts[1]), name)
    except (ValueError, IndexError):
        return (-1, -1, name)
