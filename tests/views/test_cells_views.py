"""cells/tile_K.csv, cells.csv, fields/ and the dense tile domains of tiles.csv and tile_K.yaml, built
from the store without FUSE, against what TileDB reads (tiledb-py; the TileDB 0.x library for 0.x)."""

from __future__ import annotations

import csv
import io
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import arrays  # noqa: E402
import legacy0x_arrays as Z  # noqa: E402
import reference  # noqa: E402
from tdbfs.store.open_array import open_array  # noqa: E402
from tdbfs.views.fragment_views import fragment_dir  # noqa: E402
from tdbfs.views.nodes import SymlinkNode, ViewError, resolve, walk  # noqa: E402

tiledb = pytest.importorskip("tiledb")
# explicit validity maps, as tests/arrays.py writes them
from tiledb.sparse_array import _setitem_impl_sparse  # noqa: E402


def read(root, path: str) -> bytes:
    node = resolve(root, path)
    size = node.size()
    data = bytes(node.read(0, size + 10))
    assert len(data) == size, path
    return data


def table(data: bytes) -> tuple[list[str], list[dict]]:
    reader = csv.DictReader(io.StringIO(data.decode(), newline=""))
    rows = list(reader)
    return reader.fieldnames, rows


def fragment_roots(path) -> dict:
    store = open_array(str(path))
    return {rel.rsplit("/", 1)[-1]: fragment_dir(store, rel) for rel in store.fragment_paths()}


def values_of(text: str, dtype: np.dtype) -> np.ndarray:
    """The space-separated numbers of one CSV field as `dtype` (datetimes: their stored int64)."""
    dtype = np.dtype(dtype)
    if dtype.kind == "M":
        return np.array(text.split(), np.int64).view(dtype)
    if dtype.kind == "b":   # TileDB's BOOL is a byte: 0 or 1
        return np.array(text.split(), np.uint8).astype(bool)
    return np.array(text.split()).astype(dtype)


def assert_column(got: list[str], want: reference.FieldCells, valid: list[str] | None = None):
    """One column of cells.csv (csv-parsed text) against TileDB's cells of that field."""
    assert len(got) == len(want), want.name
    if want.nullable:
        assert valid == [str(int(v)) for v in want.validity], want.name
    for i, text in enumerate(got):
        if want.nullable and not want.validity[i]:
            assert text == "", (want.name, i)
        elif want.var and want.dtype.kind == "S":
            assert text == want.cells[i].decode("utf-8", "backslashreplace"), (want.name, i)
        elif want.var:
            assert np.array_equal(values_of(text, want.dtype), np.frombuffer(want.cells[i], want.dtype))
        elif want.dtype.kind == "S":
            assert text.encode() == want.values[i], (want.name, i)
        else:
            assert np.array_equal(values_of(text, want.dtype), np.reshape(want.values[i], -1), equal_nan=True), \
                (want.name, i, text)


def assert_cells_match_tiledb(uri, name: str, root):
    """cells.csv of one fragment holds TileDB's cells of it, in stored order; the tiles' CSVs add up to it."""
    want = reference.fragment_cells(uri, name)
    info = reference.fragment_info(uri, name)
    data = read(root, "cells.csv")
    header, rows = table(data)
    attrs = [k for k, v in want.items() if v.role == "attr"]
    expected = list(info.dim_names)
    for a in attrs:
        expected += [a, f"{a}.valid"] if want[a].nullable else [a]
    assert header[:len(expected)] == expected
    for field in want.values():
        valid = [r[f"{field.name}.valid"] for r in rows] if field.nullable else None
        assert_column([r[field.name] for r in rows], field, valid)
    tiles = [read(root, f"cells/tile_{k}.csv") for k in range(info.tile_num)]
    assert all(t.split(b"\n", 1)[0] == data.split(b"\n", 1)[0] for t in tiles)
    assert data.split(b"\n", 1)[0] + b"\n" + b"".join(t.split(b"\n", 1)[1] for t in tiles) == data
    return header, rows


# -- sparse -----------------------------------------------------------------------------------

@pytest.mark.parametrize("kind,options", [
    ("sparse", {}),                                      # 2-D int, var string, nullable float
    ("sparse", {"dim_kinds": ["string", "float"]}),      # var string and float coordinates
    ("all_dtypes", {}),                                  # every fixed type, multi-value, fixed and var strings
])
def test_sparse_cells_are_what_tiledb_reads(array_factory, kind, options):
    built = array_factory(kind, **options)
    roots = fragment_roots(built.path)
    assert roots
    for name, root in roots.items():
        _header, rows = assert_cells_match_tiledb(built.path, name, root)
        assert len(rows) == reference.fragment_info(built.path, name).cell_num


