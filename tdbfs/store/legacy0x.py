"""TileDB 0.x arrays and GenomicsDB workspaces: the store side (FORMAT_0x.md).

`open_legacy0x(path)` recognises the 0.x layout (and workspaces/groups holding such arrays) and
returns a store for it, or None so that the caller opens a TileDB 2.x array as before.
Like ArrayStore, nothing is parsed when the store is created, files are read on demand through
the same byte-bounded cache, and decoded tiles are cached there. Nothing is ever written: the
0.x library's lock file (`.__consolidation_lock`) is never opened.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass

import numpy as np

from ..format.errors import FormatError
from ..format.legacy0x import book_keeping as zbk
from ..format.legacy0x.codecs import TileLayout, decode_tile
from ..format.legacy0x.names import parse_fragment_name
from ..format.legacy0x.schema import COORDS, Attribute, Legacy0xSchema, parse_schema
from .array_store import ArrayStore
from .fragment_folder import FragmentFolder
from .problems import ProblemLog
from .cache import ByteLRU
from .local_files import LocalFiles

SCHEMA_FILE = "__array_schema.tdb"
BOOK_KEEPING_FILE = "__book_keeping.tdb.gz"
FRAGMENT_MARKER = "__tiledb_fragment.tdb"
WORKSPACE_MARKER = "__tiledb_workspace.tdb"
GROUP_MARKER = "__tiledb_group.tdb"
DATA, VAR = "data", "var"
ATTRIBUTE, COORDINATES = "attribute", "coordinates"


def open_legacy0x(path: str, cache_bytes: int = 512 << 20):
    """A Legacy0xArrayStore or Legacy0xWorkspaceStore for `path`, or None when it is not 0.x."""
    path = os.path.abspath(path)
    if not os.path.isdir(path):
        return None
    files = LocalFiles(path)
    if files.is_file(WORKSPACE_MARKER):
        return Legacy0xWorkspaceStore(path, cache_bytes, "workspace")
    if is_legacy0x_array(path):
        return Legacy0xArrayStore(path, cache_bytes)
    if files.is_file(GROUP_MARKER) and not files.is_dir("__group"):
        store = Legacy0xWorkspaceStore(path, cache_bytes, "group")
        if store.array_paths():
            return store
    return None


def is_legacy0x_array(path: str) -> bool:
    files = LocalFiles(path)
    if not files.is_file(SCHEMA_FILE) or files.is_dir("__schema"):
        return False
    try:
        head = files.pread(SCHEMA_FILE, 0, 4)
        if len(head) == 4 and int.from_bytes(head, "little") >= 0x80000000:
            return True  # the fork's version tag
        checked = 0
        for entry in files.entries(""):
            if entry.is_dir and entry.name.lstrip(".").startswith("__"):
                if files.is_file(f"{entry.name}/{BOOK_KEEPING_FILE}"):
                    return True
                if files.is_file(f"{entry.name}/__fragment_metadata.tdb"):
                    return False
                checked += 1
                if checked >= 8:
                    break
        # No fragment tells: an original (untagged) 0.x schema decodes completely, a 1.x/2.x one does not.
        if files.file_size(SCHEMA_FILE) > 1 << 20:
            return False
        parse_schema(files.read(SCHEMA_FILE)[0])
        return True
    except (OSError, FormatError):
        return False


class Legacy0xArrayStore(ArrayStore):
    """ArrayStore's file access and cache over a 0.x array folder."""

    legacy0x_layout = "array"

    def __init__(self, path: str, cache_bytes: int = 512 << 20, cache: ByteLRU | None = None):
        self.path = os.path.abspath(path)
        self.files = LocalFiles(self.path)
        self.cache = cache if cache is not None else ByteLRU(cache_bytes)
        self.problems = ProblemLog()
        self.key = None  # 0.x has no encryption
        self._lock = threading.RLock()
        self._parsed: dict = {}
        self._init_fragment_cache()

    # -- schema --------------------------------------------------------------
    def schema_files(self) -> list[str]:
        return [SCHEMA_FILE] if self.isfile(SCHEMA_FILE) else []

    def latest_schema_file(self):
        files = self.schema_files()
        return files[0] if files else None

    def legacy0x_schema(self) -> Legacy0xSchema:
        return self.parsed("zero schema", SCHEMA_FILE, lambda data: parse_schema(data, SCHEMA_FILE))

    # -- fragments -------------------------------------------------------------
    def fragment_paths(self) -> list[str]:
        """Every fragment folder, committed or not (hidden `.__*` ones and unmarked ones too), oldest first."""
        out = []
        for n in self.listdir(""):
            if not self.isdir(n) or not n.lstrip(".").startswith("__"):
                continue
            try:
                ts = parse_fragment_name(n).timestamp_ms
            except FormatError:
                if not self.isfile(f"{n}/{BOOK_KEEPING_FILE}"):
                    continue
                ts = -1
            out.append((ts, n))
        return [n for _, n in sorted(out)]

    def _make_fragment(self, rel: str) -> "Legacy0xFragment":
        return Legacy0xFragment(self, rel)

    def committed_fragment_names(self) -> dict:
        return {}

    def vacuum_lists(self) -> dict:
        return {}

    def commit_files(self) -> list:
        return []

    def metadata_files(self) -> list:
        return []

    def fragment_meta_files(self) -> list:
        return []

    def enumeration_files(self) -> list:
        return []


