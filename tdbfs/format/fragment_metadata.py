"""Fragment metadata (FORMAT.md §5): `__fragment_metadata.tdb`, its footer and its sub-structures.

Everything here decodes bytes that the caller has already read:

* `build_field_space` - the per-field index space of every list in the metadata (§5.1);
* `locate_footer` / `parse_footer` / `footer_to_dict` - the footer (§5.3, §5.4);
* payload parsers for the generic tiles the footer points at (§5.5): `parse_rtree`,
  `parse_u64_list`, `parse_tile_min_max`, `parse_tile_sums`,
  `parse_fragment_min_max_sum_null_count`, `parse_processed_conditions`;
* `parse_legacy_fragment_metadata` - the whole-file generic tile of format 1/2 (§5.7).

Versions are gated on the footer's own `version` field; the version from the
fragment's folder name is only used to find the footer and as a cross-check.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .cursor import Cursor, TracingCursor
from .datatypes import DATATYPES, VAR_NUM, Datatype, decode_scalar
from .errors import FormatError
from .errors import safety_net

FRAGMENT_METADATA_FILE = "__fragment_metadata.tdb"
LEGACY_SCHEMA_NAME = "__array_schema.tdb"     # the only schema of formats 1-9

#: Newest format version whose footer layout this module knows (v23: optional sections).
MAX_FOOTER_VERSION = 23
EXPERIMENTAL_VERSION_BIT = 0x80000000

UINT64 = DATATYPES[10]

# Field kinds (§5.1) and the reserved names TileDB uses for them.
ATTRIBUTE = "attribute"
COORDS = "coords"
DIMENSION = "dimension"
TIMESTAMPS = "timestamps"
DELETE_TIMESTAMPS = "delete_timestamps"
DELETE_CONDITION_INDEX = "delete_condition_index"

COORDS_NAME = "__coords"
TIMESTAMPS_NAME = "__timestamps"
DELETE_TIMESTAMPS_NAME = "__delete_timestamps"
DELETE_CONDITION_INDEX_NAME = "__delete_condition_index"

# Format 8 file names: RFC 3986 percent codes plus TileDB's (wrong) codes for
# characters that are illegal on Windows (§5.2, §8 #21). Reproduced exactly.
_V8_ENCODING = {
    "!": "%21", "#": "%23", "$": "%24", "%": "%25", "&": "%26", "'": "%27", "(": "%28",
    ")": "%29", "*": "%2A", "+": "%2B", ",": "%2C", "/": "%2F", ":": "%3A", ";": "%3B",
    "=": "%3D", "?": "%3F", "@": "%40", "[": "%5B", "]": "%5D",
    '"': "%22", "<": "%20", ">": "%2D", "\\": "%30", "|": "%3C",
}

# Types that never get tile min/max or sum metadata (TileMetadataGenerator).
_NO_METADATA_TYPES = {"ANY", "BLOB", "GEOM_WKB", "GEOM_WKT", "STRING_UTF8", "STRING_UTF16",
                      "STRING_UTF32", "STRING_UCS2", "STRING_UCS4"}


def encode_v8_name(name: str) -> str:
    """The data file stem format 8 used for a field name."""
    return "".join(_V8_ENCODING.get(c, c) for c in name)


# ---------------------------------------------------------------------------
# 5.1 Field index space
# ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Field:
    """One slot of the per-field lists of a fragment's metadata."""

    idx: int
    name: str                     # attribute / dimension name, or __coords, __timestamps, ...
    kind: str                     # ATTRIBUTE, COORDS, DIMENSION, TIMESTAMPS, DELETE_TIMESTAMPS, ...
    stem: str                     # data file stem: a0, d1, t, dt, dci (v>=9), raw / %-encoded name (v<=8)
    datatype: Datatype | None     # None only for the phantom __coords slot of v>=5
    cell_val_num: int             # VAR_NUM for var-sized fields
    cell_size: int                # bytes of one fixed cell; for var-sized fields the size of one value
    var_sized: bool
    nullable: bool
    position: int = -1            # attribute index i / dimension index j; -1 otherwise

    @property
    def is_dim(self) -> bool:
        return self.kind == DIMENSION

    @property
    def file(self) -> str:
        return self.stem + ".tdb"

    @property
    def var_file(self) -> str | None:
        return self.stem + "_var.tdb" if self.var_sized else None

    @property
    def validity_file(self) -> str | None:
        return self.stem + "_validity.tdb" if self.nullable else None

    @property
    def has_min_max(self) -> bool:
        """Whether TileDB writes tile min/max values for this field."""
        dt = self.datatype
        if dt is None or self.kind in (DIMENSION, COORDS):
            return False
        strings = dt.name in ("CHAR", "STRING_ASCII")
        if self.var_sized and not strings:
            return False
        if not self.var_sized and self.cell_val_num != 1 and not strings:
            return False
        return dt.name not in _NO_METADATA_TYPES

    @property
    def has_sum(self) -> bool:
        """Whether TileDB writes tile sums for this field (dimensions included)."""
        dt = self.datatype
        if dt is None or self.kind == COORDS or self.var_sized or self.cell_val_num != 1:
            return False
        return dt.name not in _NO_METADATA_TYPES and dt.name != "STRING_ASCII"

    @property
    def sum_dtype(self) -> np.dtype:
        return sum_dtype(self.datatype)


def sum_dtype(dt: Datatype | None) -> np.dtype:
    """How the 8 bytes of a sum are read: int64 (signed, CHAR, date/time), uint64, float64."""
    if dt is None:
        return np.dtype("<u8")
    if dt.is_float:
        return np.dtype("<f8")
    if dt.name.startswith("INT") or dt.name == "CHAR" or dt.is_datetime:
        return np.dtype("<i8")
    return np.dtype("<u8")


