"""`__array_schema.tdb` of a 0.x array (docs/format-0x.md, "__array_schema.tdb"): not compressed.

Original Intel-HLS files start with the array name; GenomicsDB's fork prefixes a version
tag `u32 0xFFFFFFFF - version` and a workspace string, and adds compression levels (v>=1)
and an offsets codec per attribute (v>=2).
"""

from __future__ import annotations

from dataclasses import dataclass

from ...lazy import np
from ..cursor import Cursor
from ..datatypes import DATATYPES, Datatype
from ..errors import safety_net

STRUCTURE = "0.x array schema"
VAR_NUM = 0x7FFFFFFF          # TILEDB_VAR_NUM = INT_MAX
COORDS = "__coords"
# A tag is 0xFFFFFFFF - version; a name length is a small positive i32, so anything above
# 2^31 can only be a tag.
_TAG_MIN = 0x80000000
ORDERS = {0: "row-major", 1: "col-major", 2: "hilbert"}
COMPRESSORS = {0: "NONE", 1: "GZIP", 2: "ZSTD", 3: "LZ4", 4: "BLOSC", 5: "BLOSC_LZ4", 6: "BLOSC_LZ4HC",
               7: "BLOSC_SNAPPY", 8: "BLOSC_ZLIB", 9: "BLOSC_ZSTD", 10: "RLE"}
PRE_FILTERS = {1: "DELTA_ENCODE", 2: "BIT_SHUFFLE"}
DEFAULT_LEVELS = {1: -1, 2: 1, 3: 1, 4: 5, 5: 5, 6: 5, 7: 5, 8: 5, 9: 5}
COORD_TYPES = (0, 1, 2, 3)    # int32, int64, float32, float64


@dataclass(frozen=True)
class Codec:
    """One compression byte: low 4 bits compressor, bits 4-5 pre-filter, bits 6-7 post-filter."""
    raw: int
    level: int | None

    @property
    def compressor(self) -> int:
        return self.raw & 0x0F

    @property
    def compressor_name(self) -> str:
        return COMPRESSORS.get(self.compressor, f"UNKNOWN({self.compressor})")

    @property
    def pre_filter(self) -> int:
        return (self.raw >> 4) & 0x03

    @property
    def delta(self) -> bool:
        return self.pre_filter == 1

    @property
    def bitshuffle(self) -> bool:
        return self.pre_filter == 2

    @property
    def post_filter(self) -> int:
        return (self.raw >> 6) & 0x03

    @property
    def compressed(self) -> bool:
        """Whether tiles are stored with book-keeping offsets (any compressor other than NONE)."""
        return self.compressor != 0


@dataclass(frozen=True)
class Attribute:
    name: str
    datatype: Datatype
    cell_val_num: int             # VAR_NUM for var-sized
    compression: Codec
    offsets_compression: Codec | None  # var-sized only

    @property
    def var_sized(self) -> bool:
        return self.cell_val_num == VAR_NUM

    @property
    def cell_size(self) -> int:
        """Bytes of one fixed cell; 8 (one uint64 offset) for var-sized."""
        return 8 if self.var_sized else self.cell_val_num * self.datatype.size


@dataclass(frozen=True)
class Legacy0xSchema:
    file: str
    version: int | None           # None: original Intel-HLS (no tag)
    workspace: str | None
    array_name: str
    dense: bool
    tile_order: int
    cell_order: int
    capacity: int
    attributes: tuple
    dimensions: tuple             # names
    coord_type: Datatype
    domain: tuple                 # ((lo, hi), ...) per dimension
    tile_extents: tuple | None
    coords_compression: Codec
    size: int

    @property
    def dim_num(self) -> int:
        return len(self.dimensions)

    @property
    def coords_size(self) -> int:
        return self.dim_num * self.coord_type.size

    def attribute(self, name: str) -> Attribute:
        for a in self.attributes:
            if a.name == name:
                return a
        raise KeyError(name)


