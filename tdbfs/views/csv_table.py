"""Files of any size shown in pieces: a header, then parts (a tile's cells) each cut in pieces of
`ROWS_PER_PIECE` rows (cells): `cells/tile_K.csv` and `cells.csv` (a table of columns, store/tile_columns.py)
and a field's `tile_K.txt` (one line per cell).

The size of each piece is measured once, without making its text where it can be (views/cells_text.py
`rows_size`), and kept as a small array, so `ls -l` keeps no text; a read renders only the pieces it
covers, each kept in the store's bounded cache, so a read of N bytes at any offset costs N plus at most
a piece on each side, and memory stays within the cache bound whatever the file's size. A piece is one
numpy step of bounded size, so a render gives up the GIL often.
"""

from __future__ import annotations

import bisect
import threading

from ..lazy import np
from .cells_text import csv_rows, rows_size
from .nodes import FileNode, ViewError

#: rows of one piece: a piece of a table of 1M cells is ~1/16 of it (a few MB of text)
ROWS_PER_PIECE = 1 << 16


class TablePart:
    """A part as CSV rows: `made` a list of equal-length columns, or an object with `rows` and
    `columns(start, stop)` (store/tile_columns.py TileTable; with `width`, `whole(i)` and
    `column(i, start, stop, whole)` too, its pieces are measured one column at a time)."""

    def __init__(self, made):
        if hasattr(made, "columns") and hasattr(made, "rows"):
            self._table, self.rows = made, made.rows
        else:
            made = list(made)
            self._table, self.rows = None, len(made[0]) if made else 0
            self._columns = made

    def piece_sizes(self, step: int) -> np.ndarray:
        """The byte size of each piece of `step` rows, made column by column: the memory of one column of
        the part at a time."""
        starts = range(0, self.rows, step)
        table = self._table
        if table is None or not hasattr(table, "width"):
            return np.array([self.measure(s, min(self.rows, s + step)) for s in starts], np.int64)
        sizes = np.zeros(len(starts), np.int64)
        for i in range(table.width):
            whole = table.whole(i)
            for j, s in enumerate(starts):
                sizes[j] += rows_size([table.column(i, s, min(self.rows, s + step), whole)])
            del whole
        return sizes

    def _slice(self, start: int, stop: int):
        if self._table is not None:
            return self._table.columns(start, stop)
        return [c.slice(start, stop) for c in self._columns]

    def render(self, start: int, stop: int) -> bytes:
        return csv_rows(self._slice(start, stop))

    def measure(self, start: int, stop: int) -> int:
        return rows_size(self._slice(start, stop))


class PiecewiseFile(FileNode):
    """`header()` (bytes), then the rows of each of `parts`: callables giving an object with `rows`,
    `render(start, stop)` (bytes) and `measure(start, stop)` (their length). `guard(i, fn)` runs fn for
    part i (turning its failures into ViewError); `cache` (the store's ByteLRU) keeps rendered pieces under
    (`key`, part key, piece); `sizes` (a dict, kept by the caller: a few numbers a part, never evicted by
    the big values of the cache) keeps the pieces' sizes of an immutable file by part key. Files that share
    a part (a tile's `tile_K.csv` and `cells.csv`) give it the same key in `part_keys`."""

    def __init__(self, header, parts: list, mtime: float, immutable: bool, cache=None, key=None, guard=None,
                 part_keys=None, sizes: dict | None = None):
        self._header, self._parts, self._mtime, self.immutable = header, parts, mtime, immutable
        self._cache, self._key, self._sizes = cache, key, sizes
        self._part_keys = list(range(len(parts))) if part_keys is None else list(part_keys)
        self._guard = guard or (lambda i, fn: fn())
        self._layout_kept = None   # (header length, part ends, piece ends of each part)
        self._lock = threading.Lock()

    def mtime(self) -> float:
        return self._mtime

    def _piece_ends(self, i: int) -> np.ndarray:
        def measure():
            part = self._parts[i]()
            if hasattr(part, "piece_sizes"):
                return np.cumsum(part.piece_sizes(ROWS_PER_PIECE))
            sizes = [part.measure(s, min(part.rows, s + ROWS_PER_PIECE)) for s in range(0, part.rows, ROWS_PER_PIECE)]
            return np.cumsum(np.array(sizes, np.int64))

        if self._sizes is None or not self.immutable:
            return self._guard(i, measure)
        ends = self._sizes.get(self._part_keys[i])
        if ends is None:
            ends = self._sizes[self._part_keys[i]] = self._guard(i, measure)
        return ends

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
            part = self._parts[i]()
            start = j * ROWS_PER_PIECE
            return part.render(start, min(part.rows, start + ROWS_PER_PIECE))

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


class CsvTableFile(PiecewiseFile):
    """A CSV file: `header()`, then the rows of tables, each part a callable giving a list of columns
    or a TileTable (see TablePart); the rest as PiecewiseFile."""

    def __init__(self, header, parts: list, mtime: float, immutable: bool, cache=None, key=None, guard=None,
                 part_keys=None, sizes: dict | None = None):
        super().__init__(header, [lambda p=p: TablePart(p()) for p in parts], mtime, immutable, cache, key,
                         guard, part_keys, sizes)