@dataclass(frozen=True)
class FieldSpace:
    """The N fields of a fragment (§5.1), in index order.

    v>=5: attributes, the phantom `__coords`, dimensions, then `__timestamps`,
    `__delete_timestamps`, `__delete_condition_index` when present.
    v3/v4: attributes and `__coords` (which holds all coordinates); the
    var-sized lists there have only `A` entries (`var_count`).
    """

    version: int
    fields: tuple[Field, ...]
    attribute_num: int
    dim_num: int
    has_timestamps: bool = False
    has_delete_meta: bool = False

    def __len__(self) -> int:
        return len(self.fields)

    def __iter__(self):
        return iter(self.fields)

    def __getitem__(self, idx: int) -> Field:
        return self.fields[idx]

    @property
    def count(self) -> int:
        """N: entries of file_sizes, tile_offsets and the other full-width lists."""
        return len(self.fields)

    @property
    def var_count(self) -> int:
        """Entries of file_var_sizes / tile_var_offsets / tile_var_sizes (A for v<5)."""
        return self.attribute_num if self.version < 5 else len(self.fields)

    @property
    def coords_idx(self) -> int:
        return self.attribute_num

    def by_name(self, name: str) -> Field:
        for f in self.fields:
            if f.name == name:
                return f
        raise KeyError(name)

    def by_stem(self, stem: str) -> Field:
        for f in self.fields:
            if f.stem == stem:
                return f
        raise KeyError(stem)

    @property
    def attributes(self) -> tuple[Field, ...]:
        return tuple(f for f in self.fields if f.kind == ATTRIBUTE)

    @property
    def dimensions(self) -> tuple[Field, ...]:
        return tuple(f for f in self.fields if f.kind == DIMENSION)

    @property
    def special(self) -> tuple[Field, ...]:
        """The special attributes t / dt / dci present in this fragment."""
        return tuple(f for f in self.fields
                     if f.kind in (TIMESTAMPS, DELETE_TIMESTAMPS, DELETE_CONDITION_INDEX))


def _stem(version: int, name: str, positional: str) -> str:
    if version <= 7:
        return name
    if version == 8:
        return encode_v8_name(name)
    return positional


def build_field_space(schema, version: int, has_timestamps: bool = False,
                      has_delete_meta: bool = False) -> FieldSpace:
    """The index space of a fragment written with `schema` at format `version` (§5.1)."""
    attrs = schema.attributes
    dims = schema.dimensions
    A, D = len(attrs), len(dims)
    out: list[Field] = []
    for i, a in enumerate(attrs):
        out.append(Field(i, a.name, ATTRIBUTE, _stem(version, a.name, f"a{i}"), a.datatype,
                         a.cell_val_num, a.datatype.size * (1 if a.var_sized else a.cell_val_num),
                         a.var_sized, bool(a.nullable), i))
    if version < 5:
        # All coordinates zipped/unzipped in one file; dimensions share one type.
        dt = dims[0].datatype if dims else None
        size = sum(d.coord_size for d in dims)
        out.append(Field(A, COORDS_NAME, COORDS, COORDS_NAME, dt, D, size, False, False))
        return FieldSpace(version, tuple(out), A, D)
    fixed = all(not d.var_sized for d in dims)
    out.append(Field(A, COORDS_NAME, COORDS, COORDS_NAME, None, D,
                     sum(d.coord_size for d in dims) if fixed else 0, False, False))
    for j, d in enumerate(dims):
        out.append(Field(A + 1 + j, d.name, DIMENSION, _stem(version, d.name, f"d{j}"), d.datatype,
                         d.cell_val_num, d.coord_size, d.var_sized, False, j))
    idx = A + 1 + D
    specials = []
    if has_timestamps:
        specials.append((TIMESTAMPS_NAME, TIMESTAMPS, "t"))
    if has_delete_meta:
        specials.append((DELETE_TIMESTAMPS_NAME, DELETE_TIMESTAMPS, "dt"))
        specials.append((DELETE_CONDITION_INDEX_NAME, DELETE_CONDITION_INDEX, "dci"))
    for name, kind, stem in specials:
        out.append(Field(idx, name, kind, _stem(version, name, stem), UINT64, 1, 8, False, False))
        idx += 1
    return FieldSpace(version, tuple(out), A, D, bool(has_timestamps), bool(has_delete_meta))


# ---------------------------------------------------------------------------
# 5.3 Locating the footer
# ---------------------------------------------------------------------------

def computed_footer_size(schema, version: int) -> int:
    """Footer size of a v3-v9 fragment whose dimensions are all fixed (no length field)."""
    A = len(schema.attributes)
    dims = schema.dimensions
    D = len(dims)
    if version < 5:
        domain = 2 * D * (dims[0].coord_size if dims else 0)
        return 4 + 1 + 1 + domain + 8 + 8 + (A + 1) * 8 + A * 8 + 8 + (A + 1) * 8 + A * 8 + A * 8
    n = A + 1 + D
    size = 4 + 1 + 1 + sum(2 * d.coord_size for d in dims) + 8 + 8 + n * 8 + n * 8 + 8 + 3 * n * 8
    if version >= 7:
        size += n * 8 + n * 8
    return size


def footer_has_length_field(schema, name_version: int) -> bool:
    """Whether the file ends with `u64 footer_len` (name version >= 10 or any var-sized dimension)."""
    if name_version >= 10:
        return True
    if schema is None:
        raise ValueError("a format < 10 footer can only be located with the fragment's schema")
    return any(d.var_sized for d in schema.dimensions)


def locate_footer(data, file_size: int, name_version: int | None, schema,
                  file: str = FRAGMENT_METADATA_FILE) -> tuple[int, int]:
    """(offset, length) of the footer in a `__fragment_metadata.tdb` of `file_size` bytes.

    `data` is the whole file or its tail (its last `len(data)` bytes); only the
    last 8 bytes are needed. `length` excludes the trailing `footer_len` field.
    `name_version` is the format version from the fragment's folder name (§6.1).
    `schema` (the legacy `__array_schema.tdb` schema for these versions) is only
    needed when `name_version` < 10; pass None otherwise.
    """
    structure = "fragment metadata footer"
    if name_version is None or name_version <= 2:
        raise FormatError(file, structure, 0,
                          f"format {name_version} fragment metadata is one generic tile without a footer (§5.7)")
    if len(data) > file_size:
        raise FormatError(file, structure, 0, f"{len(data)} bytes given for a file of {file_size} bytes")
    if footer_has_length_field(schema, name_version):
        if file_size < 8 or len(data) < 8:
            raise FormatError(file, structure, max(file_size - 8, 0),
                              f"footer_len needs 8 bytes at the end of the file but only "
                              f"{min(file_size, len(data))} are available")
        footer_len = int.from_bytes(bytes(data[len(data) - 8:]), "little")
        if footer_len > file_size - 8:
            raise FormatError(file, structure + " length", file_size - 8,
                              f"footer_len {footer_len} exceeds the {file_size - 8} bytes before it")
        return file_size - 8 - footer_len, footer_len
    size = computed_footer_size(schema, name_version)
    if size > file_size:
        raise FormatError(file, structure, 0,
                          f"format {name_version} footer is {size} bytes but the file has only {file_size}")
    return file_size - size, size


