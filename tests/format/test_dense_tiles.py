"""The dense tile arithmetic (format/dense_tiles.py) on its own: grids TileDB would not write are
FormatErrors naming the file; the grid's tiles and cells agree with a plain enumeration. That the
arithmetic is TileDB's is checked against tiledb-py reads in tests/views/test_cells_views.py."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from tdbfs.format.dense_tiles import COL_MAJOR, ROW_MAJOR, dense_tile_grid
from tdbfs.format.errors import FormatError


@pytest.mark.parametrize("domain,extents,ned,orders,why", [
    ([(0, 9)], [None], [(0, 9)], (0, 0), "no integer tile grid"),
    ([(0, 9)], [2], [(3, 12)], (0, 0), "not inside the domain"),
    ([(0, 9)], [0], [(0, 9)], (0, 0), "not positive"),
    ([(0.5, 9)], [2], [(1, 2)], (0, 0), "no integer tile grid"),
    ([(0, 9)], [2], [(0, 9)], (4, 0), "row-major (0) or col-major (1)"),
    ([(0, 9), (0, 9)], [2], [(0, 9)], (0, 0), "2 dimensions, 1 tile extents"),
])
def test_grids_tiledb_does_not_write_are_errors(domain, extents, ned, orders, why):
    with pytest.raises(FormatError, match="f/__fragment_metadata.tdb: dense tile grid") as err:
        dense_tile_grid(domain, extents, ned, *orders, "f/__fragment_metadata.tdb", "dense tile grid")
    assert why in err.value.message


@pytest.mark.parametrize("tile_order", [ROW_MAJOR, COL_MAJOR])
@pytest.mark.parametrize("cell_order", [ROW_MAJOR, COL_MAJOR])
def test_tiles_and_cells_follow_the_orders(tile_order, cell_order):
    # domain [-5, 20] x [100, 130], extents 4 x 3; written [-3, 6] x [104, 110]
    grid = dense_tile_grid([(-5, 20), (100, 130)], [4, 3], [(-3, 6), (104, 110)], tile_order, cell_order, "f", "g")
    rows, cols = [(-5, -2), (-1, 2), (3, 6)], [(103, 105), (106, 108), (109, 111)]
    want = list(itertools.product(rows, cols)) if tile_order == ROW_MAJOR else \
        [(r, c) for c, r in itertools.product(cols, rows)]
    assert grid.tile_count == 9 and grid.cells_per_tile == 12
    assert [grid.tile_domain(k) for k in range(9)] == want
    (r0, r1), (c0, c1) = want[4]
    cells = list(itertools.product(range(r0, r1 + 1), range(c0, c1 + 1)))
    if cell_order == COL_MAJOR:
        cells = [(r, c) for c, r in itertools.product(range(c0, c1 + 1), range(r0, r1 + 1))]
    x, y = grid.cell_coordinates(4, [np.dtype("<i8"), np.dtype("<u2")])
    assert x.dtype == np.int64 and y.dtype == np.uint16
    assert list(zip(x.tolist(), y.tolist())) == cells
