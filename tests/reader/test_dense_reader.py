"""The dense reader (tdbfs/reader/dense.py) against tiledb-py: at every time of histories of overlapping
writes, consolidation with and without vacuum and schema evolution, the cells it returns equal TileDB's
read of the array opened at T (values, nulls, var-sized and fixed strings exact), in TileDB's global order,
and each cell's source is the fragment that wrote its value."""

from __future__ import annotations

import os
import shutil
import time

import numpy as np
from numpy.lib.recfunctions import structured_to_unstructured
import pytest
import tiledb

from tdbfs.format.names import try_parse_name
from tdbfs.library.cells import column_values
from tdbfs.reader.batch import NO_SOURCE, ReadPlan
from tdbfs.reader.dense import array_non_empty_domain, dense_batches
from tdbfs.store.as_of import reader_fragments, schema_as_of
from tdbfs.store.open_array import open_array


def _objects(xs) -> np.ndarray:
    out = np.empty(len(xs), object)
    for i, x in enumerate(xs):
        out[i] = x
    return out


def _plain(x):
    if x is np.ma.masked:
        return None
    if isinstance(x, (np.ndarray, list)):
        return tuple(x.tolist() if isinstance(x, np.ndarray) else x)
    if isinstance(x, np.generic):
        x = x.item()
    if isinstance(x, bytes):
        x = x.decode("utf-8", "backslashreplace")
    if isinstance(x, str):
        # TileDB returns a var-sized string's fill value as one NUL byte; tiledb-py strips it
        x = x.rstrip("\0")
    return x


def ours(path, t, subarray=None, batch=7):
    """(rows, source fragment names, source tiles) of the dense reader at T, in its order."""
    store = open_array(str(path))
    plan = ReadPlan(t, schema_as_of(store, t), reader_fragments(store, t).fragments, subarray)
    rows, sources, tiles = [], [], []
    for b in dense_batches(store, plan, batch):
        assert len(b) <= batch
        values = [column_values(c) for c in b.columns]
        for i in range(len(b)):
            rows.append(tuple(_plain(v[i]) for v in values))
            f = int(b.fragment[i])
            sources.append(None if f == NO_SOURCE else plan.fragments[f])
            tiles.append(int(b.tile[i]))
            assert (f == NO_SOURCE) == (tiles[-1] == NO_SOURCE)
    return rows, sources, tiles


def theirs(path, t, subarray=None, order="C"):
    """TileDB's rows at T over the non-empty domain (cut by `subarray`: per dimension a list of inclusive
    ranges or None)."""
    store = open_array(str(path))
    ned = array_non_empty_domain([store.fragment(r) for r in reader_fragments(store, t).fragments])
    if ned is None:
        return []
    with tiledb.open(str(path), timestamp=t) as a:
        ranges = tuple([slice(lo, hi) for lo, hi in (subarray[j] if subarray and subarray[j] else [ned[j]])]
                       for j in range(len(ned)))
        if any(attr.isnullable for attr in a.schema):
            # as Arrow: tiledb-py's multi_index drops the validity of nullable attributes in numpy results
            table = a.query(order=order, coords=True, return_arrow=True).df[ranges]
            return [tuple(_plain(v) for v in row.values()) for row in table.to_pylist()]
        r = a.query(order=order, coords=True).multi_index[ranges]
        cols = [np.asarray(r[x]).ravel() for x in [d.name for d in a.schema.domain] + [x.name for x in a.schema]]
        return [tuple(_plain(c[i]) for c in cols) for i in range(len(cols[0]))]


def same_cells(path, t, subarray=None):
    mine, _, _ = ours(path, t, subarray)
    ref = theirs(path, t, subarray)
    assert sorted(map(repr, mine)) == sorted(map(repr, ref)), f"T={t} subarray={subarray}"
    return mine