def test_a_read_across_tiles_gives_the_same_bytes(array_factory):
    built = array_factory("sparse", capacity=2, cells=9)
    root = next(iter(fragment_roots(built.path).values()))
    node = resolve(root, "cells.csv")
    whole = bytes(node.read(0, node.size()))
    pieces = b"".join(bytes(node.read(off, 7)) for off in range(0, node.size(), 7))
    assert pieces == whole and whole.count(b"\n") == 10


def test_strings_are_quoted_and_nulls_empty(tmp_path):
    uri = str(tmp_path / "quoted")
    dom = tiledb.Domain(tiledb.Dim("x", domain=(0, 9), tile=10, dtype=np.int32))
    schema = tiledb.ArraySchema(domain=dom, sparse=True, capacity=10, attrs=[
        tiledb.Attr("s", dtype=str, var=True, nullable=True), tiledb.Attr("v", dtype=np.int16, var=True)])
    tiledb.Array.create(uri, schema)
    strings = np.array(['a,b', 'say "hi"', "two\nlines", "", "null here"], dtype=object)
    ints = np.array([np.array([1, -2], np.int16), np.array([], np.int16), np.array([7], np.int16),
                     np.array([3, 4, 5], np.int16), np.array([9], np.int16)], dtype=object)
    with tiledb.open(uri, "w") as A:
        _setitem_impl_sparse(A, (np.arange(5, dtype=np.int32),), {"s": strings, "v": ints},
                             {"s": np.array([1, 1, 1, 1, 0], np.uint8)})
    root = next(iter(fragment_roots(uri).values()))
    text = read(root, "cells/tile_0.csv").decode()
    assert text.splitlines()[:3] == ['x,s,s.valid,v', '0,"a,b",1,"1 -2"', '1,"say ""hi""",1,""']
    assert '\n3,"",1,"3 4 5"\n4,,0,"9"\n' in text   # an empty string is "", a null nothing
    _header, rows = table(text.encode())
    assert [r["s"] for r in rows] == ["a,b", 'say "hi"', "two\nlines", "", ""]
    assert_cells_match_tiledb(uri, reference.list_fragments(uri)[0], root)


# -- consolidated: timestamps and delete metadata -----------------------------------------------

def test_consolidated_cells_add_timestamps_and_deletes(array_factory):
    built = array_factory("deletes")
    writes = {int(c): op.timestamp for op in built.ops if op.kind == "write" for c in op.coords["d0"]}
    deletes = [op for op in built.ops if op.kind == "delete"]
    [name] = [n for n in reference.list_fragments(built.path) if reference.fragment_info(built.path, n).has_delete_meta]
    root = fragment_roots(built.path)[name]
    header, rows = table(read(root, "cells.csv"))
    assert header == ["d0", "a0", "a1", "a2", "a2.valid", "timestamp", "delete_timestamp", "delete_condition_index"]
    links = {n: l.target for n, l in resolve(root, "fields").children().items()}
    assert {n: links[n] for n in ("__timestamps", "__delete_timestamps", "__delete_condition_index")} == {
        "__timestamps": "../attrs/t", "__delete_timestamps": "../attrs/dt", "__delete_condition_index": "../attrs/dci"}
    assert {int(r["d0"]): int(r["timestamp"]) for r in rows} == writes
    none = str(2 ** 64 - 1)   # TileDB's "never deleted"
    for r in rows:
        a0 = int(r["a0"])
        index = 0 if a0 < -80 else 1 if a0 > -40 else None   # arrays.DELETE_CONDITIONS
        if index is None:
            assert (r["delete_timestamp"], r["delete_condition_index"]) == (none, none)
        else:
            assert (int(r["delete_timestamp"]), int(r["delete_condition_index"])) == (deletes[index].timestamp, index)
    assert sum(r["delete_timestamp"] != none for r in rows) == 4


def test_consolidated_cells_without_deletes_add_only_timestamps(array_factory):
    built = array_factory("consolidated", overlap=True, allows_duplicates=True)
    writes = [op for op in built.ops if op.kind == "write"]
    [name] = [n for n in reference.list_fragments(built.path) if reference.fragment_info(built.path, n).has_timestamps]
    header, rows = table(read(fragment_roots(built.path)[name], "cells.csv"))
    assert header == ["d0", "a0", "a1", "a2", "a2.valid", "timestamp"]
    # overlapping writes: one row per version of a cell, each with the time of the write that made it
    assert sorted((int(r["d0"]), int(r["timestamp"])) for r in rows) == sorted(
        (int(c), op.timestamp) for op in writes for c in op.coords["d0"])


