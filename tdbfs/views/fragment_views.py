"""The folder of one fragment, of either layout (TileDB 2.x or 0.x), built once from the fragment
interface (store/fragment_interface.py): fragment.yaml, tiles.csv, attrs/, dims/ (with coordinates
split per dimension), the tile files and raw/. What only one layout has comes from `own_views`:
footer.yaml, rtree/ and the byte maps for 2.x here, book_keeping.yaml and rtree/ for 0.x in
legacy0x_views.py."""

from __future__ import annotations

from ..format import fragment_metadata as fm
from ..lazy import np
from .describe.filters import describe_pipeline
from .describe.fragment_metadata import (describe_footer, describe_fragment_summary, describe_legacy_footer,
                                         describe_rtree_level)
from ..store import decode_pool
from ..store.fragment import Fragment
from ..store.fragment_interface import DATA, LEGACY0X, STREAM_SUFFIX, VALIDITY, VAR, FragmentLike, streams
from ..store.dense_grid import dense_grid
from ..store.problems import unique
from . import layout_views
from .cells_views import cells_children
from .csv_table import PiecewiseFile
from .tile_lines import TileLines
from .pictures import mbrs_svg_file
from .stats_views import fragment_stats_file
from .common import guarded, guarded_children, yaml_file
from .nodes import (BytesFile, with_cost, kept, DirNode, FileNode, InCache, StaticDir, SymlinkNode, ViewError,
                    WhileState)
from .render import fixed_cells_text, to_csv, to_yaml, var_cells_text
from ..text import escape_name


def fragment_dir(store, rel: str) -> DirNode:
    return FragmentDir(store.fragment(rel))


class FragmentDir(DirNode):
    """A fragment's folder, of either layout. Built once for a committed fragment, whose files never
    change; built again whenever the files of a fragment that is not committed yet change (it may still
    be being written), whose nodes are then never immutable, so the kernel keeps no page of them."""

    def __init__(self, frag: FragmentLike):
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


def own_views(frag: FragmentLike):
    """The views of what only the fragment's layout has (TileDB 2.x: the footer, R-tree and byte maps;
    0.x: the book-keeping), and how that layout words what both have."""
    if frag.layout == LEGACY0X:
        from .legacy0x_fragment_views import LEGACY0X_VIEWS  # its decoders load only for a 0.x array
        return LEGACY0X_VIEWS
    return TILEDB_VIEWS


def _fragment_children(frag: FragmentLike, token) -> dict:
    store, rel, problems = frag.store, frag.rel, frag.problems
    own = own_views(frag)
    fixed = token == 0  # committed: nothing under it changes again
    key = (store.path, rel, token)
    t = frag.mtime()
    out = {"fragment.yaml": BytesFile(guarded(lambda: to_yaml(fragment_summary(frag)), problems, rel, "fragment"),
                                      WhileState(lambda: _summary_state(frag)), mtime=t)}
    out.update(own.metadata_children(frag, key, fixed))
    out.update({
        "stats.csv": fragment_stats_file(frag, key, fixed),
        "tiles.csv": BytesFile(guarded(lambda: tiles_csv(frag), problems, rel, "tile list"),
                               InCache(store.cache, ("tiles.csv", key), immutable=fixed), mtime=t),
        "attrs": StaticDir(guarded_children(lambda: _field_dirs(frag, False, key, fixed), frag), immutable=fixed,
                           mtime=t),
        "dims": StaticDir(guarded_children(lambda: _field_dirs(frag, True, key, fixed), frag), immutable=fixed,
                          mtime=t),
        "fields": StaticDir(guarded_children(lambda: _field_links(frag), frag), immutable=fixed, mtime=t),
    })
    out.update(cells_children(frag, key, fixed))
    out["raw"] = StaticDir(guarded_children(
        lambda: {n: RawFile(store, f"{rel}/{n}", size, t, fixed) for n, size in frag.files()}, frag),
        immutable=fixed, mtime=t)
    out.update(own.map_children(frag, key, fixed))
    return out


def tile_count_or_none(frag: FragmentLike, field) -> int | None:
    """The field's tile count; None (its problem recorded) when its tile offsets do not decode."""
    return frag.attempt(lambda: frag.tile_count(field.idx), frag._file(frag.METADATA_FILE), "tile offsets")


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


