"""Tests of the test fixtures themselves: the array factories write what they say,
and tests/reference.py reads fragments the way TileDB stores them."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import tiledb

import arrays
import reference as R
from mounting import assert_unchanged, diff_snapshots, is_mounted, mounted, snapshot_tree, unmount

HERE = Path(__file__).resolve().parent


# ---------------------------------------------------------------------------
# helpers: expectations computed independently of reference.py


def _as_bytes(v) -> bytes:
    if isinstance(v, str):
        return v.encode("utf-8")
    if isinstance(v, (bytes, np.bytes_)):
        return bytes(v)
    return np.asarray(v).tobytes()


def _coord_key(dimspec: tiledb.Dim, v):
    """(tile index, value) for one coordinate, for ordering."""
    if dimspec.isvar:  # string dimension: no tiles
        return 0, _as_bytes(v)
    dt = np.dtype(dimspec.dtype)
    lo = dimspec.domain[0]
    if dt.kind == "M":
        x = np.asarray(v).astype(dt).astype(np.int64)
        return int((x - np.asarray(lo).astype(dt).astype(np.int64)) // np.asarray(dimspec.tile).astype(np.int64)), int(x)
    if dt.kind == "f":
        return int(np.floor((float(v) - float(lo)) / float(dimspec.tile))), float(v)
    return (int(v) - int(lo)) // int(dimspec.tile), int(v)


def expected_global_order(schema: tiledb.ArraySchema, coords: dict) -> list[int]:
    """Permutation that sorts written cells into TileDB's global order (row/col-major)."""
    dims = list(schema.domain)
    n = len(coords[dims[0].name])

    def key(i):
        ks = [_coord_key(d, coords[d.name][i]) for d in dims]
        tiles = [k[0] for k in ks]
        cells = [k[1] for k in ks]
        if schema.tile_order == "col-major":
            tiles = tiles[::-1]
        if schema.cell_order == "col-major":
            cells = cells[::-1]
        return tiles, cells

    return sorted(range(n), key=key)


def assert_field_equals_written(field: R.FieldCells, written: list, validity=None):
    assert len(field) == len(written)
    if field.var:
        assert field.cells == [_as_bytes(v) for v in written]
        assert field.offsets.dtype == np.uint64
        assert int(field.offsets[-1]) + len(field.cells[-1]) == len(field.data)
    else:
        got = field.values
        exp = np.asarray(written)
        if exp.dtype.names:  # several values per cell, written as a structured array
            exp = np.array([list(r) for r in exp], dtype=got.dtype)
        if got.dtype.kind == "f":
            np.testing.assert_array_equal(got, exp.astype(got.dtype))
        else:
            assert got.tolist() == exp.astype(got.dtype).tolist()
    if validity is not None:
        assert field.validity is not None
        assert field.validity.tolist() == list(validity)


# ---------------------------------------------------------------------------
# sparse


@pytest.mark.parametrize("name", ["sparse_1d", "sparse_2d", "sparse_3d_mixed", "sparse_string_dim",
                                  "all_dtypes_sparse", "filter_ZSTD", "filter_chain"])
def test_sparse_fragments_hold_the_written_cells_in_global_order(sample_arrays, name):
    built = sample_arrays[name]
    schema = built.schema()
    frags = built.fragments()
    assert len(frags) == len(built.writes)
    for frag, op in zip(frags, built.writes):
        info = R.fragment_info(built, frag)
        assert info.t1 == info.t2 == op.timestamp
        cells = R.fragment_cells(built, frag)
        perm = expected_global_order(schema, op.coords)
        for d in schema.domain:
            assert_field_equals_written(cells[d.name], [op.coords[d.name][i] for i in perm])
        for k in range(schema.nattr):
            a = schema.attr(k)
            val = op.validity.get(a.name)
            assert_field_equals_written(cells[a.name], [op.data[a.name][i] for i in perm],
                                        None if val is None else [val[i] for i in perm])
        assert list(cells)[: schema.nattr] == [schema.attr(k).name for k in range(schema.nattr)]


