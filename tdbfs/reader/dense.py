"""The cells a read of a dense array returns: every cell of the array's non-empty domain at T (inside the
subarray), in the global order, each holding the value of the newest fragment whose non-empty domain
covers it, or the attribute's fill value where no fragment wrote it.

TileDB's rules (tiledb/sm/query/readers/dense_reader.cc; docs/reader.md): the array's non-empty domain is
the per-dimension hull of its fragments' non-empty domains (`Array::compute_non_empty_domain`); for each
cell, the fragment latest in the read's priority order whose non-empty domain holds the cell wins
(`DenseReader::copy_fixed_tiles` copies the fragments' domains oldest to newest); a dense tile's cells
outside its fragment's non-empty domain are padding and never read; fields are matched by name, and a
field the fragment lacks (schema evolution) or stores with another var-ness reads as the fill value
(`ReaderBase::skip_field`). A sparse fragment in a dense array (written before TileDB 2.12) overrides the
cells it holds, in the same priority order (the legacy `Reader`).

Work goes space tile by space tile, in the tile order, and through a tile STEP_CELLS cells at a time: beyond
the decoded tiles (in the store's cache), memory holds the columns of one step.
"""

from __future__ import annotations

from typing import Iterator

from ..format.dense_tiles import COL_MAJOR, ROW_MAJOR
from ..lazy import np
from ..store.dense_grid import dense_grid
from ..store.tile_columns import ATTRIBUTE, DIMENSION, Column, concat, stored_columns, tile_columns
from .batch import NO_SOURCE, CellBatch, ReadPlan

_ORDER = {ROW_MAJOR: "C", COL_MAJOR: "F"}
#: cells of a space tile worked on at a time: what one step allocates stays small whatever the tile's size
STEP_CELLS = 1 << 16


