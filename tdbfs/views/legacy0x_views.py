"""The tree of a TileDB 0.x array (VIEWS.md, "TileDB 0.x arrays and GenomicsDB workspaces").

Same shape as a 2.x array: README.txt, array.yaml, schema/, fragments/<name>/ with
fragment.yaml, book_keeping.yaml (instead of footer.yaml), rtree/, tiles.csv, attrs/, dims/,
raw/. Stems are attribute names as on disk; the coordinates are under dims/__coords/ as
stored and split per dimension under dims/<dimension name>/. A workspace (or group) shows
each of its arrays as arrays/<name>/ with that tree.
"""

from __future__ import annotations

import numpy as np

from ..format.legacy0x.book_keeping import book_keeping_to_dict
from ..format.legacy0x.names import name_to_dict
from ..format.legacy0x.schema import COORDS, schema_to_dict
from ..store.legacy0x import (BOOK_KEEPING_FILE, COORDINATES, DATA, SCHEMA_FILE, VAR, Legacy0xArrayStore,
                                Legacy0xFragment, Legacy0xWorkspaceStore)
from ..store.problems import merged
from .common import CachedFile, KeyedDir, LiveFile, guarded, yaml_file
from .fragment_views import RawFile, guarded_children
from .nodes import BytesFile, DirNode, DynamicDir, FileNode, StaticDir, SymlinkNode, ViewError
from .render import fixed_cells_text, to_csv, to_yaml, var_cells_text

SCHEMA_VIEW = SCHEMA_FILE + ".yaml"


def build_legacy0x_root(store) -> DirNode:
    if isinstance(store, Legacy0xWorkspaceStore):
        return workspace_root(store)
    return array_root(store)


# -- workspace --------------------------------------------------------------------------

def workspace_root(ws: Legacy0xWorkspaceStore) -> DirNode:
    root = workspace_files(ws)
    mtime = lambda: _mtime(root, "")
    readme = BytesFile(lambda: WORKSPACE_README.encode(), immutable=True, mtime=_mtime(root, ""))
    summary = LiveFile(guarded(lambda: to_yaml(workspace_summary(ws)), ws.problems, "", "workspace summary"),
                       mtime=_mtime(root, ""))
    arrays = KeyedDir(lambda: [escape_name(p) for p in ws.array_paths()],
                      lambda name: _lazy_array(ws, unescape_name(name)), mtime=mtime)
    files = KeyedDir(lambda: [n for n, _ in ws.other_files()], lambda name: StoreFile(root, name), mtime=mtime)
    return DynamicDir(lambda: {"README.txt": readme, "workspace.yaml": summary, "arrays": arrays, "files": files},
                      mtime)


def _lazy_array(ws: Legacy0xWorkspaceStore, rel: str) -> DirNode:
    holder = {}

    def children():
        if "root" not in holder:
            holder["root"] = array_root(ws.array(rel))
        return holder["root"].children()

    return DynamicDir(children, lambda: _mtime(ws.array(rel), ""))


def workspace_files(ws: Legacy0xWorkspaceStore):
    """What reads the files at the workspace root: the workspace store itself once it reads files,
    else an array store rooted there (as `ws.array` roots one at each array), whose reads never
    follow a symlink nor open anything but a regular file."""
    if all(hasattr(ws, m) for m in ("pread", "file_size", "stat")):
        return ws
    return Legacy0xArrayStore(ws.path, cache=ws.cache)


class StoreFile(FileNode):
    """A file shown byte for byte, read through its store: views never open a path themselves."""

    def __init__(self, store, rel: str):
        self._store, self._rel = store, rel

    def mtime(self) -> float:
        return _mtime(self._store, self._rel)

    def size(self) -> int:
        try:
            return self._store.file_size(self._rel)
        except OSError as exc:
            raise ViewError(f"{self._rel}: not readable ({exc})") from None

    def read(self, offset: int, size: int) -> bytes:
        try:
            return self._store.pread(self._rel, offset, size)
        except OSError as exc:
            raise ViewError(f"{self._rel}: not readable ({exc})") from None


