"""The fragment metadata footer: where it is, and every field of it.

Versions are gated on the footer's own `version` field; the version from the
fragment's folder name is only used to find the footer and as a cross-check.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..cursor import Cursor, TracingCursor
from ..errors import FormatError
from ..errors import safety_net
from .domain import read_ranges, read_u64s
from .fields import FieldSpace, build_field_space

FRAGMENT_METADATA_FILE = "__fragment_metadata.tdb"
LEGACY_SCHEMA_NAME = "__array_schema.tdb"     # the only schema of formats 1-9

#: Newest format version whose footer layout this module knows (v23: optional sections).
MAX_FOOTER_VERSION = 23
EXPERIMENTAL_VERSION_BIT = 0x80000000


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
    #: where fields start, as `offset` (file or payload offset): "sparse_tile_num", "last_tile_cell_num",
    #: and of each list ("file_sizes", ...) its first entry; a finding about a number points at it
    field_offsets: dict = field(default_factory=dict, compare=False, repr=False)

    def field_offset(self, name: str, index: int = 0) -> int | None:
        """Where the footer holds `name` (entry `index` of a list of u64s); None when not recorded."""
        at = self.field_offsets.get(name)
        return None if at is None else at + 8 * index

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


def _parse_footer_tail(cur: Cursor, version: int, schema, domain_pad: int):
    """Everything after the non-empty domain; returns a dict of fields and the field space."""
    if domain_pad:
        raw = cur.bytes(domain_pad, "null non-empty domain padding")
        if any(raw):
            raise cur.error("bytes after a null non-empty domain are not the writer's zero padding",
                            cur.pos - domain_pad)
    out: dict = {}
    at = out["field_offsets"] = {"sparse_tile_num": cur.offset}
    out["sparse_tile_num"] = cur.u64("sparse_tile_num")
    at["last_tile_cell_num"] = cur.offset
    out["last_tile_cell_num"] = cur.u64("last_tile_cell_num")
    out["has_timestamps"] = cur.bool("has_timestamps") if version >= 14 else None
    out["has_delete_meta"] = cur.bool("has_delete_meta") if version >= 15 else None
    fields = build_field_space(schema, version, bool(out["has_timestamps"]), bool(out["has_delete_meta"]))
    n, nv = fields.count, fields.var_count
    at["file_sizes"] = cur.offset
    out["file_sizes"] = read_u64s(cur, n, "file_sizes")
    at["file_var_sizes"] = cur.offset
    out["file_var_sizes"] = read_u64s(cur, nv, "file_var_sizes")
    out["file_validity_sizes"] = None
    if version >= 7:
        at["file_validity_sizes"] = cur.offset
        out["file_validity_sizes"] = read_u64s(cur, n, "file_validity_sizes")
    at["rtree"] = cur.offset
    g: dict = {"rtree": cur.u64("R-tree generic tile offset")}

    def offsets(kind: str, count: int) -> None:
        at[kind] = cur.offset
        g[kind] = read_u64s(cur, count, f"{kind} generic tile offsets")

    offsets("tile_offsets", n)
    offsets("tile_var_offsets", nv)
    offsets("tile_var_sizes", nv)
    if version >= 7:
        offsets("tile_validity_offsets", n)
    notes = []
    if version >= 11:
        for kind in ("tile_min_offsets", "tile_max_offsets", "tile_sum_offsets", "tile_null_count_offsets"):
            offsets(kind, n)
    if version >= 12 or (version == 11 and cur.remaining == 8):
        if version == 11:
            # Written by the back-compat v11 writer of TileDB >= 2.8, never by 2.7 (§8 #11).
            notes.append("format 11 footer carries a fragment min/max/sum/null count offset (later writers' "
                         "extra u64)")
        at["fragment_min_max_sum_null_count"] = cur.offset
        g["fragment_min_max_sum_null_count"] = cur.u64("fragment min/max/sum/null count generic tile offset")
    if version >= 16:
        at["processed_conditions"] = cur.offset
        g["processed_conditions"] = cur.u64("processed conditions generic tile offset")
    sections = None
    if version >= 23:
        sections = []
        count = cur.u32_count(12, "optional section count", "optional sections")
        for k in range(count):
            at = cur.pos
            sid = cur.u64(f"optional section {k} identifier")
            size = cur.u32(f"optional section {k} size")
            body = cur.sub(size, f"optional section {k}")
            if sid == 0:
                D = len(schema.dimensions)
                if size != 2 * D * 8:
                    raise cur.error(f"tile global order bounds section is {size} bytes, expected {2 * D * 8}", at)
                g["tile_global_order_min_offsets"] = read_u64s(body, D, "tile global order min offsets")
                g["tile_global_order_max_offsets"] = read_u64s(body, D, "tile global order max offsets")
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
        schema_name = _schema_name(cur)
    dense = cur.bool("dense")
    null_ned = cur.bool("null non-empty domain")
    dims = schema.dimensions
    ned = None
    pad = 0
    if not null_ned:
        if version < 5:
            cs = dims[0].coord_size if dims else 0
            sub = cur.sub(2 * len(dims) * cs, "non-empty domain")
            ned = read_ranges(sub, dims, "non-empty domain")
        else:
            ned = read_ranges(cur, dims, "non-empty domain")
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
    return version, _schema_name(cur)


def _schema_name(cur: Cursor) -> str:
    """The footer's schema name (after its u64 length): a file name in __schema/, which callers open. A NUL
    or a path separator (damage) would make that open fail with ValueError or leave the folder. A length
    the footer cannot hold is the wrong number, reported where it is."""
    at = cur.pos
    n = cur.u64("array schema name length")
    if n == 0:
        raise cur.error("array schema name length is 0", at)
    if n > cur.remaining:
        raise cur.error(f"array schema name length {n} exceeds the {cur.remaining} bytes that remain", at)
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