# ---------------------------------------------------------------------------
# 5.4 Footer
# ---------------------------------------------------------------------------

@dataclass(frozen=True)
class GenericTileOffsets:
    """Byte offsets (in `__fragment_metadata.tdb`) of the footer's generic tiles, in footer order."""

    rtree: int
    tile_offsets: tuple[int, ...]
    tile_var_offsets: tuple[int, ...]
    tile_var_sizes: tuple[int, ...]
    tile_validity_offsets: tuple[int, ...] | None = None       # v>=7
    tile_min_offsets: tuple[int, ...] | None = None            # v>=11
    tile_max_offsets: tuple[int, ...] | None = None            # v>=11
    tile_sum_offsets: tuple[int, ...] | None = None            # v>=11
    tile_null_count_offsets: tuple[int, ...] | None = None     # v>=11
    fragment_min_max_sum_null_count: int | None = None         # v>=12 (v11 only if written, §8 #11)
    processed_conditions: int | None = None                    # v>=16
    tile_global_order_min_offsets: tuple[int, ...] | None = None   # v>=23 optional section 0
    tile_global_order_max_offsets: tuple[int, ...] | None = None   # v>=23 optional section 0


@dataclass(frozen=True)
class OptionalSection:
    """One v>=23 optional footer section: identifier, size and raw bytes."""

    id: int
    offset: int
    size: int
    data: bytes


@dataclass(frozen=True)
class Footer:
    """Every field of a fragment footer (§5.4), in spec order."""

    version: int
    array_schema_name: str | None            # v>=10
    dense: bool
    null_non_empty_domain: bool
    non_empty_domain: tuple | None           # per dimension (min, max); None when null
    sparse_tile_num: int
    last_tile_cell_num: int
    has_timestamps: bool | None              # v>=14
    has_delete_meta: bool | None             # v>=15
    file_sizes: tuple[int, ...]
    file_var_sizes: tuple[int, ...]
    file_validity_sizes: tuple[int, ...] | None   # v>=7
    generic_tile_offsets: GenericTileOffsets
    optional_sections: tuple[OptionalSection, ...] | None   # v>=23
    footer_length: int                        # bytes of the footer (without the trailing footer_len)
    offset: int = 0                           # where the footer starts (file or payload offset)
    fields: FieldSpace | None = field(default=None, compare=False, repr=False)
    null_domain_padding: int = 0              # zero bytes after a null non-empty domain (§8 #12)
    notes: tuple[str, ...] = ()               # oddities found that did not stop decoding

    @property
    def tile_num(self) -> int | None:
        """Sparse: the number of tiles. Dense: not stored (depends on the domain)."""
        return None if self.dense else self.sparse_tile_num


def _check_version(version: int, cur: Cursor, at: int) -> None:
    if version == 0xFFFFFFFF or version & EXPERIMENTAL_VERSION_BIT:
        raise cur.error(f"version {version:#x} ({version}) was written by an experimental TileDB build "
                        "(TILEDB_EXPERIMENTAL_FEATURES): its layout is not a released format and TileDB refuses "
                        "it, so it is not decoded", at)
    if version < 3:
        raise cur.error(f"version {version}: formats 1 and 2 have no footer (whole-file generic tile, §5.7)", at)
    if version > MAX_FOOTER_VERSION:
        raise cur.error(f"version {version} is newer than the newest known format {MAX_FOOTER_VERSION}", at)


def _version_note(version: int, name_version: int | None) -> str | None:
    if name_version is None:
        return None
    if name_version <= 4 and version <= 4:
        return None        # names without a version suffix are "assumed 4" and also cover 3
    if name_version != version:
        return f"footer version {version} differs from the version {name_version} in the fragment name"
    return None


def _range_value(raw: bytes, dt: Datatype):
    return decode_scalar(raw, dt)


def _read_ranges(cur: Cursor, dims, what: str) -> tuple:
    """Per dimension (min, max): fixed `min,max`, var `u64 range_len, u64 start_len, bytes`."""
    out = []
    for j, d in enumerate(dims):
        if d.var_sized:
            at = cur.pos
            r_len = cur.u64(f"{what} dimension {j} range length")
            s_len = cur.u64(f"{what} dimension {j} start length")
            if s_len > r_len:
                raise cur.error(f"{what} dimension {j}: start length {s_len} exceeds range length {r_len}", at)
            raw = cur.bytes(r_len, f"{what} dimension {j} range")
            out.append((_range_value(raw[:s_len], d.datatype), _range_value(raw[s_len:], d.datatype)))
        else:
            cs = d.coord_size
            raw = cur.bytes(2 * cs, f"{what} dimension {j} range")
            out.append((_range_value(raw[:cs], d.datatype), _range_value(raw[cs:], d.datatype)))
    return tuple(out)


def _u64s(cur: Cursor, n: int, what: str) -> tuple[int, ...]:
    return tuple(cur.u64_array(n, what).tolist())


