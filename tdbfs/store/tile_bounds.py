"""A sparse tile's values against the min/max its fragment metadata records (docs/format.md §5.5): the
check that sees a tile holding another tile's bytes (swapped, or rewritten in place), which no length
check can see."""

from __future__ import annotations

from ..format import fragment_metadata as fm
from ..format.filter_registry import value_tolerance
from ..lazy import np
from .fragment_interface import DATA, TileLocation
from .problems import Problem


def check_min_max(frag, field, k: int, data, loc: TileLocation) -> None:
    """A sparse tile whose values fall outside the min/max its fragment metadata records holds another
    tile's bytes (swapped, or rewritten in place), which no length check can see."""
    bounds = frag._once(("minmax bounds", field.idx), lambda: _min_max_bounds(frag, field))
    if bounds is None or k >= len(bounds[0]):
        return
    dt = np.dtype(field.datatype.dtype)
    values = np.frombuffer(memoryview(data)[:len(data) - len(data) % dt.itemsize], dt)  # no copy of the tile
    if not len(values) or (dt.kind == "f" and np.isnan(values).any()):
        return
    lo, hi = values.min(), values.max()
    want_lo, want_hi = bounds[0][k], bounds[1][k]
    if lo == want_lo and hi == want_hi:
        return
    # TileDB takes a tile's min/max before the filters run: a lossy filter's values match them only
    # within its precision, and where it has none they are not compared (filter_registry.value_tolerance)
    tolerance = value_tolerance(frag.pipeline(field, DATA).filters, float(want_lo), float(want_hi))
    if tolerance is None:
        return
    within = ""
    if tolerance:
        # and the rounding of the value read back, in the attribute's own type
        eps = float(np.finfo(dt).eps) if dt.kind == "f" else 0.0
        tolerance += 4 * eps * max(abs(float(v)) for v in (lo, hi, want_lo, want_hi))
        if abs(float(lo) - float(want_lo)) <= tolerance and abs(float(hi) - float(want_hi)) <= tolerance:
            return
        within = f" (more than the lossy filter's {tolerance:.6g} apart)"
    frag.problems.add(Problem(loc.file, f"tile {k}", loc.offset,
                              f"values span {lo.item()}..{hi.item()} but the fragment metadata records "
                              f"{want_lo.item()}..{want_hi.item()} for this tile{within} (tiles swapped "
                              "or overwritten?)"))


def _min_max_bounds(frag, field):
    """(mins, maxes) the metadata holds for a fixed numeric attribute of a sparse fragment, else None.
    Dense tiles hold fill values outside the written cells, which TileDB leaves out of min/max."""
    footer = frag.footer()
    g = footer.generic_tile_offsets
    if (g is None or g.tile_min_offsets is None or footer.dense or field.kind != fm.ATTRIBUTE
            or field.var_sized or field.nullable or field.cell_val_num != 1 or not field.has_min_max
            or field.datatype.is_string):
        return None
    try:
        mins, maxes = frag.tile_min_max("min", field.idx), frag.tile_min_max("max", field.idx)
    except Exception:  # noqa: BLE001 -- their own problem is recorded by their parse
        return None
    return (mins, maxes) if len(mins) == len(maxes) else None
