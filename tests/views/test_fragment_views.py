"""The fragment views of both layouts, built from the store's fragment interface without FUSE, against
what TileDB wrote: a tiledb-py array (formats 1-22) and arrays written by the TileDB 0.x library."""

from __future__ import annotations

import csv
import io
import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import legacy0x_arrays as Z  # noqa: E402
from tdbfs.check.check import check_array  # noqa: E402
from tdbfs.store.fragment_interface import DATA  # noqa: E402
from tdbfs.store.open_array import open_array  # noqa: E402
from tdbfs.views.fragment_views import fragment_dir  # noqa: E402
from tdbfs.views.nodes import resolve  # noqa: E402

tiledb = pytest.importorskip("tiledb")
needs_0x = pytest.mark.skipif(Z.wheel_library_path() is None,
                              reason="genomicsdb==0.1.6 (its TileDB 0.x library) is not installed")


def read(root, path: str) -> bytes:
    node = resolve(root, path)
    data = bytes(node.read(0, node.size() + 10))
    assert len(data) == node.size(), path
    return data


def rows(data: bytes) -> list[dict]:
    return list(csv.DictReader(io.StringIO(data.decode())))


# -- TileDB 2.x ---------------------------------------------------------------------------------

COORDS = np.arange(1, 11, dtype=np.int64)
VALUES = (COORDS * 7).astype(np.int32)
STRINGS = [f"s{i}" * (i % 3 + 1) for i in range(10)]


@pytest.fixture(scope="module")
def tiledb_fragment(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("views") / "sparse")
    dom = tiledb.Domain(tiledb.Dim("d", domain=(1, 100), tile=10, dtype=np.int64))
    schema = tiledb.ArraySchema(domain=dom, sparse=True, capacity=4,
                                attrs=[tiledb.Attr("a", dtype=np.int32), tiledb.Attr("s", dtype=str, var=True)])
    tiledb.Array.create(path, schema)
    with tiledb.open(path, "w") as arr:
        arr[COORDS] = {"a": VALUES, "s": np.array(STRINGS, dtype=object)}
    store = open_array(path)
    [rel] = store.fragment_paths()
    return store, rel, fragment_dir(store, rel)


def test_tiledb_summary_and_tile_list(tiledb_fragment):
    store, rel, root = tiledb_fragment
    summary = yaml.safe_load(read(root, "fragment.yaml"))
    assert summary["type"] == "sparse" and summary["committed"] is True
    assert summary["tile_count"] == 3 and summary["cell_count"] == 10
    assert summary["non_empty_domain"] == {"d": [1, 10]}
    assert sorted(summary["fields"].values()) == ["a", "d", "s"]
    assert summary["problems"] == []
    assert list(root.children())[:3] == ["fragment.yaml", "footer.yaml", "rtree"]
    table = rows(read(root, "tiles.csv"))
    assert [int(r["cells"]) for r in table] == [4, 4, 2]
    stems = {name: stem for stem, name in summary["fields"].items()}
    sizes = [int(r[f"{stems['a']}_size"]) for r in table]
    assert sizes == [16, 16, 8]


def test_tiledb_tiles_hold_what_tiledb_reads(tiledb_fragment):
    store, rel, root = tiledb_fragment
    stems = {name: stem for stem, name in yaml.safe_load(read(root, "fragment.yaml"))["fields"].items()}
    with tiledb.open(store.path) as arr:
        want = arr[:]
    a = b"".join(read(root, f"attrs/{stems['a']}/tile_{k}.bin") for k in range(3))
    assert np.array_equal(np.frombuffer(a, np.int32), want["a"])
    d = b"".join(read(root, f"dims/{stems['d']}/tile_{k}.bin") for k in range(3))
    assert np.array_equal(np.frombuffer(d, np.int64), want["d"])
    text = b"".join(read(root, f"attrs/{stems['s']}/tile_{k}.txt") for k in range(3))
    assert [json.loads(line) for line in text.decode().splitlines()] == list(want["s"])
    record = yaml.safe_load(read(root, f"attrs/{stems['s']}/tile_1.yaml"))
    assert record["cells"] == 4 and set(record["streams"]) == {"offsets", "var"}
    assert record["streams"]["var"]["file"] == f"{rel}/{stems['s']}_var.tdb"
    info = yaml.safe_load(read(root, f"attrs/{stems['a']}/info.yaml"))
    assert info["datatype"] == "INT32" and info["tile_count"] == 3


