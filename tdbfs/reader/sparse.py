"""The cells a read of a sparse array returns (docs/reader.md; tiledb/sm/query/readers/
sparse_global_order_reader.cc and sparse_unordered_with_dups_reader.cc).

- A cell is a candidate when it lies in the subarray and its timestamp is <= T: the per-cell
  `__timestamps` of a consolidated fragment, else the fragment's t1 (`ResultTileCmpBase::get_timestamp`).
- Without duplicates, of the candidates at one coordinate the one with the greatest (timestamp, priority)
  is kept, the first stored on a tie inside one fragment (`dedup_tiles_with_timestamps`); then, if a delete
  removes that winner, the coordinate is gone (the delete conditions apply after the dedup,
  `post_dedup_bitmap`). Cells come out in the global order: a k-way merge over the fragments, each of
  which is in the global order. A fragment's tile is loaded only when the merge reaches a lower bound of
  its cells (its MBR's corner for row- and col-major orders; the previous tile's last cell), and the
  merge hands on every loaded cell below the lowest bound of the tiles not yet loaded.
- With duplicates every candidate is returned, fragment by fragment in the priority order, tiles in
  their order (what TileDB's unordered reader, tiledb-py's default, returns).
- A delete committed at D <= T removes the cells written at or before D (timestamp <= D) its condition
  does not keep, unless the fragment lists it among its processed conditions; a consolidated fragment's
  delete timestamps (`dt.tdb`) remove a cell when <= T (`ReaderBase::add_delete_timestamps_condition`).
- Each fragment is read with its own schema; fields are matched by name to the schema in force at T, and
  one the fragment lacks, or stores with another var-ness, reads as the fill value (`ReaderBase::skip_field`).
"""

from __future__ import annotations

import heapq
import os
from dataclasses import dataclass
from typing import Iterator

from ..format import fragment_metadata as fm
from ..format.names import try_parse_name
from ..lazy import np
from ..store.tile_columns import ATTRIBUTE, Column, concat, tile_columns
from .batch import CellBatch, ReadPlan
from .conditions import keeps
from .dense import fill_column
from .global_order import HILBERT, dimension_values, key_at, less_than, order_keys, sortable
from .plan import deletes_in_force

_U64_MAX = np.uint64(2**64 - 1)


@dataclass(frozen=True, eq=False)
class _Chunk:
    """Loaded cells of one tile: the output columns, their order keys, and what dedup and deletes need."""
    columns: list
    keys: list
    frag: int
    tile: int
    ts: np.ndarray          # uint64 timestamp of each cell
    deleted: np.ndarray     # bool: a delete in force removes it
    pos: np.ndarray         # int64 stored position (first stored wins a tie in one fragment)

    def __len__(self) -> int:
        return len(self.ts)

    def take(self, rows) -> "_Chunk":
        return _Chunk([c.take(rows) for c in self.columns], [k[rows] for k in self.keys], self.frag, self.tile,
                      self.ts[rows], self.deleted[rows], self.pos[rows])