#: tiles from this size on have the next tile decoded ahead (smaller ones decode faster than a handoff pays);
#: a sparse tile of 100,000 int32 cells (400 KB) decodes in ~0.5 ms, far more than the handoff
DECODE_AHEAD_MIN = 1 << 17
#: how many tiles ahead: two, so that two background threads (`cache.AHEAD_THREADS`, from 3 cores on)
#: decode side by side; with one thread, two ahead read as fast as one (three did no better)
DECODE_AHEAD_TILES = 2


class TileFile(FileNode):
    """A decoded stream of one tile: exact size from metadata, bytes decoded on first read."""

    def __init__(self, frag: FragmentLike, field, k: int, stream: str, mtime: float = 0.0, immutable: bool = True):
        self._frag, self._field, self._k, self._stream, self._mtime = frag, field, k, stream, mtime
        self.immutable = immutable

    def mtime(self) -> float:
        return self._mtime

    def size(self) -> int:
        if not np.imported():
            decode_pool.warm_numpy()  # the read that follows a stat needs it
        try:
            return self._frag.unfiltered_size(self._field, self._k, self._stream)
        except Exception as exc:
            p = self._frag.problems.add_error(exc, self._frag._file(self._field.stem), f"tile {self._k}")
            raise ViewError(p.message) from None

    def read(self, offset: int, size: int) -> bytes:
        try:
            whole = self.size()
            if offset == 0 and whole >= DECODE_AHEAD_MIN:
                # a reader from the start of a big tile: decode the next ones while this one is
                # decoded and served, as many as fit beside the tiles still being read
                # (`ByteLRU.make_soon`)
                for j in range(1, DECODE_AHEAD_TILES + 1):
                    self._frag.decode_ahead(self._field, self._k + j, self._stream, (self._k, whole))
            tile = self._frag.tile(self._field, self._k, self._stream)
        except Exception as exc:
            raise ViewError(str(exc)) from None
        out = memoryview(tile.data)[offset:offset + size]  # no copy: the FUSE layer copies it once
        # once it has all been served the decoded tile makes way (the page cache holds it)
        self._frag.tile_served(self._field, self._k, self._stream, len(out), whole)
        return out


# -- fragment.yaml -------------------------------------------------------------------

def _summary_state(frag: FragmentLike):
    """What fragment.yaml depends on that can change: the commit and vacuum files, the folder's entries
    and the problems found (None: unknown, render again)."""
    commits = frag.store.commits_state()
    if commits is None:
        return None
    try:
        return commits, frag.signature(), len(frag.problems.items)
    except OSError:
        return None


def fragment_summary(frag: FragmentLike) -> dict:
    own = own_views(frag)
    out: dict = {"name": frag.name, "path": frag.rel}
    own.summary_name(frag, out)
    try:
        out.update(own.summary_metadata(frag))
        out["type"] = "dense" if frag.dense else "sparse"
        out["tile_count"] = frag.tile_count()
        out["cell_count"] = frag.cell_count()
        domain = frag.non_empty_domain()
        out["non_empty_domain"] = None if domain is None else {
            name: list(r) for (name, _), r in zip(frag.dimensions(), domain)}
        out.update(own.summary_shape(frag))
        out["fields"] = {f.stem: f.name for f in frag.stored_fields()}
        out.update(own.summary_statistics(frag))
    except Exception:
        pass  # recorded in problems by the store
    out["files"] = {name: size for name, size in frag.files()}
    own.summary_state(frag, out)
    # last: what the parses above found is part of it
    out["problems"] = [p.to_dict() for p in unique(frag.store.fragment_findings(frag), frag.problems.items)]
    return out


# -- tiles.csv -------------------------------------------------------------------------

def tiles_csv(frag: FragmentLike) -> bytes:
    own = own_views(frag)
    fields = frag.stored_fields()
    ntiles = frag.tile_count()
    header = ["tile", "cells"]
    columns = [[frag.tile_cell_num(k) for k in range(ntiles)]]
    for f in fields:
        for stream in streams(f):
            suffix = "" if stream == DATA else f"_{stream}"
            try:
                locs = [frag.location(f, k, stream) for k in range(ntiles)]
            except Exception:
                if not own.partial_tile_list:
                    raise
                continue  # recorded; the rest of the table still shows
            header += [f"{f.stem}{suffix}_offset", f"{f.stem}{suffix}_persisted_size", f"{f.stem}{suffix}_size"]
            columns += [[l.offset for l in locs], [l.persisted_size for l in locs], [l.unfiltered_size for l in locs]]
        for label, values in frag.tile_statistics(f):
            if len(values) == ntiles and ntiles:
                header.append(f"{f.stem}_{label}")
                columns.append([_cell_value(v) for v in values])
    domains = _tile_domains(frag)
    if domains is not None:
        for j, (name, _) in enumerate(frag.dimensions()):
            header += [f"{name}_lo", f"{name}_hi"]
            columns += [[d[j][0] for d in domains], [d[j][1] for d in domains]]
    return to_csv(header, zip(range(ntiles), *columns))


