"""Fragment metadata: the footer, the R-tree's levels, the fragment-wide summary, formats 1/2."""

from __future__ import annotations

from ...format.fragment_metadata import (COORDS, Footer, FragmentFieldSummary, LegacyFragmentMetadata, RTree,
                                         legacy_footer)
from ...lazy import np


def _plain(value):
    if np.imported() and isinstance(value, np.generic):
        return value.item()
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="backslashreplace")
    return value


def describe_footer(footer: Footer) -> dict:
    """The footer as plain data with the fixed keys of `footer.yaml` (scripts read them), in spec order.

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


def describe_rtree_level(rtree: RTree, level: int) -> list[list]:
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


def describe_fragment_summary(summary: tuple[FragmentFieldSummary, ...], fields) -> dict:
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


def describe_legacy_footer(meta: LegacyFragmentMetadata, dense: bool) -> dict:
    """footer.yaml of a format 1/2 fragment: the footer keys it has, then the inline lists."""
    d = describe_footer(legacy_footer(meta, dense))
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