class Legacy0xWorkspaceStore:
    """A TileDB 0.x workspace (or group): its arrays, found in it and its groups, each a Legacy0xArrayStore."""

    legacy0x_layout = "workspace"

    def __init__(self, path: str, cache_bytes: int = 512 << 20, kind: str = "workspace"):
        self.path = os.path.abspath(path)
        self.files = LocalFiles(self.path)
        self.kind = kind
        self.cache = ByteLRU(cache_bytes)
        self.problems = ProblemLog()
        self._lock = threading.Lock()
        self._arrays: dict = {}

    def abspath(self, rel: str) -> str:
        return os.path.join(self.path, rel)

    def array_paths(self) -> list[str]:
        """Relative paths of the arrays, through nested groups, sorted."""
        out = []

        def walk(rel: str, depth: int):
            for e in self.files.entries(rel):
                if not e.is_dir or e.name.startswith("."):
                    continue
                sub = f"{rel}/{e.name}" if rel else e.name
                if self.files.is_file(f"{sub}/{SCHEMA_FILE}"):
                    out.append(sub)
                elif self.files.is_file(f"{sub}/{GROUP_MARKER}") and depth < 16:
                    walk(sub, depth + 1)

        walk("", 0)
        return out

    def group_paths(self) -> list[str]:
        out = []
        for rel in self.array_paths():
            parts = rel.split("/")[:-1]
            for i in range(1, len(parts) + 1):
                g = "/".join(parts[:i])
                if g not in out:
                    out.append(g)
        return out

    def array(self, rel: str) -> Legacy0xArrayStore:
        with self._lock:
            store = self._arrays.get(rel)
            if store is None:
                store = self._arrays[rel] = Legacy0xArrayStore(self.abspath(rel), cache=self.cache)
            return store

    def other_files(self) -> list[tuple[str, int]]:
        """Files at the workspace root (GenomicsDB keeps callset.json, vidmap.json, vcfheader.vcf there)."""
        return [(e.name, e.size) for e in self.files.entries("") if e.is_file]


@dataclass(frozen=True)
class Legacy0xField:
    """One data file stem of a fragment: an attribute, or the coordinates."""
    name: str
    kind: str                 # ATTRIBUTE or COORDINATES
    idx: int                  # position in the book-keeping lists (coordinates: attribute count)
    attribute: Attribute | None

    @property
    def var_sized(self) -> bool:
        return self.attribute is not None and self.attribute.var_sized


@dataclass(frozen=True)
class TileLocation:
    file: str                 # relative to the array root
    offset: int
    persisted_size: int
    unfiltered_size: int
    compressed: bool          # False: at a fixed position (the book-keeping lists no offsets)


@dataclass(frozen=True)
class Legacy0xTile:
    data: bytes
    location: TileLocation
    record: dict