def _parse_footer_tail(cur: Cursor, version: int, schema, domain_pad: int):
    """Everything after the non-empty domain; returns a dict of fields and the field space."""
    if domain_pad:
        raw = cur.bytes(domain_pad, "null non-empty domain padding")
        if any(raw):
            raise cur.error("bytes after a null non-empty domain are not the writer's zero padding",
                            cur.pos - domain_pad)
    out: dict = {}
    out["sparse_tile_num"] = cur.u64("sparse_tile_num")
    out["last_tile_cell_num"] = cur.u64("last_tile_cell_num")
    out["has_timestamps"] = cur.bool("has_timestamps") if version >= 14 else None
    out["has_delete_meta"] = cur.bool("has_delete_meta") if version >= 15 else None
    fields = build_field_space(schema, version, bool(out["has_timestamps"]), bool(out["has_delete_meta"]))
    n, nv = fields.count, fields.var_count
    out["file_sizes"] = _u64s(cur, n, "file_sizes")
    out["file_var_sizes"] = _u64s(cur, nv, "file_var_sizes")
    out["file_validity_sizes"] = _u64s(cur, n, "file_validity_sizes") if version >= 7 else None
    g: dict = {"rtree": cur.u64("R-tree generic tile offset")}
    g["tile_offsets"] = _u64s(cur, n, "tile_offsets generic tile offsets")
    g["tile_var_offsets"] = _u64s(cur, nv, "tile_var_offsets generic tile offsets")
    g["tile_var_sizes"] = _u64s(cur, nv, "tile_var_sizes generic tile offsets")
    if version >= 7:
        g["tile_validity_offsets"] = _u64s(cur, n, "tile_validity_offsets generic tile offsets")
    notes = []
    if version >= 11:
        g["tile_min_offsets"] = _u64s(cur, n, "tile_min_offsets generic tile offsets")
        g["tile_max_offsets"] = _u64s(cur, n, "tile_max_offsets generic tile offsets")
        g["tile_sum_offsets"] = _u64s(cur, n, "tile_sum_offsets generic tile offsets")
        g["tile_null_count_offsets"] = _u64s(cur, n, "tile_null_count_offsets generic tile offsets")
    if version >= 12:
        g["fragment_min_max_sum_null_count"] = cur.u64("fragment min/max/sum/null count generic tile offset")
    elif version == 11 and cur.remaining == 8:
        # Written by the back-compat v11 writer of TileDB >= 2.8, never by 2.7 (§8 #11).
        g["fragment_min_max_sum_null_count"] = cur.u64("fragment min/max/sum/null count generic tile offset")
        notes.append("format 11 footer carries a fragment min/max/sum/null count offset (later writers' extra u64)")
    if version >= 16:
        g["processed_conditions"] = cur.u64("processed conditions generic tile offset")
    sections = None
    if version >= 23:
        sections = []
        count = cur.u32("optional section count")
        cur.count(count, 12, "optional sections")
        for k in range(count):
            at = cur.pos
            sid = cur.u64(f"optional section {k} identifier")
            size = cur.u32(f"optional section {k} size")
            body = cur.sub(size, f"optional section {k}")
            if sid == 0:
                D = len(schema.dimensions)
                if size != 2 * D * 8:
                    raise cur.error(f"tile global order bounds section is {size} bytes, expected {2 * D * 8}", at)
                g["tile_global_order_min_offsets"] = _u64s(body, D, "tile global order min offsets")
                g["tile_global_order_max_offsets"] = _u64s(body, D, "tile global order max offsets")
            sections.append(OptionalSection(sid, cur.base + at, size, bytes(body.data)))
        sections = tuple(sections)
    if cur.remaining:
        raise cur.error(f"{cur.remaining} bytes remain after the last footer field")
    out["generic_tile_offsets"] = GenericTileOffsets(**g)
    out["optional_sections"] = sections
    return out, fields, notes


@safety_net("fragment metadata footer", offset_arg="offset", base_arg="base")
def parse_footer(data, file: str, schema, offset: int, length: int,
                 fragment_name_version: int | None = None, *, base: int = 0, within: str = "",
                 trace: list | None = None) -> Footer:
    """Decode the footer occupying `data[offset:offset+length]` (§5.4).

    `trace`, when given, receives `(field, start, end)` for every field read (byte maps).

    `schema` is the ArraySchema the fragment was written with (its footer names
    it for v>=10). Error offsets are `base + position in data`, so pass the
    whole file with base 0, or a tail with `base` = its file offset; inside a
    consolidated `.meta` payload pass `within` naming the payload.
    """
    structure = "fragment metadata footer"
    if offset < 0 or length < 0 or offset + length > len(data):
        raise FormatError(file, structure, base + max(offset, 0),
                          f"footer of {length} bytes at {offset} does not fit in {len(data)} bytes", within)
    view = memoryview(data)[offset:offset + length]
    if trace is None:
        cur = Cursor(view, file, structure, base=base + offset, within=within)
    else:
        cur = TracingCursor(view, file, structure, base=base + offset, within=within, trace=trace)
    version = cur.u32("version")
    _check_version(version, cur, 0)
    notes = []
    note = _version_note(version, fragment_name_version)
    if note:
        notes.append(note)
    schema_name = None
    if version >= 10:
        at = cur.pos
        name_len = cur.u64("array schema name length")
        if name_len == 0:
            raise cur.error("array schema name length is 0", at)
        schema_name = _schema_name(cur, name_len)
    dense = cur.bool("dense")
    null_ned = cur.bool("null non-empty domain")
    dims = schema.dimensions
    ned = None
    pad = 0
    if not null_ned:
        if version < 5:
            cs = dims[0].coord_size if dims else 0
            sub = cur.sub(2 * len(dims) * cs, "non-empty domain")
            ned = _read_ranges(sub, dims, "non-empty domain")
        else:
            ned = _read_ranges(cur, dims, "non-empty domain")
    elif dims and all(not d.var_sized for d in dims):
        # The writer pads a null domain with 2*D*coord_size(dim0) zero bytes (§8 #12).
        pad = 2 * len(dims) * dims[0].coord_size
    start = cur.pos
    traced = len(trace) if trace is not None else 0
    try:
        tail, fields, tail_notes = _parse_footer_tail(cur, version, schema, 0)
    except FormatError as first:
        if not pad or len(view) - start < pad:
            raise
        cur.pos = start
        if trace is not None:
            del trace[traced:]      # the fields of the failed first reading
        try:
            tail, fields, tail_notes = _parse_footer_tail(cur, version, schema, pad)
        except FormatError:
            raise first from None
        notes.append(f"null non-empty domain followed by {pad} zero bytes of writer padding (§8 #12)")
    else:
        pad = 0
    notes.extend(tail_notes)
    return Footer(version=version, array_schema_name=schema_name, dense=dense,
                  null_non_empty_domain=null_ned, non_empty_domain=ned, footer_length=length,
                  offset=base + offset, fields=fields, null_domain_padding=pad, notes=tuple(notes),
                  **tail)