# -- dense: tile domains and cells ----------------------------------------------------------------

ORDERS = [("row-major", "row-major"), ("row-major", "col-major"), ("col-major", "row-major"),
          ("col-major", "col-major")]


@pytest.fixture(params=ORDERS, ids=["-".join(o) for o in ORDERS])
def dense(request, tmp_path):
    """A dense array d0, d1 in [3, 13] with tile extent 3 (the last tile reaches past the domain), and one
    fragment over [4, 9] x [5, 13]: neither starting at the domain's low bound nor aligned to tiles."""
    tile_order, cell_order = request.param
    built = arrays.make_array(tmp_path, "dense", low=3, extent=3, tiles_per_dim=4, domain_high=13,
                              fragments=[[(4, 9), (5, 13)]], tile_order=tile_order, cell_order=cell_order)
    [name] = reference.list_fragments(built.path)
    return built, name, fragment_roots(built.path)[name], cell_order


def test_dense_tile_domains_hold_what_tiledb_reads_there(dense):
    built, name, root, cell_order = dense
    t1, t2, *_ = reference.parse_fragment_name(name)
    _, tiles = table(read(root, "tiles.csv"))
    header = read(root, "tiles.csv").split(b"\n", 1)[0].decode().split(",")
    assert header[-4:] == ["d0_lo", "d0_hi", "d1_lo", "d1_hi"]
    # tiles of [4, 9] x [5, 13]: rows 3-5, 6-8, 9-11 by columns 3-5, ..., 12-14 (past the domain's 13)
    domains = [((int(t["d0_lo"]), int(t["d0_hi"])), (int(t["d1_lo"]), int(t["d1_hi"]))) for t in tiles]
    assert sorted(domains) == [((lo0, lo0 + 2), (lo1, lo1 + 2)) for lo0 in (3, 6, 9) for lo1 in (3, 6, 9, 12)]
    with reference.isolated_fragment(built.path, name) as iso, tiledb.open(str(iso), timestamp=(t1, t2)) as A:
        for k, ((lo0, hi0), (lo1, hi1)) in enumerate(domains):
            record = yaml.safe_load(read(root, f"attrs/a0/tile_{k}.yaml"))
            assert record["domain"] == {"d0": [lo0, hi0], "d1": [lo1, hi1]}
            got = np.frombuffer(read(root, f"attrs/a0/tile_{k}.bin"), np.int32).reshape(
                (3, 3), order="F" if cell_order == "col-major" else "C")
            want = A.query(order="C")[lo0:min(hi0, 13) + 1, lo1:min(hi1, 13) + 1]["a0"]
            inside = np.zeros((3, 3), bool)   # the cells the fragment wrote: its non-empty domain
            inside[max(4, lo0) - lo0:min(9, hi0) + 1 - lo0, max(5, lo1) - lo1:min(13, hi1) + 1 - lo1] = True
            assert inside.any()
            assert np.array_equal(got[:want.shape[0], :want.shape[1]][inside[:want.shape[0], :want.shape[1]]],
                                  want[inside[:want.shape[0], :want.shape[1]]])


def test_dense_cells_are_the_written_subarray(dense):
    built, name, root, _ = dense
    t1, t2, *_ = reference.parse_fragment_name(name)
    header, rows = table(read(root, "cells.csv"))
    assert header == ["d0", "d1", "a0", "a1", "a2", "a2.valid"]
    with reference.isolated_fragment(built.path, name) as iso, tiledb.open(str(iso), timestamp=(t1, t2)) as A:
        want = A.query(order="C")[4:10, 5:14]
    coords = [(int(r["d0"]), int(r["d1"])) for r in rows]
    assert sorted(coords) == [(i, j) for i in range(4, 10) for j in range(5, 14)]
    a2 = want["a2"]
    for r, (i, j) in zip(rows, coords):
        assert int(r["a0"]) == want["a0"][i - 4, j - 5]
        assert r["a1"] == want["a1"][i - 4, j - 5]
        if np.ma.is_masked(a2[i - 4, j - 5]):
            assert (r["a2"], r["a2.valid"]) == ("", "0")
        else:
            assert (float(r["a2"]), r["a2.valid"]) == (a2[i - 4, j - 5], "1")
    # tile by tile, each tile's cells in its domain
    _, tiles = table(read(root, "tiles.csv"))
    for k, t in enumerate(tiles):
        for r in table(read(root, f"cells/tile_{k}.csv"))[1]:
            assert int(t["d0_lo"]) <= int(r["d0"]) <= int(t["d0_hi"])
            assert int(t["d1_lo"]) <= int(r["d1"]) <= int(t["d1_hi"])


