"""The cells of a fragment as CSV: `cells/tile_K.csv` (one tile) and `cells.csv` (every tile, one header).

One row per cell: the coordinates by dimension name, every attribute by name (a nullable one followed by
`<name>.valid`, 1 or 0; the value of a null cell is an empty field), then what a consolidated fragment
adds per cell (`timestamp`, `delete_timestamp`, `delete_condition_index`). Strings, var-sized values and
cells of several values (space-separated) are always double-quoted, `"` doubled, as Python's csv module
writes them; numbers never are, so `grep ',486,'` finds a coordinate. Dense tiles show the cells inside
the fragment's non-empty domain, their coordinates computed from the tile's domain and the cell order
(store/dense_grid.py); the rest of a dense tile is padding TileDB never reads (tile_K.txt shows it).

Rows are built column by column with numpy; only strings and var-sized values are converted per cell.
"""

from __future__ import annotations

import bisect

from ..format import fragment_metadata as fm
from ..lazy import np
from ..store.dense_grid import cells_in_domain
from ..store.fragment_interface import DATA, VALIDITY, VAR, FragmentLike
from .common import guarded, guarded_children
from .nodes import FileNode, StaticDir, with_cost
from .render import _csv_cell, _numbers_as_text

#: the column of each field a consolidated fragment adds per cell
SPECIAL_COLUMNS = {fm.TIMESTAMPS: "timestamp", fm.DELETE_TIMESTAMPS: "delete_timestamp",
                   fm.DELETE_CONDITION_INDEX: "delete_condition_index"}


def cells_children(frag: FragmentLike, key, fixed: bool) -> dict:
    """`cells/` and `cells.csv` of a fragment folder."""
    t = frag.mtime()
    render_header = guarded(lambda: cells_header(frag), frag.problems, frag.rel, "cells")

    def tile_rows(k: int):
        render = guarded(lambda: cells_rows(frag, k), frag.problems, frag.rel, f"cells of tile {k}")
        return lambda: frag.store.cache.get_or_make(("cells", key, k), lambda: with_cost(render()))

    def tiles():
        return {f"tile_{k}.csv": ConcatFile(render_header, [tile_rows(k)], t, fixed)
                for k in range(frag.tile_count())}

    def all_tiles():
        return ConcatFile(render_header, [tile_rows(k) for k in range(frag.tile_count())], t, fixed)

    return {"cells": StaticDir(guarded_children(tiles, frag), immutable=fixed, mtime=t),
            "cells.csv": LazyFile(lambda: guarded_children(all_tiles, frag)(), t, fixed)}


class ConcatFile(FileNode):
    """A header, then parts each rendered on demand (kept in the store's cache); the size of each part is
    kept once known, so a stat renders every part once and a read only the parts it covers."""

    def __init__(self, header, parts: list, mtime: float, immutable: bool):
        self._header, self._parts, self._mtime, self.immutable = header, parts, mtime, immutable
        self._ends: list[int] | None = None   # where each part ends, after the header

    def mtime(self) -> float:
        return self._mtime

    def _layout(self) -> list[int]:
        if self._ends is not None:
            return self._ends
        ends, pos = [], len(self._header())
        for part in self._parts:
            pos += len(part())
            ends.append(pos)
        if self.immutable:   # a fragment still being written may change under the next stat
            self._ends = ends
        return ends

    def size(self) -> int:
        ends = self._layout()
        return ends[-1] if ends else len(self._header())

    def read(self, offset: int, size: int) -> bytes:
        ends = self._layout()
        header = self._header()
        out = [header[offset:offset + size]] if offset < len(header) else []
        i = bisect.bisect_right(ends, offset)
        end = offset + size
        while i < len(ends) and (ends[i - 1] if i else len(header)) < end:
            start = ends[i - 1] if i else len(header)
            data = self._parts[i]()
            out.append(data[max(0, offset - start):end - start])
            i += 1
        return b"".join(out)


class LazyFile(FileNode):
    """A file node made on first use (cells.csv: its parts are listed from the tile count, which the
    fragment folder's listing must not need)."""

    def __init__(self, make, mtime: float, immutable: bool):
        self._make, self._node, self._mtime, self.immutable = make, None, mtime, immutable

    def _get(self) -> FileNode:
        if self._node is None:
            self._node = self._make()
        return self._node

    def mtime(self) -> float:
        return self._mtime

    def size(self) -> int:
        return self._get().size()

    def read(self, offset: int, size: int) -> bytes:
        return self._get().read(offset, size)


# -- the table ---------------------------------------------------------------------------

#: rows turned into text at a time: bounds the Python strings alive at once (~60 bytes each) for big tiles
ROWS_PER_BATCH = 1 << 16


def _columns(frag: FragmentLike) -> tuple[list, list, list]:
    """(dimension names, attribute fields, special fields) of the fragment, in the order of the columns."""
    fields = frag.stored_fields()
    dims = [name for name, _ in frag.dimensions()]
    attrs = [f for f in fields if f.kind == fm.ATTRIBUTE]
    specials = [f for f in fields if f.kind in SPECIAL_COLUMNS]
    return dims, attrs, specials


def cells_header(frag: FragmentLike) -> bytes:
    dims, attrs, specials = _columns(frag)
    header = list(dims)
    for f in attrs:
        header += [f.name, f"{f.name}.valid"] if f.nullable else [f.name]
    header += [SPECIAL_COLUMNS[f.kind] for f in specials]
    return (",".join(_csv_cell(h) for h in header) + "\n").encode("utf-8")


