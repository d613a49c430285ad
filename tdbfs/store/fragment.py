"""One fragment folder: its metadata parsed on first use, its tiles decoded on demand.

A fragment never changes once written, so everything parsed here is kept for
the life of the object; decoded tiles go to the store's byte-bounded cache.
"""

from __future__ import annotations

from dataclasses import replace

from ..format import fragment_metadata as fm
from ..format.errors import FormatError
from ..format.filter_registry import offsets_embedded
from ..format.generic_tile import HEADER_BASE_SIZE
from ..format.filters import EMPTY_PIPELINE, FilterPipeline, FilterSpec
from ..format.names import parse_fragment_name
from ..format.reversers.encryption import NO_KEY_MESSAGE, EncryptedError
from ..format.tile import DecodedTile, FilterContext, empty_offsets, unfilter_tile, UINT8, UINT64
from ..lazy import np
from . import decode_pool
from .fragment_folder import FragmentFolder
from .fragment_interface import DATA, STREAM_SUFFIX, TILEDB, VALIDITY, VAR, TileLocation
from .problems import Problem, WARNING
from .footer_checks import footer_size_check, sparse_tile_count
from .tile_bounds import check_min_max

#: no decoded tile is bigger (TileDB keeps tiles in memory whole); a size read from a file above it is damage
MAX_TILE_BYTES = 1 << 40
#: bytes read from the end of `__fragment_metadata.tdb` to find its footer: a footer of a few hundred fields
#: fits; a longer one costs a second read from its start
FOOTER_TAIL = 64 << 10

# Data tiles of an encrypted array end with this filter, which no schema pipeline lists (§3.1).
AES_256_GCM = FilterSpec(11)