def test_sparse_tile_lists_gain_no_domain(array_factory):
    built = array_factory("sparse")
    root = next(iter(fragment_roots(built.path).values()))
    assert not any(h.endswith(("_lo", "_hi")) for h in table(read(root, "tiles.csv"))[0])
    assert "domain" not in yaml.safe_load(read(root, "attrs/a0/tile_0.yaml"))


# -- fields/ ------------------------------------------------------------------------------------------

def test_fields_link_names_to_stems(tmp_path):
    uri = str(tmp_path / "names")
    dom = tiledb.Domain(tiledb.Dim("row/col", domain=(0, 9), tile=5, dtype=np.int32),
                        tiledb.Dim("..", domain=(0, 9), tile=5, dtype=np.int32))
    schema = tiledb.ArraySchema(domain=dom, sparse=True, attrs=[
        tiledb.Attr("50%", dtype=np.int32), tiledb.Attr("plain", dtype=np.float32),
        tiledb.Attr("a/b", dtype=np.int8)])
    tiledb.Array.create(uri, schema)
    with tiledb.open(uri, "w") as A:
        A[np.array([1, 2], np.int32), np.array([3, 4], np.int32)] = {
            "50%": np.array([5, 6], np.int32), "plain": np.array([0.5, 1.5], np.float32),
            "a/b": np.array([7, 8], np.int8)}
    root = next(iter(fragment_roots(uri).values()))
    links = resolve(root, "fields").children()
    assert {n: l.target for n, l in links.items()} == {
        "50%25": "../attrs/a0", "plain": "../attrs/a1", "a%2Fb": "../attrs/a2",
        "row%2Fcol": "../dims/d0", "%2E%2E": "../dims/d1"}
    assert all(isinstance(l, SymlinkNode) for l in links.values())
    node, where = walk(root, "fields/a%2Fb/tile_0.bin", follow_links=True)
    assert where == "attrs/a2/tile_0.bin" and bytes(node.read(0, 2)) == b"\x07\x08"
    header, rows = table(read(root, "cells.csv"))
    assert header == ["row/col", "..", "50%", "plain", "a/b"]
    assert [list(r.values()) for r in rows] == [["1", "3", "5", "0.5", "7"], ["2", "4", "6", "1.5", "8"]]


@pytest.mark.backcompat
def test_fields_escape_an_empty_name():
    import corpus
    [root] = fragment_roots(corpus.array("v15")).values()   # its one attribute is named ""
    assert {n: l.target for n, l in resolve(root, "fields").children().items()} == {"%": "../attrs/a0"}
    assert read(root, "cells/tile_0.csv").split(b"\n", 1)[0] == b"X,Y,C,"


def test_fields_of_a_dense_fragment_are_its_attributes(dense):
    _built, _name, root, _ = dense
    assert {n: l.target for n, l in resolve(root, "fields").children().items()} == {
        "a0": "../attrs/a0", "a1": "../attrs/a1", "a2": "../attrs/a2"}


# -- damage --------------------------------------------------------------------------------------------

def test_a_damaged_tile_fails_its_cells_only(array_factory, tmp_path):
    built = array_factory("sparse", capacity=3, cells=9, n_fragments=1)
    copy = tmp_path / "damaged"
    shutil.copytree(built.path, copy)
    [frag] = (copy / "__fragments").iterdir()
    data = (frag / "a0.tdb").read_bytes()
    (frag / "a0.tdb").write_bytes(data[:-8])   # the last tile cut short
    store = open_array(str(copy))
    [rel] = store.fragment_paths()
    root = fragment_dir(store, rel)
    assert table(read(root, "cells/tile_0.csv"))[1]
    with pytest.raises(ViewError, match="tile 2"):
        resolve(root, "cells/tile_2.csv").size()
    with pytest.raises(ViewError):
        resolve(root, "cells.csv").size()
    problems = yaml.safe_load(read(root, "fragment.yaml"))["problems"]
    assert any(p["file"].endswith("/a0.tdb") and p["message"].startswith("tile 2 ") for p in problems)


# -- TileDB 0.x ------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    if Z.wheel_library_path() is None:
        pytest.skip("genomicsdb==0.1.6 (its TileDB 0.x library) is not installed")
    return Z.load_corpus(tmp_path_factory.mktemp("zero"))