def workspace_summary(ws: Legacy0xWorkspaceStore) -> dict:
    out = {"uri": ws.path, "layout": "TileDB 0.x", "kind": ws.kind}
    arrays = {}
    for rel in ws.array_paths():
        store = ws.array(rel)
        entry = {"path": rel}
        try:
            s = store.legacy0x_schema()
            entry["array_type"] = "dense" if s.dense else "sparse"
            entry["schema_form"] = "versioned" if s.version is not None else "original"
        except Exception as exc:
            entry["error"] = str(exc)
        paths = store.fragment_paths()
        entry["fragments"] = len(paths)
        entry["uncommitted_fragments"] = sum(1 for p in paths if store.fragment(p).uncommitted_reasons())
        arrays[escape_name(rel)] = entry
    out["arrays"] = arrays
    out["groups"] = ws.group_paths()
    out["files"] = {n: size for n, size in ws.other_files()}
    problems = list(ws.problems.items)
    for rel in ws.array_paths():
        problems += [p for p in ws.array(rel).findings() if p not in problems]
    out["problems"] = problems
    return out


# -- one array ----------------------------------------------------------------------------

def array_root(store: Legacy0xArrayStore) -> DirNode:
    problems = store.problems
    mtime = lambda: _mtime(store, "")
    readme = BytesFile(lambda: ARRAY_README.encode(), immutable=True, mtime=_mtime(store, ""))
    summary = LiveFile(guarded(lambda: to_yaml(array_summary(store)), problems, "", "array summary"),
                       mtime=_mtime(store, ""))
    schema_dir = KeyedDir(lambda: [SCHEMA_VIEW, "current.yaml"] if store.schema_files() else [],
                          lambda name: SymlinkNode(SCHEMA_VIEW) if name == "current.yaml" else yaml_file(
                              lambda: schema_to_dict(store.legacy0x_schema()), problems, SCHEMA_FILE, "0.x array schema",
                              immutable=False, mtime=_mtime(store, SCHEMA_FILE)), mtime=mtime)
    fragments = KeyedDir(store.fragment_paths, lambda name: fragment_dir(store.fragment(name)), mtime=mtime)
    return DynamicDir(lambda: {"README.txt": readme, "array.yaml": summary, "schema": schema_dir,
                               "fragments": fragments}, mtime)


def array_summary(store: Legacy0xArrayStore) -> dict:
    out: dict = {"uri": store.path, "layout": "TileDB 0.x"}
    try:
        s = store.legacy0x_schema()
        out["array_type"] = "dense" if s.dense else "sparse"
        out["schema_form"] = ("GenomicsDB fork, schema version %d" % s.version if s.version is not None
                              else "original Intel-HLS (no version tag)")
        out["array_name_in_schema"] = s.array_name
    except Exception as exc:
        store.problems.add_error(exc, SCHEMA_FILE, "0.x array schema")
    paths = store.fragment_paths()
    uncommitted = [p for p in paths if store.fragment(p).uncommitted_reasons()]
    out["counts"] = {"fragments": len(paths), "committed_fragments": len(paths) - len(uncommitted),
                     "uncommitted_fragments": len(uncommitted), "schemas": len(store.schema_files())}
    if uncommitted:
        out["uncommitted_fragments"] = uncommitted
    out["sizes"] = store.disk_usage()
    out["problems"] = store.findings()
    return out


# -- one fragment ---------------------------------------------------------------------------

