"""What the library's tests compare an opened array with: tiledb-py's FragmentInfoList and reads
(tests/reference.py), the tree's own files (footer.yaml, tile_K.bin, cells.csv), `tdbfs check --json`."""

from __future__ import annotations

import csv
import io
import json
import os
import posixpath
import subprocess

import numpy as np
import tiledb
import yaml

import reference
from mounting import tdbfs_command


def fragment_info(uri: str, ctx=None) -> dict:
    """Fragment name -> (version, dense, nonempty_domain, cell_num, timestamp_range, schema name), as
    tiledb-py's FragmentInfoList reports each fragment it lists."""
    fil = tiledb.FragmentInfoList(uri, ctx=ctx)
    out = {}
    for i in range(len(fil)):
        name = posixpath.basename(fil.uri[i].rstrip("/"))
        ned = tuple(tuple(_plain(v) for v in r) for r in fil.nonempty_domain[i])
        out[name] = (int(fil.version[i]), not fil.sparse[i], ned, int(fil.cell_num[i]),
                     tuple(fil.timestamp_range[i]), fil.array_schema_name[i])
    assert out, f"tiledb-py lists no fragment in {uri}"
    return out


def _plain(v):
    if isinstance(v, bytes):
        return v.decode()
    return v.item() if hasattr(v, "item") else v


def assert_fragments_match_tiledb(array, uri: str, ctx=None) -> int:
    """Every fragment tiledb-py lists has the library's version, density, non-empty domain, cell count,
    timestamps and schema, in its footer too; the footer is footer.yaml's mapping. Returns how many."""
    info = fragment_info(uri, ctx)
    names = array.fragments.names()
    for name, (version, dense, ned, cells, trange, schema_name) in info.items():
        assert name in names, (name, names)
        frag = array.fragments[name]
        assert (frag.version, frag.dense, frag.non_empty_domain, frag.cell_count, frag.timestamp_range) == \
            (version, dense, ned, cells, trange), name
        footer = frag.footer
        assert footer == yaml.safe_load(array.open_view(f"fragments/{name}/footer.yaml"))
        assert footer["version"] == version and footer["dense"] == dense
        assert tuple(tuple(r) for r in footer["non_empty_domain"]) == ned
        if version >= 10:
            assert footer["array_schema_name"] == schema_name
    return len(info)


def assert_tiles_are_the_tree_files(array, frag) -> int:
    """tile(field, k) of every field and tile: the bytes of attrs|dims/<stem>/tile_K[.var|.validity].bin."""
    seen = 0
    for field in frag.fields:
        folder = "dims" if field.kind in ("dimension", "coords") else "attrs"
        for k in range(frag.tile_count):
            base = f"fragments/{frag.name}/{folder}/{field.stem}/tile_{k}"
            tile = frag.tile(field.name, k)
            if field.var_sized:   # tile_K.bin: the offsets as stored (0.x: into the fragment's whole var stream)
                stored = array.open_view(base + ".bin")
                assert frag.tile_bytes(field.name, k) == stored
                raw = np.frombuffer(stored, "<u8")
                assert tile.offsets.tolist() == (raw - raw[:1]).tolist()
                assert tile.values.tobytes() == array.open_view(base + ".var.bin")
            else:
                data = tile.data if isinstance(tile, np.ma.MaskedArray) else tile
                assert np.ascontiguousarray(data).tobytes() == array.open_view(base + ".bin")
            if field.nullable:
                valid = tile.validity if field.var_sized else ~np.ma.getmaskarray(tile)
                if valid.ndim > 1:
                    valid = valid[:, 0]
                assert valid.astype(np.uint8).tobytes() == array.open_view(base + ".validity.bin")
            seen += 1
    return seen


def assert_tiles_are_tiledb_values(frag, path) -> int:
    """tile(field, k) of every attribute (and sparse dimension) holds what tiledb-py reads of that tile
    (reference.fragment_tiles: the fragment alone, in stored order)."""
    tiles = reference.fragment_tiles(path, frag.name)
    assert len(tiles) == frag.tile_count
    inside = _dense_cells_read(path, frag) if frag.dense else None
    seen = 0
    for k, cells in enumerate(tiles):
        for name, ref in cells.items():
            tile = frag.tile(name, k)
            keep = np.ones(len(ref), bool) if inside is None else inside[k]
            if inside is not None:   # a dense tile's cells outside the non-empty domain: padding TileDB never reads
                ref = ref.slice(0, len(ref))
                for attr in ("values", "validity"):
                    if getattr(ref, attr) is not None:
                        setattr(ref, attr, getattr(ref, attr)[keep])
                if ref.var:
                    ref.cells = [c for c, kept in zip(ref.cells, keep) if kept]
                else:
                    tile = tile[keep]
            if ref.var:
                ours = [bytes(tile[i].tobytes()) for i in range(len(tile))]
                assert [c for c, kept in zip(ours, keep) if kept] == list(ref.cells), (name, k)
                tile = type(tile)(tile.offsets[keep], tile.values,
                                  None if tile.validity is None else tile.validity[keep])
            else:
                data = tile.data if isinstance(tile, np.ma.MaskedArray) else tile
                assert np.ascontiguousarray(data).tobytes() == ref.fixed_bytes(), (name, k)
            if ref.nullable:
                valid = tile.validity if ref.var else ~np.ma.getmaskarray(tile)
                valid = valid if valid.ndim == 1 else valid[:, 0]
                assert valid.tolist() == [bool(v) for v in ref.validity], (name, k)
            seen += 1
    return seen