@pytest.mark.parametrize("name", ["sparse_gzip", "dense_none", "dense_gzip"])
def test_legacy0x_cells_are_what_the_library_reads(corpus, name):
    path, spec = corpus["arrays"][name]
    store = open_array(path)
    for rel in store.fragment_paths():
        frag = store.fragment(rel)
        if not frag.committed:
            continue
        root = fragment_dir(store, rel)
        header, rows = table(read(root, "cells.csv"))
        assert header == list(spec.dims) + [a.name for a in spec.attrs]
        want = corpus["cells"][(str(path), rel)]
        if spec.dense:
            # the library read the tiles whole; cells.csv holds the non-empty domain's cells of them
            _, tiles = table(read(root, "tiles.csv"))
            ned = frag.non_empty_domain()
            coords = []
            for t in tiles:
                (lo0, hi0), (lo1, hi1) = [(int(t[f"{d}_lo"]), int(t[f"{d}_hi"])) for d in spec.dims]
                i, j = np.meshgrid(np.arange(lo0, hi0 + 1), np.arange(lo1, hi1 + 1), indexing="ij")
                order = "F" if spec.cell_order == Z.COL_MAJOR else "C"
                coords.append(np.stack([i.reshape(-1, order=order), j.reshape(-1, order=order)], 1))
            coords = np.concatenate(coords)
            keep = np.all([(coords[:, d] >= lo) & (coords[:, d] <= hi) for d, (lo, hi) in enumerate(ned)], 0)
            assert [[int(r[d]) for d in spec.dims] for r in rows] == coords[keep].tolist()
        else:
            assert [[int(r[d]) for d in spec.dims] for r in rows] == want["__coords"].tolist()
        idx = np.flatnonzero(keep) if spec.dense else np.arange(len(rows))
        for a in spec.attrs:
            got = [r[a.name] for r in rows]
            if a.var and a.type == Z.CHAR:
                assert got == [want[a.name][i].decode() for i in idx]
            elif a.var:
                assert [values_of(g, Z.NUMPY[a.type]).tolist() for g in got] == [
                    np.frombuffer(want[a.name][i], Z.NUMPY[a.type]).tolist() for i in idx]
            else:
                values = np.frombuffer(want[a.name], Z.NUMPY[a.type]).reshape(-1, a.cell_val_num)[idx]
                assert [values_of(g, values.dtype).tolist() for g in got] == values.tolist()


# -- formats 1-22: the back-compat corpus -------------------------------------------------------------

@pytest.mark.backcompat
@pytest.mark.parametrize("folder", ["v03", "v05", "v08", "v09", "v10", "v13", "v17", "v19", "v20", "v22"])
def test_cells_of_every_format_are_what_tiledb_reads(folder):
    import corpus
    path = corpus.array(folder)
    for name, root in fragment_roots(path).items():
        _header, rows = assert_cells_match_tiledb(path, name, root)
        assert len(rows) == reference.fragment_info(path, name).cell_num > 0


@pytest.mark.backcompat
@pytest.mark.parametrize("folder,cells", [
    ("v01", [["1", "10", "1"], ["2", "10", "2"], ["3", "10", "3"], ["4", "10", "4"]]),   # zipped __coords
    ("v02", [["1", "1", "1"], ["2", "3", "3"], ["2", "4", "2"]]),                         # unzipped __coords
])
def test_cells_of_formats_1_and_2_are_what_tiledb_reads(folder, cells):
    import corpus
    path = corpus.array(folder)
    [root] = fragment_roots(path).values()
    header, rows = table(read(root, "cells.csv"))
    assert [list(r.values()) for r in rows] == cells   # INDEX.md's expected cells
    with tiledb.open(path) as A:   # its one fragment
        want = A.query(order="G")[:]
        assert [[str(want[h][i]) for h in header] for i in range(len(rows))] == cells


@pytest.mark.backcompat
def test_cells_of_a_dense_image_are_what_tiledb_reads():
    import corpus
    path = corpus.array("v14")
    [(name, root)] = fragment_roots(path).items()
    header, rows = table(read(root, "cells.csv"))
    assert header == ["X", "Y", "rgb"]
    x, y = (np.array([r[h] for r in rows], np.int64) for h in ("X", "Y"))
    rgb = np.array([r["rgb"].split() for r in rows], np.uint8)   # three values a cell
    (x0, x1), (y0, y1) = [(int(lo), int(hi)) for lo, hi in reference.fragment_info(path, name).nonempty_domain]
    with tiledb.open(path) as A:
        want = A.query(order="C")[x0:x1 + 1, y0:y1 + 1]["rgb"]
    want = np.stack([want[f] for f in want.dtype.names], -1)   # tiledb-py: one record field a value
    assert len(rows) == want.shape[0] * want.shape[1]
    assert np.array_equal(rgb, want[x - x0, y - y0])
    assert len(set(zip(x.tolist(), y.tolist()))) == len(rows)