class Legacy0xFragment(FragmentFolder):
    METADATA_FILE = BOOK_KEEPING_FILE

    # -- name, files, commit state --------------------------------------------
    @property
    def parsed_name(self):
        return self._once("name", lambda: parse_fragment_name(self.name))

    def is_committed(self) -> bool:
        return not self.uncommitted_reasons()

    def uncommitted_reasons(self) -> list[str]:
        """Why the 0.x reader would skip this fragment (empty: it is committed)."""
        reasons = []
        if self.name.startswith("."):
            reasons.append("hidden '.__' folder: the writer never renamed it into place (interrupted write)")
        if not self.store.isfile(self._file(FRAGMENT_MARKER)):
            reasons.append(f"no {FRAGMENT_MARKER}: the writer never finalized it")
        return reasons

    # -- schema, book-keeping ------------------------------------------------------
    def schema(self) -> Legacy0xSchema:
        return self.store.legacy0x_schema()

    def book_keeping(self) -> zbk.BookKeeping:
        rel = self._file(BOOK_KEEPING_FILE)

        def make():
            if not self.store.isfile(rel) and self.store.isdir(self.rel):
                # what an interrupted write leaves: the writer saves the book-keeping on finalize
                raise FormatError(rel, "book-keeping", 0, "missing: the fragment was never finalized, so its "
                                                          "tiles cannot be located (its raw files are under raw/)")
            return self.store.parsed("zero book-keeping", rel,
                                     lambda data: zbk.parse_book_keeping(data, rel, self.schema()))

        return self._once("book-keeping", make)

    @property
    def dense(self) -> bool:
        return self.schema().dense

    def fields(self) -> list[Legacy0xField]:
        s = self.schema()
        out = [Legacy0xField(a.name, ATTRIBUTE, i, a) for i, a in enumerate(s.attributes)]
        if not s.dense:
            out.append(Legacy0xField(COORDS, COORDINATES, len(s.attributes), None))
        return out

    # -- tile geometry -------------------------------------------------------------
    def dense_tile_grid(self) -> list[int]:
        """Tiles per dimension over the non-empty domain expanded to tile boundaries."""
        s = self.schema()
        out = []
        for (lo, hi), (dlo, _), ext in zip(self.book_keeping().non_empty_domain, s.domain, s.tile_extents):
            first = (lo - dlo) // ext
            last = (hi - dlo) // ext
            out.append(int(last - first + 1))
        return out

    def tile_count(self) -> int:
        bk = self.book_keeping()
        if self.dense:
            return int(np.prod(self.dense_tile_grid()))
        return len(bk.mbrs)

    def cells_per_full_tile(self) -> int:
        s = self.schema()
        return int(np.prod(s.tile_extents)) if s.dense else s.capacity

    def tile_cell_num(self, k: int) -> int:
        if not self.dense and k == self.tile_count() - 1:
            return self.book_keeping().last_tile_cell_num
        return self.cells_per_full_tile()

    def cell_count(self) -> int:
        n = self.tile_count()
        return 0 if n == 0 else (n - 1) * self.cells_per_full_tile() + self.tile_cell_num(n - 1)

    def codec(self, field: Legacy0xField, stream: str):
        if field.kind == COORDINATES:
            return self.schema().coords_compression
        a = field.attribute
        if stream == DATA and a.var_sized:
            return a.offsets_compression
        return a.compression

    def layout(self, field: Legacy0xField, stream: str) -> TileLayout:
        s = self.schema()
        if field.kind == COORDINATES:
            t = s.coord_type
            return TileLayout(t.dtype, s.dim_num, s.coords_size, t.size)
        a = field.attribute
        t = a.datatype
        if a.var_sized and stream == DATA:
            # the writer treats the uint64 offsets with the attribute's type size (FORMAT_0x.md)
            return TileLayout(np.dtype("<u8"), 1, t.size, t.size)
        if a.var_sized:
            return TileLayout(t.dtype, 1, t.size, t.size)
        return TileLayout(t.dtype, a.cell_val_num, a.cell_val_num * t.size, t.size)

    def cell_size(self, field: Legacy0xField) -> int:
        if field.kind == COORDINATES:
            return self.schema().coords_size
        return field.attribute.cell_size

    def data_file(self, field: Legacy0xField, stream: str) -> str:
        return self._file(field.name + ("_var.tdb" if stream == VAR else ".tdb"))

    def location(self, field: Legacy0xField, k: int, stream: str) -> TileLocation:
        return self._once(("location", field.idx, k, stream), lambda: self._location(field, k, stream))

    def _location(self, field: Legacy0xField, k: int, stream: str) -> TileLocation:
        bk = self.book_keeping()
        ntiles = self.tile_count()
        if not 0 <= k < ntiles:
            raise FormatError(self._file(BOOK_KEEPING_FILE), "book-keeping", 0,
                              f"tile {k} of {field.name}: the fragment has {ntiles} tiles")
        rel = self.data_file(field, stream)
        file_size = self.store.file_size(rel)
        if stream == VAR:
            offsets = bk.tile_var_offsets[field.idx]
            sizes = bk.tile_var_sizes[field.idx]
            if len(offsets):
                _check_count(offsets, ntiles, self._file(BOOK_KEEPING_FILE), f"var tile offsets of {field.name}")
                if len(sizes) != len(offsets):
                    raise FormatError(self._file(BOOK_KEEPING_FILE), "book-keeping", 0,
                                      f"{len(sizes)} var tile sizes for {len(offsets)} var tile offsets of {field.name}")
                start, end = _span(offsets, k, file_size, rel)
                return TileLocation(rel, start, end - start, int(sizes[k]), True)
            # Uncompressed: the tile's values run from its first offset to the next tile's.
            start = int(self._first_offset(field, k))
            end = int(self._first_offset(field, k + 1)) if k + 1 < ntiles else file_size
            if not start <= end <= file_size:
                raise FormatError(rel, "var tile", start, f"tile {k} spans bytes {start}-{end} of a {file_size}-byte file")
            return TileLocation(rel, start, end - start, end - start, False)
        cells = self.tile_cell_num(k)
        cell_size = self.cell_size(field)
        offsets = bk.tile_offsets[field.idx]
        if len(offsets):
            _check_count(offsets, ntiles, self._file(BOOK_KEEPING_FILE), f"tile offsets of {field.name}")
            start, end = _span(offsets, k, file_size, rel)
            return TileLocation(rel, start, end - start, cells * cell_size, True)
        start = k * self.cells_per_full_tile() * cell_size
        size = cells * cell_size
        if start + size > file_size:
            raise FormatError(rel, "tile", start, f"tile {k} needs bytes {start}-{start + size} "
                                                  f"but the file has {file_size}")
        return TileLocation(rel, start, size, size, False)

    def _first_offset(self, field: Legacy0xField, k: int) -> int:
        data = self.tile(field, k, DATA).data
        if len(data) < 8:
            raise FormatError(self.data_file(field, DATA), "offsets tile", 0, f"tile {k} holds no offset")
        return int(np.frombuffer(data, "<u8", count=1)[0])

    def var_base(self, field: Legacy0xField, k: int) -> int:
        """Where tile k's values start in the fragment's whole uncompressed var stream."""
        sizes = self.book_keeping().tile_var_sizes[field.idx]
        if len(sizes):
            return int(np.sum(sizes[:k], dtype=np.uint64))
        return self.location(field, k, VAR).offset

    def tile(self, field: Legacy0xField, k: int, stream: str) -> Legacy0xTile:
        key = ("zero tile", self.store.path, self.rel, self.cache_token(), field.idx, k, stream)

        def make():
            loc = self.location(field, k, stream)
            raw = self.store.pread(loc.file, loc.offset, loc.persisted_size) if loc.persisted_size else b""
            if len(raw) != loc.persisted_size:
                raise FormatError(loc.file, "tile", loc.offset + len(raw),
                                  f"tile {k} should be {loc.persisted_size} bytes but the file ends after {len(raw)}")
            codec = self.codec(field, stream)
            if loc.compressed:
                data, record = decode_tile(raw, codec, self.layout(field, stream), loc.unfiltered_size, loc.file,
                                           loc.offset, f"tile {k}")
            else:
                data, record = raw, {"compressor": "NONE"}
                if codec.compressed:
                    record["note"] = (f"the schema says {codec.compressor_name} but the book-keeping lists no "
                                      f"tile offsets: read at its fixed position, uncompressed")
            return Legacy0xTile(data, loc, record), len(data) + 512

        try:
            return self.store.cache.get_or_make(key, make)
        except FileNotFoundError:
            raise
        except Exception as exc:
            self.problems.add_error(exc, self.data_file(field, stream), f"tile {k}")
            raise


def _check_count(offsets, ntiles: int, file: str, what: str) -> None:
    if len(offsets) != ntiles:
        raise FormatError(file, "book-keeping", 0, f"{len(offsets)} {what} for {ntiles} tiles")


def _span(offsets, k: int, file_size: int, rel: str) -> tuple[int, int]:
    start = int(offsets[k])
    end = int(offsets[k + 1]) if k + 1 < len(offsets) else file_size
    if not start <= end <= file_size:
        raise FormatError(rel, "tile", start, f"tile {k} spans bytes {start}-{end} of a {file_size}-byte file "
                                              "(book-keeping offsets)")
    return start, end
