"""The folder of one fragment: fragment.yaml, footer.yaml, rtree/, tiles.csv, attrs/, dims/, raw/."""

from __future__ import annotations

import numpy as np

from ..format import fragment_metadata as fm
from ..format.filters import pipeline_to_dict
from ..store.fragment import DATA, VAR, VALIDITY, Fragment
from ..store.problems import merged
from . import layout_views
from .common import CachedFile, StateFile, guarded, yaml_file
from .nodes import DirNode, FileNode, StaticDir, ViewError
from .render import fixed_cells_text, to_csv, to_yaml, var_cells_text


def fragment_dir(store, rel: str) -> DirNode:
    return FragmentDir(store.fragment(rel))


class FragmentDir(DirNode):
    """A fragment's folder. Built once for a committed fragment, whose files never change; built again
    whenever the files of a fragment that is not committed yet change (it may still be being written),
    whose nodes are then never immutable, so the kernel keeps no page of them."""

    def __init__(self, frag: Fragment):
        self.frag = frag
        self._built = None   # (cache token, children)

    def children(self):
        token = self.frag.cache_token()
        built = self._built
        if built is None or built[0] != token:
            built = self._built = (token, _fragment_children(self.frag, token))
        return built[1]

    def mtime(self) -> float:
        return self.frag.mtime()


def _fragment_children(frag: Fragment, token) -> dict:
    store, rel, problems = frag.store, frag.rel, frag.problems
    fixed = token == 0  # committed: nothing under it changes again
    key = (rel, token)
    t = frag.mtime()
    return {
        "fragment.yaml": StateFile(guarded(lambda: to_yaml(fragment_summary(frag)), problems, rel, "fragment"),
                                   lambda: _summary_state(frag), mtime=t),
        "footer.yaml": yaml_file(lambda: footer_view(frag), problems,
                                 f"{rel}/__fragment_metadata.tdb", "footer", immutable=fixed, mtime=t),
        "rtree": StaticDir(guarded_children(lambda: _rtree_children(frag, key, fixed), frag), immutable=fixed,
                           mtime=t),
        "tiles.csv": CachedFile(store.cache, ("tiles.csv", key),
                                guarded(lambda: tiles_csv(frag), problems, rel, "tile list"), immutable=fixed,
                                mtime=t),
        "attrs": StaticDir(guarded_children(lambda: _field_dirs(frag, False, key, fixed), frag), immutable=fixed,
                           mtime=t),
        "dims": StaticDir(guarded_children(lambda: _field_dirs(frag, True, key, fixed), frag), immutable=fixed,
                          mtime=t),
        "raw": StaticDir(lambda: {n: RawFile(store, f"{rel}/{n}", size, t, fixed) for n, size in frag.files()},
                         immutable=fixed, mtime=t),
        # Byte maps and hex dumps (layout_views.py).
        # the byte map of every file: every generic tile is decoded for it, as `tdbfs check` does
        "layout.csv": CachedFile(store.cache, ("layout.csv", key),
                                 guarded(lambda: _decoded(frag) and layout_views.layout_csv(frag), problems, rel,
                                         "byte map"), immutable=fixed, mtime=t),
        "layout": StaticDir(guarded_children(lambda: layout_views.layout_children(frag), frag),
                            immutable=fixed, mtime=t),
        "hex": StaticDir(guarded_children(lambda: layout_views.hex_children(frag), frag),
                         immutable=fixed, mtime=t),
    }


def _decoded(frag: Fragment) -> bool:
    frag.decode_metadata()
    return True


def guarded_children(make, frag: Fragment):
    def run():
        try:
            return make()
        except ViewError:
            raise
        except FileNotFoundError as exc:
            raise ViewError(str(exc)) from None
        except Exception as exc:
            problem = frag.problems.add_error(exc, frag.rel, "fragment metadata")
            raise ViewError(problem["message"]) from None
    return run


class RawFile(FileNode):
    def __init__(self, store, rel: str, size: int, mtime: float = 0.0, immutable: bool = True):
        self._store, self._rel, self._size, self._mtime = store, rel, size, mtime
        self.immutable = immutable

    def mtime(self) -> float:
        return self._mtime

    def size(self) -> int:
        return self._size

    def read(self, offset: int, size: int) -> bytes:
        size = max(0, min(size, self._size - offset))
        try:
            return self._store.pread(self._rel, offset, size) if size else b""
        except OSError as exc:  # gone, or no longer a regular file: the folder's findings say so
            raise ViewError(f"{self._rel}: {exc.strerror or exc}") from None


