"""A fragment's cells as numpy columns: the rows of cells.csv (views/cells_views.py), as values."""

from __future__ import annotations

from ..format import fragment_metadata as fm
from ..store.dense_grid import cells_in_domain
from ..store.fragment_interface import DATA, VALIDITY, VAR
from ..views.cells_views import SPECIAL_COLUMNS


def fragment_cells(frag, tile: int | None = None) -> dict:
    """Column name -> values of tile `tile` (every tile, in order, when None); see Fragment.cells."""
    import numpy as np

    tiles = range(frag.tile_count()) if tile is None else [_tile_index(frag, tile)]
    parts = [_tile_columns(frag, k) for k in tiles]
    names = _names(frag)
    if not parts:
        return {name: np.empty(0) for name in names}
    out = {}
    for i, name in enumerate(names):
        pieces = [p[i] for p in parts]
        out[name] = pieces[0] if len(pieces) == 1 else _concatenate(pieces)
    return out


def _tile_index(frag, k: int) -> int:
    n = frag.tile_count()
    if not -n <= k < n:
        raise IndexError(f"{frag.name}: tile {k} of {n}")
    return k % n


def _names(frag) -> list[str]:
    fields = frag.stored_fields()
    return ([name for name, _ in frag.dimensions()] + [f.name for f in fields if f.kind == fm.ATTRIBUTE]
            + [SPECIAL_COLUMNS[f.kind] for f in fields if f.kind in SPECIAL_COLUMNS])


def _concatenate(pieces):
    import numpy as np

    if any(isinstance(p, np.ma.MaskedArray) for p in pieces):
        return np.ma.concatenate(pieces)
    return np.concatenate(pieces)


def _tile_columns(frag, k: int) -> list:
    """The columns of tile k in the order of _names, rows as cells_rows renders them."""
    fields = frag.stored_fields()
    attrs = [f for f in fields if f.kind == fm.ATTRIBUTE]
    specials = [f for f in fields if f.kind in SPECIAL_COLUMNS]
    rows = None
    if frag.dense:
        coords, rows = cells_in_domain(frag, k)   # the cells of the tile in the non-empty domain, as cells.csv
        columns = list(coords)
    else:
        coords_field = next((f for f in fields if f.kind == fm.COORDS), None)
        if coords_field is not None:   # formats 1-4 and 0.x: every dimension in one file
            columns = [frag.coords_column(coords_field, k, j) for j in range(len(frag.dimensions()))]
        else:
            columns = [_field_column(frag, f, k) for f in fields if f.kind == fm.DIMENSION]
    columns += [_field_column(frag, f, k) for f in attrs + specials]
    counts = {len(c) for c in columns}
    if len(counts) != 1:
        raise ValueError(f"{frag.rel}: tile {k}: its fields hold {sorted(counts)} cells")
    if rows is not None:
        columns = [c[rows] for c in columns]
    return columns


def _field_column(frag, field, k: int):
    import numpy as np

    dt = field.datatype
    data = bytes(frag.tile(field, k, DATA).data)
    if field.var_sized:
        offsets = np.frombuffer(data, "<u8").astype(np.int64) - frag.var_base(field, k)
        values = bytes(frag.tile(field, k, VAR).data)
        ends = np.append(offsets[1:], len(values)) if len(offsets) else offsets
        if len(offsets) and (offsets.min() < 0 or (ends < offsets).any() or ends.max() > len(values)):
            raise ValueError(f"{field.stem}: tile {k}: var offsets do not lie in order within "
                             f"the {len(values)} bytes of values")
        column = np.empty(len(offsets), object)
        for i, (s, e) in enumerate(zip(offsets.tolist(), ends.tolist())):
            if dt.is_string and dt.size == 1:
                column[i] = values[s:e].decode("utf-8", "backslashreplace")
            else:
                column[i] = np.frombuffer(values[s:e - (e - s) % dt.size], dt.dtype)
    elif dt.is_string:
        width = field.cell_val_num * dt.size
        column = np.array([data[i:i + width].rstrip(b"\0").decode("utf-8", "backslashreplace")
                           for i in range(0, len(data) - len(data) % width, width)], dtype=object)
    else:
        values = np.frombuffer(data[: len(data) - len(data) % dt.size], dt.dtype)
        n = field.cell_val_num
        column = values[: len(values) // n * n].reshape(-1, n) if n > 1 else values
    if not field.nullable:
        return column
    valid = np.frombuffer(bytes(frag.tile(field, k, VALIDITY).data), np.uint8) != 0
    if len(valid) != len(column):
        raise ValueError(f"{field.stem}: tile {k} has {len(valid)} validity bytes for {len(column)} cells")
    mask = ~valid if column.ndim == 1 else np.repeat(~valid[:, None], column.shape[1], axis=1)
    return np.ma.masked_array(column, mask=mask)
