"""A CSV file of any size shown in pieces: a header, then tables of cells (store/tile_columns.py: a list
of columns, or a TileTable read by row ranges), each cut in pieces of `ROWS_PER_PIECE` rows.

The size of each piece is measured once without making its text (views/cells_text.py `rows_size`) and
kept in the node as a small array, so `ls -l` renders nothing; a read renders only the pieces it covers,
each kept in the store's bounded cache, so a read of N bytes at any offset costs N plus at most one piece
on each side, and memory stays within the cache bound whatever the file's size.
"""

from __future__ import annotations

import bisect
import threading

from ..lazy import np
from .cells_text import csv_rows, rows_size
from .nodes import FileNode, ViewError

#: rows of one piece: a piece of a table of 1M cells is ~1/16 of it (a few MB of text)
ROWS_PER_PIECE = 1 << 16

class _Whole:
    """A table given as a list of equal-length columns."""

    def __init__(self, columns):
        self._columns = columns
        self.rows = len(columns[0]) if columns else 0

    def columns(self, start: int, stop: int):
        return [c.slice(start, stop) for c in self._columns]


def _table(made):
    return made if hasattr(made, "columns") and hasattr(made, "rows") else _Whole(list(made))


class CsvTableFile(FileNode):
    """`header()` (bytes), then the rows of each of `parts`: callables giving a table (a list of columns
    of equal length, or an object with `rows` and `columns(start, stop)`). `guard(i, fn)` runs fn for
    part i (turning its failures into ViewError); `cache` (the store's ByteLRU) keeps rendered pieces
    under (`key`, part key, piece) and the pieces' sizes under (`key`, part key, "sizes"): files that
    share a part (a tile's `tile_K.csv` and `cells.csv`) give it the same key in `part_keys`."""

    def __init__(self, header, parts: list, mtime: float, immutable: bool, cache=None, key=None, guard=None,
                 part_keys=None):
        self._header, self._parts, self._mtime, self.immutable = header, parts, mtime, immutable
        self._cache, self._key = cache, key
        self._part_keys = list(range(len(parts))) if part_keys is None else list(part_keys)
        self._guard = guard or (lambda i, fn: fn())
        self._layout_kept = None   # (header length, part ends, piece ends of each part)
        self._lock = threading.Lock()

    def mtime(self) -> float:
        return self._mtime

    def _piece_ends(self, i: int) -> np.ndarray:
        def measure():
            table = _table(self._parts[i]())
            sizes = [rows_size(table.columns(s, min(table.rows, s + ROWS_PER_PIECE)))
                     for s in range(0, table.rows, ROWS_PER_PIECE)]
            return np.cumsum(np.array(sizes, np.int64))

        def make():
            ends = self._guard(i, measure)
            return ends, ends.nbytes + 64
        if self._cache is None or not self.immutable:
            return make()[0]
        return self._cache.get_or_make((self._key, self._part_keys[i], "sizes"), make)

    def _layout(self):
        if self._layout_kept is not None:
            return self._layout_kept
        with self._lock:
            if self._layout_kept is not None:
                return self._layout_kept
            head = len(self._header())
            pieces, ends, pos = [], [], head
            for i in range(len(self._parts)):
                p = self._piece_ends(i)
                pieces.append(p)
                pos += int(p[-1]) if len(p) else 0
                ends.append(pos)
            layout = (head, ends, pieces)
            if self.immutable:   # a fragment still being written may change under the next stat
                self._layout_kept = layout
            return layout

    def size(self) -> int:
        head, ends, _ = self._layout()
        return ends[-1] if ends else head

    def _piece(self, i: int, j: int) -> bytes:
        def render():
            table = _table(self._parts[i]())
            start = j * ROWS_PER_PIECE
            return csv_rows(table.columns(start, min(table.rows, start + ROWS_PER_PIECE)))

        def make():
            data = self._guard(i, render)
            return data, len(data) + 64
        if self._cache is None:
            return make()[0]
        return self._cache.get_or_make((self._key, self._part_keys[i], j), make)

    def read(self, offset: int, size: int) -> bytes:
        head, ends, pieces = self._layout()
        end = offset + size
        out = []
        if offset < head:
            out.append(self._header()[offset:end])
        i = bisect.bisect_right(ends, offset)
        while i < len(ends) and end > (ends[i - 1] if i else head):
            base = ends[i - 1] if i else head
            p = pieces[i]
            j = int(np.searchsorted(p, max(0, offset - base), side="right"))
            while j < len(p) and base + (int(p[j - 1]) if j else 0) < end:
                start = base + (int(p[j - 1]) if j else 0)
                data = self._piece(i, j)
                if len(data) != int(p[j]) - (int(p[j - 1]) if j else 0):
                    raise ViewError(f"rows {j * ROWS_PER_PIECE}.. of part {i}: {len(data)} bytes, measured otherwise")
                out.append(data[max(0, offset - start):end - start])
                j += 1
            i += 1
        return b"".join(out)