#: tiles from this size on have the next tile decoded ahead (smaller ones decode faster than a handoff pays)
DECODE_AHEAD_MIN = 1 << 20
#: how many tiles ahead (more did not pay on 2 cores: the FUSE loop needs the other one)
DECODE_AHEAD_TILES = 1


class TileFile(FileNode):
    """A decoded stream of one tile: exact size from metadata, bytes decoded on first read."""

    def __init__(self, frag: Fragment, field, k: int, stream: str, mtime: float = 0.0, immutable: bool = True):
        self._frag, self._field, self._k, self._stream, self._mtime = frag, field, k, stream, mtime
        self.immutable = immutable

    def mtime(self) -> float:
        return self._mtime

    def size(self) -> int:
        try:
            return self._frag.unfiltered_size(self._field, self._k, self._stream)
        except Exception as exc:
            p = self._frag.problems.add_error(exc, self._frag._file(self._field.stem), f"tile {self._k}")
            raise ViewError(p["message"]) from None

    def read(self, offset: int, size: int) -> bytes:
        try:
            if offset == 0 and self.size() >= DECODE_AHEAD_MIN:
                # a reader from the start of a big tile: decode the next ones while this one is
                # decoded and served
                for j in range(1, DECODE_AHEAD_TILES + 1):
                    self._frag.decode_ahead(self._field, self._k + j, self._stream)
            tile = self._frag.tile(self._field, self._k, self._stream)
        except FileNotFoundError as exc:
            raise ViewError(str(exc)) from None
        except Exception as exc:
            raise ViewError(str(exc)) from None
        return memoryview(tile.data)[offset:offset + size]  # no copy: the FUSE layer copies it once


def footer_view(frag: Fragment) -> dict:
    legacy = frag.legacy_metadata()
    if legacy is not None:
        return fm.legacy_footer_to_dict(legacy, frag.footer().dense)
    return fm.footer_to_dict(frag.footer())


# -- fragment.yaml -------------------------------------------------------------------

def _summary_state(frag: Fragment):
    """What fragment.yaml depends on that can change: the commit and vacuum files, the folder's entries
    and the problems found (None: unknown, render again)."""
    commits = frag.store.commits_state()
    if commits is None:
        return None
    try:
        return commits, frag.signature(), len(frag.problems.items)
    except OSError:
        return None


def fragment_summary(frag: Fragment) -> dict:
    out: dict = {"name": frag.name, "path": frag.rel}
    try:
        n = frag.parsed_name
        out.update({"t1": n.t1, "t2": n.t2, "t1_iso": n.t1_iso, "t2_iso": n.t2_iso, "uuid": n.uuid,
                    "name_version": n.name_version, "version": n.assumed_format_version})
    except Exception as exc:
        frag.problems.add_error(exc, frag.rel, "fragment name")
    try:
        footer = frag.footer()
        schema = frag.schema()
        out["format_version"] = footer.version
        out["array_schema_name"] = getattr(footer, "array_schema_name", None) or "__array_schema.tdb"
        out["type"] = "dense" if footer.dense else "sparse"
        tiles = frag.tile_count()
        out["tile_count"] = tiles
        if tiles:
            out["cell_count"] = (tiles - 1) * frag.cells_per_full_tile() + frag.tile_cell_num(tiles - 1)
        else:
            out["cell_count"] = 0
        if footer.null_non_empty_domain:
            out["non_empty_domain"] = None
        else:
            out["non_empty_domain"] = {d.name: list(r) for d, r in zip(schema.dimensions, footer.non_empty_domain)}
        out["has_timestamps"] = bool(getattr(footer, "has_timestamps", False))
        out["has_delete_meta"] = bool(getattr(footer, "has_delete_meta", False))
        out["fields"] = {f.stem: f.name for f in frag.stored_fields()}
        g = footer.generic_tile_offsets
        if g is not None and g.fragment_min_max_sum_null_count is not None:      # v>=12
            out["fragment_statistics"] = fm.fragment_summary_to_dict(frag.fragment_min_max_sum_null_count(),
                                                                     frag.fields())
        if g is not None and g.processed_conditions is not None:                 # v>=16
            out["processed_conditions"] = list(frag.processed_conditions())
    except Exception:
        pass  # recorded in problems by the store
    out["files"] = {name: size for name, size in frag.files()}
    special = frag.special_entries()
    if special:
        out["special_files"] = {e.name: e.kind + (f" -> {e.target}" if e.target is not None else "")
                                for e in special}
    commits = frag.store.committed_fragment_names()
    out["committed"] = frag.name in commits
    if frag.name in commits:
        out["commit_file"] = commits[frag.name]
    vacuumed_by = frag.store.vacuum_lists().get(frag.name)
    out["to_vacuum"] = vacuumed_by is not None
    if vacuumed_by:
        out["vacuum_file"] = vacuumed_by
    # last: what the parses above found is part of it
    out["problems"] = merged(frag.store.fragment_findings(frag), frag.problems.items)
    return out


