"""The cells an export or `Array.cells()` takes, as a stream of reader.batch.CellBatch: what a TileDB read
of the array opened at T returns (the reader, tdbfs/reader/), or one fragment's cells as stored.

A `Cells` also knows its columns when no cell comes (empty ones, for the CSV header and the Arrow
schema), and the names its batches' `fragment` indices stand for.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from collections.abc import Callable, Iterator

from ..lazy import np
from ..reader.batch import CellBatch
from ..store.tile_columns import ATTRIBUTE, DIMENSION, SPECIAL, SPECIAL_COLUMNS, Column, column_fields, tile_columns


class CellsError(ValueError):
    """A request that cannot be met as given (no such fragment, a bad subarray): one line for the user."""


@dataclass(frozen=True)
class Cells:
    """`columns`: empty columns in the batches' order; `fragment_names`: what a batch's fragment index
    names; `batches()`: a new stream of the cells, in order."""
    columns: list
    fragment_names: list
    batches: Callable[[], Iterator[CellBatch]]


def fragment_cells(store, name: str, subarray=None) -> Cells:
    """The cells fragment `name` (its folder name or relative path) stores, tile by tile, each from its
    tile; `subarray` (reader.subarray.parse_subarray's result) keeps those inside it."""
    paths = store.fragment_paths()
    rel = next((p for p in paths if p == name or posixpath.basename(p) == name.rstrip("/")), None)
    if rel is None:
        raise CellsError(f"no fragment {name!r} (see 'fragments/')")
    frag = store.fragment(rel)
    if isinstance(subarray, str):   # typed by the fragment's own dimensions (a 0.x schema names them only)
        from ..reader.subarray import parse_subarray
        subarray = parse_subarray(subarray, _Dimensions([_Dimension(n, dt) for n, dt in frag.dimensions()]))

    def batches():
        for k in range(frag.tile_count()):
            try:
                columns = tile_columns(frag, k)
            except ValueError as exc:
                raise ValueError(f"{frag.rel}: {exc}") from None
            n = len(columns[0]) if columns else 0
            batch = CellBatch(columns, np.zeros(n, np.int32), np.full(n, k, np.int64))
            if subarray is not None:
                batch = _inside(batch, subarray)
            if len(batch):
                yield batch

    return Cells(_fragment_columns(frag), [posixpath.basename(rel)], batches)


@dataclass(frozen=True)
class _Dimension:
    name: str
    datatype: object


@dataclass(frozen=True)
class _Dimensions:
    """What reader.subarray.parse_subarray reads of a schema."""
    dimensions: list


def _fragment_columns(frag) -> list:
    _, attrs, specials = column_fields(frag)
    columns = [_empty(name, DIMENSION, dt, 1, dt.is_string, False) for name, dt in frag.dimensions()]
    columns += [_empty(f.name, ATTRIBUTE, f.datatype, f.cell_val_num, f.var_sized, f.nullable) for f in attrs]
    columns += [_empty(SPECIAL_COLUMNS[f.kind], SPECIAL, f.datatype, 1, False, False) for f in specials]
    return columns


def schema_columns(schema) -> list:
    """Empty columns of the dimensions and attributes of `schema` (format.schema.ArraySchema)."""
    var = 0xFFFFFFFF
    columns = [_empty(d.name, DIMENSION, d.datatype, 1, d.cell_val_num == var or d.datatype.is_string, False)
               for d in schema.dimensions]
    columns += [_empty(a.name, ATTRIBUTE, a.datatype, a.cell_val_num, a.cell_val_num == var, a.nullable)
                for a in schema.attributes]
    return columns


def _empty(name, kind, dt, per_cell, var_sized, nullable) -> Column:
    validity = np.zeros(0, bool) if nullable else None
    if var_sized:
        return Column(name, kind, dt, 1, np.zeros(0, np.uint8), np.zeros(1, np.int64), validity)
    if dt.is_string:
        return Column(name, kind, dt, per_cell, np.zeros(0, f"S{per_cell * dt.size}"), None, validity)
    shape = (0, per_cell) if per_cell > 1 else (0,)
    return Column(name, kind, dt, per_cell, np.zeros(shape, dt.dtype), None, validity)


def _inside(batch: CellBatch, subarray) -> CellBatch:
    """The cells of `batch` whose coordinates lie in `subarray` (per dimension a tuple of inclusive ranges,
    None for every value; a string range's missing end is open)."""
    keep = np.ones(len(batch), bool)
    dims = [c for c in batch.columns if c.kind == DIMENSION]
    for column, ranges in zip(dims, subarray):
        if ranges is None:
            continue
        if column.var_sized:   # string dimensions: compared as bytes, as TileDB orders them
            values = _strings(column)
        else:
            values = column.values
        hit = np.zeros(len(batch), bool)
        for lo, hi in ranges:
            inside = np.ones(len(batch), bool)
            if lo is not None:
                inside &= values >= lo
            if hi is not None:
                inside &= values <= hi
            hit |= inside
        keep &= hit
    if keep.all():
        return batch
    rows = np.flatnonzero(keep)
    return CellBatch([c.take(rows) for c in batch.columns], batch.fragment[rows], batch.tile[rows])


#: the longest string a string dimension's cells are compared as numpy `S` values; longer, one by one
WIDEST_FIXED = 4096


def _strings(column):
    """A var-sized column's cells as numpy `S` values (NUL-padded to the longest), or as bytes objects when
    one is longer than WIDEST_FIXED or ends in a NUL (which `S` values would not tell from padding)."""
    lengths = np.diff(column.offsets)
    n = len(lengths)
    widest = int(lengths.max()) if n else 0
    ends = column.offsets[1:] - 1
    if widest > WIDEST_FIXED or (n and (column.values[ends[lengths > 0]] == 0).any()):
        return np.array([column.cell_bytes(i) for i in range(n)], dtype=object)
    grid = np.zeros((n, max(widest, 1)), np.uint8)
    rows = np.repeat(np.arange(n), lengths)
    grid[rows, np.arange(len(rows)) - np.repeat(column.offsets[:-1] - column.offsets[0], lengths)] = \
        column.values[column.offsets[0]:column.offsets[-1]]
    return grid.view(f"S{max(widest, 1)}").ravel()


def select_cells(store, as_of=None, subarray=None, fragment=None) -> Cells:
    """The cells of a read: at `as_of` (ms; None: now) what TileDB returns (reader.read_cells), or with
    `fragment` that fragment's stored cells; `subarray`: text as `as_of/<T>/cells/<subarray>.csv` names it
    (reader/subarray.py), or parse_subarray's result. CellsError for a request that cannot be met as
    given; reader.ReadError when TileDB would refuse the read."""
    from ..reader.subarray import SubarrayError, parse_subarray
    from ..store.array_store import ArrayStore

    if not isinstance(store, ArrayStore):
        raise CellsError(f"{store.path}: a group or workspace holds no cells of its own: export one of its arrays "
                         "(members/<name>/ in its tree)")
    if fragment is not None and as_of is not None:
        raise CellsError("a fragment's cells are the same at every time: give a fragment or a time, not both")
    legacy = store.legacy0x_layout is not None
    if legacy and fragment is None:
        raise CellsError(f"{store.path}: a TileDB 0.x array: what a read returns is computed for TileDB 2 "
                         "arrays only; --fragment NAME exports one fragment's cells")
    try:
        if fragment is not None:
            return fragment_cells(store, fragment, subarray)
        from ..reader import read_cells
        read = read_cells(store, as_of, subarray)
    except SubarrayError as exc:
        raise CellsError(f"--subarray {exc}") from None
    return Cells(schema_columns(read.schema), read.fragment_names, read.batches)
