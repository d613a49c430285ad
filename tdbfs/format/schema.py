"""Array schema (docs/format.md §4): the payload of a `__schema/*` or `__array_schema.tdb` generic tile.

`parse_schema(payload, file)` decodes every format version from 1 to 23 (the
field gates of §4.1-§4.7).
`decode_value(raw, datatype)` turns stored bytes of one datatype into plain
Python values and is shared by the other small decoders (metadata,
enumerations, delete conditions).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..lazy import np
from .cursor import Cursor
from .datatypes import (
    VAR_NUM,
    Datatype,
    datatype,
    decode_scalar,
)
from .errors import FormatError
from .errors import safety_net
from .filters import EMPTY_PIPELINE, FilterPipeline, parse_pipeline

# Highest format version whose schema layout we know. 23 only changed fragment
# footers (optional sections), its schema layout is that of 22.
MAX_KNOWN_VERSION = 23
# Experimental (TILEDB_EXPERIMENTAL_FEATURES) builds wrote 0xFFFFFFFF, later 0x80000000|base (§6.1).
EXPERIMENTAL_VERSION_BIT = 0x80000000

CURRENT_DOMAIN_TYPES = {0: "NDRECTANGLE"}

PAYLOAD = "generic tile payload"


@dataclass(frozen=True)
class Dimension:
    name: str
    datatype: Datatype
    cell_val_num: int
    filters: FilterPipeline            # the dimension's own pipeline (may be empty: coords pipeline applies)
    domain: tuple | None               # (min, max) as Python scalars; None for string dimensions
    tile_extent: object | None         # Python scalar; None when null_tile_extent
    domain_raw: bytes = b""
    tile_extent_raw: bytes = b""
    null_tile_extent: bool = True      # the stored flag (1 = no extent)
    offset: int = 0                    # payload offset where the dimension starts

    @property
    def var_sized(self) -> bool:
        return self.cell_val_num == VAR_NUM

    @property
    def coord_size(self) -> int:
        return self.datatype.size


@dataclass(frozen=True)
class Domain:
    dimensions: tuple[Dimension, ...]


@dataclass(frozen=True)
class Attribute:
    name: str
    datatype: Datatype
    cell_val_num: int
    filters: FilterPipeline
    fill_value: bytes = b""
    nullable: bool = False
    fill_validity: bool = False
    order: int = 0                     # v>=17: 0 unordered, 1 increasing, 2 decreasing
    enumeration_name: str = ""         # v>=20; "" = none
    fill_value_stored: bool = True     # False before v6: fill_value is TileDB's default for the type
    offset: int = 0                    # payload offset where the attribute starts

    @property
    def var_sized(self) -> bool:
        return self.cell_val_num == VAR_NUM

    @property
    def cell_size(self) -> int:
        """Bytes of one fixed cell (for var-sized: the size of one value)."""
        return self.datatype.size * (1 if self.var_sized else self.cell_val_num)


@dataclass(frozen=True)
class DimensionLabel:
    dim_index: int
    name: str
    uri_is_relative: bool
    uri: str
    label_attr_name: str
    label_order: int
    label_datatype: Datatype
    label_cell_val_num: int
    is_external: bool


@dataclass(frozen=True)
class EnumerationRef:
    name: str
    file_name: str                     # file in __schema/__enumerations/


@dataclass(frozen=True)
class CurrentDomain:
    version: int
    empty: bool
    type: int | None = None            # 0 = NDRECTANGLE
    ranges: tuple = ()                 # per dimension (min, max) as Python scalars / strings
    ranges_raw: tuple = ()             # per dimension the stored range bytes (start+end)


@dataclass(frozen=True)
class ArraySchema:
    version: int
    allows_dups: bool
    array_type: int                    # 0 dense, 1 sparse
    tile_order: int
    cell_order: int
    capacity: int
    coords_filters: FilterPipeline
    offsets_filters: FilterPipeline
    validity_filters: FilterPipeline | None
    domain: Domain
    attributes: tuple[Attribute, ...]
    labels: tuple[DimensionLabel, ...] = ()
    enumerations: tuple[EnumerationRef, ...] = ()
    current_domain: CurrentDomain | None = None
    domain_datatype: Datatype | None = None   # v<5 only: one type for all dimensions
    trailing_bytes: int = 0            # payload bytes after the last field (TileDB ignores them)
    problems: tuple[FormatError, ...] = ()    # non-fatal oddities found while decoding

    @property
    def dense(self) -> bool:
        return self.array_type == 0

    @property
    def dimensions(self) -> tuple[Dimension, ...]:
        return self.domain.dimensions


# ---------------------------------------------------------------------------
# values

def _text(raw: bytes, dt: Datatype) -> str:
    codec = {1: "utf-8", 2: "utf-16-le", 4: "utf-32-le"}.get(dt.size, "utf-8")
    return raw.decode(codec, errors="backslashreplace")


def _plain_number(value):
    if isinstance(value, np.generic):
        value = value.item()
    return value


def decode_value(raw: bytes, dt: Datatype, *, single: bool | None = None):
    """Stored bytes of one value (one cell, fill value, metadata value...) as plain Python.

    String types (CHAR, STRING_*) → `str`; BOOL → `bool` / list of bools; BLOB,
    ANY and GEOM types → `bytes`; numbers → a scalar when the bytes hold one
    value (or `single` is True), else a list. Returns None when the length is
    not a multiple of the type size (the caller then shows the bytes in hex).
    """
    raw = bytes(raw)
    if dt.is_string:
        return _text(raw, dt)
    if dt.name in ("BLOB", "ANY", "GEOM_WKB", "GEOM_WKT"):
        return raw
    if dt.size == 0 or len(raw) % dt.size:
        return None
    values = np.frombuffer(raw, dt.dtype)
    if dt.name == "BOOL":
        items = [bool(v) for v in values]
    else:
        items = [_plain_number(v) for v in values]
    if single is None:
        single = len(items) == 1
    if single and len(items) == 1:
        return items[0]
    return items


def plain(value):
    """A decoded value made safe for YAML/JSON: bytes → hex string, tuples → lists."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex()
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return value


