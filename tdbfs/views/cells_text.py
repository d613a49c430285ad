"""Columns of cells (store/tile_columns.py) as CSV text: the rows of every cells table of the tree
(a fragment's `cells.csv` and `cells/tile_K.csv`, the cells TileDB returns under `as_of/<T>/`) and of
`tdbfs export` to CSV.

A nullable field is followed by `<name>.valid` (1 or 0; the value of a null cell is an empty field).
Strings, var-sized values and cells of several values (space-separated) are always double-quoted, `"`
doubled, as Python's csv module writes them; numbers never are, so `grep ',486,'` finds a coordinate.
Fixed strings are shown without the NULs that pad them (as tiledb-py returns them, and so that grep does
not take the file for binary).

Rows are built column by column with numpy; only strings and var-sized values are converted per cell.
"""

from __future__ import annotations

from ..lazy import np
from .render import _csv_cell, _numbers_as_text

#: rows turned into text at a time: bounds the Python strings alive at once (~60 bytes each) for big tiles
ROWS_PER_BATCH = 1 << 16


def header_names(columns) -> list[str]:
    """The CSV header of columns (a nullable one adds `<name>.valid`)."""
    names = []
    for c in columns:
        names += [c.name, f"{c.name}.valid"] if c.validity is not None else [c.name]
    return names


def csv_header(names: list[str]) -> bytes:
    return (",".join(_csv_cell(h) for h in names) + "\n").encode("utf-8")


def csv_rows(columns) -> bytes:
    """The rows of columns of equal length, without the header."""
    if not columns:
        return b""
    return _rows(columns, len(columns[0]), lambda start, stop: [])


def source_header(columns) -> bytes:
    """The header of the cells a read returns (`as_of/<T>/cells.csv`, `tdbfs export`): the columns', then
    `fragment` and `tile`."""
    return csv_header(header_names(columns) + ["fragment", "tile"])


def batch_csv_rows(batch, fragment_names) -> bytes:
    """The rows of a reader.batch.CellBatch: its columns, then the name of the fragment each value comes
    from (a string, so quoted) and the tile; both empty for a cell no fragment wrote (a dense fill value)."""
    names = np.array(['"' + name.replace('"', '""') + '"' for name in fragment_names] + [""], dtype=object)

    def source(start, stop):
        tiles = batch.tile[start:stop]
        return [names[batch.fragment[start:stop]].tolist(),   # NO_SOURCE (-1) picks the "" at the end
                np.where(tiles >= 0, tiles.astype(str), "").tolist()]
    return _rows(batch.columns, len(batch), source)


def _rows(columns, n: int, more) -> bytes:
    """Rows of `columns`, then the fields `more(start, stop)` gives for each run of rows."""
    out = []
    for start in range(0, n, ROWS_PER_BATCH):
        stop = min(n, start + ROWS_PER_BATCH)
        texts = []
        for c in columns:
            texts += column_text(c.slice(start, stop))
        texts += more(start, stop)
        out.append(("\n".join(map(",".join, zip(*texts))) + "\n").encode("utf-8"))
    return b"".join(out)


def column_text(c) -> list[list[str]]:
    """The CSV fields of one column: [values] or, nullable, [values, valid]."""
    if c.offsets is not None:
        text = _var_text(c)
    elif c.values.dtype.kind == "S":
        text = _quoted(v.decode("utf-8", "backslashreplace") for v in c.values.tolist())
    elif c.values.ndim > 1:
        text = _quoted(" ".join(r) for r in _numbers_as_text(c.values).tolist())
    else:
        text = _numbers_as_text(c.values).tolist()
    if c.validity is None:
        return [text]
    valid = c.validity
    return [np.where(valid, np.array(text, dtype=object), "").tolist(), np.where(valid, "1", "0").tolist()]


def _var_text(c) -> list[str]:
    data, dt = c.values.tobytes(), c.datatype
    spans = zip(c.offsets[:-1].tolist(), c.offsets[1:].tolist())
    if dt.is_string and dt.size == 1:
        return _quoted(data[s:e].decode("utf-8", "backslashreplace") for s, e in spans)
    w = dt.size
    return _quoted(" ".join(_numbers_as_text(np.frombuffer(data[s:e - (e - s) % w], dt.dtype)).tolist())
                   for s, e in spans)


def _quoted(texts) -> list[str]:
    return ['"' + s.replace('"', '""') + '"' for s in texts]
