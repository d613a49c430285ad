"""Which part of the domain each tile of a dense fragment covers, and each cell's coordinates.

A dense fragment stores whole space tiles: its non-empty domain expanded to tile boundaries, tile
after tile in the array's tile order, each tile's cells in the cell order (docs/format.md §5.2;
TileDB: `Domain::expand_to_tiles`, `Domain::get_tile_subarray` in tiledb/sm/array_schema/domain.cc,
the dense tile count of tiledb/sm/fragment/fragment_metadata.cc; 0.x: docs/format-0x.md "Data
files"). Tile t of dimension j spans [low_j + t * extent_j, low_j + (t + 1) * extent_j - 1],
unclipped: a tile may reach past the domain's upper bound.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..lazy import np
from .errors import FormatError

#: the dense layouts, numbered alike in 2.x schemas (docs/format.md §4.6, "Layout") and 0.x ones
ROW_MAJOR, COL_MAJOR = 0, 1
_NUMPY_ORDER = {ROW_MAJOR: "C", COL_MAJOR: "F"}   # row-major: the last dimension varies fastest


@dataclass(frozen=True)
class DenseTileGrid:
    lows: tuple[int, ...]       # the domain's low bound per dimension
    extents: tuple[int, ...]    # tile extent per dimension
    first: tuple[int, ...]      # per dimension, the index of the first tile the fragment holds
    counts: tuple[int, ...]     # per dimension, how many tiles the fragment holds
    tile_order: int
    cell_order: int

    @property
    def tile_count(self) -> int:
        return int(np.prod(self.counts, dtype=object)) if self.counts else 0

    @property
    def cells_per_tile(self) -> int:
        return int(np.prod(self.extents, dtype=object))

    def tile_domain(self, k: int) -> tuple[tuple[int, int], ...]:
        """(lo, hi) per dimension of tile k (in the fragment's tile order)."""
        index = np.unravel_index(k, self.counts, order=_NUMPY_ORDER[self.tile_order])
        out = []
        for low, ext, first, t in zip(self.lows, self.extents, self.first, index):
            lo = low + (first + int(t)) * ext
            out.append((lo, lo + ext - 1))
        return tuple(out)

    def cell_coordinates(self, k: int, dtypes) -> list[np.ndarray]:
        """Per dimension, the coordinate of every cell of tile k, in the cell order."""
        index = np.unravel_index(np.arange(self.cells_per_tile), self.extents, order=_NUMPY_ORDER[self.cell_order])
        return [np.asarray(lo, dtype=dt) + idx.astype(dt) for (lo, _), idx, dt in
                zip(self.tile_domain(k), index, dtypes)]


def dense_tile_grid(domain: list[tuple], extents: list, non_empty_domain: list[tuple], tile_order: int,
                    cell_order: int, file: str, structure: str) -> DenseTileGrid:
    """The tiles of a dense fragment whose array has `domain` ((lo, hi) per dimension), tile
    `extents` and orders, holding `non_empty_domain`. A value that makes no grid (no extent, a
    non-integer bound, a non-empty domain outside the domain, a layout dense arrays do not take)
    is a FormatError in `file`/`structure`."""
    if tile_order not in _NUMPY_ORDER or cell_order not in _NUMPY_ORDER:
        raise FormatError(file, structure, 0, f"tile order {tile_order} / cell order {cell_order}: a dense array "
                                              "has row-major (0) or col-major (1) orders")
    if not (len(domain) == len(extents) == len(non_empty_domain)):
        raise FormatError(file, structure, 0, f"{len(domain)} dimensions, {len(extents)} tile extents and "
                                              f"{len(non_empty_domain)} non-empty ranges")
    lows, exts, first, counts = [], [], [], []
    for j, ((dlo, dhi), ext, (lo, hi)) in enumerate(zip(domain, extents, non_empty_domain)):
        values = (dlo, dhi, ext, lo, hi)
        if any(v is None or not float(v).is_integer() for v in values):
            raise FormatError(file, structure, 0, f"dimension {j}: domain {dlo}..{dhi}, tile extent {ext} and "
                                                  f"non-empty domain {lo}..{hi} make no integer tile grid")
        dlo, dhi, ext, lo, hi = (int(v) for v in values)
        if ext <= 0 or not dlo <= lo <= hi <= dhi:
            raise FormatError(file, structure, 0, f"dimension {j}: non-empty domain {lo}..{hi} is not inside the "
                                                  f"domain {dlo}..{dhi}, or tile extent {ext} is not positive")
        lows.append(dlo)
        exts.append(ext)
        first.append((lo - dlo) // ext)
        counts.append((hi - dlo) // ext - (lo - dlo) // ext + 1)
    return DenseTileGrid(tuple(lows), tuple(exts), tuple(first), tuple(counts), tile_order, cell_order)
