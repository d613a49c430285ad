"""A fragment's cells as numpy columns: the rows of cells.csv, as values (store/tile_columns.py)."""

from __future__ import annotations

from ..store.tile_columns import column_names, concat, tile_columns


def fragment_cells(frag, tile: int | None = None) -> dict:
    """Column name -> values of tile `tile` (every tile, in order, when None); see Fragment.cells."""
    import numpy as np

    tiles = range(frag.tile_count()) if tile is None else [_tile_index(frag, tile)]
    parts = [_tile_columns(frag, k) for k in tiles]
    names = column_names(frag)
    if not parts:
        return {name: np.empty(0) for name in names}
    return {name: column_values(concat([p[i] for p in parts])) for i, name in enumerate(names)}


def _tile_index(frag, k: int) -> int:
    n = frag.tile_count()
    if not -n <= k < n:
        raise IndexError(f"{frag.name}: tile {k} of {n}")
    return k % n


def _tile_columns(frag, k: int) -> list:
    try:
        return tile_columns(frag, k)
    except ValueError as exc:
        raise ValueError(f"{frag.rel}: {exc}") from None


def column_values(c):
    """A column's cells as numpy values: numbers as their dtype ((n, per_cell) for several per cell),
    strings as str objects, var-sized numbers as one array per cell, nulls masked."""
    import numpy as np

    dt = c.datatype
    if c.offsets is not None:
        data = c.values.tobytes()
        spans = zip(c.offsets[:-1].tolist(), c.offsets[1:].tolist())
        column = np.empty(len(c), object)
        if dt.is_string and dt.size == 1:
            column[:] = [data[s:e].decode("utf-8", "backslashreplace") for s, e in spans]
        else:
            for i, (s, e) in enumerate(spans):
                column[i] = np.frombuffer(data[s:e - (e - s) % dt.size], dt.dtype)
    elif c.values.dtype.kind == "S":
        column = np.array([v.decode("utf-8", "backslashreplace") for v in c.values.tolist()], dtype=object)
    else:
        column = c.values
    if c.validity is None:
        return column
    mask = ~c.validity if column.ndim == 1 else np.repeat(~c.validity[:, None], column.shape[1], axis=1)
    return np.ma.masked_array(column, mask=mask)