@safety_net("fragment metadata footer", offset_arg="offset", base_arg="base")
def peek_footer_schema_name(data, file: str, offset: int = 0, *, base: int = 0,
                            within: str = "") -> tuple[int, str | None]:
    """(version, array schema name) from the start of a footer, to pick the schema before parsing."""
    cur = Cursor(data, file, "fragment metadata footer", base=base, within=within, pos=offset)
    version = cur.u32("version")
    _check_version(version, cur, offset)
    if version < 10:
        return version, None
    at = cur.pos
    n = cur.u64("array schema name length")
    if n == 0:
        raise cur.error("array schema name length is 0", at)
    return version, _schema_name(cur, n)


def _schema_name(cur: Cursor, n: int) -> str:
    """The footer's schema name: a file name in __schema/, which callers open. A NUL or a path
    separator (damage) would make that open fail with ValueError or leave the folder."""
    at = cur.pos
    name = cur.string(n, "array schema name")
    if "\0" in name or "/" in name or "\\" in name or name in (".", ".."):
        raise cur.error(f"array schema name {name!r} is not a file name", at)
    return name


@safety_net("fragment metadata footer")
def read_footer(data, file_size: int, name_version: int | None, schemas,
                file: str = FRAGMENT_METADATA_FILE) -> Footer:
    """Locate, pick the schema for, and decode the footer of a `__fragment_metadata.tdb`.

    `data` is the whole file or a tail of it (its last `len(data)` bytes) that
    holds the whole footer; `schemas` maps schema file names (and
    `LEGACY_SCHEMA_NAME` for `__array_schema.tdb`) to ArraySchema. Offsets in
    the result and in errors are file offsets.
    """
    start = file_size - len(data)
    try:
        off, length = locate_footer(data, file_size, name_version, schemas.get(LEGACY_SCHEMA_NAME), file)
    except ValueError as exc:
        raise FormatError(file, "fragment metadata footer", 0, str(exc)) from None
    if off < start:
        raise FormatError(file, "fragment metadata footer", off,
                          f"the footer starts at byte {off} but only bytes from {start} were given")
    _, schema_name = peek_footer_schema_name(data, file, off - start, base=start)
    key = schema_name if schema_name is not None else LEGACY_SCHEMA_NAME
    schema = schemas.get(key)
    if schema is None:
        raise FormatError(file, "fragment metadata footer", off + 12 if schema_name else off,
                          f"the fragment's schema {key} is not among the array's schemas")
    return parse_footer(data, file, schema, off - start, length, name_version, base=start)


def _plain(value):
    if isinstance(value, (np.generic,)):
        return value.item()
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="backslashreplace")
    return value


def footer_to_dict(footer: Footer) -> dict:
    """The footer as plain data with the fixed keys of `footer.yaml` (VIEWS.md), in spec order.

    Fields the footer's version does not have are left out; a null non-empty
    domain is `None`.
    """
    v = footer.version
    d: dict = {"version": int(v)}
    if v >= 10:
        d["array_schema_name"] = footer.array_schema_name
    d["dense"] = bool(footer.dense)
    d["null_non_empty_domain"] = bool(footer.null_non_empty_domain)
    d["non_empty_domain"] = (None if footer.non_empty_domain is None else
                             [[_plain(lo), _plain(hi)] for lo, hi in footer.non_empty_domain])
    d["sparse_tile_num"] = int(footer.sparse_tile_num)
    d["last_tile_cell_num"] = int(footer.last_tile_cell_num)
    if v >= 14:
        d["has_timestamps"] = bool(footer.has_timestamps)
    if v >= 15:
        d["has_delete_meta"] = bool(footer.has_delete_meta)
    d["file_sizes"] = [int(x) for x in footer.file_sizes]
    d["file_var_sizes"] = [int(x) for x in footer.file_var_sizes]
    if v >= 7:
        d["file_validity_sizes"] = [int(x) for x in footer.file_validity_sizes]
    g = footer.generic_tile_offsets
    if g is None:       # formats 1/2 (legacy_footer): no generic tiles, no footer length
        return d
    gd: dict = {"rtree": int(g.rtree)}
    for key in ("tile_offsets", "tile_var_offsets", "tile_var_sizes", "tile_validity_offsets",
                "tile_min_offsets", "tile_max_offsets", "tile_sum_offsets", "tile_null_count_offsets"):
        value = getattr(g, key)
        if value is not None:
            gd[key] = [int(x) for x in value]
    if g.fragment_min_max_sum_null_count is not None:
        gd["fragment_min_max_sum_null_count"] = int(g.fragment_min_max_sum_null_count)
    if g.processed_conditions is not None:
        gd["processed_conditions"] = int(g.processed_conditions)
    d["generic_tile_offsets"] = gd
    d["footer_length"] = int(footer.footer_length)
    return d


# ---------------------------------------------------------------------------
# 5.5 Sub-structures (generic tile payloads)
# ---------------------------------------------------------------------------

@dataclass(frozen=True)
class RTreeLevel:
    """One R-tree level: per dimension, fixed dims an (n, 2) array of (min, max), var dims a list of (start, end)."""

    mbr_num: int
    ranges: tuple


@dataclass(frozen=True)
class RTree:
    version: int
    fanout: int
    levels: tuple[RTreeLevel, ...]     # root first, leaves (one MBR per sparse tile) last
    dim_num: int | None = None         # stored only before v5
    datatype: int | None = None        # stored only before v5

    @property
    def leaves(self) -> RTreeLevel | None:
        return self.levels[-1] if self.levels else None

    @property
    def leaf_num(self) -> int:
        return self.levels[-1].mbr_num if self.levels else 0


def _var_value(raw: bytes, dt: Datatype):
    if dt.is_string:
        return decode_scalar(raw, dt)
    return raw


def _mbr_dtype(dims) -> np.dtype:
    return np.dtype([(f"d{j}", d.datatype.dtype, (2,)) for j, d in enumerate(dims)])