class _Source:
    """One fragment of the read: loads its tiles as chunks in the schema in force."""

    def __init__(self, store, rel: str, idx: int, plan: ReadPlan, schema, deletes):
        self.frag = store.fragment(rel)
        self.idx, self.plan, self.schema = idx, plan, schema
        name = try_parse_name(os.path.basename(rel))
        self.t1 = name.t1 if name is not None else 0
        fields = self.frag.stored_fields()
        self.has_ts = any(f.kind == fm.TIMESTAMPS for f in fields)
        self.has_dt = any(f.kind == fm.DELETE_TIMESTAMPS for f in fields)
        processed = set()
        if self.has_dt or any(d.timestamp >= self.t1 for d in deletes):
            try:
                processed = {p.lstrip("/") for p in self.frag.processed_conditions()}
            except Exception:  # noqa: BLE001 -- formats before 16 keep no such list
                processed = set()
        self.deletes = [d for d in deletes if d.timestamp >= self.t1 and d.marker not in processed]
        self.n_tiles = self.frag.tile_count()
        self._mbrs = None

    def mbr(self, k: int):
        """Per dimension (min, max) of tile k, or None when the R-tree does not decode."""
        if self._mbrs is None:
            try:
                leaf = self.frag.rtree().levels[-1]
                self._mbrs = leaf.ranges
            except Exception:  # noqa: BLE001 -- the R-tree's own problem is recorded by the store
                self._mbrs = ()
        if not self._mbrs:
            return None
        try:
            return [(r[k][0], r[k][1]) for r in self._mbrs]
        except (IndexError, TypeError):
            return None

    def intersects(self, k: int) -> bool:
        sub = self.plan.subarray
        if sub is None:
            return True
        mbr = self.mbr(k)
        if mbr is None:
            return True
        for (lo, hi), ranges in zip(mbr, sub):
            if ranges is not None and not any(_overlaps(lo, hi, a, b) for a, b in ranges):
                return False
        return True

    def lower_bound(self, k: int):
        """A key no cell of tile k sorts below (its MBR's corner), None when there is none to tell."""
        if self.schema.cell_order == HILBERT:
            return None
        mbr = self.mbr(k)
        if mbr is None:
            return None
        values = []
        for d, (lo, _) in zip(self.schema.dimensions, mbr):
            if isinstance(lo, (bytes, bytearray, str)):
                values.append(np.array([lo.encode() if isinstance(lo, str) else bytes(lo), b""], dtype=object)[:1])
            else:
                values.append(np.array([lo], d.datatype.dtype))
        return key_at(order_keys(self.schema, values), 0)

    def load(self, k: int, with_keys: bool):
        """(chunk of tile k's candidate cells, key of the tile's last stored cell or None)."""
        cols = tile_columns(self.frag, k)
        by_name = {c.name: c for c in cols}
        dims = cols[:len(self.schema.dimensions)]
        n = len(dims[0]) if dims else 0
        t = self.plan.timestamp
        keep = np.ones(n, bool)
        values = dimension_values(dims)
        if self.plan.subarray is not None:
            for v, ranges in zip(values, self.plan.subarray):
                if ranges is not None:
                    keep &= _in_ranges(v, ranges)
        if self.has_ts:
            ts = by_name["timestamp"].values.astype(np.uint64)
            keep &= ts <= np.uint64(t)
        else:
            ts = np.full(n, self.t1, np.uint64)
        deleted = np.zeros(n, bool)
        if self.has_dt:
            deleted |= by_name["delete_timestamp"].values.astype(np.uint64) <= np.uint64(t)
        fields = {c.name: c for c in cols if c.kind != "special"}
        for d in self.deletes:
            deleted |= (ts <= np.uint64(d.timestamp)) & ~keeps(d.condition, fields, n)
        last = None
        if with_keys and n:
            last = key_at(order_keys(self.schema, [v[n - 1:] for v in values]), 0)
        rows = np.flatnonzero(keep)
        out = [c.take(rows) for c in dims] + [self._attribute(a, by_name, rows) for a in self.schema.attributes]
        keys = order_keys(self.schema, [v[rows] for v in values]) if with_keys else []
        return _Chunk(out, keys, self.idx, k, ts[rows], deleted[rows], rows.astype(np.int64)), last

    def _attribute(self, attr, by_name: dict, rows) -> Column:
        col = by_name.get(attr.name)
        if col is None or col.kind != ATTRIBUTE or col.var_sized != attr.var_sized \
                or col.values.dtype.itemsize != _itemsize(attr):
            return fill_column(attr, len(rows))
        col = col.take(rows)
        validity = col.validity
        if attr.nullable and validity is None:
            validity = np.ones(len(col), bool)
        elif not attr.nullable:
            validity = None
        values = col.values
        if not attr.var_sized and not attr.datatype.is_string and values.dtype != attr.datatype.dtype:
            values = values.view(attr.datatype.dtype)
        return Column(attr.name, ATTRIBUTE, attr.datatype, col.per_cell, values, col.offsets, validity)


def _itemsize(attr) -> int:
    if attr.var_sized:
        return 1
    if attr.datatype.is_string:
        return attr.cell_val_num * attr.datatype.size
    return attr.datatype.size


def _overlaps(lo, hi, a, b) -> bool:
    if isinstance(lo, str):
        lo, hi = lo.encode(), hi.encode()
    return (b is None or lo <= b) and (a is None or a <= hi)


def _in_ranges(v, ranges):
    if v.dtype == object:
        items = v.tolist()
        return np.array([any((a is None or a <= s) and (b is None or s <= b) for a, b in ranges)
                         for s in items], bool)
    out = np.zeros(len(v), bool)
    for a, b in ranges:
        out |= (v >= a) & (v <= b)
    return out


def sparse_batches(store, plan: ReadPlan, batch_cells: int = 1 << 16) -> Iterator[CellBatch]:
    schema = store.schema(plan.schema_rel)
    deletes = deletes_in_force(store, plan.timestamp)
    sources = [_Source(store, rel, i, plan, schema, deletes) for i, rel in enumerate(plan.fragments)]
    chunks = _with_dups(sources) if schema.allows_dups else _merged(sources, schema)
    return _batched(chunks, batch_cells)