# -- rtree/ --------------------------------------------------------------------------

def _rtree_children(frag: Fragment, key, fixed: bool) -> dict:
    rtree = frag.rtree()
    dims = frag.schema().dimensions
    header = ["mbr"] + [f"{d.name}_{end}" for d in dims for end in ("min", "max")]
    out = {}
    for level in range(len(rtree.levels)):
        def render(level=level):
            rows = fm.rtree_level_rows(rtree, level)
            return to_csv(header, ([i] + list(row) for i, row in enumerate(rows)))
        out[f"level_{level}.csv"] = CachedFile(frag.store.cache, ("rtree", key, level),
                                               guarded(render, frag.problems, frag.rel, "R-tree"), immutable=fixed,
                                               mtime=frag.mtime())
    return out


# -- tiles.csv -------------------------------------------------------------------------

def tiles_csv(frag: Fragment) -> bytes:
    footer = frag.footer()
    fields = frag.stored_fields()
    ntiles = frag.tile_count()
    header = ["tile", "cells"]
    columns = []
    cells = np.array([frag.tile_cell_num(k) for k in range(ntiles)], dtype=np.int64)
    columns.append(cells)
    for f in fields:
        streams = [DATA] + ([VAR] if f.var_sized else []) + ([VALIDITY] if f.nullable else [])
        for stream in streams:
            suffix = "" if stream == DATA else f"_{stream}"
            locs = [frag.location(f, k, stream) for k in range(ntiles)]
            header += [f"{f.stem}{suffix}_offset", f"{f.stem}{suffix}_persisted_size", f"{f.stem}{suffix}_size"]
            columns += [[l.offset for l in locs], [l.persisted_size for l in locs], [l.unfiltered_size for l in locs]]
        if footer.version >= 11:
            for label, get in (("min", lambda: frag.tile_min_max("min", f.idx)),
                               ("max", lambda: frag.tile_min_max("max", f.idx)),
                               ("sum", lambda: frag.tile_sums(f.idx)),
                               ("null_count", lambda: frag.tile_null_counts(f.idx))):
                try:
                    values = list(get())
                except Exception:
                    values = []
                if len(values) == ntiles and ntiles:
                    header.append(f"{f.stem}_{label}")
                    columns.append([_cell_value(v) for v in values])
    rows = zip(range(ntiles), *columns) if columns else ([k] for k in range(ntiles))
    return to_csv(header, rows)


def _cell_value(v):
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, (bytes, bytearray)):
        return v.decode("utf-8", errors="backslashreplace")
    if isinstance(v, np.ndarray):
        return " ".join(str(x) for x in v.tolist())
    return v


# -- attrs/<stem>/ and dims/<stem>/ ------------------------------------------------------

def _field_dirs(frag: Fragment, dims: bool, key, fixed: bool) -> dict:
    out = {}
    for f in frag.stored_fields():
        if (f.kind in (fm.DIMENSION, fm.COORDS)) != dims:
            continue
        out[f.stem] = StaticDir(lambda f=f: _tile_files(frag, f, key, fixed), immutable=fixed, mtime=frag.mtime())
        if f.kind == fm.COORDS:
            # Formats 1-4: one __coords.tdb for all dimensions, shown as stored and split per dimension.
            for j, d in enumerate(frag.schema().dimensions):
                out[coords_dim_stem(d.name, j)] = StaticDir(
                    lambda j=j, f=f: _coords_dim_files(frag, f, j, key, fixed), immutable=fixed, mtime=frag.mtime())
    return out


def coords_dim_stem(name: str, j: int) -> str:
    """Folder of one dimension split out of __coords: its name, as formats <= 7 named data files."""
    if name in ("", ".", "..", fm.COORDS_NAME) or "/" in name or "\0" in name:
        return f"d{j}"
    return name