def _tile_domains(frag: FragmentLike) -> list | None:
    """The (lo, hi) per dimension of every tile of a dense fragment; None for a sparse one, or when the
    schema and metadata make no tile grid (that problem is recorded)."""
    if not frag.dense:
        return None
    try:
        grid = dense_grid(frag)
    except Exception:  # noqa: BLE001 -- recorded by dense_grid; the rest of the table still shows
        return None
    return [grid.tile_domain(k) for k in range(grid.tile_count)]


def _cell_value(v):
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, (bytes, bytearray)):
        return v.decode("utf-8", errors="backslashreplace")
    if isinstance(v, np.ndarray):
        return " ".join(str(x) for x in v.tolist())
    return v


# -- fields/<name> -> ../attrs/<stem> or ../dims/<stem> -------------------------------------

def _field_links(frag: FragmentLike) -> dict:
    """Each stored field by name (escaped as 0.x stems are), linked to its folder; the dimensions split
    out of __coords too."""
    own = own_views(frag)
    out = {}
    for f in frag.stored_fields():
        folder = "dims" if f.kind in (fm.DIMENSION, fm.COORDS) else "attrs"
        out[escape_name(f.name)] = SymlinkNode(f"../{folder}/{f.stem}")
        if f.kind == fm.COORDS:
            for j, (name, _) in enumerate(frag.dimensions()):
                out[escape_name(name)] = SymlinkNode(f"../dims/{own.coords_dim_stem(name, j)}")
    return out


# -- attrs/<stem>/ and dims/<stem>/ ------------------------------------------------------

def _field_dirs(frag: FragmentLike, dims: bool, key, fixed: bool) -> dict:
    own, out, t = own_views(frag), {}, frag.mtime()
    for f in frag.stored_fields():
        if (f.kind in (fm.DIMENSION, fm.COORDS)) != dims:
            continue
        out[f.stem] = StaticDir(guarded_children(lambda f=f: _tile_files(frag, f, key, fixed), frag), fixed, t)
        if f.kind == fm.COORDS:
            # All dimensions in one file (0.x, formats 1-4): shown as stored and split per dimension.
            for j, (name, _) in enumerate(frag.dimensions()):
                out[own.coords_dim_stem(name, j)] = StaticDir(guarded_children(
                    lambda j=j, f=f: _coords_dim_files(frag, f, j, key, fixed), frag), fixed, t)
    return out


class CoordsDimTile(FileNode):
    """Dimension j's coordinates of one tile of all dimensions' coordinates (derived from the decoded tile)."""

    def __init__(self, frag: FragmentLike, coords, j: int, k: int, key, mtime: float = 0.0, immutable: bool = True):
        self._frag, self._coords, self._j, self._k, self._key, self._mtime = frag, coords, j, k, key, mtime
        self.immutable = immutable

    def mtime(self) -> float:
        return self._mtime

    def size(self) -> int:
        try:
            return self._frag.coords_column_size(self._coords, self._k, self._j)
        except Exception as exc:
            raise ViewError(str(exc)) from None

    def read(self, offset: int, size: int) -> bytes:
        frag = self._frag
        try:  # split once, not on every 128 KiB read
            data = frag.store.cache.get_or_make(("coords_bin", self._key, self._j, self._k), lambda: with_cost(
                frag.coords_column(self._coords, self._k, self._j).tobytes()))
        except Exception as exc:
            raise ViewError(str(exc)) from None
        return data[offset:offset + size]