def fragment_dir(frag: Legacy0xFragment) -> DirNode:
    problems = frag.problems
    t = frag.mtime()
    store = frag.store

    def children():
        return {
            "fragment.yaml": LiveFile(guarded(lambda: to_yaml(fragment_summary(frag)), problems, frag.rel,
                                              "fragment"), mtime=t),
            "book_keeping.yaml": yaml_file(lambda: book_keeping_to_dict(frag.book_keeping(), frag.schema()),
                                           problems, f"{frag.rel}/{BOOK_KEEPING_FILE}", "book-keeping", mtime=t),
            "rtree": StaticDir(guarded_children(lambda: _rtree(frag), frag), immutable=True, mtime=t),
            "tiles.csv": CachedFile(store.cache, ("zero tiles.csv", store.path, frag.rel),
                                    guarded(lambda: tiles_csv(frag), problems, frag.rel, "tile list"), mtime=t),
            "attrs": StaticDir(guarded_children(lambda: _field_dirs(frag, coords=False), frag), immutable=True,
                               mtime=t),
            "dims": StaticDir(guarded_children(lambda: _field_dirs(frag, coords=True), frag), immutable=True,
                              mtime=t),
            "raw": StaticDir(lambda: {n: RawFile(store, f"{frag.rel}/{n}", size, t) for n, size in frag.files()},
                             immutable=True, mtime=t),
        }

    return StaticDir(children, immutable=True, mtime=t)


def fragment_summary(frag: Legacy0xFragment) -> dict:
    out: dict = {"name": frag.name, "path": frag.rel, "layout": "TileDB 0.x"}
    try:
        out.update(name_to_dict(frag.parsed_name))
    except Exception as exc:
        frag.problems.add_error(exc, frag.rel, "0.x fragment name")
    reasons = frag.uncommitted_reasons()
    out["committed"] = not reasons
    if reasons:
        out["uncommitted"] = reasons
    try:
        schema = frag.schema()
        bk = frag.book_keeping()
        out["type"] = "dense" if schema.dense else "sparse"
        out["tile_count"] = frag.tile_count()
        out["cell_count"] = frag.cell_count()
        out["non_empty_domain"] = {d: list(r) for d, r in zip(schema.dimensions, bk.non_empty_domain)}
        if schema.dense:
            out["tile_grid"] = frag.dense_tile_grid()
        out["fields"] = {escape_name(f.name): f.name for f in frag.fields()}
    except Exception:
        pass  # recorded in problems
    out["files"] = {name: size for name, size in frag.files()}
    out["problems"] = merged(frag.store.fragment_findings(frag), frag.problems.items)
    return out


def _rtree(frag: Legacy0xFragment) -> dict:
    dims = frag.schema().dimensions
    header = ["mbr"] + [f"{d}_{end}" for d in dims for end in ("min", "max")]

    def render():
        mbrs = frag.book_keeping().mbrs
        return to_csv(header, ([i] + m.reshape(-1).tolist() for i, m in enumerate(mbrs)))

    return {"level_0.csv": CachedFile(frag.store.cache, ("zero rtree", frag.store.path, frag.rel),
                                      guarded(render, frag.problems, frag.rel, "MBRs"), mtime=frag.mtime())}


def tiles_csv(frag: Legacy0xFragment) -> bytes:
    n = frag.tile_count()
    header = ["tile", "cells"]
    columns = [[frag.tile_cell_num(k) for k in range(n)]]
    for f in frag.fields():
        for stream in _streams(f):
            suffix = "_var" if stream == VAR else ""
            stem = escape_name(f.name)
            try:
                locs = [frag.location(f, k, stream) for k in range(n)]
            except Exception:
                continue  # recorded; the rest of the table still shows
            header += [f"{stem}{suffix}_offset", f"{stem}{suffix}_persisted_size", f"{stem}{suffix}_size"]
            columns += [[l.offset for l in locs], [l.persisted_size for l in locs], [l.unfiltered_size for l in locs]]
    return to_csv(header, zip(range(n), *columns))


def _streams(field) -> list[str]:
    return [DATA, VAR] if field.var_sized else [DATA]


def _field_dirs(frag: Legacy0xFragment, coords: bool) -> dict:
    out = {}
    for f in frag.fields():
        if (f.kind == COORDINATES) != coords:
            continue
        out[escape_name(f.name)] = StaticDir(lambda f=f: _tile_files(frag, f), immutable=True, mtime=frag.mtime())
        if coords:
            for d, dim in enumerate(frag.schema().dimensions):
                out[escape_name(dim)] = StaticDir(lambda f=f, d=d: _dim_files(frag, f, d), immutable=True,
                                                  mtime=frag.mtime())
    return out