@pytest.fixture(scope="module")
def overlapping(tmp_path_factory):
    """2-D, col-major cells in row-major tiles; int, var string, nullable float; three overlapping writes,
    then an evolved attribute with a fill value and a fourth write."""
    path = tmp_path_factory.mktemp("dense") / "overlap"
    dom = tiledb.Domain(tiledb.Dim("x", domain=(0, 19), tile=4, dtype=np.int32),
                        tiledb.Dim("y", domain=(1, 10), tile=3, dtype=np.int32))
    tiledb.Array.create(str(path), tiledb.ArraySchema(
        domain=dom, sparse=False, cell_order="col-major", tile_order="row-major",
        attrs=[tiledb.Attr("a", dtype=np.int32), tiledb.Attr("s", dtype=str, var=True),
               tiledb.Attr("n", dtype=np.float64, nullable=True)]))
    writes = {1: (slice(2, 9), slice(3, 7)), 2: (slice(5, 15), slice(1, 4)), 3: (slice(0, 2), slice(9, 11))}
    for t, (xs, ys) in writes.items():
        shape = (xs.stop - xs.start, ys.stop - ys.start)
        k = np.arange(shape[0] * shape[1]).reshape(shape)
        with tiledb.open(str(path), "w", timestamp=t) as a:
            a[xs, ys] = {"a": (100 * t + k).astype(np.int32),
                         "s": _objects([f"w{t}:{i}" for i in k.ravel()]).reshape(shape),
                         "n": np.ma.masked_array(k * 0.5, mask=k % 3 == 0)}
    evolution = tiledb.ArraySchemaEvolution(tiledb.Ctx())
    evolution.add_attribute(tiledb.Attr("e", dtype=np.float32, fill=2.5))
    evolution.array_evolve(str(path))
    with tiledb.open(str(path), "w") as a:
        a[18:20, 10:11] = {"a": np.full((2, 1), 400, np.int32), "s": _objects(["q", "r"]).reshape(2, 1),
                           "n": np.ma.masked_array(np.full((2, 1), 3.0), mask=[[False], [True]]),
                           "e": np.full((2, 1), 4.5, np.float32)}
    return path


def test_every_time_of_overlapping_writes_and_an_evolved_schema(overlapping):
    now = int(time.time() * 1000) + 1000
    counts = {}
    for t in (0, 1, 2, 3, now):
        counts[t] = len(same_cells(overlapping, t))
    # the non-empty domain grows with each write: 7x4, then x 2..14 by y 1..6, ...
    assert counts == {0: 0, 1: 28, 2: 13 * 6, 3: 15 * 10, now: 20 * 10}


def test_global_order_is_tiledbs(overlapping):
    mine, _, _ = ours(overlapping, 3)
    assert [r[:2] for r in mine] == [r[:2] for r in theirs(overlapping, 3, order="G")]


def test_each_value_comes_from_the_fragment_that_wrote_it(overlapping):
    rows, sources, tiles = ours(overlapping, 3)
    seen = set()
    for row, source, tile in zip(rows, sources, tiles):
        if source is None:
            assert row[2] == np.iinfo(np.int32).min and row[3] == "" and row[4] is None   # fill values
            continue
        written_at = try_parse_name(os.path.basename(source)).t1
        assert row[2] // 100 == written_at and row[3].startswith(f"w{written_at}:")
        seen.add((written_at, tile))
    assert {t for t, _ in seen} == {1, 2, 3}


def test_subarrays_of_several_ranges(overlapping):
    for sub in ([[(1, 3), (7, 12)], None], [[(1, 3), (7, 12)], [(2, 3), (6, 9)]], [None, [(10, 10)]],
                [[(4, 9)], [(2, 8)]]):
        assert same_cells(overlapping, 3, sub)
    assert ours(overlapping, 3, [[(16, 19)], None])[0] == []   # outside the non-empty domain at T=3


