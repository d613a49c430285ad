"""A damaged fragment written again from its surviving cells, with tiledb-py, at its own time range.

A cell survives when every field of its tile decodes (store/tile_columns.py raises otherwise). The
cells are handed to TileDB as the stored bytes, through tiledb-py's low-level Query and raw buffers:
its numpy API would cut trailing NULs of strings, drop the bytes of null cells and turn NaN into 0.
A buffer's size counts elements of the field's datatype, offsets are u64 byte offsets, validity one
byte per cell (tiledb/sm/query/query.cc `set_data_buffer`, `set_offsets_buffer`, `set_validity_buffer`).

TileDB writes a fragment at one time, `__t_t_<uuid>_<v>`; its range is in its name only, so the folder
and its marker are renamed to `__t1_t2_...` (copy.rename_fragment) and it is ordered and filtered as
the source fragment was (store/as_of.py). Per-cell timestamps of a consolidated fragment (`t.tdb`)
cannot be written by a query: the cells a reader at T takes are written, and the detail is reported lost.

- sparse: unordered writes of the surviving cells, a batch of up to BATCH_BYTES each (with
  `sm.check_coord_dups` off: a fragment of an array with duplicates holds them); a consolidated
  fragment's in one, since a reader's choice among versions of a cell spans its tiles;
- dense: a dense write takes a rectangle in row-major order; all the tiles when every tile survives
  and they hold less than BATCH_BYTES (the fragment's non-empty domain), else one rectangle per
  surviving tile (its part of the non-empty domain). Lost tiles then show what lies beneath: older fragments, or the fill value.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from urllib.parse import unquote, urlparse

from ..lazy import np
from ..store.dense_grid import cells_in_domain, dense_grid
from ..store.problems import problem_of
from ..store.tile_columns import DIMENSION, SPECIAL, Column, column_fields, concat, tile_columns
from .copy import rename_fragment
from .plan import SalvageError

EXTRA = "salvage"
#: the surviving cells of a sparse fragment handed to TileDB in one write, at most (a batch ends with the
#: tile that reaches it): the memory a rewrite holds
BATCH_BYTES = 256 << 20


def tiledb_module():
    """tiledb-py, or SalvageError naming the extra that brings it."""
    try:
        import tiledb
    except ImportError:
        raise SalvageError(f"rewriting a damaged fragment needs tiledb-py: pip install 'tdbfs[{EXTRA}]'") from None
    return tiledb


def tiledb_version() -> str:
    import tiledb
    return ".".join(str(v) for v in tiledb.libtiledb.version())


@dataclass(frozen=True)
class LostTile:
    tile: int
    bounds: dict              # dimension name -> [lo, hi]: a dense tile's domain, a sparse tile's MBR
    cells: int | None         # the cells it held (None: unknown)
    problem: str              # the problem that lost it (FILE:OFFSET: STRUCTURE: MESSAGE)
    kind: str = "mbr"         # "domain" (dense) or "mbr" (sparse)


@dataclass(frozen=True)
class Rewritten:
    written: tuple[str, ...]      # the fragments written in DEST
    cells_kept: int
    cells_lost: int
    lost_tiles: tuple[LostTile, ...]
    lost_detail: tuple[str, ...]  # what of the surviving cells could not be kept
    not_read: int = 0             # cells a reader at T does not take (newer, deleted, superseded)


def rewrite_fragment(frag, dest_root: str, t: int, key: bytes | None, allows_duplicates: bool,
                     problems=(), dense_array: bool = False) -> Rewritten:
    """Write the surviving cells of `frag` into the array being built at `dest_root` (which holds the
    fragment's own schema as its newest), as read at `t`. A tile is lost when a field of it does not
    decode, or when one of `problems` (the check's, store/tile_bounds.py: values outside the min/max the
    metadata records) names it: its bytes decode but are not the ones written. Raises when nothing of
    the fragment can be read (its metadata) or TileDB refuses the write."""
    ntiles = frag.tile_count()
    dims = [name for name, _ in frag.dimensions()]
    named = _tiles_named(frag, problems)
    n1, n2 = _times(frag)
    # cells without per-cell times go to TileDB a batch at a time, each batch a fragment of the same
    # time range: the memory held stays bounded whatever the fragment's size
    streaming = not frag.dense and not dense_array and not column_fields(frag)[2]
    kept, lost, written = [], [], []
    held = cells = 0
    tile_by_tile = False   # a dense fragment too big for one write: each surviving tile a write of its own
    for k in range(ntiles):
        try:
            if k in named:
                raise named[k]
            columns = tile_columns(frag, k)
        except Exception as exc:  # noqa: BLE001 -- each failure loses the tile, named in the report
            lost.append(_lost_tile(frag, k, exc))
            continue
        kept.append(columns)
        cells += len(columns[0])
        held += sum(c.values.nbytes + (0 if c.offsets is None else c.offsets.nbytes) for c in columns)
        if streaming and held >= BATCH_BYTES:
            written += _write(dest_root, n2, key, concat_all(kept), None)
            kept, held = [], 0
        elif frag.dense and held >= BATCH_BYTES:
            tile_by_tile = True
            for tile in kept:
                written += _write_dense(frag, tile, dims, dest_root, n2, key)
            kept, held = [], 0
    detail: list[str] = []
    not_read = 0
    if kept:
        if frag.dense:
            groups = [concat_all(kept)] if not lost and not tile_by_tile else kept
            for cols in groups:
                written += _write_dense(frag, cols, dims, dest_root, n2, key)
        else:
            cols = concat_all(kept)
            before = len(cols[0])
            cols, detail = _as_read(cols, dims, t, allows_duplicates, (n1, n2))
            not_read = before - len(cols[0])
            if len(cols[0]) and dense_array:   # a sparse fragment of a dense array (format 7 and before)
                for run in _runs(cols):
                    written += _write_dense(frag, run, dims, dest_root, n2, key)
            elif len(cols[0]):
                written += _write(dest_root, n2, key, [c for c in cols if c.kind != SPECIAL], None)
    written = [rename_fragment(dest_root, rel, n1) for rel in written]
    return Rewritten(tuple(written), cells - not_read, sum(x.cells or 0 for x in lost), tuple(lost),
                     tuple(detail), not_read)


class _Named(Exception):
    """A problem the check found in a tile that decodes."""

    def __init__(self, problem):
        super().__init__(problem.message)
        self.problem = problem


def _tiles_named(frag, problems) -> dict:
    """Tile index -> _Named, for each problem of a data file of the fragment whose structure is a tile."""
    out = {}
    for p in problems:
        k = p.structure[5:] if p.structure.startswith("tile ") else ""
        if k.isdigit() and p.file.startswith(frag.rel + "/"):
            out.setdefault(int(k), _Named(p))
    return out


def concat_all(tiles: list[list[Column]]) -> list[Column]:
    return [concat([cols[j] for cols in tiles]) for j in range(len(tiles[0]))]


def _times(frag) -> tuple[int, int]:
    n = frag.parsed_name
    return n.t1, n.t2


def _lost_tile(frag, k: int, exc: Exception) -> LostTile:
    p = exc.problem if isinstance(exc, _Named) else problem_of(exc, frag.rel, f"tile {k}")
    problem = p.printable().line()
    dims = [name for name, _ in frag.dimensions()]
    bounds, cells, kind = {}, None, "mbr"
    try:
        if frag.dense:
            kind = "domain"
            ned = frag.non_empty_domain()
            for name, (lo, hi), (nlo, nhi) in zip(dims, dense_grid(frag).tile_domain(k), ned):
                bounds[name] = [_plain(max(lo, nlo)), _plain(min(hi, nhi))]
            cells = len(cells_in_domain(frag, k)[1])
        else:
            leaves = frag.rtree().leaves
            for name, ranges in zip(dims, leaves.ranges):
                lo, hi = ranges[k]
                bounds[name] = [_plain(lo), _plain(hi)]
            cells = frag.tile_cell_num(k)
    except Exception:  # noqa: BLE001 -- the metadata that would say is damaged too: the bounds stay unknown
        pass
    return LostTile(k, bounds, cells, problem, kind)


def _plain(v):
    """A bound as YAML shows it: numbers as numbers, string coordinates as text."""
    if isinstance(v, (bytes, bytearray)):
        return bytes(v).decode("utf-8", "backslashreplace")
    return v.item() if hasattr(v, "item") else v


def _as_read(cols: list[Column], dims: list[str], t: int, allows_duplicates: bool,
             times: tuple[int, int]) -> tuple[list[Column], list[str]]:
    """The cells of a consolidated fragment a reader at T takes (tiledb/sm/query/readers/
    sparse_global_order_reader.cc: cells newer than T, and cells a delete at or before T removed, are
    left out; without duplicates, the newest version of a coordinate wins), and what is lost by writing
    them at the fragment's time range."""
    by = {c.name: c for c in cols}
    stamp, deleted = by.get("timestamp"), by.get("delete_timestamp")
    if stamp is None and deleted is None:
        return cols, []
    keep = np.ones(len(cols[0]), bool)
    if stamp is not None:
        keep &= stamp.values <= t
    if deleted is not None:
        keep &= deleted.values > t
    rows = np.flatnonzero(keep)
    if stamp is not None and not allows_duplicates and len(rows):
        rows = _newest_per_coordinate([by[d] for d in dims], stamp.values, rows)
    detail = []
    if stamp is not None:
        detail.append(f"per-cell timestamps (t.tdb): the surviving cells read at {t} are written at the "
                      f"fragment's range [{times[0]}, {times[1]}], so a read between its two times differs")
    if deleted is not None:
        detail.append("per-cell delete times (dt.tdb, dci.tdb): cells deleted at or before the time read are left out")
    return [c.take(rows) for c in cols], detail


def _newest_per_coordinate(dims: list[Column], stamps, rows):
    """Of `rows`, the one with the greatest timestamp for each coordinate."""
    keys = []
    for c in dims:
        if c.var_sized:
            cells = np.array([c.cell_bytes(i) for i in rows], dtype=object)
            keys.append(np.unique(cells, return_inverse=True)[1].ravel())
        else:
            keys.append(np.asarray(c.values)[rows])
    order = np.lexsort([stamps[rows]] + keys[::-1])
    sorted_keys = [k[order] for k in keys]
    last = np.ones(len(order), bool)
    if len(order) > 1:
        same = np.ones(len(order) - 1, bool)
        for k in sorted_keys:
            same &= k[1:] == k[:-1]
        last[:-1] = ~same
    return np.sort(rows[order[last]])


def _runs(cols: list[Column]) -> list[list[Column]]:
    """The cells as runs of consecutive cells along the last dimension (the others equal), in row-major
    order: TileDB takes only rectangles of cells into a dense array (query.cc: "Unordered writes are
    only possible for sparse arrays"), and a sparse fragment of a dense array holds any cells."""
    coords = [np.asarray(c.values).astype(np.int64) for c in cols if c.kind == DIMENSION]
    order = np.lexsort(coords[::-1])
    sorted_coords = [c[order] for c in coords]
    start = np.ones(len(order), bool)
    if len(order) > 1:
        same = np.ones(len(order) - 1, bool)
        for c in sorted_coords[:-1]:
            same &= c[1:] == c[:-1]
        same &= sorted_coords[-1][1:] == sorted_coords[-1][:-1] + 1
        start[1:] = ~same
    bounds = list(np.flatnonzero(start)) + [len(order)]
    return [[c.take(order[a:b]) for c in cols] for a, b in zip(bounds[:-1], bounds[1:])]


def _write_dense(frag, cols: list[Column], dims: list[str], dest_root: str, t: int, key) -> list[str]:
    """One dense write of the rectangle the cells fill, in row-major order."""
    coords = [c for c in cols if c.kind == DIMENSION]
    order = np.lexsort([np.asarray(c.values) for c in coords][::-1])
    ranges = [(np.asarray(c.values).min(), np.asarray(c.values).max()) for c in coords]
    expected = int(np.prod([int(hi) - int(lo) + 1 for lo, hi in ranges], dtype=object))
    if expected != len(order):
        raise ValueError(f"{frag.rel}: {len(order)} surviving cells do not fill the rectangle {ranges}")
    attrs = [c.take(order) for c in cols if c.kind not in (DIMENSION, SPECIAL)]
    return _write(dest_root, t, key, attrs, ranges)


def _buffers(c: Column):
    """(data u8, element count, offsets u64 or None, validity u8 or None) of a column."""
    if c.var_sized:
        data = np.ascontiguousarray(c.values, np.uint8)
        offsets = np.ascontiguousarray(c.offsets[:-1], np.uint64)
    else:
        data = np.ascontiguousarray(c.values).view(np.uint8).reshape(-1)
        offsets = None
    if not data.size:   # TileDB refuses a buffer of no bytes: one spare byte, counted as none
        data = np.zeros(1, np.uint8)
        count = 0
    else:
        count = data.nbytes // c.datatype.size
    validity = None if c.validity is None else np.ascontiguousarray(c.validity, np.uint8)
    return data, count, offsets, validity


def _write(dest_root: str, t: int, key, columns: list[Column], ranges) -> list[str]:
    """One write query at time t (unordered for `ranges` None, else a dense row-major rectangle); the
    fragments it wrote, relative to dest_root."""
    tiledb = tiledb_module()
    import tiledb.libtiledb as lt

    config = {"sm.check_coord_dups": "false"}
    if key is not None:
        config.update({"sm.encryption_type": "AES_256_GCM", "sm.encryption_key": _key_text(key)})
    ctx = tiledb.Ctx(config)
    keep = []   # the buffers must live until the query is finalized
    with tiledb.open(dest_root, "w", timestamp=t, ctx=ctx) as W:
        q = lt.Query(lt.Context(W.ctx), W.array, lt.QueryType.WRITE)
        if ranges is None:
            q.layout = lt.LayoutType.UNORDERED
        else:
            q.layout = lt.LayoutType.ROW_MAJOR
            sub = lt.Subarray(lt.Context(W.ctx), W.array)
            for j, (lo, hi) in enumerate(ranges):
                sub._add_dim_range(j, (lo, hi))
            q.set_subarray(sub)
        for c in columns:
            data, count, offsets, validity = _buffers(c)
            keep.append((data, offsets, validity))
            q.set_data_buffer(c.name, data, count)
            if offsets is not None:
                q.set_offsets_buffer(c.name, offsets, offsets.size)
            if validity is not None:
                q.set_validity_buffer(c.name, validity, validity.size)
        q._submit()
        q.finalize()
        uris = [q.fragment_uri(i) for i in range(q.fragment_num())]
    root = os.path.realpath(dest_root)
    return [os.path.relpath(os.path.realpath(unquote(urlparse(u).path)), root) for u in uris]


def _key_text(key: bytes) -> str:
    """TileDB takes the key as a configuration string: its 32 bytes must be ASCII."""
    try:
        return key.decode("ascii")
    except UnicodeDecodeError:
        raise SalvageError("the key is not 32 ASCII characters: TileDB's configuration cannot take it to "
                           "write the rewritten fragments") from None
