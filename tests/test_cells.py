"""cells/, cells.csv, fields/ and the dense tile domains end to end: a real FUSE mount read with grep, cat
and readlink, and the CLI without FUSE, against what tiledb-py reads."""

from __future__ import annotations

import csv
import io
import os
import subprocess

import numpy as np
import pytest
import tiledb
import yaml

import reference
from mounting import tdbfs_command


def sh(*cmd, cwd=None) -> str:
    return subprocess.run(list(cmd), capture_output=True, timeout=120, check=True, text=True, cwd=cwd).stdout


def cli(*args) -> bytes:
    return subprocess.run(tdbfs_command() + list(args), capture_output=True, timeout=120, check=True).stdout


def rows_of(text: str) -> list[dict]:
    return list(csv.DictReader(io.StringIO(text, newline="")))


@pytest.fixture(scope="module")
def arrays_2d(tmp_path_factory):
    """A sparse and a dense 2-D array over [0, 999]^2 that each hold the cell (874, 486), with a0 = 1000 * x + y
    (so no value reads as ',486,'). Sparse: 40 scattered cells, capacity 8. Dense: [870, 881] x [480, 491]
    with tile extents 8 (so neither aligned to tiles nor starting at the domain's low bound)."""
    base = tmp_path_factory.mktemp("cells")
    rng = np.random.default_rng(7)
    xs = np.concatenate([[874, 486, 3], rng.integers(0, 1000, 37)]).astype(np.int32)
    ys = np.concatenate([[486, 12, 999], rng.integers(0, 1000, 37)]).astype(np.int32)
    xs, ys = zip(*sorted(set(zip(xs.tolist(), ys.tolist())) - {(x, 486) for x in range(1000)} | {(874, 486)}))
    xs, ys = np.array(xs, np.int32), np.array(ys, np.int32)
    sparse = str(base / "sparse")
    dims = [tiledb.Dim("x", domain=(0, 999), tile=100, dtype=np.int32),
            tiledb.Dim("y", domain=(0, 999), tile=100, dtype=np.int32)]
    attrs = [tiledb.Attr("a0", dtype=np.int64), tiledb.Attr("label", dtype=str, var=True)]
    tiledb.Array.create(sparse, tiledb.ArraySchema(domain=tiledb.Domain(*dims), sparse=True, capacity=8,
                                                   attrs=attrs))
    with tiledb.open(sparse, "w") as A:
        A[xs, ys] = {"a0": xs.astype(np.int64) * 1000 + ys,
                     "label": np.array([f"cell {x}/{y}" for x, y in zip(xs, ys)], dtype=object)}
    dense = str(base / "dense")
    dims = [tiledb.Dim("x", domain=(0, 999), tile=8, dtype=np.int32),
            tiledb.Dim("y", domain=(0, 999), tile=8, dtype=np.int32)]
    tiledb.Array.create(dense, tiledb.ArraySchema(domain=tiledb.Domain(*dims), sparse=False, attrs=attrs))
    gx, gy = np.meshgrid(np.arange(870, 882), np.arange(480, 492), indexing="ij")
    with tiledb.open(dense, "w") as A:
        A[870:882, 480:492] = {"a0": gx.astype(np.int64) * 1000 + gy,
                               "label": np.array([f"cell {x}/{y}" for x, y in zip(gx.ravel(), gy.ravel())],
                                                 dtype=object).reshape(gx.shape)}
    return {"sparse": sparse, "dense": dense}


@pytest.mark.parametrize("kind", ["sparse", "dense"])
def test_grep_finds_a_cell_by_coordinate(arrays_2d, mount, kind):
    mnt = mount(arrays_2d[kind])
    [frag] = os.listdir(mnt / "fragments")
    hits = sh("sh", "-c", "grep -r ',486,' fragments/*/cells/", cwd=mnt).splitlines()
    found = {h.split(":", 1)[1] for h in hits}
    if kind == "sparse":
        assert found == {'874,486,874486,"cell 874/486"'}
    else:   # the written block's column y = 486
        assert found == {f'{x},486,{x * 1000 + 486},"cell {x}/486"' for x in range(870, 882)}
    [where] = [h.split(":", 1)[0] for h in hits if h.endswith('874,486,874486,"cell 874/486"')]
    assert where.startswith(f"fragments/{frag}/cells/tile_") and where.endswith(".csv")