def test_sparse_capacity_splits_tiles_in_global_order(sample_arrays):
    built = sample_arrays["sparse_1d"]  # capacity 3, 10 cells per fragment
    for frag in built.fragments():
        info = R.fragment_info(built, frag)
        assert info.capacity == 3 and info.cell_num == 10
        assert info.tile_cell_counts == [3, 3, 3, 1]
        tiles = R.fragment_tiles(built, frag)
        assert [len(t["d0"]) for t in tiles] == [3, 3, 3, 1]
        coords = np.concatenate([t["d0"].values for t in tiles])
        assert coords.tolist() == sorted(coords.tolist())  # 1-D row-major: sorted
        # TileDB's own R-tree leaves (MBRs) agree with the tiles we cut
        assert len(info.mbrs) == 4
        for t, mbr in zip(tiles, info.mbrs):
            assert (int(t["d0"].values.min()), int(t["d0"].values.max())) == tuple(int(x) for x in mbr[0])


def test_sparse_multi_dim_mbrs_match_reference_tiles(sample_arrays):
    for name in ("sparse_2d", "sparse_3d_mixed", "sparse_hilbert"):
        built = sample_arrays[name]
        for frag in built.fragments():
            info = R.fragment_info(built, frag)
            tiles = R.fragment_tiles(built, frag)
            assert len(tiles) == len(info.mbrs) == info.tile_num
            for t, mbr in zip(tiles, info.mbrs):
                for dname, (lo, hi) in zip(info.dim_names, mbr):
                    vals = t[dname].values
                    assert vals.min() == np.asarray(lo).astype(vals.dtype)
                    assert vals.max() == np.asarray(hi).astype(vals.dtype)


def test_hilbert_fragment_is_a_permutation_of_the_write(sample_arrays):
    built = sample_arrays["sparse_hilbert"]
    op = built.writes[0]
    cells = R.fragment_cells(built, 0)
    got = sorted(zip(cells["d0"].values.tolist(), cells["d1"].values.tolist(), cells["a0"].values.tolist()))
    exp = sorted(zip(op.coords["d0"].tolist(), op.coords["d1"].tolist(), op.data["a0"].tolist()))
    assert got == exp
    # the same order as TileDB's own global-order read of the whole array
    with tiledb.open(built.uri) as A:
        g = A.query(order="G")[:]
    assert cells["d0"].values.tolist() == g["d0"].tolist()


def test_sparse_factory_options(array_factory):
    built = array_factory("sparse", ndim=3, dim_kinds="float", capacity=2, cells=5, n_fragments=3,
                          cell_order="col-major", tile_order="col-major")
    schema = built.schema()
    assert schema.sparse and schema.capacity == 2 and schema.domain.ndim == 3
    assert schema.cell_order == "col-major" and schema.tile_order == "col-major"
    assert all(np.dtype(d.dtype) == np.float64 for d in schema.domain)
    frags = built.fragments()
    assert len(frags) == 3
    for frag, op in zip(frags, built.writes):
        cells = R.fragment_cells(built, frag)
        perm = expected_global_order(schema, op.coords)
        for d in schema.domain:
            assert cells[d.name].values.tolist() == [op.coords[d.name][i] for i in perm]
        assert R.fragment_info(built, frag).tile_cell_counts == [2, 2, 1]


# ---------------------------------------------------------------------------
# dense


