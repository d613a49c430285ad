"""`tdbfs export` and `Array.export()`: cells (library/cell_batches.py) to CSV or Parquet, batch by batch,
so memory holds one batch (one row group for Parquet) whatever the array's size.

CSV is exactly `as_of/<T>/cells.csv` (views/cells_text.py makes both). Parquet keeps TileDB's types
(library/arrow_columns.py); batches are gathered into row groups, each written once full, and the file
appears under its name only once complete.
"""

from __future__ import annotations

import os
import sys

from ..views.cells_text import batch_csv_rows, source_header
from .cell_batches import Cells

FORMATS = {".csv": "csv", ".parquet": "parquet"}


class OutputError(Exception):
    """OUT cannot be written (its folder missing, OUT a folder): the message names OUT."""


def output_format(out) -> str:
    """'csv' or 'parquet' for OUT ('-': CSV on stdout); ValueError for any other name."""
    if out == "-":
        return "csv"
    for suffix, kind in FORMATS.items():
        if str(out).endswith(suffix):
            return kind
    raise ValueError(f"{out}: the output's name ends in .csv or .parquet (or is '-' for CSV on stdout)")


def export_cells(cells: Cells, out, overwrite: bool = False) -> int:
    """Write `cells` to `out` (a path ending in .csv or .parquet, or '-' for CSV on stdout); the number of
    cells written. FileExistsError when `out` exists and not `overwrite`; OutputError when it cannot be
    written."""
    kind = output_format(out)
    if kind == "parquet":
        from .arrow_columns import pyarrow
        pyarrow()   # the missing extra, said before anything is written
    if out == "-":   # a notebook's sys.stdout has no binary buffer: text then
        stream = getattr(sys.stdout, "buffer", None)
        return write_csv(cells, stream if stream is not None else _TextStream(sys.stdout))
    out = os.fspath(out)
    if os.path.lexists(out) and not overwrite:
        raise FileExistsError(f"{out}: exists (give --force to replace it)")
    tmp = os.path.join(os.path.dirname(out) or ".", f".{os.path.basename(out)}.tdbfs-{os.getpid()}")
    try:
        # a new file of its own (O_EXCL): never through a link someone left under that name
        f = os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666), "wb")
    except OSError as exc:
        raise OutputError(f"{out}: {exc.strerror or exc}") from None
    try:
        with f:
            n = write_csv(cells, f) if kind == "csv" else write_parquet(cells, f)
        try:
            os.replace(tmp, out)
        except OSError as exc:   # OUT a folder, ...
            raise OutputError(f"{out}: {exc.strerror or exc}") from None
    finally:
        if os.path.lexists(tmp):
            os.unlink(tmp)
    return n


class _TextStream:
    def __init__(self, text):
        self.text = text

    def write(self, data: bytes) -> None:
        self.text.write(data.decode("utf-8"))

    def flush(self) -> None:
        self.text.flush()


def write_csv(cells: Cells, stream) -> int:
    """The CSV text of `as_of/<T>/cells.csv` for `cells`, written batch by batch to a binary stream."""
    stream.write(source_header(cells.columns))
    n = 0
    for batch in cells.batches():
        stream.write(batch_csv_rows(batch, cells.fragment_names))
        n += len(batch)
    stream.flush()
    return n


#: cells gathered into one Parquet row group (fewer, larger groups compress better and read faster), and
#: the bytes of Arrow data that close a group sooner: what memory holds beyond one batch
ROW_GROUP_CELLS = 1 << 20
ROW_GROUP_BYTES = 64 << 20


def write_parquet(cells: Cells, stream) -> int:
    """Parquet of `cells`: TileDB's types, then `fragment` and `tile`; a row group per ROW_GROUP_CELLS
    cells (or ROW_GROUP_BYTES of data), written as the batches come."""
    from .arrow_columns import batch_schema, pyarrow, record_batch
    pa = pyarrow()
    schema = batch_schema(cells.columns)
    n = 0
    with pa.parquet.ParquetWriter(stream, schema) as writer:
        group, size = [], 0

        def flush():
            if group:
                writer.write_table(pa.Table.from_batches(group, schema=schema), row_group_size=ROW_GROUP_CELLS)
                group.clear()

        for batch in cells.batches():
            rb = record_batch(batch, cells.fragment_names, schema)
            if group and (size + rb.num_rows > ROW_GROUP_CELLS
                          or sum(b.nbytes for b in group) + rb.nbytes > ROW_GROUP_BYTES):
                flush()
                size = 0
            group.append(rb)
            size += rb.num_rows
            n += len(batch)
        flush()
    return n


def cells_table(cells: Cells):
    """Every cell as one pyarrow Table (the `[parquet]` extra)."""
    from .arrow_columns import batch_schema, pyarrow, record_batch
    pa = pyarrow()
    schema = batch_schema(cells.columns)
    return pa.Table.from_batches([record_batch(b, cells.fragment_names, schema) for b in cells.batches()],
                                 schema=schema)


def cells_columns(cells: Cells) -> dict:
    """Every cell as column name -> numpy values (without pyarrow): library/cells.column_values of each
    column, then `fragment` (the name, None for a fill cell) and `tile` (masked for a fill cell)."""
    import numpy as np

    from ..store.tile_columns import concat
    from .cells import column_values

    batches = list(cells.batches())
    out = {c.name: column_values(concat([c] + [b.columns[i] for b in batches]))
           for i, c in enumerate(cells.columns)}
    fragment = np.concatenate([np.zeros(0, np.int32)] + [b.fragment for b in batches])
    tile = np.concatenate([np.zeros(0, np.int64)] + [b.tile for b in batches])
    names = np.array(list(cells.fragment_names) + [None], dtype=object)
    out["fragment"] = names[fragment]   # NO_SOURCE (-1) picks the None at the end
    out["tile"] = np.ma.masked_array(tile, mask=tile < 0)
    return out