#: Largest default fill value built for a pre-v6 attribute. The fill is cell_val_num copies of
#: one value, so a damaged cell_val_num (a u32) would otherwise build gigabytes; no writer
#: makes fixed cells anywhere near this large (a tile holds `capacity` of them).
MAX_DEFAULT_FILL = 1 << 24


def default_fill_value(dt: Datatype, cell_val_num: int) -> bytes:
    """TileDB's default fill value for a type (used for schemas before v6 that do not store it)."""
    n = 1 if cell_val_num == VAR_NUM else cell_val_num
    if n * max(dt.size, 1) > MAX_DEFAULT_FILL:
        raise ValueError(f"cell_val_num {cell_val_num} makes {n * dt.size}-byte cells, more than the "
                         f"{MAX_DEFAULT_FILL} bytes a default fill value is built for")
    name = dt.name
    if dt.is_float:
        one = np.array([math.nan], dt.dtype).tobytes()
    elif name == "CHAR" or name in ("INT8", "INT16", "INT32", "INT64") or dt.is_datetime:
        one = np.array([np.iinfo(dt.dtype).min], dt.dtype).tobytes()
    elif name in ("UINT8", "UINT16", "UINT32", "UINT64"):
        one = np.array([np.iinfo(dt.dtype).max], dt.dtype).tobytes()
    else:  # strings, ANY, BLOB, GEOM, BOOL
        one = bytes(dt.size)
    return one * n


# ---------------------------------------------------------------------------
# parsing

def _datatype(cur: Cursor, what: str) -> Datatype:
    at = cur.pos
    type_id = cur.u8(what)
    dt = datatype(type_id)
    if dt is None:
        raise cur.error(f"{what}: unknown datatype id {type_id}", offset=at)
    return dt


def _name(cur: Cursor, what: str, *, wide: bool = False) -> str:
    n = cur.u64(f"{what} length") if wide else cur.u32(f"{what} length")
    return cur.string(n, what)


def check_version(cur: Cursor, version: int, structure: str) -> None:
    """Refuse versions whose layout is unknown (0, experimental builds, newer than 23)."""
    at = cur.pos - 4
    if version == 0xFFFFFFFF or version & EXPERIMENTAL_VERSION_BIT:
        raise cur.error(
            f"format version {version:#x} was written by an experimental TileDB build; "
            "its layout is not a released format (TileDB refuses it too)", offset=at, structure=structure)
    if version == 0:
        raise cur.error("format version 0 does not exist (pre-1.4 header?)", offset=at, structure=structure)
    if version > MAX_KNOWN_VERSION:
        raise cur.error(f"format version {version} is newer than the newest known ({MAX_KNOWN_VERSION})",
                        offset=at, structure=structure)


