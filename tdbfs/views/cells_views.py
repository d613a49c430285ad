"""The cells of a fragment as CSV: `cells/tile_K.csv` (one tile) and `cells.csv` (every tile, one header).

One row per cell: the coordinates by dimension name, every attribute by name, then what a consolidated
fragment adds per cell (`timestamp`, `delete_timestamp`, `delete_condition_index`); the columns come from
store/tile_columns.py and their text from cells_text.py. Dense tiles show the cells inside the fragment's
non-empty domain; the rest of a dense tile is padding TileDB never reads (tile_K.txt shows it).
"""

from __future__ import annotations

import bisect

from ..store.fragment_interface import FragmentLike
from ..store.tile_columns import SPECIAL_COLUMNS, TileTable, column_fields, tile_columns
from .cells_text import csv_header, csv_rows
from .common import guarded, guarded_children
from .csv_table import CsvTableFile
from .nodes import FileNode, StaticDir, with_cost


def cells_children(frag: FragmentLike, key, fixed: bool) -> dict:
    """`cells/` and `cells.csv` of a fragment folder: CSV files shown in pieces (views/csv_table.py),
    whose sizes are measured without rendering, and whose pieces a tile's file and cells.csv share."""
    t = frag.mtime()
    render_header = guarded(lambda: cells_header(frag), frag.problems, frag.rel, "cells")
    cache = frag.store.cache
    sizes = frag._once(("piece sizes", "cells"), dict) if fixed else None

    def table(k: int):
        return lambda: TileTable(frag, k)

    def guard_tiles(ks):
        return lambda i, fn: guarded(fn, frag.problems, frag.rel, f"cells of tile {ks[i]}")()

    def tiles():
        return {f"tile_{k}.csv": CsvTableFile(render_header, [table(k)], t, fixed, cache, ("cells", key),
                                              guard_tiles([k]), [k], sizes)
                for k in range(frag.tile_count())}

    def all_tiles():
        ks = range(frag.tile_count())
        return CsvTableFile(render_header, [table(k) for k in ks], t, fixed, cache, ("cells", key),
                            guard_tiles(ks), ks, sizes)

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

def cells_header(frag: FragmentLike) -> bytes:
    dims, attrs, specials = column_fields(frag)
    names = list(dims)
    for f in attrs:
        names += [f.name, f"{f.name}.valid"] if f.nullable else [f.name]
    return csv_header(names + [SPECIAL_COLUMNS[f.kind] for f in specials])


def cells_rows(frag: FragmentLike, k: int) -> bytes:
    """The rows of tile k, without the header."""
    return csv_rows(tile_columns(frag, k))
