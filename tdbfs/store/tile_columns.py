"""One tile's cells as raw numpy columns, in the order `cells.csv` shows them (docs/VIEWS: the coordinates by
dimension name, the attributes by name, then what a consolidated fragment adds per cell).

This is what every table of cells builds on: the CSV views (views/cells_text.py), the library's values
(library/cells.py), the reader of what TileDB returns at a time (reader/), export and salvage. A column
keeps the stored bytes exactly (fixed strings with their NUL padding, NaN payloads, the bytes of null
cells), so a rewrite can hand them back to TileDB unchanged; text and typed values are made from it.
Dense tiles give the cells inside the fragment's non-empty domain, their coordinates computed from the
tile's domain and the cell order (store/dense_grid.py); the rest of a dense tile is padding no reader sees.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..format import fragment_metadata as fm
from ..lazy import np
from .dense_grid import cells_in_domain
from .fragment_interface import DATA, VALIDITY, VAR, FragmentLike

#: kinds of column
DIMENSION, ATTRIBUTE, SPECIAL = "dimension", "attribute", "special"

#: the column of each field a consolidated fragment adds per cell
SPECIAL_COLUMNS = {fm.TIMESTAMPS: "timestamp", fm.DELETE_TIMESTAMPS: "delete_timestamp",
                   fm.DELETE_CONDITION_INDEX: "delete_condition_index"}


@dataclass(frozen=True, eq=False)
class Column:
    """The cells of one field.

    - fixed numbers: `values` of the datatype's dtype, shape (n,) or (n, per_cell);
    - fixed strings: `values` of numpy dtype `S<width>` (width = per_cell x the character size), shape (n,);
    - var-sized: `values` the uint8 bytes of every cell in turn, `offsets` n + 1 int64 byte offsets into them;
    - nullable: `validity` a bool per cell (the value of a null cell is whatever bytes were stored).
    """
    name: str
    kind: str
    datatype: object          # format.datatypes.Datatype
    per_cell: int             # values per cell of a fixed field; 1 for a var-sized one
    values: np.ndarray
    offsets: np.ndarray | None = None
    validity: np.ndarray | None = None

    @property
    def var_sized(self) -> bool:
        return self.offsets is not None

    @property
    def nullable(self) -> bool:
        return self.validity is not None

    def __len__(self) -> int:
        return len(self.offsets) - 1 if self.offsets is not None else len(self.values)

    def cell_bytes(self, i: int) -> bytes:
        """The stored bytes of cell i (var-sized or fixed)."""
        if self.offsets is not None:
            return self.values[self.offsets[i]:self.offsets[i + 1]].tobytes()
        return self.values[i].tobytes()

    def take(self, rows: np.ndarray) -> "Column":
        """The cells at positions `rows` (any order, repeats allowed)."""
        rows = np.asarray(rows, np.int64)
        validity = None if self.validity is None else self.validity[rows]
        if self.offsets is None:
            return Column(self.name, self.kind, self.datatype, self.per_cell, self.values[rows], None, validity)
        starts, ends = self.offsets[rows], self.offsets[rows + 1]
        lengths = ends - starts
        offsets = np.zeros(len(rows) + 1, np.int64)
        np.cumsum(lengths, out=offsets[1:])
        index = np.repeat(starts - offsets[:-1], lengths) + np.arange(offsets[-1], dtype=np.int64)
        return Column(self.name, self.kind, self.datatype, self.per_cell, self.values[index], offsets, validity)

    def slice(self, start: int, stop: int) -> "Column":
        """Cells start..stop-1, without copying fixed values."""
        validity = None if self.validity is None else self.validity[start:stop]
        if self.offsets is None:
            return Column(self.name, self.kind, self.datatype, self.per_cell, self.values[start:stop], None, validity)
        lo, hi = int(self.offsets[start]), int(self.offsets[stop])
        return Column(self.name, self.kind, self.datatype, self.per_cell, self.values[lo:hi],
                      self.offsets[start:stop + 1] - lo, validity)


def concat(columns: list[Column]) -> Column:
    """The cells of several columns of one field, one after another."""
    first = columns[0]
    if len(columns) == 1:
        return first
    validity = None if first.validity is None else np.concatenate([c.validity for c in columns])
    values = np.concatenate([c.values for c in columns])
    if first.offsets is None:
        return Column(first.name, first.kind, first.datatype, first.per_cell, values, None, validity)
    bases = np.cumsum([0] + [len(c.values) for c in columns[:-1]])
    offsets = np.concatenate([c.offsets[:-1] + b for c, b in zip(columns, bases)] + [[len(values)]]).astype(np.int64)
    return Column(first.name, first.kind, first.datatype, first.per_cell, values, offsets, validity)


def column_fields(frag: FragmentLike) -> tuple[list, list, list]:
    """(dimension names, attribute fields, special fields) of the fragment, in the order of the columns."""
    fields = frag.stored_fields()
    dims = [name for name, _ in frag.dimensions()]
    attrs = [f for f in fields if f.kind == fm.ATTRIBUTE]
    specials = [f for f in fields if f.kind in SPECIAL_COLUMNS]
    return dims, attrs, specials


def column_names(frag: FragmentLike) -> list[str]:
    dims, attrs, specials = column_fields(frag)
    return dims + [f.name for f in attrs] + [SPECIAL_COLUMNS[f.kind] for f in specials]


def tile_columns(frag: FragmentLike, k: int, fields=None) -> list[Column]:
    """Tile k's columns (in `column_names` order; only the attributes/specials in `fields` when given).

    ValueError when the tile's fields disagree on their cell count, or offsets or validity bytes do not fit."""
    _, attrs, specials = column_fields(frag)
    if fields is not None:
        wanted = {f.name for f in fields}
        attrs = [f for f in attrs if f.name in wanted]
        specials = [f for f in specials if f.name in wanted]
    rows = None
    if frag.dense:
        coords, rows = cells_in_domain(frag, k)   # the cells of the tile in the non-empty domain
        columns = [Column(name, DIMENSION, dt, 1, c) for (name, dt), c in zip(frag.dimensions(), coords)]
    else:
        columns = _sparse_coordinates(frag, k)
    columns += _stored(frag, k, attrs, specials)
    counts = {len(c) for c in columns}
    if len(counts) > 1:
        raise ValueError(f"tile {k}: its fields hold {sorted(counts)} cells")
    if rows is not None:
        columns = [c.take(rows) for c in columns]
    return columns


