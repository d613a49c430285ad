"""The decoded tiles of every fragment equal, byte for byte, what TileDB reads from it.

For each fragment of each sample array (written by tiledb-py), the concatenated
tile_K.bin / tile_K.var.bin / tile_K.validity.bin of every stem are compared with
TileDB's own read of that fragment alone in global order; fragment.yaml,
footer.yaml and the R-tree are compared with TileDB's fragment info.
Dense fragments store whole tiles, but TileDB only answers for the cells inside
the fragment's non-empty domain (it reads fill values elsewhere, while the file
holds zeros there), so dense comparisons are restricted to those cells.
"""

from __future__ import annotations

import csv
import io

import numpy as np
import pytest
import yaml

import reference
from arrays import SAMPLE_SET
from tdbfs.store import ArrayStore
from tdbfs.views.nodes import resolve
from tdbfs.views.tree import build_root

# Arrays whose fragments hold cells TileDB's reader hides (older versions of a
# cell kept with their timestamps, deleted cells): compared on what TileDB shows.
SKIP_VALUES_WHEN_TIMESTAMPS = True


def _read(root, path: str) -> bytes:
    node = resolve(root, path)
    data = node.read(0, node.size() + 1)
    assert len(data) == node.size(), f"{path}: read {len(data)} bytes, stat says {node.size()}"
    return data


def _inside_mask(schema, ned) -> np.ndarray:
    """Per cell in stored order: is it inside the fragment's non-empty domain?"""
    masks = []
    order = "F" if schema.cell_order == "col-major" else "C"
    for tile in reference._dense_tiles(schema, ned):
        axes = [np.arange(lo, hi + 1) for lo, hi in tile]
        grids = np.meshgrid(*axes, indexing="ij")
        inside = np.ones(grids[0].shape, bool)
        for g, (lo, hi) in zip(grids, ned):
            inside &= (g >= int(lo)) & (g <= int(hi))
        masks.append(inside.reshape(-1, order=order))
    return np.concatenate(masks)


def _fragments(built):
    return [(built, name) for name in reference.list_fragments(built.path)]


CASES = [name for name in SAMPLE_SET]


@pytest.mark.parametrize("array_name", CASES)
def test_every_fragment_matches_tiledb(sample_arrays, array_name):
    built = sample_arrays[array_name]
    root = build_root(ArrayStore(str(built.path)))
    names = reference.list_fragments(built.path)
    assert names, "the sample array has fragments"
    assert sorted(resolve(root, "fragments").children()) == sorted(names)
    for name in names:
        _check_fragment(root, built, name)


def _check_fragment(root, built, name):
    info = reference.fragment_info(built.path, name)
    base = f"fragments/{name}"
    frag = yaml.safe_load(_read(root, f"{base}/fragment.yaml"))
    footer = yaml.safe_load(_read(root, f"{base}/footer.yaml"))
    assert frag["problems"] == [], frag["problems"]
    assert frag["version"] == info.version == footer["version"] and "format_version" not in frag
    assert frag["type"] == ("sparse" if info.sparse else "dense")
    assert footer["dense"] is (not info.sparse)
    assert frag["cell_count"] == info.cell_num
    assert frag["tile_count"] == info.tile_num
    assert footer["array_schema_name"] == info.array_schema_name
    ned = [list(r) for r in info.nonempty_domain]
    assert footer["non_empty_domain"] == [_plain_range(r) for r in ned]
    assert frag["files"] == info.files
    if info.sparse:
        assert footer["sparse_tile_num"] == info.tile_num
        assert footer["last_tile_cell_num"] == info.tile_cell_counts[-1]
        _check_rtree(root, base, info)

    cells = reference.fragment_cells(built.path, name)
    stems = frag["fields"]  # stem -> field name
    mask = None
    if not info.sparse:
        with reference.isolated_fragment(built.path, name) as iso:
            schema = reference._open_schema(iso, info.t1, info.t2)
        mask = _inside_mask(schema, info.nonempty_domain)
    if SKIP_VALUES_WHEN_TIMESTAMPS and frag.get("has_timestamps"):
        # TileDB's reader returns only the newest version of each cell; the fragment
        # holds them all. The cell counts then differ, and values are checked in
        # test_consolidated_fragment_with_timestamps instead.
        if any(len(c) != info.cell_num for c in cells.values()):
            return
    for stem, field_name in stems.items():
        if field_name not in cells:
            continue  # t, dt, dci: not readable through tiledb-py
        kind = "dims" if stem.startswith("d") and cells[field_name].role == "dim" else "attrs"
        _check_field(root, f"{base}/{kind}/{stem}", cells[field_name], info, mask)