def _expected_dense_fragment(schema, op, name, fill):
    """Written values laid into the fragment's expanded tiles, in global order."""
    dims = list(schema.domain)
    ext = [int(d.tile) for d in dims]
    lo = [int(d.domain[0]) for d in dims]
    sub = op.subarray
    t0 = [(s[0] - l) // e for s, l, e in zip(sub, lo, ext)]
    t1 = [(s[1] - l) // e for s, l, e in zip(sub, lo, ext)]
    start = [l + a * e for l, a, e in zip(lo, t0, ext)]
    shape = [(b - a + 1) * e for a, b, e in zip(t0, t1, ext)]
    grid = np.empty(shape, dtype=object)
    grid[...] = fill
    vals = np.asarray(op.data[name], dtype=object)
    region = tuple(slice(s[0] - st, s[1] - st + 1) for s, st in zip(sub, start))
    grid[region] = vals
    order = "F" if schema.cell_order == "col-major" else "C"
    out = []
    tiles = [range(a, b + 1) for a, b in zip(t0, t1)]
    import itertools
    combos = list(itertools.product(*tiles))
    if schema.tile_order == "col-major":
        combos = sorted(combos, key=lambda c: c[::-1])
    for c in combos:
        sl = tuple(slice((k - a) * e, (k - a + 1) * e) for k, a, e in zip(c, t0, ext))
        out += list(grid[sl].reshape(-1, order=order))
    return out


@pytest.mark.parametrize("name", ["dense_1d", "dense_2d", "dense_3d", "dense_2d_colmajor", "all_dtypes_dense"])
def test_dense_fragments_are_expanded_tiles_in_global_order(sample_arrays, name):
    built = sample_arrays[name]
    schema = built.schema()
    for frag, op in zip(built.fragments(), built.writes):
        info = R.fragment_info(built, frag)
        assert not info.sparse
        cells = R.fragment_cells(built, frag)
        tile_cells = int(np.prod([int(d.tile) for d in schema.domain]))
        assert info.cell_num == len(cells[schema.attr(0).name]) == tile_cells * info.tile_num
        a0 = schema.attr(0)
        exp = _expected_dense_fragment(schema, op, a0.name, a0.fill[0])
        got = cells[a0.name].values.tolist()
        assert got == np.asarray(exp).astype(cells[a0.name].values.dtype).tolist()


def test_dense_partial_write_reads_fill_values(sample_arrays):
    built = sample_arrays["dense_2d"]  # 6x6, 2x2 tiles; fragment 2 writes rows/cols 2..4
    schema = built.schema()
    op = built.writes[1]
    assert op.subarray == [(2, 4), (2, 4)]
    info = R.fragment_info(built, 1)
    assert info.nonempty_domain == [(2, 4), (2, 4)]
    assert info.tile_num == 4 and info.cell_num == 16  # tiles rows 1-4 x cols 1-4
    cells = R.fragment_cells(built, 1)
    a0 = cells["a0"].values
    fill = int(schema.attr("a0").fill[0])
    w = op.data["a0"]
    # tile (rows 1-2, cols 1-2): (1,1) (1,2) (2,1) fill, (2,2) written
    assert a0[:4].tolist() == [fill, fill, fill, int(w[0, 0])]
    # tile (rows 1-2, cols 3-4): (2,3) (2,4) written
    assert a0[4:8].tolist() == [fill, fill, int(w[0, 1]), int(w[0, 2])]
    assert (a0 == fill).sum() == 16 - 9
    # nullable attribute: fill cells are null; written cells keep the write's validity
    v = cells["a2"].validity
    assert v.sum() == int(op.validity["a2"].sum())
    # var attribute: fill cells hold the fill string
    strs = cells["a1"].cells
    assert strs[3] == _as_bytes(op.data["a1"][0, 0])
    assert strs[0] == strs[1] == strs[2] != strs[3]  # fill
    # cross-check: TileDB's global-order read of the expanded region gives the same
    with tiledb.open(built.uri, timestamp=(info.t1, info.t2)) as A:
        g = A.query(order="G")[1:5, 1:5]
    assert g["a0"].reshape(-1).tolist() == a0.tolist()


def test_dense_tile_sticking_out_of_domain_is_padded(array_factory):
    # domain 1..5 with tile extent 2: the last tile [5, 6] sticks out of the domain
    built = array_factory("dense", ndim=1, extent=2, domain_high=5, attrs="int", fragments=[[(4, 5)]])
    info = R.fragment_info(built, 0)
    assert info.tile_num == 2 and info.cell_num == 4
    cells = R.fragment_cells(built, 0)
    fill = int(built.schema().attr("a0").fill[0])
    w = built.writes[0].data["a0"].tolist()
    assert cells["a0"].values.tolist() == [fill, w[0], w[1], fill]


# ---------------------------------------------------------------------------
# datatypes and filters


@pytest.mark.parametrize("name", ["all_dtypes_sparse", "all_dtypes_dense"])
def test_all_dtypes_schema(sample_arrays, name):
    schema = sample_arrays[name].schema()
    got = {schema.attr(k).name: schema.attr(k) for k in range(schema.nattr)}
    for dt in arrays.FIXED_DTYPES:
        a = got[arrays._attr_name(dt)]
        assert np.dtype(a.dtype) == np.dtype(dt) and not a.isvar
    assert got["f3"].ncells == 3 and not got["f3"].isvar
    assert got["s3"].ncells == 3
    assert got["vu"].isvar and got["vs"].isvar and got["vascii"].isvar and got["vi"].isvar
    assert got["vascii"].isascii
    assert got["nf"].isnullable and got["ni"].isnullable and got["nvu"].isnullable and got["nvu"].isvar


def test_all_dtypes_reference_shapes(sample_arrays):
    cells = R.fragment_cells(sample_arrays["all_dtypes_sparse"], 0)
    assert cells["f3"].values.shape == (7, 3) and cells["f3"].cell_val_num == 3
    assert cells["f3"].values.dtype == np.float32
    assert len(cells["s3"].fixed_bytes()) == 7 * 3
    assert cells["x_datetime64_ns"].values.dtype == np.dtype("datetime64[ns]")
    assert len(cells["x_bool"].fixed_bytes()) == 7
    vi = cells["vi"]
    assert all(len(c) % 4 == 0 and len(c) > 0 for c in vi.cells)
    assert cells["nvu"].validity is not None and 0 < cells["nvu"].validity.sum() < 7
    # the value under a null cell is what was written (TileDB stores it)
    op = sample_arrays["all_dtypes_sparse"].writes[0]
    order = np.argsort(op.coords["d0"])
    assert cells["nf"].values.tolist() == op.data["nf"][order].tolist()
    assert cells["vu"].as_python()[0] == _as_bytes(op.data["vu"][order[0]])


@pytest.mark.parametrize("fname", arrays.FILTER_NAMES)
def test_filter_arrays_put_the_filter_everywhere(sample_arrays, fname):
    built = sample_arrays[f"filter_{fname}"]
    schema = built.schema()
    expected = [type(f) for f in arrays.FILTERS[fname]()]
    for k in range(schema.nattr):
        assert [type(f) for f in schema.attr(k).filters] == expected
    assert [type(f) for f in schema.offsets_filters] == expected
    assert [type(f) for f in schema.validity_filters] == expected
    assert [type(f) for f in schema.coords_filters] == expected
    for d in schema.domain:
        # written with no filters of their own; TileDB reports the coords pipeline
        # they fall back to
        assert [type(f) for f in d.filters] == expected
    # data round-trips
    op = built.writes[0]
    cells = R.fragment_cells(built, 0)
    perm = expected_global_order(schema, op.coords)
    for a in ("a0", "a1", "a2", "a3"):
        val = op.validity.get(a)
        assert_field_equals_written(cells[a], [op.data[a][i] for i in perm],
                                    None if val is None else [val[i] for i in perm])
    frag_files = set(R.fragment_info(built, 0).files)
    assert {"a0.tdb", "a1.tdb", "a1_var.tdb", "a2.tdb", "a2_validity.tdb", "a3.tdb", "a3_var.tdb",
            "a3_validity.tdb", "d0.tdb", "d1.tdb", "__fragment_metadata.tdb"} <= frag_files


def test_filter_list_parsing():
    assert len(arrays.filter_list("none")) == 0
    chain = arrays.filter_list("BYTESHUFFLE+ZSTD+CHECKSUM_SHA256")
    assert [type(f).__name__ for f in chain] == ["ByteShuffleFilter", "ZstdFilter", "ChecksumSHA256Filter"]
    with pytest.raises(ValueError):
        arrays.filter_list("NOPE")


# ---------------------------------------------------------------------------
# consolidation, deletes, commits, fragment metadata, vacuum


def _commit_files(built, suffix):
    d = built.path / "__commits"
    return sorted(p.name for p in d.iterdir() if p.name.endswith(suffix)) if d.is_dir() else []


def test_consolidated_sparse(sample_arrays):
    built = sample_arrays["consolidated_sparse"]
    frags = built.fragments()
    assert len(frags) == 4  # 3 originals + the consolidated one, not vacuumed
    infos = [R.fragment_info(built, f) for f in frags]
    cons = [i for i in infos if i.t1 != i.t2]
    assert len(cons) == 1
    cons = cons[0]
    ts = [op.timestamp for op in built.writes]
    assert (cons.t1, cons.t2) == (min(ts), max(ts))
    assert cons.has_timestamps and "t.tdb" in cons.files and not cons.has_delete_meta
    assert sorted(i.to_vacuum for i in infos) == [False, True, True, True] and not cons.to_vacuum
    vac = _commit_files(built, ".vac")
    assert len(vac) == 1
    listed = (built.path / "__commits" / vac[0]).read_text().split()
    assert sorted(os.path.basename(x) for x in listed) == sorted(i.name for i in infos if i.to_vacuum)
    # the consolidated fragment holds every written cell, in global order
    cells = R.fragment_cells(built, cons.name)
    allc = sorted(int(c) for op in built.writes for c in op.coords["d0"])
    assert cells["d0"].values.tolist() == allc
    assert cons.tile_cell_counts == [4, 4, 4, 3]


def test_consolidated_vacuumed_with_fragment_meta(sample_arrays):
    built = sample_arrays["consolidated_sparse_vacuumed"]
    frags = built.fragments()
    assert len(frags) == 1
    assert not _commit_files(built, ".vac")
    assert len(_commit_files(built, ".wrt")) == 1


def test_consolidated_dense(sample_arrays):
    built = sample_arrays["consolidated_dense"]
    infos = [R.fragment_info(built, f) for f in built.fragments()]
    cons = [i for i in infos if i.t1 != i.t2][0]
    assert not cons.has_timestamps  # dense fragments never store cell timestamps
    assert cons.nonempty_domain == [(0, 10)]
    cells = R.fragment_cells(built, cons.name)
    # the newest write wins where writes overlap
    exp = {}
    for op in built.writes:
        lo, hi = op.subarray[0]
        for k, x in enumerate(range(lo, hi + 1)):
            exp[x] = int(op.data["a0"][k])
    got = cells["a0"].values.tolist()
    assert [got[x] for x in range(0, 11)] == [exp[x] for x in range(0, 11)]
    assert len(got) == 12  # tiles [0-3] [4-7] [8-11]


def test_deletes_and_delete_metadata(sample_arrays):
    built = sample_arrays["deletes"]
    dels = _commit_files(built, ".del")
    assert len(dels) == 2
    assert [R.parse_fragment_name(d)[0] for d in dels] == [op.timestamp for op in built.ops_of("delete")]
    infos = [R.fragment_info(built, f) for f in built.fragments()]
    cons = [i for i in infos if i.t1 != i.t2][0]
    assert {"t.tdb", "dt.tdb", "dci.tdb"} <= set(cons.files)
    assert cons.has_delete_meta
    # the consolidated fragment still stores the deleted cells ...
    written = sorted(int(v) for op in built.writes for v in op.data["a0"])
    cells = R.fragment_cells(built, cons.name)
    assert sorted(cells["a0"].values.tolist()) == written
    # ... and a normal read no longer returns them
    remaining = sorted(R.array_cells(built)["a0"].values.tolist())
    assert remaining == [v for v in written if not (v < -80 or v > -40)]
    assert len(remaining) == len(written) - 4


def test_deletes_purged(array_factory):
    built = array_factory("deletes", purge=True)
    infos = [R.fragment_info(built, f) for f in built.fragments()]
    cons = [i for i in infos if i.t1 != i.t2][0]
    assert "dt.tdb" not in cons.files and "dci.tdb" not in cons.files
    assert cons.cell_num == 18 - 4


def test_commits_consolidation_and_ignore_file(sample_arrays):
    built = sample_arrays["commits"]
    con = _commit_files(built, ".con")
    ign = _commit_files(built, ".ign")
    assert len(con) == 1 and len(ign) == 1
    con_bytes = (built.path / "__commits" / con[0]).read_bytes()
    ign_lines = (built.path / "__commits" / ign[0]).read_text().split()
    assert len(ign_lines) == 3 and all(x.endswith(".wrt") for x in ign_lines)
    for line in ign_lines:
        assert os.path.basename(line).encode() in con_bytes
    assert b".del" in con_bytes
    frags = built.fragments()
    assert len(frags) == 1 and R.is_committed(built, frags[0])


def test_commits_vacuumed_keep_fragments_committed(array_factory):
    built = array_factory("commits", vacuum_commits=True, then_fragments=False)
    assert not _commit_files(built, ".wrt") and not _commit_files(built, ".del")
    assert len(_commit_files(built, ".con")) == 1
    frags = built.fragments()
    assert len(frags) == 3 and all(R.is_committed(built, f) for f in frags)
    assert len(R.array_cells(built)["a0"]) == 12 - 2


def test_fragment_meta(sample_arrays):
    built = sample_arrays["fragment_meta"]
    metas = sorted((built.path / "__fragment_meta").iterdir())
    assert len(metas) == 1 and metas[0].name.endswith(".meta")
    assert all(R.fragment_info(built, f).has_consolidated_metadata for f in built.fragments())


# ---------------------------------------------------------------------------
# schema evolution, enumerations, labels, metadata


def test_schema_evolution(sample_arrays):
    built = sample_arrays["schema_evolution"]
    schemas = R.schema_names(built)
    assert len(schemas) == 3
    frags = built.fragments()
    infos = [R.fragment_info(built, f) for f in frags]
    assert [i.array_schema_name for i in infos] == schemas
    fields = [list(R.fragment_cells(built, f)) for f in frags]
    assert fields == [["a0", "a1", "d0"], ["a0", "a1", "a2", "d0"], ["a0", "a2", "d0"]]
    assert {"a0.tdb", "a1.tdb", "a1_var.tdb"} <= set(infos[0].files)
    assert {"a0.tdb", "a1.tdb", "a1_var.tdb", "a2.tdb"} <= set(infos[1].files)
    # after dropping a1, a2 is attribute 1: its file is a1.tdb, not var
    assert {"a0.tdb", "a1.tdb"} <= set(infos[2].files) and "a1_var.tdb" not in infos[2].files
    c2 = R.fragment_cells(built, frags[2])
    assert c2["a2"].values.tolist() == built.writes[2].data["a2"].tolist()
    # reading the whole array now: old fragments show a2's fill value
    allc = R.array_cells(built)
    assert "a1" not in allc and 1.5 in allc["a2"].values.tolist()


def test_enumerations(sample_arrays):
    built = sample_arrays["enumerations"]
    enum_dir = built.path / "__schema" / "__enumerations"
    assert len(list(enum_dir.iterdir())) == 3  # colors, sizes, extended colors
    assert len(R.schema_names(built)) == 2
    with tiledb.open(built.uri) as A:
        assert A.schema.attr("color").enum_label == "colors"
        assert list(A.enum("colors").values()) == ["red", "green", "blue", "purple"]
        assert list(A.enum("sizes").values()) == [10, 20, 30]
    c1 = R.fragment_cells(built, 1)
    assert c1["color"].values.tolist() == [3, 0]


def test_dim_labels(sample_arrays):
    built = sample_arrays["dim_labels"]
    lab = built.path / "__labels" / "l0"
    assert (lab / "__schema").is_dir() and len(R.list_fragments(lab)) == 1
    with tiledb.open(built.uri) as A:
        assert A.schema.has_dim_label("xl")
        got = A.label_index(["xl"])[-1.0:0.0]
    assert got["a0"].tolist() == [0, 3, 6, 9]
    assert R.fragment_cells(built, 0)["a0"].values.tolist() == built.writes[0].data["a0"].tolist()
    # the label array's own fragment holds the label values
    assert R.fragment_cells(lab, 0)[tiledb.ArraySchema.load(str(lab)).attr(0).name].values.tolist() == \
        built.writes[0].data["xl"].tolist()


def test_metadata(sample_arrays):
    built = sample_arrays["metadata"]
    meta_files = sorted(p.name for p in (built.path / "__meta").iterdir())
    assert len(meta_files) == 3
    ops = built.ops_of("meta")
    assert [R.parse_fragment_name(n)[0] for n in meta_files] == [op.timestamp for op in ops]
    got = R.read_metadata(built)
    exp = arrays.expected_metadata(built)
    assert set(got) == set(exp) and "int" not in got
    for k, v in exp.items():
        if isinstance(v, np.ndarray):
            assert np.asarray(got[k]).tolist() == v.tolist()
        else:
            assert got[k] == v
    # time travel: before the deletion "int" is there
    assert R.read_metadata(built, timestamp=ops[1].timestamp)["int"] == 7


def test_metadata_consolidated(array_factory):
    built = array_factory("metadata", consolidate_meta=True)
    names = sorted(p.name for p in (built.path / "__meta").iterdir())
    assert len([n for n in names if n.endswith(".vac")]) == 1
    assert len([n for n in names if not n.endswith(".vac")]) == 4
    got = R.read_metadata(built)
    assert set(got) == set(arrays.expected_metadata(built)) and got["str"] == "hello again"
    built2 = array_factory("metadata", consolidate_meta=True, vacuum_meta=True)
    names2 = sorted(p.name for p in (built2.path / "__meta").iterdir())
    assert len(names2) == 1


# ---------------------------------------------------------------------------
# timestamps, isolation, snapshots


def test_timestamps_are_explicit_distinct_and_not_in_the_future(sample_arrays):
    now = arrays.now_ms()
    for name, built in sample_arrays.items():
        ts = [op.timestamp for op in built.ops if op.timestamp is not None]
        assert len(ts) == len(set(ts)), name
        assert ts == sorted(ts) and max(ts) <= now, name
        plain = [f for f in built.fragments() if R.parse_fragment_name(f)[0] == R.parse_fragment_name(f)[1]]
        plain_ts = sorted(R.parse_fragment_name(f)[0] for f in plain)
        write_ts = sorted(op.timestamp for op in built.writes)
        if built.ops_of("vacuum"):
            assert set(plain_ts) <= set(write_ts), name
        else:
            assert plain_ts == write_ts, name


def test_fragment_can_be_isolated_by_timestamp(sample_arrays):
    built = sample_arrays["sparse_2d"]
    op = built.writes[0]
    with tiledb.open(built.uri, timestamp=(op.timestamp, op.timestamp)) as A:
        res = A[:]
    assert len(res["a0"]) == len(op.data["a0"])


def test_reference_reads_leave_the_array_untouched(sample_arrays):
    for name in ("deletes", "commits", "schema_evolution", "dense_2d"):
        built = sample_arrays[name]
        before = snapshot_tree(built.path)
        for f in built.fragments():
            R.fragment_cells(built, f)
        R.array_cells(built)
        assert_unchanged(before, snapshot_tree(built.path))


def test_snapshot_detects_changes(tmp_path):
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "f").write_bytes(b"abc")
    before = snapshot_tree(tmp_path)
    assert before["d/f"][0] == "file" and before["d/f"][1] == 3
    (tmp_path / "d" / "f").write_bytes(b"abd")
    os.utime(tmp_path / "d" / "f", ns=(before["d/f"][2], before["d/f"][2]))
    after = snapshot_tree(tmp_path)
    assert any("changed: d/f" in line for line in diff_snapshots(before, after))  # same size+mtime, new sha
    with pytest.raises(AssertionError):
        assert_unchanged(before, after)


def test_sample_set_builds_quickly(tmp_path):
    t = time.monotonic()
    arrays.build_sample_set(tmp_path)
    assert time.monotonic() - t < 20


# ---------------------------------------------------------------------------
# FUSE environment and the mount helper (with a tiny stand-in file system)


def test_fuse_works_and_mount_helper_always_unmounts(tmp_path):
    assert os.path.exists("/dev/fuse"), "/dev/fuse is missing"
    cmd = [sys.executable, str(HERE / "hello_fuse.py")]
    with mounted(tmp_path, command=cmd) as mnt:
        assert is_mounted(mnt)
        assert (mnt / "hello.txt").read_bytes() == b"hello from fuse\n"
        assert os.listdir(mnt) == ["hello.txt"]
        kept = mnt
    assert not is_mounted(kept) and not kept.exists()
    # unmounted also when the body fails
    with pytest.raises(RuntimeError):
        with mounted(tmp_path, command=cmd) as mnt:
            kept = mnt
            raise RuntimeError("boom")
    assert not is_mounted(kept)


def test_unmount_fallbacks(tmp_path):
    mnt = tmp_path / "m"
    mnt.mkdir()
    res = subprocess.run([sys.executable, str(HERE / "hello_fuse.py"), "x", str(mnt)], timeout=60)
    assert res.returncode == 0 and is_mounted(mnt)
    log = unmount(mnt, use_cli=False)
    assert not is_mounted(mnt), log
    assert log and ("fusermount" in log[0] or "umount" in log[0])


def test_mount_helper_reports_a_failing_command(tmp_path):
    with pytest.raises(AssertionError, match="mount command failed"):
        with mounted(tmp_path, command=[sys.executable, "-c", "import sys; sys.exit(3)"]):
            pass
