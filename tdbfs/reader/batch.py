"""What the reader hands on: cells in batches, as columns (store/tile_columns.py) with their source."""

from __future__ import annotations

from dataclasses import dataclass

from ..lazy import np

#: `CellBatch.fragment` and `.tile` of a cell no fragment wrote (a dense cell holding the fill value)
NO_SOURCE = -1


@dataclass(frozen=True, eq=False)
class CellBatch:
    """Consecutive cells of a read, in the order TileDB returns them.

    `columns`: the dimensions, then the attributes of the schema in force at T, in the schema's order
    (store.tile_columns.Column, kind DIMENSION or ATTRIBUTE). `fragment`: int32, each cell's source as an
    index into ReadPlan.fragments, NO_SOURCE for a fill cell. `tile`: int64, the tile of that fragment
    the cell's value comes from, NO_SOURCE for a fill cell."""
    columns: list
    fragment: np.ndarray
    tile: np.ndarray

    def __len__(self) -> int:
        return len(self.fragment)


@dataclass(frozen=True)
class ReadPlan:
    """One read: the array as opened at `timestamp` (ms, inclusive), restricted to `subarray`.

    `fragments`: the fragment folders (relative paths) the read takes, in TileDB's priority order (oldest
    first; a later one wins a cell written by both): store/as_of.reader_fragments. `schema_rel`: the schema
    in force at T. `subarray`: per dimension (schema order) a tuple of inclusive (lo, hi) ranges, or None for
    the whole dimension; None for the whole array."""
    timestamp: int
    schema_rel: str
    fragments: tuple[str, ...]
    subarray: tuple | None = None
