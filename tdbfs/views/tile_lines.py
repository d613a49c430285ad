"""A field's `tile_K.txt` (one JSON-ish value per line, views/render.py) a range of cells at a time, as a
part of a PiecewiseFile (views/csv_table.py): a tile of millions of cells is then shown, and sized, in
pieces of bounded memory. Each line depends on its own cell only, so the pieces' bytes joined are the
whole tile's text."""

from __future__ import annotations

from ..format import fragment_metadata as fm
from ..lazy import np
from ..store.fragment_interface import DATA, VALIDITY, VAR, FragmentLike
from ..store.tile_columns import Column
from .cells_text import _assemble, _field_lengths, _fields
from .render import fixed_cells_text, var_cells_text


class TileLines:
    """Tile k of `field` as lines of text (fragment_views.tile_text, which renders it whole)."""

    def __init__(self, frag: FragmentLike, field, k: int):
        dt = field.datatype
        self._field, self._dt = field, dt
        data = frag.tile(field, k, DATA).data
        validity = None
        if field.nullable:
            validity = np.frombuffer(frag.tile(field, k, VALIDITY).data, np.uint8)
        if field.kind == fm.COORDS:   # one line per cell, [d0, d1, ...], whichever way the tile stores them
            ndims = len(frag.dimensions())
            cols = [frag.coords_column(field, k, j) for j in range(ndims)]
            self._values = np.stack(cols, axis=1).reshape(-1) if cols else np.array([])
            self._per_cell, validity = max(ndims, 1), None
        elif field.var_sized:
            self._offsets = np.frombuffer(data, "<u8").astype(np.int64) - frag.var_base(field, k)
            self._data = frag.tile(field, k, VAR).data
            self.rows = len(self._offsets)
            self._validity = validity
            return
        else:
            self._values = np.frombuffer(data[: len(data) - len(data) % dt.size], dt.dtype)
            self._per_cell = max(field.cell_val_num, 1)
        self._offsets = None
        self.rows = len(self._values) // self._per_cell
        # the whole tile's text marks nulls only when the validity has one byte per line
        self._validity = validity if validity is not None and len(validity) == self.rows else None

    def _simple(self) -> bool:
        return (self._offsets is None and self._per_cell == 1 and self._field.kind != fm.COORDS
                and not self._dt.is_string and self._validity is None)

    def render(self, start: int, stop: int) -> bytes:
        if self._offsets is not None:
            end = int(self._offsets[stop]) if stop < self.rows else len(self._data)
            validity = None if self._validity is None else self._validity[start:]
            return var_cells_text(self._offsets[start:stop], self._data, self._dt.dtype, self._dt.is_string,
                                  validity, end=end)
        if self._simple():
            return _assemble(_fields(self._column(start, stop)), stop - start)
        validity = None if self._validity is None else self._validity[start:stop]
        return fixed_cells_text(self._values[start * self._per_cell:stop * self._per_cell], self._per_cell,
                                self._dt.is_string, validity)

    def measure(self, start: int, stop: int) -> int:
        if self._simple():
            return int(_field_lengths(self._column(start, stop))[0].sum()) + (stop - start)
        return len(self.render(start, stop))

    def _column(self, start: int, stop: int) -> Column:
        return Column(self._field.name, "", self._dt, 1, self._values[start:stop])