def _coords_dim_files(frag: FragmentLike, coords, j: int, key, fixed: bool) -> dict:
    own = own_views(frag)
    t = frag.mtime()
    is_string = frag.dimensions()[j][1].is_string
    ntiles = tile_count_or_none(frag, coords) or 0
    info_where, where = own.coords_where(frag, coords)
    out = {"info.yaml": yaml_file(lambda: own.coords_dim_info(frag, coords, j), frag.problems, info_where,
                                  "field info", keep=kept(fixed), mtime=t)}
    for k in range(ntiles):
        out[f"tile_{k}.bin"] = CoordsDimTile(frag, coords, j, k, key, t, fixed)
        out[f"tile_{k}.txt"] = BytesFile(
            guarded(lambda k=k: fixed_cells_text(frag.coords_column(coords, k, j), 1, is_string, None),
                    frag.problems, where, f"tile {k}"),
            InCache(frag.store.cache, ("coords_txt", key, j, k), immutable=fixed), mtime=t)
        out[f"tile_{k}.yaml"] = BytesFile(
            guarded(lambda k=k: to_yaml(own.coords_dim_record(frag, coords, j, k, tile_record(frag, coords, k))),
                    frag.problems, where,
                    f"tile {k}"),
            InCache(frag.store.cache, ("coords_yaml", key, j, k), immutable=fixed), mtime=t)
    return out


def _tile_files(frag: FragmentLike, field, key, fixed: bool) -> dict:
    own = own_views(frag)
    ntiles = tile_count_or_none(frag, field) or 0
    t = frag.mtime()
    out = {"info.yaml": yaml_file(lambda: own.field_info(frag, field), frag.problems, frag.rel, "field info",
                                  keep=kept(fixed), mtime=t)}
    cache = frag.store.cache
    where = f"{frag.rel}/{field.stem}"
    sizes = frag._once(("piece sizes", "txt", field.idx), dict) if fixed else None
    for k in range(ntiles):
        out[f"tile_{k}.bin"] = TileFile(frag, field, k, DATA, t, fixed)
        if field.var_sized:
            out[f"tile_{k}.var.bin"] = TileFile(frag, field, k, VAR, t, fixed)
        if field.nullable:
            out[f"tile_{k}.validity.bin"] = TileFile(frag, field, k, VALIDITY, t, fixed)
        # in pieces of bounded memory (views/tile_lines.py); tile_text renders the same bytes whole
        out[f"tile_{k}.txt"] = PiecewiseFile(
            lambda: b"", [lambda k=k: TileLines(frag, field, k)], t, fixed, cache, ("txt", key, field.idx),
            lambda _i, fn, k=k: guarded(fn, frag.problems, where, f"tile {k}")(), [k], sizes)
        out[f"tile_{k}.yaml"] = BytesFile(guarded(lambda k=k: to_yaml(tile_record(frag, field, k)), frag.problems,
                                                   where, f"tile {k}"),
                                           InCache(cache, ("tileyaml", key, field.idx, k), immutable=fixed), mtime=t)
    return out


def tile_text(frag: FragmentLike, field, k: int) -> bytes:
    validity = None
    if field.nullable:
        validity = np.frombuffer(frag.tile(field, k, VALIDITY).data, np.uint8)
    data = frag.tile(field, k, DATA).data
    dt = field.datatype
    if field.kind == fm.COORDS:
        # One line per cell, [d0, d1, ...], whichever way the tile stores them.
        ndims = len(frag.dimensions())
        cols = [frag.coords_column(field, k, j) for j in range(ndims)]
        values = np.stack(cols, axis=1).reshape(-1) if cols else np.array([])
        return fixed_cells_text(values, ndims, dt.is_string, None)
    if field.var_sized:
        offsets = np.frombuffer(data, "<u8").astype(np.int64) - frag.var_base(field, k)
        return var_cells_text(offsets, frag.tile(field, k, VAR).data, dt.dtype, dt.is_string, validity)
    values = np.frombuffer(data[: len(data) - len(data) % dt.size], dt.dtype)
    return fixed_cells_text(values, field.cell_val_num, dt.is_string, validity)


def tile_record(frag: FragmentLike, field, k: int) -> dict:
    own = own_views(frag)
    out = {"field": field.name, "stem": field.stem, "tile": k, "cells": frag.tile_cell_num(k)}
    if frag.dense:
        try:
            out["domain"] = {name: list(r) for (name, _), r in zip(frag.dimensions(), dense_grid(frag).tile_domain(k))}
        except Exception as exc:  # noqa: BLE001 -- recorded by dense_grid; the streams still show
            out["domain_error"] = str(exc)
    out["streams"] = {}
    for stream in streams(field):
        entry: dict = {}
        try:
            loc = frag.location(field, k, stream)
            entry.update({"file": loc.file, "offset": loc.offset, "persisted_size": loc.persisted_size,
                          "unfiltered_size": loc.unfiltered_size})
            own.describe_stream(frag, field, k, stream, loc, entry)
        except Exception as exc:
            entry["error"] = str(exc)
        out["streams"][stream if stream != DATA else ("offsets" if field.var_sized else "data")] = entry
    return out