@pytest.mark.parametrize("kind", ["sparse", "dense"])
def test_cells_csv_through_the_mount_and_the_cli(arrays_2d, mount, kind):
    uri = arrays_2d[kind]
    mnt = mount(uri)
    [frag] = os.listdir(mnt / "fragments")
    folder = mnt / "fragments" / frag
    text = sh("cat", str(folder / "cells.csv"))
    assert os.stat(folder / "cells.csv").st_size == len(text.encode())
    assert cli("cat", uri, f"fragments/{frag}/cells.csv") == text.encode()
    tiles = sorted(os.listdir(folder / "cells"), key=lambda n: int(n[5:-4]))
    assert tiles == [f"tile_{k}.csv" for k in range(len(tiles))]
    parts = [(folder / "cells" / t).read_text() for t in tiles]
    assert "".join(p.split("\n", 1)[1] for p in parts) == text.split("\n", 1)[1]
    rows = rows_of(text)
    assert list(rows[0]) == ["x", "y", "a0", "label"]
    t1, t2, *_ = reference.parse_fragment_name(frag)
    with tiledb.open(uri, timestamp=(t1, t2)) as A:   # the array's one fragment
        want = A.query(order="G")[:] if kind == "sparse" else A.query(order="C")[870:882, 480:492]
    got = {(int(r["x"]), int(r["y"])): (int(r["a0"]), r["label"]) for r in rows}
    assert len(got) == len(rows)
    if kind == "sparse":
        assert [(int(r["x"]), int(r["y"])) for r in rows] == list(zip(want["x"].tolist(), want["y"].tolist()))
        assert [int(r["a0"]) for r in rows] == want["a0"].tolist() and [r["label"] for r in rows] == list(want["label"])
    else:
        assert got == {(x, y): (int(want["a0"][x - 870, y - 480]), want["label"][x - 870, y - 480])
                       for x in range(870, 882) for y in range(480, 492)}


def test_fields_are_symlinks_read_by_name(arrays_2d, mount):
    uri = arrays_2d["sparse"]
    mnt = mount(uri)
    [frag] = os.listdir(mnt / "fragments")
    fields = mnt / "fragments" / frag / "fields"
    assert sorted(os.listdir(fields)) == ["a0", "label", "x", "y"]
    assert {n: os.readlink(fields / n) for n in os.listdir(fields)} == {
        "a0": "../attrs/a0", "label": "../attrs/a1", "x": "../dims/d0", "y": "../dims/d1"}
    assert sh("cat", str(fields / "label" / "tile_0.txt")) == sh("cat", str(fields / ".." / "attrs" / "a1" /
                                                                          "tile_0.txt"))
    assert cli("cat", uri, f"fragments/{frag}/fields/label/tile_0.var.bin") == \
        (fields.parent / "attrs" / "a1" / "tile_0.var.bin").read_bytes()
    assert b"label -> ../attrs/a1" in cli("ls", "-l", uri, f"fragments/{frag}/fields")


def test_dense_tile_domains_through_the_mount(arrays_2d, mount):
    uri = arrays_2d["dense"]
    mnt = mount(uri)
    [frag] = os.listdir(mnt / "fragments")
    folder = mnt / "fragments" / frag
    tiles = rows_of(sh("cat", str(folder / "tiles.csv")))
    # [870, 881] x [480, 491] in tiles of 8 from 0: rows 864-871, 872-879, 880-887 by columns 480-487, 488-495
    assert [(t["x_lo"], t["x_hi"], t["y_lo"], t["y_hi"]) for t in tiles] == [
        (str(x), str(x + 7), str(y), str(y + 7)) for x in (864, 872, 880) for y in (480, 488)]
    for k, t in enumerate(tiles):
        record = yaml.safe_load(sh("cat", str(folder / "attrs" / "a0" / f"tile_{k}.yaml")))
        assert record["domain"] == {"x": [int(t["x_lo"]), int(t["x_hi"])], "y": [int(t["y_lo"]), int(t["y_hi"])]}
        # the tile's cells hold what TileDB reads in its domain, where the fragment wrote
        values = np.frombuffer((folder / "attrs" / "a0" / f"tile_{k}.bin").read_bytes(), np.int64).reshape(8, 8)
        x0, y0 = int(t["x_lo"]), int(t["y_lo"])
        xs, ys = slice(max(x0, 870) - x0, min(x0 + 8, 882) - x0), slice(max(y0, 480) - y0, min(y0 + 8, 492) - y0)
        assert np.array_equal(values[xs, ys], (np.arange(x0, x0 + 8)[:, None] * 1000 + np.arange(y0, y0 + 8))[xs, ys])