# -- TileDB 0.x ---------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    if Z.wheel_library_path() is None:
        pytest.skip("genomicsdb==0.1.6 (its TileDB 0.x library) is not installed")
    return Z.load_corpus(tmp_path_factory.mktemp("zero"))


def _committed(store) -> list[str]:
    return [rel for rel in store.fragment_paths() if store.fragment(rel).committed]


@needs_0x
def test_legacy0x_tiles_hold_what_the_library_reads(corpus):
    path, spec = corpus["arrays"]["sparse_gzip"]
    store = open_array(path)
    for rel in _committed(store):
        root = fragment_dir(store, rel)
        summary = yaml.safe_load(read(root, "fragment.yaml"))
        assert summary["layout"] == "TileDB 0.x" and summary["committed"] is True
        assert list(root.children()) == ["fragment.yaml", "book_keeping.yaml", "rtree", "stats.csv", "tiles.csv",
                                         "attrs", "dims", "fields", "cells", "cells.csv", "raw"]
        n = summary["tile_count"]
        assert len(rows(read(root, "tiles.csv"))) == n
        want = corpus["cells"][(str(path), rel)]
        for a in spec.attrs:
            data = b"".join(read(root, f"attrs/{a.name}/tile_{k}.bin") for k in range(n))
            if a.var:
                values = b"".join(read(root, f"attrs/{a.name}/tile_{k}.var.bin") for k in range(n))
                offs = np.frombuffer(data, "<u8").astype(np.int64)
                ends = np.append(offs[1:], len(values))
                assert [values[s:e] for s, e in zip(offs.tolist(), ends.tolist())] == want[a.name]
            elif a.type == Z.CHAR:
                assert data == want[a.name]
            else:
                assert np.array_equal(np.frombuffer(data, Z.NUMPY[a.type]), want[a.name])
        coords = b"".join(read(root, f"dims/__coords/tile_{k}.bin") for k in range(n))
        coords = np.frombuffer(coords, spec.coord_dtype).reshape(-1, len(spec.dims))
        assert np.array_equal(coords, want["__coords"])
        for j, dim in enumerate(spec.dims):
            col = b"".join(read(root, f"dims/{dim}/tile_{k}.bin") for k in range(n))
            assert np.array_equal(np.frombuffer(col, spec.coord_dtype), want["__coords"][:, j])
        lines = read(root, "dims/__coords/tile_0.txt").decode().splitlines()
        assert [json.loads(line) for line in lines] == want["__coords"][:len(lines)].tolist()


@needs_0x
def test_legacy0x_check_names_the_damaged_tile(corpus, tmp_path):
    path, _spec = corpus["arrays"]["sparse_gzip"]
    copy = tmp_path / "sparse_gzip"
    shutil.copytree(path, copy)
    store = open_array(str(copy))
    rel = _committed(store)[0]
    frag = store.fragment(rel)
    field = next(f for f in frag.stored_fields() if f.name == "a1")
    loc = frag.location(field, 1, DATA)
    assert loc.listed  # gzip: the book-keeping lists where each tile starts
    with open(copy / loc.file, "r+b") as fh:
        fh.seek(loc.offset)
        fh.write(b"\xff" * min(16, loc.persisted_size))

    result = check_array(open_array(str(copy)))
    assert not result.clean
    [bad] = [p for p in result.errors if p.file == loc.file]
    assert bad.offset == loc.offset and bad.structure == "tile 1", bad.line()
    assert result.counts["fragments"] == len(open_array(str(copy)).fragment_paths())


@needs_0x
def test_legacy0x_workspace_check_counts_every_array(corpus):
    ws = open_array(corpus["ws"])
    result = check_array(ws)
    fragments = sum(len(ws.array(rel).fragment_paths()) for rel in ws.array_paths())
    assert result.counts["fragments"] == fragments > 0
    assert result.counts["tiles"] > 0