@safety_net("R-tree")
def parse_rtree(payload, file: str, schema_dims, version: int, *, within: str = "R-tree") -> RTree:
    """The R-tree generic tile payload (§5.5): root level first, leaves last."""
    dims = tuple(schema_dims)
    cur = Cursor(payload, file, "R-tree", within=within)
    dim_num = datatype = None
    if version < 5:
        dim_num = cur.u32("dim_num")
        if dim_num != len(dims):
            raise cur.error(f"R-tree has {dim_num} dimensions but the schema has {len(dims)}", 0)
    fanout = cur.u32("fanout")
    if version < 5:
        datatype = cur.u8("datatype")
    level_num = cur.u32("level count")
    cur.count(level_num, 8, "R-tree levels")
    all_fixed = all(not d.var_sized for d in dims)
    fixed_size = sum(2 * d.coord_size for d in dims if not d.var_sized)
    min_mbr = fixed_size + 16 * sum(1 for d in dims if d.var_sized)
    levels = []
    for lv in range(level_num):
        n = cur.u64(f"level {lv} MBR count")
        if min_mbr:
            cur.count(n, min_mbr, f"level {lv} MBRs")
        elif n:
            raise cur.error(f"level {lv} has {n} MBRs but the schema has no dimensions")
        if all_fixed:
            rec = cur.array(n, _mbr_dtype(dims), f"level {lv} MBRs")
            ranges = tuple(np.ascontiguousarray(rec[f"d{j}"]) for j in range(len(dims)))
        else:
            cols: list = [[] for _ in dims]
            fixed_cols: list = [[] for _ in dims]
            for m in range(n):
                for j, d in enumerate(dims):
                    if d.var_sized:
                        at = cur.pos
                        r_len = cur.u64(f"level {lv} MBR {m} dimension {j} range length")
                        s_len = cur.u64(f"level {lv} MBR {m} dimension {j} start length")
                        if s_len > r_len:
                            raise cur.error(f"level {lv} MBR {m} dimension {j}: start length {s_len} "
                                            f"exceeds range length {r_len}", at)
                        raw = cur.bytes(r_len, f"level {lv} MBR {m} dimension {j} range")
                        cols[j].append((_var_value(raw[:s_len], d.datatype), _var_value(raw[s_len:], d.datatype)))
                    else:
                        fixed_cols[j].append(cur.bytes(2 * d.coord_size, f"level {lv} MBR {m} dimension {j} range"))
            ranges = tuple(cols[j] if d.var_sized else
                           np.frombuffer(b"".join(fixed_cols[j]), d.datatype.dtype).reshape(-1, 2)
                           for j, d in enumerate(dims))
        levels.append(RTreeLevel(n, ranges))
    if cur.remaining:
        raise cur.error(f"{cur.remaining} bytes remain after the last R-tree level")
    return RTree(version, fanout, tuple(levels), dim_num, datatype)


def rtree_level_rows(rtree: RTree, level: int) -> list[list]:
    """Rows of one level: per MBR `[dim0_min, dim0_max, dim1_min, dim1_max, ...]` as Python values."""
    lv = rtree.levels[level]
    per_dim = []
    for r in lv.ranges:
        if isinstance(r, np.ndarray):
            per_dim.append(r.tolist())
        else:
            per_dim.append([[lo, hi] for lo, hi in r])
    rows = []
    for m in range(lv.mbr_num):
        row = []
        for col in per_dim:
            row.extend(col[m])
        rows.append(row)
    return rows


@safety_net("u64 list")
def parse_u64_list(payload, file: str, structure: str, *, within: str | None = None) -> np.ndarray:
    """`u64 n, u64[n]`: tile offsets, var offsets, var sizes, validity offsets, null counts."""
    cur = Cursor(payload, file, structure, within=structure if within is None else within)
    n = cur.u64("count")
    values = cur.u64_array(n, "values")
    if cur.remaining:
        raise cur.error(f"{cur.remaining} bytes remain after {n} values")
    return values


def _field_label(f: Field) -> str:
    return f"{f.name} (idx {f.idx})"


@safety_net("tile mins")
def parse_tile_min_max(payload, file: str, f: Field, structure: str = "tile mins", *,
                       within: str | None = None):
    """Per-tile min (or max) values of field `f` (§5.5).

    Layout `u64 fixed_bytes, u64 var_bytes, fixed, var`. Numeric fields: a numpy
    array of the field's type, one value per tile. CHAR/ASCII fields: a list of
    bytes (fixed cells, or var values cut at the u64 offsets in `fixed`). Fields
    without min/max give an empty result. The phantom `__coords` slot, which
    some writers fill with junk, comes back as raw uint8.
    """
    label = f"{structure} of {_field_label(f)}"
    cur = Cursor(payload, file, label, within=label if within is None else within)
    fixed_len = cur.u64("fixed bytes")
    var_len = cur.u64("var bytes")
    fixed_at = cur.pos
    fixed = cur.bytes(fixed_len, "fixed values")
    var_at = cur.pos
    var = cur.bytes(var_len, "var values") if fixed_len or var_len else b""
    if cur.remaining:
        raise cur.error(f"{cur.remaining} bytes remain after the values")
    dt = f.datatype
    if dt is None or f.kind == COORDS:
        return np.frombuffer(fixed, np.uint8)
    if f.var_sized:
        if fixed_len % 8:
            raise cur.error(f"{fixed_len} bytes of var offsets is not a multiple of 8", fixed_at)
        offs = np.frombuffer(fixed, "<u8")
        if len(offs) and (np.any(np.diff(offs.astype(np.int64)) < 0) or int(offs[-1]) > var_len
                          or np.any(offs > var_len)):
            raise cur.error("var offsets are not increasing within the var values", fixed_at)
        bounds = offs.tolist() + [var_len]
        return [var[bounds[k]:bounds[k + 1]] for k in range(len(offs))]
    cell = f.cell_size
    if cell == 0 or fixed_len % cell:
        raise cur.error(f"{fixed_len} bytes of values is not a multiple of the {cell}-byte cell", fixed_at)
    if var_len:
        raise cur.error(f"a fixed-size field has {var_len} var bytes", var_at)
    if dt.is_string:
        return [fixed[k:k + cell] for k in range(0, fixed_len, cell)]
    arr = np.frombuffer(fixed, dt.dtype)
    if f.cell_val_num not in (1, VAR_NUM) and f.cell_val_num:
        arr = arr.reshape(-1, f.cell_val_num)
    return arr