def stored_columns(frag: FragmentLike, k: int) -> list[Column]:
    """Tile k's attribute and special columns as stored: every cell the tile holds (all of a dense tile,
    the padding outside the non-empty domain included), with no coordinates."""
    _, attrs, specials = column_fields(frag)
    return _stored(frag, k, attrs, specials)


def _stored(frag: FragmentLike, k: int, attrs, specials) -> list[Column]:
    return ([_field_column(frag, f, k, ATTRIBUTE) for f in attrs]
            + [_field_column(frag, f, k, SPECIAL) for f in specials])


def _sparse_coordinates(frag: FragmentLike, k: int) -> list[Column]:
    fields = frag.stored_fields()
    coords = next((f for f in fields if f.kind == fm.COORDS), None)
    if coords is not None:   # formats 1-4 and 0.x: every dimension in one file
        return [Column(name, DIMENSION, dt, 1, frag.coords_column(coords, k, j))
                for j, (name, dt) in enumerate(frag.dimensions())]
    return [_field_column(frag, f, k, DIMENSION) for f in fields if f.kind == fm.DIMENSION]


def _field_column(frag: FragmentLike, field, k: int, kind: str) -> Column:
    dt = field.datatype
    name = SPECIAL_COLUMNS.get(field.kind, field.name)
    data = frag.tile(field, k, DATA).data
    if field.var_sized:
        values = np.frombuffer(frag.tile(field, k, VAR).data, np.uint8)
        starts = np.frombuffer(data[:len(data) - len(data) % 8], "<u8").astype(np.int64) - frag.var_base(field, k)
        offsets = np.append(starts, len(values)).astype(np.int64)
        if len(starts) and (starts.min() < 0 or (np.diff(offsets) < 0).any()):
            raise ValueError(f"{field.stem}: tile {k}: var offsets do not lie in order within the "
                             f"{len(values)} bytes of values")
        column = Column(name, kind, dt, 1, values, offsets)
    elif dt.is_string:
        width = field.cell_val_num * dt.size
        column = Column(name, kind, dt, field.cell_val_num,
                        np.frombuffer(data[:len(data) - len(data) % width], f"S{width}"))
    else:
        values = np.frombuffer(data[:len(data) - len(data) % dt.size], dt.dtype)
        n = field.cell_val_num
        column = Column(name, kind, dt, n, values[:len(values) // n * n].reshape(-1, n) if n > 1 else values)
    if not field.nullable:
        return column
    validity = np.frombuffer(frag.tile(field, k, VALIDITY).data, np.uint8) != 0
    if len(validity) != len(column):
        raise ValueError(f"{field.stem}: tile {k} has {len(validity)} validity bytes for {len(column)} cells")
    return Column(column.name, kind, dt, column.per_cell, column.values, column.offsets, validity)