def _fixed_pair(raw: bytes, dt: Datatype):
    half = len(raw) // 2
    return decode_scalar(raw[:half], dt), decode_scalar(raw[half:], dt)


def _parse_dimension(cur: Cursor, version: int, domain_type: Datatype | None, index: int,
                     problems: list) -> Dimension:
    start = cur.pos
    cur.structure = f"dimension {index}"
    name = _name(cur, "dimension name")
    cur.structure = f"dimension {index} ({name!r})"
    if version >= 5:
        dt = _datatype(cur, "dimension datatype")
        cell_val_num = cur.u32("dimension cell_val_num")
        filters = parse_pipeline(cur, version)
        domain_len = cur.u64("dimension domain length")
    else:
        dt = domain_type
        cell_val_num = VAR_NUM if dt.is_string else 1
        filters = EMPTY_PIPELINE   # not stored before v5 (TileDB's default-constructed pipeline)
        domain_len = 2 * dt.size
    domain_at = cur.pos
    domain_raw = cur.bytes(domain_len, "dimension domain")
    domain = None
    if domain_len:
        if cell_val_num == VAR_NUM or dt.is_string:
            problems.append(cur.error(f"string/var dimension stores {domain_len} domain bytes (expected 0)",
                                      offset=domain_at))
        elif domain_len != 2 * dt.size:
            problems.append(cur.error(f"domain length {domain_len} is not 2 x {dt.size} ({dt.name})",
                                      offset=domain_at))
        else:
            domain = _fixed_pair(domain_raw, dt)
    null_tile_extent = cur.u8("dimension null_tile_extent flag")
    extent_raw = b""
    extent = None
    if null_tile_extent == 0:
        extent_raw = cur.bytes(dt.size, "dimension tile extent")
        extent = decode_scalar(extent_raw, dt)
    return Dimension(name, dt, cell_val_num, filters, domain, extent, domain_raw, extent_raw,
                     null_tile_extent != 0, start)


def _parse_attribute(cur: Cursor, version: int, index: int) -> Attribute:
    start = cur.pos
    cur.structure = f"attribute {index}"
    name = _name(cur, "attribute name")
    cur.structure = f"attribute {index} ({name!r})"
    dt = _datatype(cur, "attribute datatype")
    cvn_at = cur.pos
    cell_val_num = cur.u32("attribute cell_val_num")
    filters = parse_pipeline(cur, version)
    if version >= 6:
        fill_len = cur.u64("attribute fill value length")
        fill = cur.bytes(fill_len, "attribute fill value")
        stored = True
    else:
        try:
            fill = default_fill_value(dt, cell_val_num)
        except ValueError as exc:
            raise cur.error(str(exc), offset=cvn_at) from None
        stored = False
    nullable = fill_validity = False
    if version >= 7:
        nullable = cur.bool("attribute nullable flag")
        fill_validity = cur.bool("attribute fill value validity")
    order = 0
    if version >= 17:
        order = cur.u8("attribute order")
    enum_name_ = ""
    if version >= 20:
        enum_name_ = _name(cur, "attribute enumeration name")
    return Attribute(name, dt, cell_val_num, filters, fill, nullable, fill_validity, order,
                     enum_name_, stored, start)


def _parse_label(cur: Cursor, index: int) -> DimensionLabel:
    cur.structure = f"dimension label {index}"
    dim_index = cur.u32("label dimension index")
    name = _name(cur, "label name")
    cur.structure = f"dimension label {index} ({name!r})"
    relative = cur.bool("label uri_is_relative flag")
    uri = _name(cur, "label URI", wide=True)
    attr_name = _name(cur, "label attribute name")
    order = cur.u8("label order")
    dt = _datatype(cur, "label datatype")
    cvn = cur.u32("label cell_val_num")
    external = cur.bool("label is_external flag")
    return DimensionLabel(dim_index, name, relative, uri, attr_name, order, dt, cvn, external)


