"""One fragment of a TileDB 0.x array: its book-keeping parsed on first use, its tiles located and
decoded on demand, behind the same interface as a 2.x fragment (fragment_interface.py)."""

from __future__ import annotations

from dataclasses import dataclass

from ..format.datatypes import Datatype
from ..format.errors import FormatError
from ..format.fragment_metadata import ATTRIBUTE, COORDS
from ..format.legacy0x import book_keeping as zbk
from ..format.legacy0x.codecs import TileLayout, decode_tile
from ..format.legacy0x.names import parse_fragment_name
from ..format.legacy0x.schema import COORDS as COORDS_NAME, Attribute, Legacy0xSchema
from ..lazy import np
from ..text import escape_name
from .fragment_folder import FragmentFolder
from .fragment_interface import DATA, LEGACY0X, VAR, TileLocation

BOOK_KEEPING_FILE = "__book_keeping.tdb.gz"
FRAGMENT_MARKER = "__tiledb_fragment.tdb"


@dataclass(frozen=True)
class Legacy0xField:
    """One data file stem of a fragment: an attribute, or the coordinates (kind COORDS: every dimension's
    coordinates interleaved, cell after cell)."""
    name: str                 # as on disk: the data files are <name>.tdb and <name>_var.tdb
    kind: str                 # ATTRIBUTE or COORDS
    idx: int                  # position in the book-keeping lists (coordinates: attribute count)
    attribute: Attribute | None
    datatype: Datatype
    cell_val_num: int         # coordinates: the dimension count
    nullable: bool = False    # 0.x has no nullable attributes

    @property
    def stem(self) -> str:
        return escape_name(self.name)

    @property
    def var_sized(self) -> bool:
        return self.attribute is not None and self.attribute.var_sized


@dataclass(frozen=True)
class Legacy0xTile:
    data: bytes
    location: TileLocation
    record: dict              # what was undone: compressor, pre-filter