class CoordsDimTile(FileNode):
    """Dimension j's coordinates of one legacy __coords tile (derived from the decoded tile)."""

    def __init__(self, frag: Fragment, coords, j: int, k: int, mtime: float = 0.0, immutable: bool = True):
        self._frag, self._coords, self._j, self._k, self._mtime = frag, coords, j, k, mtime
        self.immutable = immutable

    def mtime(self) -> float:
        return self._mtime

    def size(self) -> int:
        try:
            return self._frag.tile_cell_num(self._k) * self._frag.schema().dimensions[self._j].coord_size
        except Exception as exc:
            raise ViewError(str(exc)) from None

    def read(self, offset: int, size: int) -> bytes:
        try:
            data = coords_dim_values(self._frag, self._coords, self._j, self._k).tobytes()
        except Exception as exc:
            raise ViewError(str(exc)) from None
        return data[offset:offset + size]


def coords_dim_values(frag: Fragment, coords, j: int, k: int) -> np.ndarray:
    tile = frag.tile(coords, k, DATA)
    loc = frag.location(coords, k, DATA)
    zipped = fm.coords_zipped(frag.footer().version, frag.schema().coords_filters)
    return fm.split_coords(tile.data, frag.schema().dimensions, zipped, loc.file, f"tile {k}", loc.offset)[j]


def _coords_dim_files(frag: Fragment, coords, j: int, key, fixed: bool) -> dict:
    t = frag.mtime()
    dim = frag.schema().dimensions[j]
    ntiles = frag.tile_count(coords.idx)
    where = f"{frag.rel}/{coords.file}"
    out = {"info.yaml": yaml_file(lambda: coords_dim_info(frag, coords, j), frag.problems, where,
                                  "field info", immutable=fixed, mtime=t)}
    for k in range(ntiles):
        out[f"tile_{k}.bin"] = CoordsDimTile(frag, coords, j, k, t, fixed)
        out[f"tile_{k}.txt"] = CachedFile(
            frag.store.cache, ("coords_txt", key, j, k),
            guarded(lambda k=k: fixed_cells_text(coords_dim_values(frag, coords, j, k), 1,
                                                 dim.datatype.is_string, None),
                    frag.problems, where, f"tile {k}"), immutable=fixed, mtime=t)
        out[f"tile_{k}.yaml"] = CachedFile(
            frag.store.cache, ("coords_yaml", key, j, k),
            guarded(lambda k=k: to_yaml(coords_dim_record(frag, coords, j, k)), frag.problems, where,
                    f"tile {k}"), immutable=fixed, mtime=t)
    return out


def _layout(frag: Fragment) -> str:
    if fm.coords_zipped(frag.footer().version, frag.schema().coords_filters):
        return "zipped (one value per dimension, cell after cell)"
    return "unzipped (all values of each dimension, dimension after dimension)"


def coords_dim_info(frag: Fragment, coords, j: int) -> dict:
    d = frag.schema().dimensions[j]
    return {"name": d.name, "stem": coords_dim_stem(d.name, j), "kind": "dimension", "position": j,
            "datatype": d.datatype.name, "cell_val_num": 1, "nullable": False,
            "derived_from": coords.file, "coords_layout": _layout(frag),
            "filters": {"data": pipeline_to_dict(frag.pipeline(coords, DATA))},
            "data_files": {coords.file: dict(frag.files()).get(coords.file)},
            "tile_count": frag.tile_count(coords.idx)}


def coords_dim_record(frag: Fragment, coords, j: int, k: int) -> dict:
    out = tile_record(frag, coords, k)
    out.update({"field": frag.schema().dimensions[j].name, "stem": coords_dim_stem(frag.schema().dimensions[j].name, j),
                "derived_from": f"{coords.stem}/tile_{k}.bin", "coords_layout": _layout(frag)})
    return out


def _tile_files(frag: Fragment, field, key, fixed: bool) -> dict:
    ntiles = frag.tile_count(field.idx)
    t = frag.mtime()
    out = {"info.yaml": yaml_file(lambda: field_info(frag, field), frag.problems, frag.rel, "field info",
                                  immutable=fixed, mtime=t)}
    cache = frag.store.cache
    for k in range(ntiles):
        out[f"tile_{k}.bin"] = TileFile(frag, field, k, DATA, t, fixed)
        if field.var_sized:
            out[f"tile_{k}.var.bin"] = TileFile(frag, field, k, VAR, t, fixed)
        if field.nullable:
            out[f"tile_{k}.validity.bin"] = TileFile(frag, field, k, VALIDITY, t, fixed)
        out[f"tile_{k}.txt"] = CachedFile(cache, ("txt", key, field.idx, k),
                                          guarded(lambda k=k: tile_text(frag, field, k), frag.problems,
                                                  f"{frag.rel}/{field.stem}", f"tile {k}"), immutable=fixed, mtime=t)
        out[f"tile_{k}.yaml"] = CachedFile(cache, ("tileyaml", key, field.idx, k),
                                           guarded(lambda k=k: to_yaml(tile_record(frag, field, k)), frag.problems,
                                                   f"{frag.rel}/{field.stem}", f"tile {k}"), immutable=fixed,
                                           mtime=t)
    return out


