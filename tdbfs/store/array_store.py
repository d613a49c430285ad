"""The store: reads an array's files on demand, parses lazily, caches under a memory bound.

Nothing here is parsed when the store is created; listings are re-read on
each call so that fragments written, consolidated or vacuumed while mounted
appear and disappear. TileDB files are written once and never modified, so
whatever is parsed from a file is cached for as long as that file exists.
The array is only ever opened for reading.
"""

from __future__ import annotations

import os
import stat
import threading
import time
from collections import OrderedDict

from ..format.generic_tile import GenericTile, read_generic_tile
from .cache import ByteLRU
from .local_files import LocalFiles
from .problems import WARNING, ProblemLog, problem

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
        files = LocalFiles(path)
        try:
            st = os.stat(path)  # the path the user named may itself be a symlink: that one is followed
        except FileNotFoundError:
            raise FileNotFoundError(f"array not found: {path}") from None
        if not stat.S_ISDIR(st.st_mode):
            raise NotAnArrayError(f"not a TileDB array (not a directory): {path}")
        # a __schema that is not a real folder (a symlink) still makes an array: shown, with its problem
        if not (files.entry(SCHEMA_DIR) is not None or files.is_file(LEGACY_SCHEMA)):
            if files.entry("__tiledb_group.tdb") is not None or files.is_dir("__group"):
                raise NotAnArrayError(f"not a TileDB array: {path} is a TileDB group")
            raise NotAnArrayError(f"not a TileDB array (no __schema/ and no __array_schema.tdb): {path}")
        self.path = path
        self.files = files
        self.cache = ByteLRU(cache_bytes)
        self.problems = ProblemLog()
        self._lock = threading.RLock()
        self._parsed: dict = {}          # (kind, relpath, size, mtime) -> parsed object
        self._init_fragment_cache()
        self._commit_derived: dict = {}  # kind -> (commits_state, value), see _per_commits_state
        self.key = key                   # EncryptionKey of an AES-256-GCM array, or None (never shown)

    # -- files: every access goes through LocalFiles (no symlink followed, regular files only) ---
    def abspath(self, rel: str) -> str:
        return os.path.join(self.path, rel)

    def listdir(self, rel: str = "") -> list[str]:
        """Every name in the folder `rel` (whatever kind of entry), sorted; [] when there is no such folder."""
        return self.files.names(rel)

    def entries(self, rel: str = ""):
        """Every entry of the folder `rel` as lstat sees it (local_files.Entry), sorted by name."""
        return self.files.entries(rel)

    def entry(self, rel: str):
        return self.files.entry(rel)

    def isdir(self, rel: str) -> bool:
        """A real folder (a symlink to one is not)."""
        return self.files.is_dir(rel)

    def isfile(self, rel: str) -> bool:
        """A regular file (a symlink to one is not)."""
        return self.files.is_file(rel)

    def stat(self, rel: str) -> os.stat_result:
        return self.files.lstat(rel)

    def file_size(self, rel: str) -> int:
        return self.files.file_size(rel)

    def pread(self, rel: str, offset: int, size: int) -> bytes:
        """At most `size` bytes from `offset`: fewer where the file ends (fstat's size bounds every read)."""
        return self.files.pread(rel, offset, size)

    def _version_of(self, rel: str) -> tuple[int, int]:
        """(size, mtime_ns) of a regular file: what caches of its contents are keyed on, so a file that
        changes (a fragment still being written, a file damaged while mounted) is read again."""
        st = self.files.regular_stat(rel)
        return st.st_size, st.st_mtime_ns

    def read_file(self, rel: str) -> bytes:
        """A whole file, cached under its absolute path, size and mtime (the arrays of a workspace share one
        cache)."""
        version = self._version_of(rel)

        def make():
            data, _ = self.files.read(rel)
            return data, len(data)

        return self.cache.get_or_make(("file", self.abspath(rel), version), make)

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
        fail are recorded in `problems` (default: the array's), the tile is still returned."""
        version = self._version_of(rel)

        def make():
            tile = read_generic_tile(self.read_file(rel), offset, rel, structure, key=self.key)
            # header, pipeline and per-chunk records: ~1.6 KiB for a one-chunk tile (tracemalloc)
            return tile, len(tile.payload) + 1024 + 600 * len(tile.chunks)

        tile = self.cache.get_or_make(("gtile", rel, version, offset), make)
        log = problems if problems is not None else self.problems
        for failure in tile.checksum_failures:
            log.add(problem(rel, f"{structure} generic tile", tile.header.payload_offset, failure))
        return tile

    def attempt(self, fn, file: str, structure: str):
        """fn(), or None with its failure recorded among the array's problems."""
        return self.problems.attempt(fn, file, structure)

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
        out = [LEGACY_SCHEMA] if self.isfile(LEGACY_SCHEMA) else []
        out += [f"{SCHEMA_DIR}/{n}" for n in self._regular_files(SCHEMA_DIR)]
        return out

    def _regular_files(self, rel: str) -> list[str]:
        """Names of the regular files in the folder `rel` (anything else there is a finding, never read)."""
        return self.files.regular_names(rel)

    def schema(self, rel: str):
        from ..format.schema import parse_schema

        def parse(data):
            schema = parse_schema(self.generic_tile(rel, 0, "array schema").payload, rel)
            for e in schema.enumerations:
                enum = f"{ENUMERATIONS_DIR}/{e.file_name}"
                if not self.isfile(enum):
                    self.problems.add(problem(enum, "enumeration", None,
                                              f"file missing: the array schema {rel} names it for {e.name!r}"))
            return schema

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
        return [f"{ENUMERATIONS_DIR}/{n}" for n in self._regular_files(ENUMERATIONS_DIR)]

    def enumeration(self, rel: str):
        from ..format.enumeration import parse_enumeration
        return self.parsed("enumeration", rel,
                           lambda data: parse_enumeration(self.generic_tile(rel, 0, "enumeration").payload, rel))

    # -- every other array-level file: one parse each, the same for views and `check` --------
    def array_metadata(self, rel: str):
        from ..format.array_metadata import parse_array_metadata
        return self.parsed("array metadata", rel, lambda data: parse_array_metadata(
            self.generic_tile(rel, 0, "array metadata").payload, rel))

    def vacuum_file(self, rel: str) -> list:
        from ..format.commits import parse_vacuum_file
        return self.parsed("vac", rel, lambda data: list(parse_vacuum_file(data, rel)))

    def ignore_file(self, rel: str) -> list:
        from ..format.commits import parse_ignore_file
        return self.parsed("ign", rel, lambda data: list(parse_ignore_file(data, rel)))

    def consolidated_commits(self, rel: str):
        from ..format.commits import parse_consolidated_commits
        return self.parsed("con", rel, lambda data: parse_consolidated_commits(data, rel))

    def condition(self, rel: str):
        """A delete (.del) or update (.upd) commit's condition."""
        from ..format import commits
        if rel.endswith(".del"):
            return self.parsed("del", rel, lambda data: commits.parse_delete_condition(
                self.generic_tile(rel, 0, "delete condition").payload, rel))
        return self.parsed("upd", rel, lambda data: commits.parse_update_condition(
            self.generic_tile(rel, 0, "update condition").payload, rel))

    def consolidated_fragment_metadata(self, rel: str):
        """The entries of a `__fragment_meta` file; each footer is compared with the fragment's own, and a
        difference (or a fragment that is not there) is recorded among the array's problems."""
        from ..format.consolidated_fragment_metadata import STRUCTURE, parse_consolidated_fragment_metadata
        tile = self.generic_tile(rel, 0, STRUCTURE)
        entries = self.parsed("cfm", rel, lambda data: parse_consolidated_fragment_metadata(
            tile.payload, rel, within=STRUCTURE + " payload"))
        live = {os.path.basename(p): p for p in self.fragment_paths()}
        for entry in entries:
            frag_rel = live.get(entry.fragment_name)
            if frag_rel is None:
                self.problems.add(problem(rel, "consolidated fragment metadata", entry.entry_offset,
                                          f"names fragment {entry.fragment_name}, which is not in the array",
                                          WARNING, within="consolidated fragment metadata payload"))
                continue
            own = self.fragment(frag_rel).own_footer_bytes()
            if own is not None and own != bytes(entry.footer):
                at = next((i for i, (a, b) in enumerate(zip(own, entry.footer)) if a != b),
                          min(len(own), len(entry.footer)))
                self.problems.add(problem(rel, "consolidated fragment metadata", entry.footer_offset + at,
                                          f"footer of {entry.fragment_name} differs from the fragment's own footer "
                                          f"(first at footer byte {at}; {len(entry.footer)} vs {len(own)} bytes)",
                                          within="consolidated fragment metadata payload"))
        return entries

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
        return self.files.subdirs(rel)

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
        self._findings: dict = {}   # fragment relpath -> ((signature, commits state), its listing findings)

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
            for gone in set(self._findings) - live:
                del self._findings[gone]
        return [self.fragment(p) for p in paths]

    def loaded_fragments(self) -> list:
        with self._lock:
            return list(self._fragments.values())

    # -- commits, metadata, consolidated fragment metadata ---------------------
    def commit_files(self) -> list[str]:
        out = [f"{COMMITS_DIR}/{n}" for n in self._regular_files(COMMITS_DIR)]
        # Before format 12 commit markers and vacuum files lived at the root.
        out += [n for n in self._regular_files("") if n.endswith((".ok", ".vac"))]
        return out

    def metadata_files(self) -> list[str]:
        return [f"{META_DIR}/{n}" for n in self._regular_files(META_DIR)]

    def fragment_meta_files(self) -> list[str]:
        out = [f"{FRAGMENT_META_DIR}/{n}" for n in self._regular_files(FRAGMENT_META_DIR)]
        out += [n for n in self._regular_files("") if n.endswith(".meta")]
        return out

    def commits_state(self):
        """A key that changes whenever a commit, vacuum or root marker file comes or goes (the mtimes
        of __commits/ and of the root), or None while either changed within the last second:
        directory mtimes tick coarsely, so two changes in one tick would look like one."""
        stamps = []
        now = time.time_ns()
        for rel in (COMMITS_DIR, ""):
            try:
                stamp = self.files.lstat(rel).st_mtime_ns
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
                    con = self.consolidated_commits(rel)
                    for entry in con.entries:
                        p = entry.path.rsplit("/", 1)[-1]
                        if p.endswith(".wrt"):
                            out.setdefault(p[:-4], rel)
                except Exception as exc:  # recorded, the rest still works
                    self.problems.add_error(exc, rel, "consolidated commits")
        # Formats 1-4 had no marker: a root fragment folder with its metadata file counts as committed.
        for n in self.listdir(""):
            if n not in out and _legacy_unmarked(n) and self.isfile(f"{n}/{FRAGMENT_METADATA_FILE}"):
                out[n] = f"{n}/{FRAGMENT_METADATA_FILE}"
        return out

    def vacuum_lists(self) -> dict[str, str]:
        """Fragment name -> the vacuum file (`.vac`) that lists it as obsolete."""
        return self._per_commits_state("vacuum", self._vacuum_lists)

    def _vacuum_lists(self) -> dict[str, str]:
        out = {}
        for rel in self.commit_files():
            if not rel.endswith(".vac"):
                continue
            try:
                entries = self.vacuum_file(rel)
            except Exception as exc:
                self.problems.add_error(exc, rel, "vacuum file")
                continue
            for entry in entries:
                out.setdefault(os.path.basename(entry.rstrip("/")), rel)
        return out

    def disk_usage(self) -> dict:
        """Bytes and files under the array, by top-level folder (lstat: symlinks count as themselves)."""
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

    def fragment_findings(self, frag) -> list[dict]:
        """findings.fragment_findings(frag), computed again only when the fragment's folder or the commits
        changed (array.yaml asks for every fragment's at each render)."""
        from .findings import fragment_findings
        commits = self.commits_state()
        try:
            key = (frag.signature(), commits)
        except OSError:
            key = None
        if key is not None and commits is not None:
            with self._lock:
                hit = self._findings.get(frag.rel)
            if hit is not None and hit[0] == key:
                return hit[1]
        value = fragment_findings(frag)
        if key is not None and commits is not None:
            with self._lock:
                self._findings[frag.rel] = (key, value)
        return value

    def findings(self) -> list[dict]:
        """Every problem known now: the listings' findings and what decoding found (array.yaml, check)."""
        from .findings import all_findings
        return all_findings(self)

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