def _plain_range(r):
    out = []
    for v in r:
        if isinstance(v, (bytes, np.bytes_)):
            v = v.decode()
        elif isinstance(v, np.datetime64):
            v = int(v.astype("int64"))
        elif hasattr(v, "item"):
            v = v.item()
        out.append(v)
    return out


def _check_field(root, folder, ref, info, mask):
    n_tiles = info.tile_num
    listing = resolve(root, folder).children()
    assert f"tile_{n_tiles - 1}.bin" in listing and f"tile_{n_tiles}.bin" not in listing
    if ref.var:
        got_cells = []
        for k in range(n_tiles):
            offsets = np.frombuffer(_read(root, f"{folder}/tile_{k}.bin"), "<u8")
            values = _read(root, f"{folder}/tile_{k}.var.bin")
            assert len(offsets) == info.tile_cell_counts[k]
            assert len(offsets) == 0 or offsets[0] == 0, "offsets restart at 0 in every tile"
            ends = list(offsets[1:]) + [len(values)]
            got_cells += [values[int(s):int(e)] for s, e in zip(offsets, ends)]
        expected = list(ref.cells)
        keep = np.ones(len(expected), bool) if mask is None else mask
        valid = ref.validity.astype(bool) if ref.nullable and ref.validity is not None else np.ones(len(expected), bool)
        assert len(got_cells) == len(expected)
        for i in np.flatnonzero(keep & valid):
            assert got_cells[i] == expected[i], f"{folder}: cell {i}: {got_cells[i]!r} != {expected[i]!r}"
        if mask is None:
            assert b"".join(got_cells[i] for i in range(len(got_cells)) if valid[i]) == \
                b"".join(expected[i] for i in range(len(expected)) if valid[i])
    else:
        got = b"".join(_read(root, f"{folder}/tile_{k}.bin") for k in range(n_tiles))
        want = ref.fixed_bytes()
        if mask is None and not ref.nullable:
            assert got == want, f"{folder}: concatenated tiles differ from TileDB's read"
        else:
            n = len(ref)
            g = np.frombuffer(got, np.uint8).reshape(n, -1)
            w = np.frombuffer(want, np.uint8).reshape(n, -1)
            keep = np.ones(n, bool) if mask is None else mask
            if ref.nullable and ref.validity is not None:
                keep = keep & ref.validity.astype(bool)
            assert np.array_equal(g[keep], w[keep]), f"{folder}: tiles differ from TileDB's read"
    if ref.nullable and ref.validity is not None:
        got_v = np.frombuffer(b"".join(_read(root, f"{folder}/tile_{k}.validity.bin") for k in range(n_tiles)), np.uint8)
        keep = np.ones(len(got_v), bool) if mask is None else mask
        assert np.array_equal(got_v[keep] != 0, ref.validity.astype(bool)[keep])


def _check_rtree(root, base, info):
    levels = sorted(n for n in resolve(root, f"{base}/rtree").children() if n.endswith(".csv"))
    last = levels[-1]
    assert last == f"level_{len(levels) - 1}.csv"
    rows = list(csv.reader(io.StringIO(_read(root, f"{base}/rtree/{last}").decode())))
    header, rows = rows[0], rows[1:]
    assert header[0] == "mbr" and len(rows) == info.tile_num
    for row, mbr in zip(rows, info.mbrs):
        expected = [str(x) for pair in mbr for x in _plain_range(pair)]
        got = row[1:]
        for g, e in zip(got, expected):
            if g != e:
                assert float(g) == pytest.approx(float(e)), f"MBR {row[0]}: {got} != {expected}"
    root_rows = list(csv.reader(io.StringIO(_read(root, f"{base}/rtree/level_0.csv").decode())))[1:]
    assert len(root_rows) >= 1