def cells_rows(frag: FragmentLike, k: int) -> bytes:
    """The rows of tile k, without the header."""
    _, attrs, specials = _columns(frag)
    if frag.dense:
        coords, rows = cells_in_domain(frag, k)   # the cells of the tile in the non-empty domain
        columns = [_Numbers(c, 1) for c in coords]
    else:
        columns = _sparse_coordinates(frag, k)
        rows = None
    for f in attrs:
        columns += _field_columns(frag, f, k)
    for f in specials:
        columns += _field_columns(frag, f, k)
    counts = {len(c) for c in columns}
    if len(counts) != 1:
        raise ValueError(f"tile {k}: its fields hold {sorted(counts)} cells")
    if rows is None:
        rows = np.arange(counts.pop())
    out = []
    for start in range(0, len(rows), ROWS_PER_BATCH):
        batch = rows[start:start + ROWS_PER_BATCH]
        text = "\n".join(map(",".join, zip(*(c.text(batch) for c in columns)))) + "\n"
        out.append(text.encode("utf-8"))
    return b"".join(out)


def _sparse_coordinates(frag: FragmentLike, k: int) -> list:
    fields = frag.stored_fields()
    coords = next((f for f in fields if f.kind == fm.COORDS), None)
    if coords is not None:   # formats 1-4 and 0.x: every dimension in one file
        return [_Numbers(frag.coords_column(coords, k, j), 1) for j in range(len(frag.dimensions()))]
    return [c for f in fields if f.kind == fm.DIMENSION for c in _field_columns(frag, f, k)]


def _field_columns(frag: FragmentLike, field, k: int) -> list:
    """The column of one field in tile k, and its `.valid` column when it is nullable."""
    dt = field.datatype
    data = frag.tile(field, k, DATA).data
    if field.var_sized:
        offsets = np.frombuffer(data, "<u8").astype(np.int64) - frag.var_base(field, k)
        column = _VarCells(offsets, bytes(frag.tile(field, k, VAR).data), dt)
    elif dt.is_string:
        width = field.cell_val_num * dt.size
        column = _FixedStrings(bytes(data[:len(data) - len(data) % width]), width)
    else:
        column = _Numbers(np.frombuffer(data[: len(data) - len(data) % dt.size], dt.dtype), field.cell_val_num)
    if not field.nullable:
        return [column]
    validity = np.frombuffer(frag.tile(field, k, VALIDITY).data, np.uint8) != 0
    if len(validity) != len(column):
        raise ValueError(f"{field.stem}: tile {k} has {len(validity)} validity bytes for {len(column)} cells")
    return [_Nullable(column, validity), _Validity(validity)]


def _quoted(texts) -> list[str]:
    return ['"' + s.replace('"', '""') + '"' for s in texts]


class _Numbers:
    """Fixed cells of numbers: one number plain, several space-separated and quoted."""

    def __init__(self, values: np.ndarray, per_cell: int):
        n = len(values) // max(per_cell, 1)
        self._values = values[:n * per_cell].reshape(n, per_cell) if per_cell > 1 else values
        self._several = per_cell > 1

    def __len__(self) -> int:
        return len(self._values)

    def text(self, rows: np.ndarray) -> list[str]:
        text = _numbers_as_text(self._values[rows])
        return _quoted(" ".join(r) for r in text.tolist()) if self._several else text.tolist()


class _FixedStrings:
    """Fixed-size strings, without the NULs that pad them (as tiledb-py returns them, and so that grep
    does not take the file for binary)."""

    def __init__(self, raw: bytes, width: int):
        self._raw, self._width = raw, width

    def __len__(self) -> int:
        return len(self._raw) // self._width

    def text(self, rows: np.ndarray) -> list[str]:
        raw, w = self._raw, self._width
        cells = (raw[i * w:(i + 1) * w].rstrip(b"\0") for i in rows.tolist())
        return _quoted(c.decode("utf-8", "backslashreplace") for c in cells)


class _VarCells:
    """Var-sized cells: strings as text, numbers space-separated; always quoted."""

    def __init__(self, offsets: np.ndarray, data: bytes, dt):
        ends = np.append(offsets[1:], len(data)) if len(offsets) else offsets
        if len(offsets) and (offsets.min() < 0 or (ends < offsets).any() or ends.max() > len(data)):
            raise ValueError(f"var offsets do not lie in order within the {len(data)} bytes of values")
        self._starts, self._ends, self._data, self._dt = offsets, ends, data, dt

    def __len__(self) -> int:
        return len(self._starts)

    def text(self, rows: np.ndarray) -> list[str]:
        data, dt = self._data, self._dt
        spans = zip(self._starts[rows].tolist(), self._ends[rows].tolist())
        if dt.is_string and dt.size == 1:
            return _quoted(data[s:e].decode("utf-8", "backslashreplace") for s, e in spans)
        w = dt.size
        return _quoted(" ".join(_numbers_as_text(np.frombuffer(data[s:e - (e - s) % w], dt.dtype)).tolist())
                       for s, e in spans)


class _Nullable:
    """A nullable field's values: an empty field where the cell is null."""

    def __init__(self, column, valid: np.ndarray):
        self._column, self._valid = column, valid

    def __len__(self) -> int:
        return len(self._column)

    def text(self, rows: np.ndarray) -> list[str]:
        return np.where(self._valid[rows], np.array(self._column.text(rows), dtype=object), "").tolist()


class _Validity:
    def __init__(self, valid: np.ndarray):
        self._valid = valid

    def __len__(self) -> int:
        return len(self._valid)

    def text(self, rows: np.ndarray) -> list[str]:
        return np.where(self._valid[rows], "1", "0").tolist()