def _dense_cells_read(path, frag) -> list:
    """Per tile of a dense fragment: which of its cells (in the cell order) lie in the non-empty domain."""
    with reference.isolated_fragment(path, frag.name) as iso:
        schema = reference._open_schema(iso, frag.t1, frag.t2)
    ned = frag.non_empty_domain
    out = []
    for ranges in reference._dense_tiles(schema, ned):
        axes = [np.arange(lo, hi + 1) for lo, hi in ranges]
        grid = np.meshgrid(*axes, indexing="ij")
        order = "F" if schema.cell_order == "col-major" else "C"
        keep = np.ones(grid[0].size, bool)
        for g, (lo, hi) in zip(grid, ned):
            flat = g.ravel(order=order)
            keep &= (flat >= lo) & (flat <= hi)
        out.append(keep)
    return out


def assert_cells_are_cells_csv(array, frag) -> int:
    """cells() holds the rows of fragments/<F>/cells.csv, column by column; cells(k) those of cells/tile_K.csv."""
    rows = list(csv.reader(io.StringIO(array.open_view(f"fragments/{frag.name}/cells.csv").decode())))
    header, body = rows[0], rows[1:]
    cells = frag.cells()
    named = [h for h in header if not h.endswith(".valid")]
    assert list(cells) == named
    for name, column in cells.items():
        texts = [row[header.index(name)] for row in body]
        assert len(column) == len(texts), name
        for i, text in enumerate(texts):
            _assert_cell(column, i, text, name)
        if f"{name}.valid" in header:
            valid = [row[header.index(f"{name}.valid")] == "1" for row in body]
            mask = np.ma.getmaskarray(column)
            assert [not (m.any() if np.ndim(m) else m) for m in mask] == valid
    if frag.tile_count:
        k = frag.tile_count - 1
        last = list(csv.reader(io.StringIO(array.open_view(f"fragments/{frag.name}/cells/tile_{k}.csv").decode())))
        assert len(next(iter(frag.cells(k).values()))) == len(last) - 1
    return len(body)


def _assert_cell(column, i: int, text: str, name: str) -> None:
    if np.ma.isMaskedArray(column) and np.ma.getmaskarray(column)[i].any():
        assert text == "", (name, i, text)
        return
    v = column.data[i] if np.ma.isMaskedArray(column) else column[i]
    if isinstance(v, str):
        assert v == text, (name, i)
    elif isinstance(v, np.ndarray) or (hasattr(v, "__len__") and not isinstance(v, (bytes, str))):
        values = np.asarray(v)
        parts = text.split()
        assert len(parts) == len(values), (name, i, text)
        for p, x in zip(parts, values.tolist()):
            _assert_number(p, x, name, i)
    else:
        _assert_number(text, v.item() if hasattr(v, "item") else v, name, i)


def _assert_number(text: str, value, name, i) -> None:
    if isinstance(value, float):
        if text == "NaN":
            assert value != value, (name, i)
        else:
            assert np.float32(float(text)) == np.float32(value) or float(text) == value, (name, i, text, value)
    elif isinstance(value, bool):
        assert text in ("true", "1") if value else text in ("false", "0"), (name, i, text)
    else:
        assert int(text) == value, (name, i, text, value)


def cli_check_json(location: str, env: dict | None = None) -> dict:
    """`tdbfs check --json LOCATION`'s document."""
    res = subprocess.run(tdbfs_command() + ["check", "--json", "--jobs", "1", location], capture_output=True,
                         text=True, timeout=300, env=dict(os.environ, **(env or {})), stdin=subprocess.DEVNULL)
    assert res.returncode in (0, 1), res.stderr
    return json.loads(res.stdout)


def check_document(result) -> dict:
    """The library's CheckResult as `tdbfs check --json` prints it."""
    return json.loads(json.dumps(result.to_dict(), indent=1, default=str))