@safety_net("tile sums")
def parse_tile_sums(payload, file: str, f: Field, *, within: str | None = None) -> np.ndarray:
    """Per-tile sums of field `f`: `u64 n, n x 8 bytes` as int64, uint64 or float64 by type (§5.5)."""
    label = f"tile sums of {_field_label(f)}"
    cur = Cursor(payload, file, label, within=label if within is None else within)
    n = cur.u64("count")
    values = cur.array(n, f.sum_dtype, "sums")
    if cur.remaining:
        raise cur.error(f"{cur.remaining} bytes remain after {n} sums")
    return values


@dataclass(frozen=True)
class FragmentFieldSummary:
    """Fragment-wide min / max / sum / null count of one field (v>=12)."""

    idx: int
    name: str
    min: object            # None when not stored; Python scalar, or bytes for strings
    max: object
    sum: int | float
    null_count: int
    min_raw: bytes = b""
    max_raw: bytes = b""


def _summary_value(raw: bytes, f: Field):
    dt = f.datatype
    if not raw:
        # An empty string is a valid min/max of a string field; elsewhere nothing was stored.
        return b"" if f.has_min_max and dt.is_string else None
    if dt is None or f.kind == COORDS or dt.is_string or len(raw) != dt.size:
        return raw
    return np.frombuffer(raw, dt.dtype)[0].item()


@safety_net("fragment min/max/sum/null count")
def parse_fragment_min_max_sum_null_count(payload, file: str, fields, *,
                                          within: str = "fragment min/max/sum/null count"
                                          ) -> tuple[FragmentFieldSummary, ...]:
    """Per field `u64 min_len, min, u64 max_len, max, u64 sum, u64 null_count` (§5.5)."""
    cur = Cursor(payload, file, "fragment min/max/sum/null count", within=within)
    out = []
    for f in fields:
        cur.structure = f"fragment min/max/sum/null count of {_field_label(f)}"
        mn = cur.bytes(cur.u64("min length"), "min")
        mx = cur.bytes(cur.u64("max length"), "max")
        raw_sum = cur.bytes(8, "sum")
        null_count = cur.u64("null count")
        total = np.frombuffer(raw_sum, f.sum_dtype)[0].item()
        out.append(FragmentFieldSummary(f.idx, f.name, _summary_value(mn, f), _summary_value(mx, f),
                                        total, null_count, mn, mx))
    cur.structure = "fragment min/max/sum/null count"
    if cur.remaining:
        raise cur.error(f"{cur.remaining} bytes remain after {len(out)} fields")
    return tuple(out)


def fragment_summary_to_dict(summary: tuple[FragmentFieldSummary, ...], fields) -> dict:
    """Fragment-level min / max / sum / null count (v>=12) per field name, for YAML.

    Only what the writer fills in is shown: min/max where the field has them,
    a sum where it has sums, a null count for nullable attributes.
    """
    out = {}
    for s, f in zip(summary, fields):
        if f.kind == COORDS:
            continue
        entry: dict = {}
        if s.min is not None or s.max is not None:
            entry["min"], entry["max"] = _plain(s.min), _plain(s.max)
        if f.has_sum:
            entry["sum"] = s.sum
        if f.nullable:
            entry["null_count"] = int(s.null_count)
        out[f.name] = entry
    return out


@safety_net("processed conditions")
def parse_processed_conditions(payload, file: str, *, within: str = "processed conditions") -> tuple[str, ...]:
    """`u64 n, n x {u64 len, bytes}`: names of the delete/update commits already applied (§5.5)."""
    cur = Cursor(payload, file, "processed conditions", within=within)
    n = cur.u64("count")
    cur.count(n, 8, "processed conditions")
    out = []
    for k in range(n):
        out.append(cur.string(cur.u64(f"condition {k} length"), f"condition {k}"))
    if cur.remaining:
        raise cur.error(f"{cur.remaining} bytes remain after {n} conditions")
    return tuple(out)


# ---------------------------------------------------------------------------
# 5.7 Formats 1 and 2
# ---------------------------------------------------------------------------

@dataclass(frozen=True)
class LegacyFragmentMetadata:
    """Format 1/2 `__fragment_metadata.tdb`: one generic tile holding everything (§5.7)."""

    version: int
    non_empty_domain: tuple | None           # per dimension (min, max); None when empty
    mbrs: RTreeLevel                         # one MBR per sparse tile
    bounding_coords_num: int                 # first/last coordinates per tile (stored, unused)
    bounding_coords: np.ndarray              # raw, shape (n, 2*D*coord_size) uint8
    tile_offsets: tuple[np.ndarray, ...]     # A+1 (attributes, __coords)
    tile_var_offsets: tuple[np.ndarray, ...]   # A
    tile_var_sizes: tuple[np.ndarray, ...]     # A
    last_tile_cell_num: int
    file_sizes: tuple[int, ...]              # A+1
    file_var_sizes: tuple[int, ...]          # A
    fields: FieldSpace | None = field(default=None, compare=False, repr=False)


@safety_net("legacy fragment metadata")
def parse_legacy_fragment_metadata(payload, file: str, schema, *,
                                   within: str = "fragment metadata") -> LegacyFragmentMetadata:
    cur = Cursor(payload, file, "legacy fragment metadata", within=within)
    version = cur.u32("version")
    if version > 2 or version == 0:
        raise cur.error(f"version {version} is not a format 1/2 fragment metadata", 0)
    dims = schema.dimensions
    A, D = len(schema.attributes), len(dims)
    fields = build_field_space(schema, version)
    ned_at = cur.pos
    ned_len = cur.u64("non-empty domain length")
    ned = None
    if ned_len:
        expected = sum(2 * d.coord_size for d in dims)
        if ned_len != expected:
            raise cur.error(f"non-empty domain is {ned_len} bytes, expected {expected}", ned_at)
        ned = _read_ranges(cur.sub(ned_len, "non-empty domain"), dims, "non-empty domain")
    rec = _mbr_dtype(dims)
    if not rec.itemsize:
        raise cur.error("the schema has no dimensions", 0)
    mbr_num = cur.u64("MBR count")
    mbrs = cur.array(mbr_num, rec, "MBRs")
    level = RTreeLevel(mbr_num, tuple(np.ascontiguousarray(mbrs[f"d{j}"]) for j in range(D)))
    bnum = cur.u64("bounding coordinates count")
    cur.count(bnum, rec.itemsize, "bounding coordinates")
    bounding = cur.array(bnum * rec.itemsize, np.uint8, "bounding coordinates").reshape(bnum, rec.itemsize)

    def lists(count: int, what: str):
        out = []
        for k in range(count):
            n = cur.u64(f"{what} {k} count")
            out.append(cur.u64_array(n, f"{what} {k}"))
        return tuple(out)

    tile_offsets = lists(A + 1, "tile offsets")
    tile_var_offsets = lists(A, "tile var offsets")
    tile_var_sizes = lists(A, "tile var sizes")
    last = cur.u64("last_tile_cell_num")
    file_sizes = _u64s(cur, A + 1, "file_sizes")
    file_var_sizes = _u64s(cur, A, "file_var_sizes")
    if cur.remaining:
        raise cur.error(f"{cur.remaining} bytes remain after the last field")
    return LegacyFragmentMetadata(version, ned, level, bnum, bounding, tile_offsets, tile_var_offsets,
                                  tile_var_sizes, last, file_sizes, file_var_sizes, fields)