@pytest.fixture(scope="module")
def consolidated(tmp_path_factory):
    """1-D uint16 with a var int32 and a fixed string attribute: seven overlapping writes."""
    path = tmp_path_factory.mktemp("dense") / "consolidated"
    tiledb.Array.create(str(path), tiledb.ArraySchema(
        domain=tiledb.Domain(tiledb.Dim("x", domain=(1, 30), tile=7, dtype=np.uint16)), sparse=False,
        attrs=[tiledb.Attr("a", dtype=np.int64), tiledb.Attr("v", dtype=np.int32, var=True),
               tiledb.Attr("c", dtype="S3")]))
    # writes 1..5 cover a box of the domain (5..20), which TileDB's dense consolidation needs
    for t, (lo, hi) in enumerate([(12, 17), (5, 12), (10, 16), (8, 20), (5, 20), (21, 25), (7, 14)], start=1):
        n = hi - lo + 1
        with tiledb.open(str(path), "w", timestamp=t) as a:
            a[lo:hi + 1] = {"a": np.arange(n) + 100 * t,
                            "v": _objects([np.arange(i % 3 + 1, dtype=np.int32) + t for i in range(n)]),
                            "c": np.array([b"x%d" % t] * n, dtype="S3")}
    return path


def test_consolidation_without_and_with_vacuum(consolidated):
    times = list(range(0, 9))
    before = {t: same_cells(consolidated, t) for t in times}
    tiledb.consolidate(str(consolidated), config=tiledb.Config(
        {"sm.consolidation.timestamp_start": "1", "sm.consolidation.timestamp_end": "5",
         "sm.consolidation.buffer_size": "1000000", "sm.consolidation.amplification": "100"}))
    assert len(os.listdir(consolidated / "__fragments")) == 8
    for t in times:   # before the vacuum, a read inside 1..5 takes the originals, after 5 the consolidated one
        assert same_cells(consolidated, t) == before[t]
    tiledb.vacuum(str(consolidated))
    assert len(os.listdir(consolidated / "__fragments")) == 3
    after = {t: same_cells(consolidated, t) for t in times}
    # inside 1..5 the originals are gone and the consolidated fragment is not in range: nothing is read
    assert {t for t in times if after[t] != before[t]} == {1, 2, 3, 4}
    assert all(after[t] == [] for t in (1, 2, 3, 4))


BACKCOMPAT = os.path.join(os.path.dirname(os.path.dirname(__file__)), "data", "backcompat_arrays")


def test_a_sparse_fragment_of_a_dense_array_written_by_tiledb_2_2(tmp_path):
    path = tmp_path / "nullable_attributes"
    shutil.copytree(os.path.join(BACKCOMPAT, "v07", "nullable_attributes"), path)
    rows, sources, _ = ours(path, int(time.time() * 1000))
    assert sorted(map(repr, rows)) == sorted(map(repr, theirs(path, int(time.time() * 1000))))
    assert len(rows) == 4 and all(s is not None for s in sources)


@pytest.mark.parametrize("version", ["v14", "v15"])
def test_dense_images_of_formats_14_and_15_cell_for_cell_in_global_order(tmp_path, version):
    """TileDB-BioImaging's uint8 images (half a million and 1.6 million cells), compared column by column."""
    path = tmp_path / "image"
    shutil.copytree(os.path.join(BACKCOMPAT, version, "bioimg_l_2.tdb"), path)
    t = int(time.time() * 1000)
    store = open_array(str(path))
    plan = ReadPlan(t, schema_as_of(store, t), reader_fragments(store, t).fragments)
    batches = list(dense_batches(store, plan, 1 << 16))
    mine = {c.name: np.concatenate([b.columns[i].values for b in batches])
            for i, c in enumerate(batches[0].columns)}
    ned = array_non_empty_domain([store.fragment(r) for r in plan.fragments])
    with tiledb.open(str(path), timestamp=t) as a:
        ref = a.query(order="G", coords=True)[tuple(slice(lo, hi + 1) for lo, hi in ned)]
    assert list(mine) == list(ref)
    for name in mine:
        expected = np.asarray(ref[name]).ravel()
        if expected.dtype.names:   # tiledb-py's cells of several values: one record per cell
            expected = structured_to_unstructured(expected)
        assert np.array_equal(mine[name], expected), name
    assert len(mine[next(iter(mine))]) == int(np.prod([hi - lo + 1 for lo, hi in ned]))