class Legacy0xTileFile(FileNode):
    """A decoded stream of one tile: exact size from the book-keeping, decoded on first read.
    `column` picks one dimension out of interleaved coordinates."""

    immutable = True

    def __init__(self, frag: Legacy0xFragment, field, k: int, stream: str, column: int | None = None):
        self._frag, self._field, self._k, self._stream, self._column = frag, field, k, stream, column
        self._mtime = frag.mtime()

    def mtime(self) -> float:
        return self._mtime

    def size(self) -> int:
        try:
            size = self._frag.location(self._field, self._k, self._stream).unfiltered_size
        except Exception as exc:
            raise ViewError(str(exc)) from None
        return size // self._frag.schema().dim_num if self._column is not None else size

    def read(self, offset: int, size: int) -> bytes:
        try:
            frag = self._frag
            if self._column is None:
                data = frag.tile(self._field, self._k, self._stream).data
            else:  # split once, not on every 128 KiB read
                key = ("zero column", frag.store.path, frag.rel, self._k, self._column)
                data = frag.store.cache.get_or_make(key, lambda: _with_cost(coords_column(
                    frag, frag.tile(self._field, self._k, self._stream).data, self._column)))
        except Exception as exc:
            raise ViewError(str(exc)) from None
        return data[offset:offset + size]


def _with_cost(data: bytes):
    return data, len(data) + 64


def coords_column(frag: Legacy0xFragment, data: bytes, d: int) -> bytes:
    s = frag.schema()
    values = np.frombuffer(data[: len(data) - len(data) % s.coords_size], s.coord_type.dtype)
    return np.ascontiguousarray(values.reshape(-1, s.dim_num)[:, d]).tobytes()


def _tile_files(frag: Legacy0xFragment, field) -> dict:
    t = frag.mtime()
    cache = frag.store.cache
    stem = escape_name(field.name)
    where = f"{frag.rel}/{field.name}"
    out = {"info.yaml": yaml_file(lambda: field_info(frag, field), frag.problems, frag.rel, "field info", mtime=t)}
    for k in range(frag.tile_count()):
        out[f"tile_{k}.bin"] = Legacy0xTileFile(frag, field, k, DATA)
        if field.var_sized:
            out[f"tile_{k}.var.bin"] = Legacy0xTileFile(frag, field, k, VAR)
        key = (frag.store.path, frag.rel, stem, k)
        out[f"tile_{k}.txt"] = CachedFile(cache, ("zero txt",) + key,
                                          guarded(lambda k=k: tile_text(frag, field, k), frag.problems, where,
                                                  f"tile {k}"), mtime=t)
        out[f"tile_{k}.yaml"] = CachedFile(cache, ("zero tileyaml",) + key,
                                           guarded(lambda k=k: to_yaml(tile_record(frag, field, k)), frag.problems,
                                                   where, f"tile {k}"), mtime=t)
    return out


def _dim_files(frag: Legacy0xFragment, field, d: int) -> dict:
    t = frag.mtime()
    s = frag.schema()
    dim = s.dimensions[d]
    out = {"info.yaml": yaml_file(lambda: {"name": dim, "kind": "dimension", "index": d,
                                           "datatype": s.coord_type.name, "cell_val_num": 1,
                                           "split_from": f"{COORDS}.tdb (interleaved coordinates)",
                                           "tile_count": frag.tile_count()},
                                  frag.problems, frag.rel, "field info", mtime=t)}
    for k in range(frag.tile_count()):
        out[f"tile_{k}.bin"] = Legacy0xTileFile(frag, field, k, DATA, column=d)

        def text(k=k):
            col = np.frombuffer(coords_column(frag, frag.tile(field, k, DATA).data, d), s.coord_type.dtype)
            return fixed_cells_text(col, 1, False, None)

        out[f"tile_{k}.txt"] = CachedFile(frag.store.cache, ("zero dimtxt", frag.store.path, frag.rel, d, k),
                                          guarded(text, frag.problems, f"{frag.rel}/{COORDS}", f"tile {k}"), mtime=t)
        out[f"tile_{k}.yaml"] = CachedFile(frag.store.cache, ("zero dimyaml", frag.store.path, frag.rel, d, k),
                                           guarded(lambda k=k: to_yaml(coords_dim_record(frag, field, d, k)),
                                                   frag.problems, f"{frag.rel}/{COORDS}", f"tile {k}"), mtime=t)
    return out