class Fragment(FragmentFolder):
    METADATA_FILE = "__fragment_metadata.tdb"
    layout = TILEDB

    # -- name, files -----------------------------------------------------------
    @property
    def parsed_name(self):
        return self._once("name", self._parse_name)

    def _parse_name(self):
        """The folder's name parsed; a name that does not parse is a problem of the folder (TileDB refuses
        to open an array with such a folder in __fragments/)."""
        try:
            return parse_fragment_name(self.name)
        except FormatError as exc:
            raise FormatError(self.rel, "fragment name", exc.offset, exc.message) from None

    def is_committed(self) -> bool:
        # in a summary's pass over 100,000 fragments the commits listed already answer; else an lstat
        # or two, without a map of the commits of 100,000 fragments
        return self.store.commit_file_of(self.name) is not None

    # -- footer, schema, fields ------------------------------------------------
    def metadata_bytes(self) -> bytes:
        return self.store.read_file(self._file(self.METADATA_FILE))

    def footer(self):
        return self._once("footer", self._kept_footer_and_schema)[0]

    def _kept_footer_and_schema(self):
        """The footer and its schema, kept in the store's bounded cache too: a fragment object dropped from
        the store's LRU (a walk or a summary of 100,000 fragments) is made again without a parse."""
        key = ("footer", self.store.path, self.rel, self.cache_token())

        def make():
            footer, schema = self._footer_and_schema()
            # the parsed footer, its field list and arrays: ~5 KiB for 3 fields (tracemalloc); the schema
            # is the store's, shared
            return (footer, schema), 2048 + 1024 * len(footer.fields)

        return self.store.cache.get_or_make(key, make)

    def _footer_and_schema(self):
        rel = self._file(self.METADATA_FILE)
        self.store.note_footer_decoded()
        name_version = self._name_version()
        if name_version is not None and name_version <= 2:
            # Formats 1/2: no footer; dense iff there is no __coords.tdb (§5.7).
            dense = not any(n == fm.COORDS_NAME + ".tdb" for n, _ in self.files())
            return fm.legacy_footer(self.legacy_metadata(), dense), self._named_schema("", rel, 0)
        # The footer sits at the end of the file (§5.4): its tail is read alone, and the rest (R-tree, tile
        # offsets: most of a big fragment's metadata) only when a view needs it.
        data, start = self.store.file_tail(rel, FOOTER_TAIL)
        size = start + len(data)
        if name_version is not None and name_version >= 10:
            offset, length = fm.locate_footer(data, size, name_version, None, rel)
            if offset < start:   # a footer longer than the tail read: read from its start
                data, start = self.store.file_tail(rel, size - offset)
            _, schema_name = fm.peek_footer_schema_name(data, rel, offset - start, base=start)
            schema = self._named_schema(schema_name or "", rel, offset)
        else:
            schema = self._named_schema("", rel, 0)
            offset, length = fm.locate_footer(data, size, name_version, schema, rel)
            if offset < start:
                data, start = self.store.file_tail(rel, size - offset)
        return fm.parse_footer(data, rel, schema, offset - start, length, name_version, base=start), schema

    def _named_schema(self, name: str, rel: str, footer_offset: int):
        """The schema a footer names; a name with no schema file behind it is a problem of the footer
        (a garbled name reads as a schema that is not there)."""
        if name and ("/" in name or "\0" in name or name in (".", "..")):
            raise FormatError(rel, "footer", footer_offset + 12,
                              f"names the array schema {name!r}, which is not a file name")
        try:
            return self.store.schema_by_name(name)
        except FormatError as exc:
            # the schema's own problem is listed with the schema; the fragment's views fail through this field
            raise FormatError(rel, "footer", footer_offset + (12 if name else 0),
                              f"names the array schema {name or '(legacy)'!r}, which does not decode "
                              f"({exc.structure} at byte {exc.offset}: {exc.message})") from None
        except OSError as exc:
            where = f"__schema/{name}" if name else "__array_schema.tdb"
            why = "is not there" if isinstance(exc, FileNotFoundError) else f"cannot be read ({exc.strerror})"
            # the name field starts 12 bytes into a v>=10 footer (version u32, name length u64)
            raise FormatError(rel, "footer", footer_offset + (12 if name else 0),
                              f"names the array schema {name or '(legacy)'!r}, but {where} {why}") from None

    def schema(self):
        return self._once("footer", self._kept_footer_and_schema)[1]

    def decode_metadata(self) -> int:
        """Decode every generic tile the footer points at, through the accessors the views use (so a
        failure is the same problem, whoever finds it); failures are recorded, never raised. Returns how
        many generic tiles the footer points at. In one pass of the store: the metadata file is one
        version for all of its generic tiles (a stat, not one per tile)."""
        with self.store.one_pass():
            return self._decode_metadata()

    def _decode_metadata(self) -> int:
        md = self._file(self.METADATA_FILE)
        footer = self.attempt(self.footer, md, "footer")
        if footer is None:
            return 0
        self.attempt(self.rtree, md, "R-tree")
        g = footer.generic_tile_offsets
        if g is None:
            return 0
        for f in self.attempt(self.fields, md, "fields") or ():
            for getter, what, kind in ((self.tile_offsets, "tile offsets", "tile_offsets"),
                                       (self.tile_var_offsets, "tile var offsets", "tile_var_offsets"),
                                       (self.tile_var_sizes, "tile var sizes", "tile_var_sizes")):
                if f.idx < len(getattr(g, kind) or ()):  # formats < 5 list no offsets for __coords' phantom slot
                    self.attempt(lambda getter=getter, f=f: getter(f.idx), md, f"{what} of {f.stem}")
            if g.tile_validity_offsets is not None and f.idx < len(g.tile_validity_offsets):
                self.attempt(lambda f=f: self.tile_validity_offsets(f.idx), md, f"tile validity offsets of {f.stem}")
            if g.tile_min_offsets is not None and f.idx < len(g.tile_min_offsets):
                self.attempt(lambda f=f: self.tile_min_max("min", f.idx), md, f"tile mins of {f.stem}")
                self.attempt(lambda f=f: self.tile_min_max("max", f.idx), md, f"tile maxes of {f.stem}")
                self.attempt(lambda f=f: self.tile_sums(f.idx), md, f"tile sums of {f.stem}")
                self.attempt(lambda f=f: self.tile_null_counts(f.idx), md, f"tile null counts of {f.stem}")
        if g.fragment_min_max_sum_null_count is not None:
            self.attempt(self.fragment_min_max_sum_null_count, md, "fragment min/max/sum/null count")
        if g.processed_conditions is not None:
            self.attempt(self.processed_conditions, md, "processed conditions")
        return 1 + sum(len(getattr(g, kind) or ()) for kind in (
            "tile_offsets", "tile_var_offsets", "tile_var_sizes", "tile_validity_offsets", "tile_min_offsets",
            "tile_max_offsets", "tile_sum_offsets", "tile_null_count_offsets")) \
            + (g.fragment_min_max_sum_null_count is not None) + (g.processed_conditions is not None)

    def own_footer_bytes(self) -> bytes | None:
        """The footer's bytes as stored (None before format 3, or when the footer does not decode)."""
        try:
            footer = self.footer()
            if footer.generic_tile_offsets is None:
                return None
            data, start = self.store.file_tail(self._file(self.METADATA_FILE),
                                               self.store.file_size(self._file(self.METADATA_FILE)) - footer.offset)
            return bytes(data[footer.offset - start:footer.offset - start + footer.footer_length])
        except Exception:  # noqa: BLE001 -- the footer's own problem is recorded by its parse
            return None

    def legacy_metadata(self):
        """Format 1/2 `__fragment_metadata.tdb` (one generic tile, §5.7); None for later formats."""
        if self._name_version() not in (1, 2):
            return None

        def make():
            rel = self._file(self.METADATA_FILE)
            tile = self.store.generic_tile(rel, 0, "legacy fragment metadata", self.problems)
            return fm.parse_legacy_fragment_metadata(tile.payload, rel, self._named_schema("", rel, 0))
        return self._once("legacy", make)

    def _name_version(self) -> int | None:
        try:
            return self.parsed_name.assumed_format_version
        except Exception:
            return None

    def fields(self) -> list:
        return list(self.footer().fields)

    def dimensions(self) -> list[tuple]:
        """(name, datatype) of each dimension."""
        return [(d.name, d.datatype) for d in self.schema().dimensions]

    @property
    def dense(self) -> bool:
        return self.footer().dense

    def non_empty_domain(self):
        """The (min, max) of each dimension the fragment holds cells in; None when the footer keeps none."""
        footer = self.footer()
        return None if footer.null_non_empty_domain else footer.non_empty_domain

    def field_by_stem(self, stem: str):
        for f in self.fields():
            if f.stem == stem:
                return f
        raise KeyError(stem)

    # -- generic tiles of the fragment metadata -----------------------------------
    def _gtile_payload(self, kind: str, idx: int | None, structure: str) -> bytes:
        """The payload of the generic tile whose offset the footer keeps in `kind` (a GenericTileOffsets
        field; entry `idx` of a per-field list). Generic tiles lie before the footer: an offset that does
        not is the footer's wrong number, reported where the footer holds it."""
        footer = self.footer()
        offsets = getattr(footer.generic_tile_offsets, kind)
        offset = int(offsets if idx is None else offsets[idx])
        md = self._file(self.METADATA_FILE)
        if offset + HEADER_BASE_SIZE > footer.offset:
            at = footer.field_offset(kind, idx or 0)
            raise FormatError(md, "fragment metadata footer", footer.offset if at is None else at,
                              f"{structure} generic tile offset {offset}: the generic tiles end where the footer "
                              f"starts, at byte {footer.offset}")
        return self.store.generic_tile(md, offset, structure, self.problems).payload

    def rtree(self):
        def make():
            footer = self.footer()
            if footer.generic_tile_offsets is None:
                return fm.legacy_rtree(self.legacy_metadata())
            payload = self._gtile_payload("rtree", None, "R-tree")
            return fm.parse_rtree(payload, self._file(self.METADATA_FILE), self.schema().dimensions, footer.version)
        return self._once("rtree", make)

    def _u64_list_payload(self, kind: str, idx: int):
        footer = self.footer()
        lists = getattr(footer.generic_tile_offsets, kind) or ()
        if idx >= len(lists):
            raise FormatError(self._file(self.METADATA_FILE), "footer", footer.offset,
                              f"the footer has {len(lists)} {kind}, none for field {idx}")
        return self._gtile_payload(kind, idx, f"{kind}[{idx}]")

    def _u64_list(self, kind: str, idx: int) -> np.ndarray:
        def make():
            if self.footer().generic_tile_offsets is None:
                return _legacy_list(self.legacy_metadata(), kind, idx, self._file(self.METADATA_FILE))
            return fm.parse_u64_list(self._u64_list_payload(kind, idx), self._file(self.METADATA_FILE),
                                     f"{kind}[{idx}]")
        return self._once((kind, idx), make)

    def _u64_count(self, kind: str, idx: int) -> int:
        """len(self._u64_list(kind, idx)), without building the list (and importing numpy) when it is
        not built yet: `find` or `ls` of a dense fragment's tile folder on a fresh mount needs only
        this. Checked as the list is: a damaged list fails both with the same problem."""
        if self.footer().generic_tile_offsets is None or self._known((kind, idx)):
            return len(self._u64_list(kind, idx))
        return self._once(("count", kind, idx), lambda: fm.count_u64_list(
            self._u64_list_payload(kind, idx), self._file(self.METADATA_FILE), f"{kind}[{idx}]"))

    def tile_list(self, kind: str, idx: int) -> np.ndarray:
        """A per-field list of u64s by its footer name (tile_offsets, tile_var_offsets, ...)."""
        return self._u64_list(kind, idx)

    def tile_offsets(self, idx: int) -> np.ndarray:
        return self._u64_list("tile_offsets", idx)

    def tile_var_offsets(self, idx: int) -> np.ndarray:
        return self._u64_list("tile_var_offsets", idx)

    def tile_var_sizes(self, idx: int) -> np.ndarray:
        return self._u64_list("tile_var_sizes", idx)

    def tile_validity_offsets(self, idx: int) -> np.ndarray:
        return self._u64_list("tile_validity_offsets", idx)

    def tile_null_counts(self, idx: int) -> np.ndarray:
        return self._u64_list("tile_null_count_offsets", idx)

    def tile_min_max(self, which: str, idx: int):
        def make():
            payload = self._gtile_payload(f"tile_{which}_offsets", idx, f"tile_{which}[{idx}]")
            return fm.parse_tile_min_max(payload, self._file(self.METADATA_FILE), self.fields()[idx],
                                         "tile mins" if which == "min" else "tile maxes")
        return self._once(("minmax", which, idx), make)

    def tile_sums(self, idx: int):
        def make():
            payload = self._gtile_payload("tile_sum_offsets", idx, f"tile_sums[{idx}]")
            return fm.parse_tile_sums(payload, self._file(self.METADATA_FILE), self.fields()[idx])
        return self._once(("sums", idx), make)

    def fragment_min_max_sum_null_count(self):
        def make():
            payload = self._gtile_payload("fragment_min_max_sum_null_count", None,
                                          "fragment min/max/sum/null count")
            return fm.parse_fragment_min_max_sum_null_count(payload, self._file(self.METADATA_FILE), self.fields())
        return self._once("fragment_mmsn", make)

    def processed_conditions(self):
        def make():
            payload = self._gtile_payload("processed_conditions", None, "processed conditions")
            return fm.parse_processed_conditions(payload, self._file(self.METADATA_FILE))
        return self._once("processed_conditions", make)

    def tile_statistics(self, field) -> list:
        """[(label, one value per tile)] of what the metadata keeps per tile (format 11 on), each list that
        decodes; one that does not is left out (its own problem says why)."""
        if self.footer().version < 11:
            return []
        out = []
        for label, get in (("min", lambda: self.tile_min_max("min", field.idx)),
                           ("max", lambda: self.tile_min_max("max", field.idx)),
                           ("sum", lambda: self.tile_sums(field.idx)),
                           ("null_count", lambda: self.tile_null_counts(field.idx))):
            try:
                out.append((label, list(get())))
            except Exception:  # noqa: BLE001 -- recorded by its parse
                out.append((label, []))
        return out

    # -- tile geometry -------------------------------------------------------------
    def stored_fields(self) -> list:
        """Fields with data files: attributes, dimensions of sparse fragments, t/dt/dci."""
        footer = self.footer()
        # The __coords slot is a phantom from format 5 on; before, sparse fragments store __coords.tdb.
        return [f for f in self.fields()
                if not (f.kind == fm.COORDS and (footer.version >= 5 or footer.dense))
                and not (f.kind == fm.DIMENSION and footer.dense)]

    def tile_count(self, idx: int | None = None) -> int:
        footer = self.footer()
        if not footer.dense:
            return self._once("sparse tile count", lambda: sparse_tile_count(self))
        if idx is None:
            idx = self.stored_fields()[0].idx
        return self._u64_count("tile_offsets", idx)

    def cells_per_full_tile(self) -> int:
        footer = self.footer()
        if footer.dense:
            n = 1
            for d in self.schema().dimensions:
                n *= int(d.tile_extent)
            return n
        return self.schema().capacity

    def tile_cell_num(self, k: int) -> int:
        footer = self.footer()
        if footer.dense:
            return self.cells_per_full_tile()
        return footer.last_tile_cell_num if k == footer.sparse_tile_num - 1 else self.schema().capacity

    def unfiltered_size(self, field, k: int, stream: str) -> int:
        """Exact decoded size from metadata alone (no tile is read)."""
        cells = self.tile_cell_num(k)
        md = self._file(self.METADATA_FILE)
        if stream == VAR:
            sizes = self.tile_var_sizes(field.idx)
            if k >= len(sizes):
                raise FormatError(md, f"tile_var_sizes[{field.idx}]", self._list_offset("tile_var_sizes", field.idx),
                                  f"tile {k} of {field.stem} is not in its {len(sizes)} var sizes")
            size = int(sizes[k])
        elif stream == VALIDITY:
            size = cells
        elif field.var_sized:
            size = cells * 8
        else:
            size = cells * field.cell_size
        if size > MAX_TILE_BYTES:
            # a number read from the file that would size a file (and a decode): checked first
            raise FormatError(md, f"tile_var_sizes[{field.idx}]" if stream == VAR else "footer",
                              self._list_offset("tile_var_sizes", field.idx) if stream == VAR else 0,
                              f"tile {k} of {field.stem} would decode to {size} bytes, more than any tile can hold")
        return size

    def location(self, field, k: int, stream: str) -> TileLocation:
        footer = self.footer()
        if stream == VAR:
            offsets, file_size = self.tile_var_offsets(field.idx), footer.file_var_sizes[field.idx]
            kind = "tile_var_offsets"
        elif stream == VALIDITY:
            offsets, file_size = self.tile_validity_offsets(field.idx), footer.file_validity_sizes[field.idx]
            kind = "tile_validity_offsets"
        else:
            offsets, file_size = self.tile_offsets(field.idx), footer.file_sizes[field.idx]
            kind = "tile_offsets"
        md = self._file(self.METADATA_FILE)
        if k >= len(offsets):
            raise FormatError(md, "tile offsets", self._list_offset(kind, field.idx),
                              f"tile {k} of {field.stem} is not in its {len(offsets)} tile offsets")
        start = int(offsets[k])
        end = int(offsets[k + 1]) if k + 1 < len(offsets) else int(file_size)
        if end < start:
            footer_size_check(self, field, k, stream)
            # offsets out of order, or a file size below the last offset: no length can be trusted
            what = f"tile {k + 1} starts at {end}" if k + 1 < len(offsets) else f"the footer's file size is {end}"
            raise FormatError(md, f"{kind}[{field.idx}]", self._list_offset(kind, field.idx),
                              f"tile {k} of {field.stem} starts at {start} but {what}")
        return TileLocation(self._file(field.stem + STREAM_SUFFIX[stream]), start, end - start,
                            self.unfiltered_size(field, k, stream))

    def _list_offset(self, kind: str, idx: int) -> int:
        """File offset of the generic tile that holds a per-field list (0 for formats 1/2, which inline it)."""
        g = self.footer().generic_tile_offsets
        lists = getattr(g, kind, None) if g is not None else None
        return int(lists[idx]) if lists is not None and idx < len(lists) else 0

    def pipeline(self, field, stream: str) -> FilterPipeline:
        schema = self.schema()
        if stream == VALIDITY:
            return schema.validity_filters or EMPTY_PIPELINE
        if stream == DATA and field.var_sized:
            return schema.offsets_filters
        if field.kind == fm.ATTRIBUTE:
            return schema.attributes[field.position].filters
        if field.kind == fm.DIMENSION:
            own = schema.dimensions[field.position].filters
            return own if own.filters else schema.coords_filters
        return schema.coords_filters  # t, dt, dci

    def filter_context(self, field, stream: str) -> FilterContext:
        version = self.footer().version
        key = self.store.key
        if stream == VALIDITY:
            return FilterContext(UINT8, 1, version, key=key)
        if stream == DATA and field.var_sized:
            return FilterContext(UINT64, 8, version, key=key)
        if stream == VAR:
            return FilterContext(field.datatype, field.datatype.size, version,
                                 var_strings=self.offsets_embedded(field), key=key)
        return FilterContext(field.datatype, field.cell_size, version, key=key)

    def encrypted(self) -> bool:
        """AES-256-GCM, as the (unencrypted) header of the first generic tile of the metadata file says.

        Data tiles then end with an implicit AES_256_GCM filter that no schema pipeline lists (§3.1)."""
        return self._once("encrypted", lambda: self.store.encryption_type(self._file(self.METADATA_FILE)) == 1)

    def offsets_embedded(self, field) -> bool:
        """Var strings whose first filter is RLE (v>=12) or DICTIONARY (v>=13) for ASCII, either for
        UTF-8 (v>=17): TileDB stores an empty offsets tile and the var data carries the lengths (§3.4)."""
        if not field.var_sized or field.kind != fm.ATTRIBUTE and field.kind != fm.DIMENSION:
            return False
        version = self.footer().version
        pipe = self.pipeline(field, VAR)
        first = pipe.filters[0].id if pipe.filters else None
        return offsets_embedded(first, field.datatype.name, version)

    def tile(self, field, k: int, stream: str) -> DecodedTile:
        """Tile k of one stream, decoded once and kept in the store's cache."""
        key = self._tile_key(field, k, stream)
        try:
            return self.store.cache.get_or_make(key, lambda: self._decode(field, k, stream))
        except FileNotFoundError:
            self._missing(field, stream)
            raise
        except Exception as exc:
            self.problems.add_error(exc, self._file(field.stem), f"tile {k}")
            raise

    def var_base(self, field, k: int) -> int:
        return 0  # the offsets of a 2.x tile start at 0

    def coords_column(self, coords, k: int, j: int) -> np.ndarray:
        """Dimension j's coordinates of tile k of a legacy __coords field (formats 1-4), zipped or not."""
        tile = self.tile(coords, k, DATA)
        loc = self.location(coords, k, DATA)
        zipped = fm.coords_zipped(self.footer().version, self.schema().coords_filters)
        return fm.split_coords(tile.data, self.schema().dimensions, zipped, loc.file, f"tile {k}", loc.offset)[j]

    def coords_column_size(self, coords, k: int, j: int) -> int:
        return self.tile_cell_num(k) * self.schema().dimensions[j].coord_size

    def _missing(self, field, stream: str) -> None:
        """A tile's file is gone: the folder's finding for that file says so (the same words), or, when the
        whole fragment vanished while mounted (vacuumed), the array's problems do."""
        from .findings import data_file_finding
        if self.store.entry(self.rel) is None:
            self.store.problems.add(Problem(self.rel, "fragment", None, "the fragment folder vanished while "
                                            "mounted (vacuumed?): what was open of it reads as I/O errors",
                                            WARNING))
            return
        try:
            finding = data_file_finding(self, field, stream, None)
        except Exception:  # noqa: BLE001 -- the footer's own problem explains the rest
            finding = None
        if finding is not None:
            self.problems.add(finding)

    def decode_ahead(self, field, k: int, stream: str, reading: tuple[int, int] | None = None) -> None:
        """Start decoding tile k in the background, if it exists (a sequential reader wants it next) and
        fits beside `reading`, (tile, decoded bytes) the reader is on; a failure there is not recorded:
        the real read records it."""
        try:
            if k >= self.tile_count(field.idx) or (stream == DATA and self.offsets_embedded(field)):
                return
            nbytes = self.unfiltered_size(field, k, stream)
        except Exception:
            return
        self.store.cache.make_soon(self._tile_key(field, k, stream), lambda: self._decode(field, k, stream), nbytes,
                                   reading and (self._tile_key(field, reading[0], stream), reading[1]))

    def tile_served(self, field, k: int, stream: str, nbytes: int, whole: int) -> None:
        self.store.cache.note_served(self._tile_key(field, k, stream), nbytes, whole)

    def _tile_key(self, field, k: int, stream: str) -> tuple:
        # the store's path too: arrays may share one cache
        return ("tile", self.store.path, self.rel, self.cache_token(), field.idx, k, stream)

    def _decode(self, field, k: int, stream: str):
        """(decoded tile k, its byte cost in the cache)."""
        if stream == DATA and self.offsets_embedded(field):
            return self._embedded_offsets(field, k)
        loc = self.location(field, k, stream)
        raw = self.store.pread(loc.file, loc.offset, loc.persisted_size)
        if len(raw) != loc.persisted_size:
            footer_size_check(self, field, k, stream)
            raise FormatError(loc.file, "tile", loc.offset + len(raw),
                              f"tile {k} should be {loc.persisted_size} bytes but the file ends after {len(raw)}")
        pipeline, ctx = self.pipeline(field, stream), self.filter_context(field, stream)
        if self.encrypted():
            if self.store.key is None:
                raise EncryptedError(loc.file, f"tile {k}", loc.offset, NO_KEY_MESSAGE)
            pipeline = FilterPipeline(pipeline.max_chunk_size, pipeline.filters + (AES_256_GCM,))
        if ctx.var_strings:
            ctx = replace(ctx, cell_num=self.tile_cell_num(k))
        decoded = unfilter_tile(raw, loc.file, loc.offset, pipeline, ctx, f"tile {k}",
                                expected_size=loc.unfiltered_size, base=loc.offset, pool=decode_pool.pool(),
                                share=self.store.cache.offer_help)
        for failure in decoded.checksum_failures:
            self.problems.add(Problem(loc.file, f"tile {k}", loc.offset, failure))
        if stream == DATA:
            check_min_max(self, field, k, decoded.data, loc)
        # the records of each chunk and stage weigh ~0.6 KiB a chunk (tracemalloc), more than small tiles
        return decoded, len(decoded.data) + len(decoded.offsets or b"") + 768 + 600 * len(decoded.chunks)

    def _embedded_offsets(self, field, k: int):
        """The offsets of tile k of a var-string field whose RLE/DICTIONARY embeds them (§3.4): rebuilt
        while decoding the var tile (the same cached decode), as the uint64 tile-relative offsets TileDB
        returns. The offsets file holds an empty tile there; a var tile without chunks is all empty strings."""
        cells = self.tile_cell_num(k)
        var = self.tile(field, k, VAR)
        offsets = var.offsets if var.offsets is not None else empty_offsets(cells)
        if var.offsets is None and var.data:
            raise FormatError(self._file(field.stem + "_var.tdb"), f"tile {k}", 0,
                              "var-string tile decoded without rebuilding its offsets")
        if len(offsets) != 8 * cells:
            raise FormatError(self._file(field.stem + "_var.tdb"), f"tile {k}", 0,
                              f"{len(offsets) // 8} offsets rebuilt for a tile of {cells} cells")
        return DecodedTile(offsets, ()), len(offsets) + 256


def _legacy_list(meta, kind: str, idx: int, file: str):
    """A per-field list of format 1/2 metadata, which holds them inline instead of in generic tiles."""
    lists = {"tile_offsets": meta.tile_offsets, "tile_var_offsets": meta.tile_var_offsets,
             "tile_var_sizes": meta.tile_var_sizes}.get(kind)
    if lists is None:
        raise FormatError(file, "legacy fragment metadata", 0, f"format {meta.version} has no {kind}")
    if idx >= len(lists):
        raise FormatError(file, "legacy fragment metadata", 0, f"{kind} has {len(lists)} lists, no list {idx}")
    return lists[idx]

