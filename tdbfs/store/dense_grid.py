"""The tile grid of a dense fragment of either layout (format/dense_tiles.py), from its schema and its
non-empty domain, kept with the fragment's other parsed objects."""

from __future__ import annotations

from ..format.dense_tiles import DenseTileGrid, dense_tile_grid
from ..format.errors import FormatError
from .fragment_interface import LEGACY0X, FragmentLike


def dense_grid(frag: FragmentLike) -> DenseTileGrid:
    """The grid of a dense fragment; a FormatError (recorded) when its schema and metadata make none,
    or when it disagrees with the tile count the metadata gives."""
    return frag._once("dense tile grid", lambda: _make(frag))


def _make(frag: FragmentLike) -> DenseTileGrid:
    where = f"{frag.rel}/{frag.METADATA_FILE}"
    ned = frag.non_empty_domain()
    if ned is None:
        raise FormatError(where, "non-empty domain", 0, "a dense fragment without a non-empty domain has no tiles")
    schema = frag.schema()
    if frag.layout == LEGACY0X:
        domain, extents = list(schema.domain), list(schema.tile_extents or [None] * len(schema.domain))
    else:
        domain = [d.domain or (None, None) for d in schema.dimensions]
        extents = [d.tile_extent for d in schema.dimensions]
    grid = dense_tile_grid(domain, extents, list(ned), schema.tile_order, schema.cell_order, where,
                           "dense tile grid")
    if grid.tile_count != frag.tile_count():
        raise FormatError(where, "dense tile grid", 0,
                          f"the non-empty domain spans {grid.tile_count} tiles of the schema's extents, but the "
                          f"metadata lists {frag.tile_count()}")
    return grid


def dense_dtypes(frag: FragmentLike) -> list:
    """The numpy dtype of each dimension's coordinates."""
    return [dt.dtype for _, dt in frag.dimensions()]


def cells_in_domain(frag: FragmentLike, k: int) -> tuple[list, object]:
    """Dense tile k's coordinates (one array per dimension, every cell of the tile) and the positions of
    its cells inside the fragment's non-empty domain: the cells a reader sees; the rest is padding."""
    import numpy as np

    grid = dense_grid(frag)
    coords = grid.cell_coordinates(k, dense_dtypes(frag))
    keep = np.ones(grid.cells_per_tile, bool)
    for c, (lo, hi) in zip(coords, frag.non_empty_domain()):
        keep &= (c >= lo) & (c <= hi)
    return coords, np.flatnonzero(keep)