# -- what only TileDB 2.x fragments have, and its words -----------------------------------

class TileDBViews:
    #: a tile list fails whole when a tile cannot be located (the footer's lists disagree)
    partial_tile_list = False

    @staticmethod
    def metadata_children(frag: Fragment, key, fixed: bool) -> dict:
        t = frag.mtime()
        return {
            "footer.yaml": yaml_file(lambda: footer_view(frag), frag.problems, f"{frag.rel}/{frag.METADATA_FILE}",
                                     "footer", keep=kept(fixed), mtime=t),
            "rtree": StaticDir(guarded_children(lambda: _rtree_children(frag, key, fixed), frag), immutable=fixed,
                               mtime=t),
        }

    @staticmethod
    def map_children(frag: Fragment, key, fixed: bool) -> dict:
        """Byte maps and hex dumps (layout_views.py)."""
        store, rel, problems, t = frag.store, frag.rel, frag.problems, frag.mtime()
        return {
            # the byte map of every file: every generic tile is decoded for it, as `tdbfs check` does
            "layout.csv": BytesFile(guarded(lambda: _decoded(frag) and layout_views.layout_csv(frag), problems, rel,
                                             "byte map"),
                                    InCache(store.cache, ("layout.csv", key), immutable=fixed), mtime=t),
            "layout": StaticDir(guarded_children(lambda: layout_views.layout_children(frag), frag),
                                immutable=fixed, mtime=t),
            "hex": StaticDir(guarded_children(lambda: layout_views.hex_children(frag), frag),
                             immutable=fixed, mtime=t),
        }

    @staticmethod
    def summary_name(frag: Fragment, out: dict) -> None:
        try:
            n = frag.parsed_name
            out.update({"t1": n.t1, "t2": n.t2, "t1_iso": n.t1_iso, "t2_iso": n.t2_iso, "uuid": n.uuid,
                        "name_version": n.name_version, "version": n.assumed_format_version})
        except Exception as exc:
            frag.problems.add_error(exc, frag.rel, "fragment name")

    @staticmethod
    def summary_metadata(frag: Fragment) -> dict:
        footer = frag.footer()
        frag.schema()
        # the version the metadata records replaces the name's (summary_name): a name without `_<v>` only
        # bounds it (docs/format.md §6.1), and TileDB's FragmentInfo reports the metadata's
        return {"version": footer.version,
                "array_schema_name": getattr(footer, "array_schema_name", None) or "__array_schema.tdb"}

    @staticmethod
    def summary_shape(frag: Fragment) -> dict:
        footer = frag.footer()
        return {"has_timestamps": bool(getattr(footer, "has_timestamps", False)),
                "has_delete_meta": bool(getattr(footer, "has_delete_meta", False))}

    @staticmethod
    def summary_statistics(frag: Fragment) -> dict:
        out = {}
        g = frag.footer().generic_tile_offsets
        if g is not None and g.fragment_min_max_sum_null_count is not None:      # v>=12
            out["fragment_statistics"] = describe_fragment_summary(frag.fragment_min_max_sum_null_count(),
                                                                   frag.fields())
        if g is not None and g.processed_conditions is not None:                 # v>=16
            out["processed_conditions"] = list(frag.processed_conditions())
        return out

    @staticmethod
    def summary_state(frag: Fragment, out: dict) -> None:
        special = frag.special_entries()
        if special:
            out["special_files"] = {e.name: e.kind + (f" -> {e.target}" if e.target is not None else "")
                                    for e in special}
        commit = frag.store.commit_file_of(frag.name)
        out["committed"] = commit is not None
        if commit is not None:
            out["commit_file"] = commit
        vacuumed_by = frag.store.vacuum_lists().get(frag.name)
        out["to_vacuum"] = vacuumed_by is not None
        if vacuumed_by:
            out["vacuum_file"] = vacuumed_by

    @staticmethod
    def coords_dim_stem(name: str, j: int) -> str:
        return coords_dim_stem(name, j)

    @staticmethod
    def coords_where(frag: Fragment, coords) -> tuple[str, str]:
        where = f"{frag.rel}/{coords.file}"
        return where, where

    @staticmethod
    def coords_dim_info(frag: Fragment, coords, j: int) -> dict:
        d = frag.schema().dimensions[j]
        return {"name": d.name, "stem": coords_dim_stem(d.name, j), "kind": "dimension", "position": j,
                "datatype": d.datatype.name, "cell_val_num": 1, "nullable": False,
                "derived_from": coords.file, "coords_layout": _coords_layout(frag),
                "filters": {"data": describe_pipeline(frag.pipeline(coords, DATA))},
                "data_files": {coords.file: dict(frag.files()).get(coords.file)},
                "tile_count": tile_count_or_none(frag, coords)}

    @staticmethod
    def coords_dim_record(frag: Fragment, coords, j: int, k: int, record: dict) -> dict:
        out = record
        name = frag.schema().dimensions[j].name
        out.update({"field": name, "stem": coords_dim_stem(name, j),
                    "derived_from": f"{coords.stem}/tile_{k}.bin", "coords_layout": _coords_layout(frag)})
        return out

    @staticmethod
    def field_info(frag: Fragment, field) -> dict:
        out = {"name": field.name, "stem": field.stem, "kind": field.kind, "index": field.idx,
               "datatype": field.datatype.name,
               "cell_val_num": "var" if field.var_sized else field.cell_val_num,
               "nullable": bool(field.nullable)}
        files = dict(frag.files())
        out["filters"] = {}
        out["data_files"] = {}
        names = {DATA: "offsets" if field.var_sized else "data", VAR: "var", VALIDITY: "validity"}
        for stream in streams(field):
            out["filters"][names[stream]] = describe_pipeline(frag.pipeline(field, stream))
            fname = field.stem + STREAM_SUFFIX[stream]
            out["data_files"][fname] = files.get(fname)
        out["tile_count"] = tile_count_or_none(frag, field)
        if field.kind == fm.COORDS:
            out["dimensions"] = [d.name for d in frag.schema().dimensions]
            out["coords_layout"] = _coords_layout(frag)
            out["split_into"] = [coords_dim_stem(d.name, j) for j, d in enumerate(frag.schema().dimensions)]
        return out

    @staticmethod
    def describe_stream(frag: Fragment, field, k: int, stream: str, loc, entry: dict) -> None:
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