def _streams(field) -> list[str]:
    return [DATA] + ([VAR] if field.var_sized else []) + ([VALIDITY] if field.nullable else [])


def field_info(frag: Fragment, field) -> dict:
    out = {"name": field.name, "stem": field.stem, "kind": field.kind, "index": field.idx,
           "datatype": field.datatype.name,
           "cell_val_num": "var" if field.var_sized else field.cell_val_num,
           "nullable": bool(field.nullable)}
    files = dict(frag.files())
    out["filters"] = {}
    out["data_files"] = {}
    names = {DATA: "offsets" if field.var_sized else "data", VAR: "var", VALIDITY: "validity"}
    suffix = {DATA: ".tdb", VAR: "_var.tdb", VALIDITY: "_validity.tdb"}
    for stream in _streams(field):
        out["filters"][names[stream]] = pipeline_to_dict(frag.pipeline(field, stream))
        fname = field.stem + suffix[stream]
        out["data_files"][fname] = files.get(fname)
    out["tile_count"] = frag.tile_count(field.idx)
    if field.kind == fm.COORDS:
        out["dimensions"] = [d.name for d in frag.schema().dimensions]
        out["coords_layout"] = _layout(frag)
        out["split_into"] = [coords_dim_stem(d.name, j) for j, d in enumerate(frag.schema().dimensions)]
    return out


def tile_text(frag: Fragment, field, k: int) -> bytes:
    validity = None
    if field.nullable:
        validity = np.frombuffer(frag.tile(field, k, VALIDITY).data, np.uint8)
    data = frag.tile(field, k, DATA).data
    dt = field.datatype
    if field.kind == fm.COORDS:
        # One line per cell, [d0, d1, ...], whichever way the tile stores them.
        dims = frag.schema().dimensions
        cols = [coords_dim_values(frag, field, j, k) for j in range(len(dims))]
        values = np.stack(cols, axis=1).reshape(-1) if cols else np.array([])
        return fixed_cells_text(values, len(dims), dt.is_string, None)
    if field.var_sized:
        offsets = np.frombuffer(data, "<u8")
        values = frag.tile(field, k, VAR).data
        return var_cells_text(offsets, values, dt.dtype, dt.is_string, validity)
    values = np.frombuffer(data[: len(data) - len(data) % dt.size], dt.dtype)
    return fixed_cells_text(values, field.cell_val_num, dt.is_string, validity)


def tile_record(frag: Fragment, field, k: int) -> dict:
    out = {"field": field.name, "stem": field.stem, "tile": k, "cells": frag.tile_cell_num(k), "streams": {}}
    for stream in _streams(field):
        entry: dict = {}
        try:
            loc = frag.location(field, k, stream)
            entry.update({"file": loc.file, "offset": loc.offset, "persisted_size": loc.persisted_size,
                          "unfiltered_size": loc.unfiltered_size})
            pipe = frag.pipeline(field, stream)
            entry["filters"] = [f.name for f in pipe.filters]
            tile = frag.tile(field, k, stream)
            entry["chunks"] = [_chunk_dict(c) for c in tile.chunks]
            if stream == DATA and frag.offsets_embedded(field):
                entry["rebuilt_from"] = ("var: the first var filter embeds the string lengths, so the offsets "
                                         "file holds an empty tile and the offsets are rebuilt from the var tile")
            checks = [c for ch in tile.chunks for s in ch.stages for c in s.get("checksums", [])]
            if checks:
                entry["checksums"] = "ok" if all(c["ok"] for c in checks) else "FAILED"
        except Exception as exc:
            entry["error"] = str(exc)
        out["streams"][stream if stream != DATA else ("offsets" if field.var_sized else "data")] = entry
    return out


def _chunk_dict(c) -> dict:
    h = c.header
    return {"index": h.index, "offset": h.offset, "unfiltered_size": h.unfiltered_size,
            "filtered_size": h.filtered_size, "metadata_size": h.metadata_size,
            "stages": list(c.stages)}