def _with_dups(sources) -> Iterator[_Chunk]:
    for src in sources:
        for k in range(src.n_tiles):
            if src.intersects(k):
                chunk, _ = src.load(k, with_keys=False)
                yield chunk.take(np.flatnonzero(~chunk.deleted))


def _merged(sources, schema) -> Iterator[_Chunk]:
    heap: list = []           # (lower bound, fragment, tile) of each fragment's next tile to load
    buffer: list[_Chunk] = []
    seq = 0

    def push(src, k, after):
        """Queue src's next tile from k that meets the subarray; `after`: the last key of its previous tile."""
        nonlocal seq
        while k < src.n_tiles and not src.intersects(k):
            k += 1
        if k >= src.n_tiles:
            return
        bound = src.lower_bound(k)
        if after is not None and (bound is None or after > bound):
            bound = after
        if bound is None:
            load(src, k)
            return
        heapq.heappush(heap, (bound, src.idx, k))

    def load(src, k):
        chunk, last = src.load(k, with_keys=True)
        if len(chunk):
            buffer.append(chunk)
        push(src, k + 1, last)

    for src in sources:
        push(src, 0, None)
    while heap or buffer:
        if heap:
            _, i, k = heapq.heappop(heap)
            load(sources[i], k)
        bound = heap[0][0] if heap else None
        out, rest = [], []
        for chunk in buffer:
            if bound is None:
                out.append(chunk)
                continue
            below = less_than(chunk.keys, bound)
            if below.all():
                out.append(chunk)
            elif below.any():
                out.append(chunk.take(np.flatnonzero(below)))
                rest.append(chunk.take(np.flatnonzero(~below)))
            else:
                rest.append(chunk)
        buffer = rest
        if out:
            merged = _dedup(out)
            if len(merged):
                yield merged


def _dedup(chunks: list[_Chunk]) -> _Chunk:
    """The chunks' cells in the global order, one per coordinate: the greatest (timestamp, priority), the
    first stored on a tie; then less the winners a delete removed."""
    frag = np.concatenate([np.full(len(c), c.frag, np.int64) for c in chunks])
    tile = np.concatenate([np.full(len(c), c.tile, np.int64) for c in chunks])
    ts = np.concatenate([c.ts for c in chunks])
    deleted = np.concatenate([c.deleted for c in chunks])
    pos = np.concatenate([c.pos for c in chunks])
    keys = [np.concatenate([c.keys[j] for c in chunks]) for j in range(len(chunks[0].keys))]
    sort_keys = [sortable(k) for k in keys]
    order = np.lexsort([pos, -frag, _U64_MAX - ts] + sort_keys[::-1])
    first = np.ones(len(order), bool)
    if len(order) > 1:
        same = np.ones(len(order) - 1, bool)
        for k in sort_keys:
            ks = k[order]
            same &= ks[1:] == ks[:-1]
        first[1:] = ~same
    winners = order[first]
    winners = winners[~deleted[winners]]
    columns = [concat([c.columns[j] for c in chunks]).take(winners) for j in range(len(chunks[0].columns))]
    return _Merged(columns, frag[winners], tile[winners])


@dataclass(frozen=True, eq=False)
class _Merged:
    columns: list
    frag: np.ndarray
    tile: np.ndarray

    def __len__(self) -> int:
        return len(self.frag)


def _batched(chunks, batch_cells: int) -> Iterator[CellBatch]:
    """CellBatches of batch_cells cells (the last one fewer) from chunks of any size."""
    pending, count = [], 0

    def flush(parts):
        columns = [concat([p.columns[j] for p in parts]) for j in range(len(parts[0].columns))]
        frag = np.concatenate([_frags(p) for p in parts]).astype(np.int32)
        tile = np.concatenate([_tiles(p) for p in parts]).astype(np.int64)
        return columns, frag, tile

    for chunk in chunks:
        if not len(chunk):
            continue
        pending.append(chunk)
        count += len(chunk)
        if count >= batch_cells:
            columns, frag, tile = flush(pending)
            start = 0
            while count - start >= batch_cells:
                yield CellBatch([c.slice(start, start + batch_cells) for c in columns],
                                frag[start:start + batch_cells], tile[start:start + batch_cells])
                start += batch_cells
            pending = [_Merged([c.slice(start, count) for c in columns], frag[start:], tile[start:])] \
                if start < count else []
            count -= start
    if pending:
        columns, frag, tile = flush(pending)
        yield CellBatch(columns, frag, tile)


def _frags(p):
    return p.frag if isinstance(p, _Merged) else np.full(len(p), p.frag, np.int64)


def _tiles(p):
    return p.tile if isinstance(p, _Merged) else np.full(len(p), p.tile, np.int64)