class Legacy0xFragment(FragmentFolder):
    METADATA_FILE = BOOK_KEEPING_FILE
    layout = LEGACY0X

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
            def parse(data):
                self.store.note_footer_decoded()
                return zbk.parse_book_keeping(data, rel, self.schema())
            return self.store.parsed("zero book-keeping", rel, parse)

        return self._once("book-keeping", make)

    @property
    def dense(self) -> bool:
        return self.schema().dense

    def fields(self) -> list[Legacy0xField]:
        s = self.schema()
        out = [Legacy0xField(a.name, ATTRIBUTE, i, a, a.datatype, a.cell_val_num) for i, a in enumerate(s.attributes)]
        if not s.dense:
            out.append(Legacy0xField(COORDS_NAME, COORDS, len(s.attributes), None, s.coord_type, s.dim_num))
        return out

    def stored_fields(self) -> list[Legacy0xField]:
        return self.fields()

    def dimensions(self) -> list[tuple]:
        """(name, datatype) of each dimension: 0.x gives all coordinates one type."""
        s = self.schema()
        return [(name, s.coord_type) for name in s.dimensions]

    def non_empty_domain(self):
        return self.book_keeping().non_empty_domain

    def decode_metadata(self) -> int:
        """Decode the book-keeping, recording a failure; it is no generic tile, so none is counted."""
        self.attempt(self.book_keeping, self._file(BOOK_KEEPING_FILE), "book-keeping")
        return 0

    def tile_statistics(self, field) -> list:
        return []  # 0.x keeps no per-tile min/max/sum

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

    def tile_count(self, idx: int | None = None) -> int:
        """Every field of a 0.x fragment has the same tiles (`idx` is for the interface)."""
        bk = self.book_keeping()
        if self.dense:
            return self._once("dense tile count", self._dense_tile_count)
        return len(bk.mbrs)

    def _dense_tile_count(self) -> int:
        """The tiles of the non-empty domain, checked before it drives a loop (a garbled domain would span
        billions): every tile takes a byte at least in an attribute file, and a compressed one is listed in
        the book-keeping's tile offsets."""
        n = 1
        for tiles in self.dense_tile_grid():
            n *= tiles       # Python ints: no overflow
        listed = max((len(offsets) for offsets in self.book_keeping().tile_offsets), default=0)
        room = max([listed] + [size for name, size in self.files() if name != BOOK_KEEPING_FILE])
        if n > room:
            raise FormatError(self._file(BOOK_KEEPING_FILE), "book-keeping", 8,
                              f"the non-empty domain spans {n} tiles of the schema's extents, more than the "
                              f"{room} the attribute files and tile offsets can hold", "decompressed stream")
        return n

    def cells_per_full_tile(self) -> int:
        s = self.schema()
        return int(np.prod(s.tile_extents)) if s.dense else s.capacity

    def tile_cell_num(self, k: int) -> int:
        if not self.dense and k == self.tile_count() - 1:
            return self.book_keeping().last_tile_cell_num
        return self.cells_per_full_tile()

    def codec(self, field: Legacy0xField, stream: str):
        if field.kind == COORDS:
            return self.schema().coords_compression
        a = field.attribute
        if stream == DATA and a.var_sized:
            return a.offsets_compression
        return a.compression

    def tile_layout(self, field: Legacy0xField, stream: str) -> TileLayout:
        s = self.schema()
        if field.kind == COORDS:
            t = s.coord_type
            return TileLayout(t.dtype, s.dim_num, s.coords_size, t.size)
        a = field.attribute
        t = a.datatype
        if a.var_sized and stream == DATA:
            # the writer treats the uint64 offsets with the attribute's type size (docs/format-0x.md)
            return TileLayout(np.dtype("<u8"), 1, t.size, t.size)
        if a.var_sized:
            return TileLayout(t.dtype, 1, t.size, t.size)
        return TileLayout(t.dtype, a.cell_val_num, a.cell_val_num * t.size, t.size)

    def cell_size(self, field: Legacy0xField) -> int:
        if field.kind == COORDS:
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
                return TileLocation(rel, start, end - start, int(sizes[k]))
            # Uncompressed: the tile's values run from its first offset to the next tile's.
            start = int(self._first_offset(field, k))
            end = int(self._first_offset(field, k + 1)) if k + 1 < ntiles else file_size
            if not start <= end <= file_size:
                raise FormatError(rel, "var tile", start, f"tile {k} spans bytes {start}-{end} of a {file_size}-byte file")
            return TileLocation(rel, start, end - start, end - start, listed=False)
        cells = self.tile_cell_num(k)
        cell_size = self.cell_size(field)
        offsets = bk.tile_offsets[field.idx]
        if len(offsets):
            _check_count(offsets, ntiles, self._file(BOOK_KEEPING_FILE), f"tile offsets of {field.name}")
            start, end = _span(offsets, k, file_size, rel)
            return TileLocation(rel, start, end - start, cells * cell_size)
        start = k * self.cells_per_full_tile() * cell_size
        size = cells * cell_size
        if start + size > file_size:
            raise FormatError(rel, "tile", start, f"tile {k} needs bytes {start}-{start + size} "
                                                  f"but the file has {file_size}")
        return TileLocation(rel, start, size, size, listed=False)

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

    def unfiltered_size(self, field: Legacy0xField, k: int, stream: str) -> int:
        return self.location(field, k, stream).unfiltered_size

    def coords_column(self, coords: Legacy0xField, k: int, j: int) -> np.ndarray:
        """Dimension j's coordinates of tile k of the interleaved coordinates."""
        s = self.schema()
        data = self.tile(coords, k, DATA).data
        values = np.frombuffer(data[: len(data) - len(data) % s.coords_size], s.coord_type.dtype)
        return np.ascontiguousarray(values.reshape(-1, s.dim_num)[:, j])

    def coords_column_size(self, coords: Legacy0xField, k: int, j: int) -> int:
        return self.unfiltered_size(coords, k, DATA) // self.schema().dim_num

    def decode_ahead(self, field: Legacy0xField, k: int, stream: str, reading: tuple[int, int] | None = None) -> None:
        """Start decoding tile k in the background, if it exists; a failure there is not recorded: the real
        read records it."""
        try:
            if k >= self.tile_count():
                return
            nbytes = self.unfiltered_size(field, k, stream)
        except Exception:  # noqa: BLE001 -- the book-keeping's own problem says why
            return
        self.store.cache.make_soon(self._tile_key(field, k, stream), lambda: self._decode(field, k, stream), nbytes,
                                   reading and (self._tile_key(field, reading[0], stream), reading[1]))

    def tile_served(self, field: Legacy0xField, k: int, stream: str, nbytes: int, whole: int) -> None:
        self.store.cache.note_served(self._tile_key(field, k, stream), nbytes, whole)

    def _tile_key(self, field: Legacy0xField, k: int, stream: str) -> tuple:
        return ("zero tile", self.store.path, self.rel, self.cache_token(), field.idx, k, stream)

    def tile(self, field: Legacy0xField, k: int, stream: str) -> Legacy0xTile:
        try:
            return self.store.cache.get_or_make(self._tile_key(field, k, stream),
                                                lambda: self._decode(field, k, stream))
        except FileNotFoundError:
            raise
        except Exception as exc:
            self.problems.add_error(exc, self.data_file(field, stream), f"tile {k}")
            raise

    def _decode(self, field: Legacy0xField, k: int, stream: str):
        """(decoded tile k, its byte cost in the cache)."""
        loc = self.location(field, k, stream)
        raw = self.store.pread(loc.file, loc.offset, loc.persisted_size) if loc.persisted_size else b""
        if len(raw) != loc.persisted_size:
            raise FormatError(loc.file, "tile", loc.offset + len(raw),
                              f"tile {k} should be {loc.persisted_size} bytes but the file ends after {len(raw)}")
        codec = self.codec(field, stream)
        if loc.listed:
            data, record = decode_tile(raw, codec, self.tile_layout(field, stream), loc.unfiltered_size, loc.file,
                                       loc.offset, f"tile {k}")
        else:
            data, record = raw, {"compressor": "NONE"}
            if codec.compressed:
                record["note"] = (f"the schema says {codec.compressor_name} but the book-keeping lists no "
                                  f"tile offsets: read at its fixed position, uncompressed")
        return Legacy0xTile(data, loc, record), len(data) + 512


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