def coords_dim_record(frag: Legacy0xFragment, field, d: int, k: int) -> dict:
    """Tile K of one dimension: nothing of it is stored apart, so its record is the __coords tile
    it is cut from (where it is on disk, its codec, how it decoded), and where the column sits in it."""
    s = frag.schema()
    out = tile_record(frag, field, k)
    out.update({"field": s.dimensions[d], "stem": escape_name(s.dimensions[d]), "dimension_index": d,
                "datatype": s.coord_type.name, "derived_from": f"{COORDS}/tile_{k}.bin",
                "coords_layout": f"interleaved: each cell's {s.dim_num} coordinates together, this dimension's "
                                 f"at byte {d * s.coord_type.size} of every {s.coords_size}-byte cell",
                "size": frag.tile_cell_num(k) * s.coord_type.size})
    return out


def field_info(frag: Legacy0xFragment, field) -> dict:
    files = dict(frag.files())
    if field.kind == COORDINATES:
        s = frag.schema()
        out = {"name": COORDS, "kind": "coordinates", "index": field.idx, "datatype": s.coord_type.name,
               "cell_val_num": s.dim_num, "dimensions": list(s.dimensions),
               "compression": {"data": s.coords_compression.to_dict()}}
    else:
        a = field.attribute
        out = {"name": a.name, "stem": escape_name(a.name), "kind": "attribute", "index": field.idx,
               "datatype": a.datatype.name, "cell_val_num": "var" if a.var_sized else a.cell_val_num,
               "compression": {"data": a.compression.to_dict()}}
        if a.var_sized:
            out["compression"] = {"offsets": a.offsets_compression.to_dict(), "var": a.compression.to_dict()}
    out["data_files"] = {n: files.get(n) for n in
                         [field.name + ".tdb"] + ([field.name + "_var.tdb"] if field.var_sized else [])}
    out["tile_count"] = frag.tile_count()
    return out


def tile_text(frag: Legacy0xFragment, field, k: int) -> bytes:
    data = frag.tile(field, k, DATA).data
    if field.kind == COORDINATES:
        s = frag.schema()
        values = np.frombuffer(data[: len(data) - len(data) % s.coord_type.size], s.coord_type.dtype)
        return fixed_cells_text(values, s.dim_num, False, None)
    a = field.attribute
    dt = a.datatype
    if a.var_sized:
        offsets = np.frombuffer(data, "<u8").astype(np.int64) - frag.var_base(field, k)
        return var_cells_text(offsets, frag.tile(field, k, VAR).data, dt.dtype, dt.is_string, None)
    values = np.frombuffer(data[: len(data) - len(data) % dt.size], dt.dtype)
    return fixed_cells_text(values, a.cell_val_num, dt.is_string, None)


def tile_record(frag: Legacy0xFragment, field, k: int) -> dict:
    out = {"field": field.name, "stem": escape_name(field.name), "tile": k, "cells": frag.tile_cell_num(k),
           "streams": {}}
    for stream in _streams(field):
        entry: dict = {}
        try:
            loc = frag.location(field, k, stream)
            entry.update({"file": loc.file, "offset": loc.offset, "persisted_size": loc.persisted_size,
                          "unfiltered_size": loc.unfiltered_size,
                          "located_by": "book-keeping offsets" if loc.compressed else "fixed position (uncompressed)",
                          "compression": frag.codec(field, stream).to_dict()})
            tile = frag.tile(field, k, stream)
            entry["decoded"] = dict(tile.record)
            if stream == DATA and field.var_sized:
                stored = np.frombuffer(tile.data, "<u8")
                base = frag.var_base(field, k)
                entry["var_base"] = base
                entry["offsets_stored"] = stored.tolist()
                entry["offsets_tile_relative"] = (stored.astype(np.int64) - base).tolist()
        except Exception as exc:
            entry["error"] = str(exc)
        name = ("offsets" if field.var_sized else "data") if stream == DATA else "var"
        out["streams"][name] = entry
    return out