@safety_net("array schema")
def parse_schema(data: bytes, file: str = "__array_schema.tdb") -> Legacy0xSchema:
    c = Cursor(data, file, STRUCTURE)
    version = workspace = None
    first = c.u32("version tag or array name length")
    if first >= _TAG_MIN:
        version = 0xFFFFFFFF - first
        if version > 2:
            raise c.error(f"schema version {version} (tag 0x{first:08x}) is newer than the 2 this reader knows", 0)
        workspace = _string(c, "workspace")
    else:
        c.pos = 0
    name = _string(c, "array name")
    dense = c.u8("dense")
    if dense > 1:
        raise c.error(f"dense flag {dense} is neither 0 nor 1", c.pos - 1)
    tile_order = _signed8(c, "tile order")
    cell_order = _signed8(c, "cell order")
    for what, value in (("tile order", tile_order), ("cell order", cell_order)):
        if value not in ORDERS:
            raise c.error(f"{what} {value} is not row-major (0), col-major (1) or hilbert (2)")
    capacity = c.i64("capacity")
    if capacity <= 0:
        raise c.error(f"capacity {capacity} is not positive", c.pos - 8)
    attr_names = _names(c, "attribute")
    dim_names = _names(c, "dimension")
    if not dim_names:
        raise c.error("an array needs at least one dimension")
    at = c.pos
    domain_bytes = c.i32("domain size")
    domain_raw = c.bytes(_length(c, domain_bytes, "domain", at), "domain")
    at = c.pos
    extents_bytes = c.i32("tile extents size")
    extents_raw = c.bytes(_length(c, extents_bytes, "tile extents", at), "tile extents")
    n = len(attr_names)
    at = c.pos
    types = [c.u8("type") for _ in range(n + 1)]
    for i, t in enumerate(types):
        if t not in DATATYPES or t > 10:
            raise c.error(f"type {t} of {(attr_names + [COORDS])[i]} is not a 0.x datatype (0-10)", at + i)
    coord_type = DATATYPES[types[-1]]
    if types[-1] not in COORD_TYPES:
        raise c.error(f"coordinate type {coord_type.name} is not int32, int64, float32 or float64", at + n)
    cvns = []
    for i in range(n):
        at = c.pos
        v = c.i32("cell_val_num")
        if v <= 0:
            raise c.error(f"cell_val_num {v} of {attr_names[i]} is not positive", at)
        cvns.append(v)
    compression = [c.u8("compression") for _ in range(n + 1)]
    levels = [None] * (n + 1)
    offsets = list(compression[:n])
    offsets_levels = [None] * n
    if version is not None and version >= 1:
        levels = [_signed8(c, "compression level") for _ in range(n + 1)]
    if version is not None and version >= 2:
        offsets = [c.u8("offsets compression") for _ in range(n)]
        offsets_levels = [_signed8(c, "offsets compression level") for _ in range(n)]
    else:
        # Before v2 a var attribute's offsets share its compressor (docs/format-0x.md), at the default level.
        offsets = [x & 0x0F for x in compression[:n]]
        offsets_levels = [DEFAULT_LEVELS.get(x) for x in offsets]
    if not c.at_end():
        raise c.error(f"{c.remaining} bytes after the last schema field")
    dt = coord_type.dtype
    size2 = 2 * len(dim_names) * coord_type.size
    if len(domain_raw) != size2:
        raise c.error(f"domain is {len(domain_raw)} bytes, {len(dim_names)} dimensions of {coord_type.name} need {size2}")
    domain = np.frombuffer(domain_raw, dt).reshape(-1, 2)
    extents = None
    if extents_raw:
        if len(extents_raw) != size2 // 2:
            raise c.error(f"tile extents are {len(extents_raw)} bytes, {len(dim_names)} dimensions need {size2 // 2}")
        extents = tuple(np.frombuffer(extents_raw, dt).tolist())
    elif dense:
        raise c.error("a dense array needs tile extents")
    attrs = tuple(
        Attribute(attr_names[i], DATATYPES[types[i]], cvns[i], Codec(compression[i], levels[i]),
                  Codec(offsets[i], offsets_levels[i]) if cvns[i] == VAR_NUM else None)
        for i in range(n))
    return Legacy0xSchema(file, version, workspace, name, bool(dense), tile_order, cell_order, capacity, attrs,
                      tuple(dim_names), coord_type, tuple(tuple(r) for r in domain.tolist()), extents,
                      Codec(compression[n], levels[n]), len(data))


def looks_like_legacy0x_schema(data: bytes) -> bool:
    """True when the bytes decode completely as a 0.x schema (tagged or original)."""
    try:
        parse_schema(data)
        return True
    except Exception:
        return False


def _string(c: Cursor, what: str) -> str:
    at = c.pos
    n = c.i32(f"{what} length")
    return c.string(_length(c, n, what, at), what)


def _length(c: Cursor, n: int, what: str, at: int) -> int:
    if n < 0 or n > c.remaining:
        raise c.error(f"{what} length {n} does not fit in the {c.remaining} bytes that remain", at)
    return n


def _names(c: Cursor, what: str) -> list[str]:
    at = c.pos
    n = c.i32(f"{what} count")
    # every name takes at least its 4-byte length
    if n < 0 or n > c.remaining // 4:
        raise c.error(f"{what} count {n} cannot fit in the {c.remaining} bytes that remain", at)
    return [_string(c, f"{what} name") for _ in range(n)]


def _signed8(c: Cursor, what: str) -> int:
    v = c.u8(what)
    return v - 256 if v > 127 else v
