"""Formats 1 and 2: `__fragment_metadata.tdb` is one generic tile holding every list inline."""

from __future__ import annotations

from dataclasses import dataclass, field

from ...lazy import np
from ..cursor import Cursor
from ..errors import safety_net
from .domain import read_ranges, read_u64s
from .fields import FieldSpace, build_field_space
from .footer import Footer
from .rtree import RTree, RTreeLevel, mbr_dtype


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
        ned = read_ranges(cur.sub(ned_len, "non-empty domain"), dims, "non-empty domain")
    rec = mbr_dtype(dims)
    if not rec.itemsize:
        raise cur.error("the schema has no dimensions", 0)
    mbr_num = cur.u64_count(rec.itemsize, "MBR count", "MBRs")
    mbrs = cur.array(mbr_num, rec, "MBRs")
    level = RTreeLevel(mbr_num, tuple(np.ascontiguousarray(mbrs[f"d{j}"]) for j in range(D)))
    bnum = cur.u64_count(rec.itemsize, "bounding coordinates count", "bounding coordinates")
    bounding = cur.array(bnum * rec.itemsize, np.uint8, "bounding coordinates").reshape(bnum, rec.itemsize)

    def lists(count: int, what: str):
        out = []
        for k in range(count):
            n = cur.u64_count(8, f"{what} {k} count", f"{what} {k}")
            out.append(cur.u64_array(n, f"{what} {k}"))
        return tuple(out)

    tile_offsets = lists(A + 1, "tile offsets")
    tile_var_offsets = lists(A, "tile var offsets")
    tile_var_sizes = lists(A, "tile var sizes")
    last = cur.u64("last_tile_cell_num")
    file_sizes = read_u64s(cur, A + 1, "file_sizes")
    file_var_sizes = read_u64s(cur, A, "file_var_sizes")
    if cur.remaining:
        raise cur.error(f"{cur.remaining} bytes remain after the last field")
    return LegacyFragmentMetadata(version, ned, level, bnum, bounding, tile_offsets, tile_var_offsets,
                                  tile_var_sizes, last, file_sizes, file_var_sizes, fields)


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