TILEDB_VIEWS = TileDBViews()


def _decoded(frag: Fragment) -> bool:
    frag.decode_metadata()
    return True


def footer_view(frag: Fragment) -> dict:
    legacy = frag.legacy_metadata()
    if legacy is not None:
        return describe_legacy_footer(legacy, frag.footer().dense)
    return describe_footer(frag.footer())


def _rtree_children(frag: Fragment, key, fixed: bool) -> dict:
    rtree = frag.rtree()
    dims = frag.schema().dimensions
    header = ["mbr"] + [f"{d.name}_{end}" for d in dims for end in ("min", "max")]
    out = {}
    for level in range(len(rtree.levels)):
        def render(level=level):
            rows = describe_rtree_level(rtree, level)
            return to_csv(header, ([i] + list(row) for i, row in enumerate(rows)))
        out[f"level_{level}.csv"] = BytesFile(guarded(render, frag.problems, frag.rel, "R-tree"),
                                              InCache(frag.store.cache, ("rtree", key, level), immutable=fixed),
                                              mtime=frag.mtime())
    if out:  # dense fragments keep no MBRs
        out["mbrs.svg"] = mbrs_svg_file(frag, rtree, key, fixed)
    return out


def coords_dim_stem(name: str, j: int) -> str:
    """Folder of one dimension split out of __coords: its name, as formats <= 7 named data files."""
    if name in ("", ".", "..", fm.COORDS_NAME) or "/" in name or "\0" in name:
        return f"d{j}"
    return name


def _coords_layout(frag: Fragment) -> str:
    if fm.coords_zipped(frag.footer().version, frag.schema().coords_filters):
        return "zipped (one value per dimension, cell after cell)"
    return "unzipped (all values of each dimension, dimension after dimension)"


def _chunk_dict(c) -> dict:
    h = c.header
    return {"index": h.index, "offset": h.offset, "unfiltered_size": h.unfiltered_size,
            "filtered_size": h.filtered_size, "metadata_size": h.metadata_size,
            "stages": list(c.stages)}