def legacy_to_dict(meta: LegacyFragmentMetadata) -> dict:
    """Plain data for a YAML view of format 1/2 fragment metadata."""
    return {
        "version": meta.version,
        "null_non_empty_domain": meta.non_empty_domain is None,
        "non_empty_domain": (None if meta.non_empty_domain is None else
                             [[_plain(lo), _plain(hi)] for lo, hi in meta.non_empty_domain]),
        "mbr_num": meta.mbrs.mbr_num,
        "bounding_coords_num": meta.bounding_coords_num,
        "tile_offsets": [a.tolist() for a in meta.tile_offsets],
        "tile_var_offsets": [a.tolist() for a in meta.tile_var_offsets],
        "tile_var_sizes": [a.tolist() for a in meta.tile_var_sizes],
        "last_tile_cell_num": meta.last_tile_cell_num,
        "file_sizes": list(meta.file_sizes),
        "file_var_sizes": list(meta.file_var_sizes),
    }


def legacy_footer(meta: LegacyFragmentMetadata, dense: bool) -> Footer:
    """The footer-shaped view of a format 1/2 fragment: the same fields, taken from its one generic tile.

    Formats 1/2 store no `dense` flag: TileDB decides it by the presence of
    `__coords.tdb`, so the caller passes it. There are no generic tile offsets
    (the lists are inline, see `meta`) and no footer length.
    """
    return Footer(version=meta.version, array_schema_name=None, dense=dense,
                  null_non_empty_domain=meta.non_empty_domain is None, non_empty_domain=meta.non_empty_domain,
                  sparse_tile_num=0 if dense else meta.mbrs.mbr_num, last_tile_cell_num=meta.last_tile_cell_num,
                  has_timestamps=None, has_delete_meta=None, file_sizes=meta.file_sizes,
                  file_var_sizes=meta.file_var_sizes, file_validity_sizes=None, generic_tile_offsets=None,
                  optional_sections=None, footer_length=0, fields=meta.fields,
                  notes=(f"format {meta.version}: no footer; the fields come from the whole-file generic tile (§5.7)",))


def legacy_rtree(meta: LegacyFragmentMetadata) -> RTree:
    """Formats 1/2 keep only the leaf MBRs (one per sparse tile): an R-tree of one level."""
    return RTree(meta.version, 0, (meta.mbrs,) if meta.mbrs.mbr_num else ())


def legacy_footer_to_dict(meta: LegacyFragmentMetadata, dense: bool) -> dict:
    """footer.yaml of a format 1/2 fragment: the footer keys it has (VIEWS.md), then the inline lists."""
    d = footer_to_dict(legacy_footer(meta, dense))
    for key in ("generic_tile_offsets", "footer_length"):
        d.pop(key, None)
    d["legacy_fragment_metadata"] = {
        "note": "formats 1 and 2 have no footer: __fragment_metadata.tdb is one generic tile holding every "
                "list inline; dense is decided by the presence of __coords.tdb",
        "mbr_num": meta.mbrs.mbr_num,
        "bounding_coords_num": meta.bounding_coords_num,
        "tile_offsets": [a.tolist() for a in meta.tile_offsets],
        "tile_var_offsets": [a.tolist() for a in meta.tile_var_offsets],
        "tile_var_sizes": [a.tolist() for a in meta.tile_var_sizes],
    }
    return d


# ---------------------------------------------------------------------------
# 5.2 Legacy __coords.tdb (formats 1-4): all dimensions in one tile
# ---------------------------------------------------------------------------

#: Filters TileDB 1.4 counted as the coordinates' "compressor" (GZIP, ZSTD, LZ4, RLE, BZIP2, DOUBLE_DELTA).
_COMPRESSION_FILTER_IDS = frozenset({1, 2, 3, 4, 5, 6})


def coords_zipped(version: int, coords_filters) -> bool:
    """Whether a legacy `__coords.tdb` tile is zipped (x1,y1,x2,y2,...) rather than split per dimension.

    Format 1 split the coordinates only when the coords pipeline had a
    compressor; from format 2 they are always split (§5.2).
    """
    if version >= 2:
        return False
    return not any(f.id in _COMPRESSION_FILTER_IDS for f in coords_filters.filters)


@safety_net("coordinates tile")
def split_coords(data, dims, zipped: bool, file: str = "__coords.tdb", structure: str = "coordinates tile",
                 offset: int = 0) -> tuple[np.ndarray, ...]:
    """One decoded `__coords` tile cut into per-dimension coordinate arrays (dimensions share one type).

    Zipped: D values per cell, cell after cell. Unzipped: all of dimension 0,
    then all of dimension 1, ...
    """
    dims = tuple(dims)
    if not dims:
        raise FormatError(file, structure, offset, "the schema has no dimensions")
    dt = dims[0].datatype
    if any(d.datatype.id != dt.id for d in dims):
        raise FormatError(file, structure, offset, "legacy coordinates need one datatype for every dimension")
    D = len(dims)
    cell = D * dt.size
    if len(data) % cell:
        raise FormatError(file, structure, offset,
                          f"{len(data)} bytes is not a whole number of {D}-dimensional {cell}-byte coordinates")
    values = np.frombuffer(bytes(data), dt.dtype)
    n = len(values) // D
    table = values.reshape(n, D).T if zipped else values.reshape(D, n)
    return tuple(np.ascontiguousarray(table[j]) for j in range(D))
