"""`as_of/<T>/cells.csv` and `as_of/<T>/cells/<subarray>.csv`: the cells a TileDB read of the array
opened at T returns (tdbfs/reader), one row each: the dimensions, the attributes by name, then `fragment`
(the name of the fragment the values come from) and `tile` (its tile); both empty for a dense cell no
fragment wrote (the fill value). The subarray is typed as reader/subarray.py reads it; the folder lists
nothing.

The read streams: the file's size is known after one pass that measures each batch's rows without
making their text (cells_text.batch_rows_size) and keeps only their lengths; a read
renders the batches it covers, from a cursor kept on the read (reading on from where the last read
stopped continues it; a read further back starts the read again), so memory holds one batch of text and
the reader's bounded state, whatever the size of the array.
"""

from __future__ import annotations

import bisect
import threading
from collections import OrderedDict

from . import cells_text
from .cells_text import csv_header
from .common import KeyedDir
from .nodes import FileNode, ViewError

#: subarray files of one time kept with their layout
SUBARRAYS_KEPT = 16
#: rendered batches kept per file (a read spanning two batches renders neither twice)
BATCHES_KEPT = 2


def cells_children(store, at, state) -> dict:
    """`cells.csv` and `cells/` of `as_of/<T>/`; `at()` gives T (ms), `state()` the key of the files that
    decide what a reader at T sees (as_of_views.moment_state)."""
    from ..reader import read_cells
    from ..reader.subarray import SubarrayError, parse_subarray
    from ..store.as_of import schema_as_of

    def subarray_of(name: str):
        if not name.endswith(".csv"):
            return None
        rel = schema_as_of(store, at())
        if rel is None:
            return None
        try:
            return parse_subarray(name[:-4], store.schema(rel))
        except SubarrayError:   # a name that is no subarray is not there
            return None
        except Exception:  # noqa: BLE001 -- a schema that does not decode: its own problem says why
            return None

    def file_for(name: str):
        return CellsFile(lambda: read_cells(store, at(), subarray_of(name)), state, store)

    subarrays = KeyedDir(lambda: [], file_for, mtime=lambda: store.mtime(""),
                         exists=lambda name: subarray_of(name) is not None, mode=FileNode.mode, keep=SUBARRAYS_KEPT)
    return {"cells.csv": CellsFile(lambda: read_cells(store, at()), state, store), "cells": subarrays}


def header(read) -> bytes:
    names = []
    for f in read.fields:
        names += [f.name, f"{f.name}.valid"] if getattr(f, "nullable", False) else [f.name]
    return csv_header(names + ["fragment", "tile"])


def batch_rows(batch, fragment_names) -> bytes:
    """The CSV rows of a CellBatch: its columns, then the source fragment's name (a string, quoted) and tile,
    both empty for a fill cell."""
    return cells_text.batch_csv_rows(batch, fragment_names)


class CellsFile(FileNode):
    """The rows of one read (`make_read()` -> reader.CellRead), laid out once per `state()`."""

    def __init__(self, make_read, state, store):
        self._make_read, self._state, self._store = make_read, state, store
        self._lock = threading.RLock()
        self._layout_of = None          # (state, read, header bytes, batch ends after the header)
        self._cursor = None             # (next batch index, iterator)
        self._texts: OrderedDict = OrderedDict()

    def mtime(self) -> float:
        return self._store.mtime("")

    def _layout(self):
        state = self._state()
        with self._lock:
            if self._layout_of is not None and state is not None and self._layout_of[0] == state:
                return self._layout_of
            try:
                read = self._make_read()
                head = header(read)
                ends, pos = [], len(head)
                self._cursor, self._texts = None, OrderedDict()
                for batch in read.batches():   # sized without making the text (cells_text.batch_rows_size)
                    pos += cells_text.batch_rows_size(batch, read.fragment_names)
                    ends.append(pos)
            except ViewError:
                raise
            except Exception as exc:  # noqa: BLE001 -- a read that fails is an EIO with its reason
                raise ViewError(f"the cells a reader returns: {type(exc).__name__}: {exc}") from None
            layout = (state, read, head, ends)
            self._layout_of = layout
            return layout

    def _remember(self, i: int, text: bytes) -> None:
        self._texts[i] = text
        while len(self._texts) > BATCHES_KEPT:
            self._texts.popitem(last=False)

    def _batch_text(self, read, i: int) -> bytes:
        text = self._texts.get(i)
        if text is not None:
            return text
        if self._cursor is None or self._cursor[0] > i:
            self._cursor = (0, read.batches())
        at, it = self._cursor
        while at < i:            # batches before i: merged, not rendered
            next(it)
            at += 1
        text = batch_rows(next(it), read.fragment_names)
        self._cursor = (i + 1, it)
        self._remember(i, text)
        return text

    def size(self) -> int:
        _, _, head, ends = self._layout()
        return ends[-1] if ends else len(head)

    def read(self, offset: int, size: int) -> bytes:
        _, read, head, ends = self._layout()
        out = [head[offset:offset + size]] if offset < len(head) else []
        end = offset + size
        with self._lock:
            i = bisect.bisect_right(ends, offset)
            while i < len(ends) and (ends[i - 1] if i else len(head)) < end:
                start = ends[i - 1] if i else len(head)
                try:
                    data = self._batch_text(read, i)
                except Exception as exc:  # noqa: BLE001
                    raise ViewError(f"cells: batch {i}: {exc}") from None
                out.append(data[max(0, offset - start):end - start])
                i += 1
        return b"".join(out)