# -- names -------------------------------------------------------------------------------------

_ESCAPE = {"%": "%25", "/": "%2F", "\0": "%00"}


def escape_name(name: str) -> str:
    """A name as a file name: '%', '/' and NUL percent-escaped; '.' and '..' too."""
    out = "".join(_ESCAPE.get(ch, ch) for ch in name)
    if out in (".", ".."):
        out = out.replace(".", "%2E")
    return out or "%"


def unescape_name(name: str) -> str:
    from urllib.parse import unquote
    return unquote(name)


def _mtime(store, rel: str) -> float:
    try:
        return store.stat(rel).st_mtime
    except OSError:
        return 0.0


ARRAY_README = """\
tdbfs: a read-only view of a TileDB 0.x array (Intel-HLS TileDB / GenomicsDB)
==============================================================================

Every file here is computed from the array's own files on demand; nothing is ever
written to the array (not even the lock file the 0.x library uses). Sizes are exact.
A file that cannot be built reads as an I/O error; the reason, with the file and
byte offset, is under `problems` in array.yaml and in the fragment's fragment.yaml.

  array.yaml              path, dense/sparse, schema form, fragment counts
                          (committed and not), sizes, problems found so far
  schema/                 __array_schema.tdb decoded (versioned GenomicsDB form or
                          the original untagged form); current.yaml links to it
  fragments/<name>/       one folder per fragment folder, named as on disk, hidden
                          `.__*` and unfinished ones included (they are flagged)
    fragment.yaml         parsed name (writer id: uuid/MAC/thread id, timestamp in
                          ms and ISO 8601), committed or why not, dense/sparse,
                          tile and cell counts, non-empty domain, files, problems
    book_keeping.yaml     __book_keeping.tdb.gz decoded: non-empty domain, MBRs,
                          bounding coordinates, tile offsets, var tile offsets and
                          sizes, last tile cell number
    rtree/level_0.csv     the MBR of every data tile (sparse fragments)
    tiles.csv             per tile: offset, size on disk and decoded size in every
                          data file
    attrs/<name>/         per attribute, named as on disk (`<name>.tdb`):
      info.yaml           type, cell_val_num, compression (offsets and values)
      tile_K.bin          tile K decompressed, pre-filters undone (var-sized: its
                          uint64 offsets as stored, relative to the fragment)
      tile_K.var.bin      var-sized: tile K's values
      tile_K.txt          tile K's cells, one JSON value per line
      tile_K.yaml         where tile K is on disk, its codec, and for var-sized
                          attributes the offsets both as stored and tile-relative
    dims/__coords/        the coordinates tiles as stored (interleaved per cell)
    dims/<dimension>/     the same coordinates split per dimension; its tile_K.yaml
                          names the __coords tile it is cut from
    raw/                  the fragment's files, byte for byte

Tile numbers K start at 0 and follow the order of tiles in the data file.
"""

WORKSPACE_README = """\
tdbfs: a read-only view of a TileDB 0.x workspace (e.g. a GenomicsDB workspace)
================================================================================

  workspace.yaml          the arrays (with fragment counts, uncommitted ones
                          included), groups and files of the workspace
  arrays/<name>/          each array, found in the workspace and its groups, shown
                          with the tree of a 0.x array (its README.txt says more);
                          an array inside a group is named <group>%2F<array>
  files/                  the files at the workspace root (GenomicsDB keeps
                          callset.json, vidmap.json, vcfheader.vcf there), byte for byte
"""