def _range_values(raw: bytes, start_len: int | None, dim: Dimension):
    if start_len is None:
        return _fixed_pair(raw, dim.datatype)
    return decode_value(raw[:start_len], dim.datatype), decode_value(raw[start_len:], dim.datatype)


def _parse_current_domain(cur: Cursor, dims: tuple[Dimension, ...]) -> CurrentDomain:
    cur.structure = "current domain"
    cd_version = cur.u32("current domain version")
    empty = cur.bool("current domain empty flag")
    if empty:
        return CurrentDomain(cd_version, True)
    at = cur.pos
    cd_type = cur.u8("current domain type")
    if cd_type != 0:
        raise cur.error(f"unknown current domain type {cd_type} (only 0 = NDRECTANGLE is defined)", offset=at)
    ranges, raws = [], []
    for d in dims:
        cur.structure = f"current domain range of dimension {d.name!r}"
        if d.var_sized:
            range_len = cur.u64("range length")
            at = cur.pos
            start_len = cur.u64("range start length")
            if start_len > range_len:
                raise cur.error(f"range start length {start_len} exceeds range length {range_len}", offset=at)
            raw = cur.bytes(range_len, "range bytes")
            ranges.append(_range_values(raw, start_len, d))
        else:
            raw = cur.bytes(2 * d.datatype.size, "range bytes")
            ranges.append(_range_values(raw, None, d))
        raws.append(raw)
    return CurrentDomain(cd_version, False, cd_type, tuple(ranges), tuple(raws))


@safety_net("array schema")
def parse_schema(payload, file: str, within: str = PAYLOAD) -> ArraySchema:
    """Decode an array schema (§4) from the unfiltered payload of its generic tile.

    Offsets in errors are payload offsets (`within` names the payload).
    Raises FormatError for truncated or impossible input, for unknown datatypes,
    and for versions whose layout is unknown (0, > 23, experimental builds).
    """
    cur = Cursor(payload, file, "array schema", within=within)
    version = cur.u32("format version")
    check_version(cur, version, "array schema")
    problems: list[FormatError] = []
    allows_dups = cur.bool("allows_dups") if version >= 5 else False
    array_type = cur.u8("array_type")
    tile_order = cur.u8("tile_order")
    cell_order = cur.u8("cell_order")
    capacity = cur.u64("capacity")
    cur.structure = "coords filter pipeline"
    coords = parse_pipeline(cur, version)
    cur.structure = "offsets filter pipeline"
    offsets = parse_pipeline(cur, version)
    validity = None
    if version >= 7:
        cur.structure = "validity filter pipeline"
        validity = parse_pipeline(cur, version)

    cur.structure = "domain"
    domain_type = None
    if version < 5:
        domain_type = _datatype(cur, "domain datatype")
    ndims = cur.u32_count(26 if version >= 5 else 5, "dimension count", "dimensions")
    dims = tuple(_parse_dimension(cur, version, domain_type, i, problems) for i in range(ndims))

    cur.structure = "attributes"
    nattrs = cur.u32_count(17, "attribute count", "attributes")
    attrs = tuple(_parse_attribute(cur, version, i) for i in range(nattrs))

    labels: tuple = ()
    if version >= 18:
        cur.structure = "dimension labels"
        nlabels = cur.u32_count(28, "dimension label count", "dimension labels")
        labels = tuple(_parse_label(cur, i) for i in range(nlabels))

    enums: tuple = ()
    if version >= 20:
        cur.structure = "enumerations"
        nenums = cur.u32_count(8, "enumeration count", "enumerations")
        refs = []
        for i in range(nenums):
            cur.structure = f"enumeration {i}"
            ename = _name(cur, "enumeration name")
            fname = _name(cur, "enumeration file name")
            refs.append(EnumerationRef(ename, fname))
        enums = tuple(refs)

    current = None
    if version >= 22:
        current = _parse_current_domain(cur, dims)

    trailing = cur.remaining
    if trailing:
        problems.append(cur.error(f"{trailing} bytes after the last schema field", structure="array schema"))
    return ArraySchema(version, allows_dups, array_type, tile_order, cell_order, capacity, coords, offsets,
                       validity, Domain(dims), attrs, labels, enums, current, domain_type, trailing,
                       tuple(problems))