def dense_batches(store, plan: ReadPlan, batch_cells: int = 1 << 16) -> Iterator[CellBatch]:
    schema = store.schema(plan.schema_rel)
    frags = [store.fragment(rel) for rel in plan.fragments]
    if not frags:
        return
    region = _region(schema, frags, plan.subarray)
    if region is None:
        return
    dims = schema.dimensions
    lows = [int(d.domain[0]) for d in dims]
    extents = [int(d.tile_extent) for d in dims]
    tile_ranges = [range((lo - dlo) // ext, (hi - dlo) // ext + 1)
                   for (lo, hi), dlo, ext in zip(_hull(region), lows, extents)]
    order = _ORDER[schema.cell_order]
    cells_per_tile = int(np.prod(extents))
    step = max(batch_cells, STEP_CELLS)
    for t in _tiles_in_order(tile_ranges, schema.tile_order):
        tile_lo = [dlo + ti * ext for dlo, ti, ext in zip(lows, t, extents)]
        whole = _inside(tile_lo, extents, region)
        for first in range(0, cells_per_tile, step):
            # positions, in the cell order, of this step's cells of the tile, and their coordinates
            pos = np.arange(first, min(cells_per_tile, first + step), dtype=np.int64)
            coords = [idx.astype(d.datatype.dtype) + np.asarray(lo, d.datatype.dtype) for lo, idx, d in
                      zip(tile_lo, np.unravel_index(pos, extents, order=order), dims)]
            if not whole:
                keep = np.ones(len(pos), bool)
                for c, ranges in zip(coords, region):
                    keep &= _in_ranges(c, ranges)
                if not keep.any():
                    continue
                pos, coords = pos[keep], [c[keep] for c in coords]
            batch = _space_tile(schema, frags, tile_lo, coords, pos, extents, order)
            for start in range(0, len(pos), batch_cells):
                stop = min(len(pos), start + batch_cells)
                yield CellBatch([c.slice(start, stop) for c in batch.columns], batch.fragment[start:stop],
                                batch.tile[start:stop])


def array_non_empty_domain(frags) -> list[tuple] | None:
    """The per-dimension hull of the fragments' non-empty domains."""
    neds = [f.non_empty_domain() for f in frags]
    neds = [n for n in neds if n is not None]
    if not neds:
        return None
    return [(min(n[j][0] for n in neds), max(n[j][1] for n in neds)) for j in range(len(neds[0]))]


def _region(schema, frags, subarray) -> list[list[tuple]] | None:
    """Per dimension, the inclusive ranges returned: the non-empty domain cut by the subarray's ranges."""
    ned = array_non_empty_domain(frags)
    if ned is None:
        return None
    region = []
    for j, (lo, hi) in enumerate(ned):
        wanted = subarray[j] if subarray is not None and subarray[j] is not None else [(lo, hi)]
        cut = [(max(lo, a), min(hi, b)) for a, b in wanted if max(lo, a) <= min(hi, b)]
        if not cut:
            return None
        region.append(cut)
    return region


def _inside(tile_lo, extents, ranges_per_dim) -> bool:
    """Whether the whole space tile lies inside the ranges (one range of each dimension holds it)."""
    return all(any(a <= lo and lo + ext - 1 <= b for a, b in ranges)
               for lo, ext, ranges in zip(tile_lo, extents, ranges_per_dim))


def _hull(region):
    return [(min(a for a, _ in r), max(b for _, b in r)) for r in region]


def _in_ranges(values, ranges) -> np.ndarray:
    inside = np.zeros(len(values), bool)
    for lo, hi in ranges:
        inside |= (values >= lo) & (values <= hi)
    return inside


def _tiles_in_order(tile_ranges, tile_order):
    """The space tiles' indices, in the tile order (row-major: the last dimension varies fastest)."""
    shape = [len(r) for r in tile_ranges]
    for flat in range(int(np.prod(shape))):
        index = np.unravel_index(flat, shape, order=_ORDER[tile_order])
        yield tuple(r[int(i)] for r, i in zip(tile_ranges, index))


def _space_tile(schema, frags, tile_lo, coords, pos, extents, order) -> CellBatch:
    """The cells `pos` of the space tile whose low corner is tile_lo: which fragment wins each, and the
    attributes' values."""
    n = len(pos)
    tile_hi = [lo + ext - 1 for lo, ext in zip(tile_lo, extents)]
    source = np.full(n, NO_SOURCE, np.int32)
    row = np.zeros(n, np.int64)          # the winner's row in its tile's columns
    tile = np.full(n, NO_SOURCE, np.int64)
    loaded = {}                          # fragment index -> that fragment's columns for this space tile
    for i, frag in enumerate(frags):
        ned = frag.non_empty_domain()
        if ned is None or any(hi < a or lo > b for (lo, hi), a, b in zip(ned, tile_lo, tile_hi)):
            continue
        got = (_dense_part if frag.dense else _sparse_part)(frag, tile_lo, coords, pos, extents, order)
        if got is None:
            continue
        covered, rows, k, columns = got
        source[covered], row[covered], tile[covered] = i, rows, k
        loaded[i] = columns
    columns = [Column(d.name, DIMENSION, d.datatype, 1, c) for d, c in zip(schema.dimensions, coords)]
    for attr in schema.attributes:
        columns.append(_attribute(attr, source, row, loaded))
    return CellBatch(columns, source, tile)


def _dense_part(frag, tile_lo, coords, pos, extents, order):
    """(covered cells, their rows, tile index, columns by name) of dense fragment `frag` in the space tile.
    A dense fragment's tile is the whole space tile, so a cell's row in it is its position in the cell order."""
    ned = frag.non_empty_domain()
    if _inside(tile_lo, extents, [[r] for r in ned]):
        covered = np.arange(len(pos))
    else:
        inside = np.ones(len(pos), bool)
        for c, (lo, hi) in zip(coords, ned):
            inside &= (c >= lo) & (c <= hi)
        covered = np.flatnonzero(inside)
        if not len(covered):
            return None
    grid = dense_grid(frag)
    local = [(lo - low) // ext - first for lo, low, ext, first in zip(tile_lo, grid.lows, grid.extents, grid.first)]
    k = int(np.ravel_multi_index(local, grid.counts, order=_ORDER[grid.tile_order]))
    return covered, pos[covered], k, {c.name: c for c in stored_columns(frag, k)}


def _sparse_part(frag, tile_lo, coords, pos, extents, order):
    """The same for a sparse fragment of a dense array: the cells of the space tile it holds (a cell's
    position in the tile's cell order comes from its coordinates relative to the tile's low corner)."""
    covered_all, rows_all, tiles_all, parts = [], [], [], {}
    for k in range(frag.tile_count()):
        cols = _by_name(frag, k)
        dim_cols = [cols[d] for d in cols if cols[d].kind == DIMENSION]
        rel = [dc.values.astype(np.int64) - int(lo) for dc, lo in zip(dim_cols, tile_lo)]
        inside = np.ones(len(rel[0]), bool)
        for r, ext in zip(rel, extents):
            inside &= (r >= 0) & (r < ext)
        if not inside.any():
            continue
        where = np.ravel_multi_index([r[inside] for r in rel], extents, order=order)
        at = np.searchsorted(pos, where)
        hit = (at < len(pos)) & (pos[np.minimum(at, len(pos) - 1)] == where)
        covered_all.append(at[hit])
        rows_all.append(np.flatnonzero(inside)[hit])
        tiles_all.append(np.full(hit.sum(), k, np.int64))
        parts[k] = cols
    if not parts:
        return None
    if len(parts) > 1:   # a space tile spread over several sparse tiles: one column set, rows renumbered
        order_k = sorted(parts)
        base = np.cumsum([0] + [len(next(iter(parts[k].values()))) for k in order_k[:-1]])
        shift = dict(zip(order_k, base))
        rows_all = [r + shift[int(ks[0])] if len(ks) else r for r, ks in zip(rows_all, tiles_all)]
        merged = {name: concat([parts[k][name] for k in order_k]) for name in parts[order_k[0]]}
    else:
        merged = next(iter(parts.values()))
    covered = np.concatenate(covered_all)
    rows = np.concatenate(rows_all)
    tiles = np.concatenate(tiles_all)
    return covered, rows, tiles, merged


def _by_name(frag, k: int) -> dict:
    return {c.name: c for c in tile_columns(frag, k)}


def _attribute(attr, source, row, loaded) -> Column:
    """The attribute's column: each cell from its winning fragment's tile, or the fill value."""
    n = len(source)
    pieces, where = [], []
    fill_rows = source == NO_SOURCE
    for i, columns in loaded.items():
        mine = source == i
        col = columns.get(attr.name)
        if col is None or col.kind != ATTRIBUTE or col.var_sized != attr.var_sized:
            fill_rows |= mine       # a field this fragment lacks reads as the fill value
            continue
        if not mine.any():
            continue
        pieces.append(_as_attribute(col, attr).take(row[mine]))
        where.append(np.flatnonzero(mine))
    if fill_rows.any():
        pieces.append(fill_column(attr, int(fill_rows.sum())))
        where.append(np.flatnonzero(fill_rows))
    if not pieces:
        return fill_column(attr, 0)
    joined = concat(pieces)
    back = np.empty(n, np.int64)
    back[np.concatenate(where)] = np.arange(n)
    return joined.take(back)


def _as_attribute(col: Column, attr) -> Column:
    """A fragment's column as the schema in force declares the attribute (its validity when now nullable)."""
    validity = col.validity
    if attr.nullable and validity is None:
        validity = np.ones(len(col), bool)
    elif not attr.nullable:
        validity = None
    return Column(attr.name, ATTRIBUTE, attr.datatype, col.per_cell, col.values, col.offsets, validity)


def fill_column(attr, n: int) -> Column:
    """n cells of the attribute's fill value (one element for a var-sized attribute: docs/reader.md)."""
    fill = attr.fill_value
    validity = np.full(n, bool(attr.fill_validity)) if attr.nullable else None
    dt = attr.datatype
    if attr.var_sized:
        values = np.frombuffer(fill * n, np.uint8)
        offsets = np.arange(n + 1, dtype=np.int64) * len(fill)
        return Column(attr.name, ATTRIBUTE, dt, 1, values, offsets, validity)
    if dt.is_string:
        return Column(attr.name, ATTRIBUTE, dt, attr.cell_val_num, np.full(n, fill, f"S{len(fill)}"), None, validity)
    one = np.frombuffer(fill, dt.dtype)
    if attr.cell_val_num > 1:
        return Column(attr.name, ATTRIBUTE, dt, attr.cell_val_num, np.tile(one, (n, 1)), None, validity)
    return Column(attr.name, ATTRIBUTE, dt, 1, np.repeat(one[:1], n), None, validity)
