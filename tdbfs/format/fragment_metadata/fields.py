"""The per-field index space of a fragment's metadata: which list slot is which field.

Every per-field list of the footer and its generic tiles is indexed by this
space; it also names each field's data files, which changed with the format.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...lazy import np
from ..datatypes import DATATYPES, Datatype

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
